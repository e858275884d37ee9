//! Outside A2A agents (SQLite migration 0017; on PostgreSQL, migration 0008 also holds
//! them one node at a time: `postgres/nodes.rs`).

use crate::model::RemoteAgentRecord;
use crate::store::StoreError;
use crate::store::columns::{REMOTE_COLUMNS, remote};

for_each_engine! {
    /// Every outside agent whose registry agent is still a member.
    pub(crate) async fn members(pool: &Pool) -> Result<Vec<RemoteAgentRecord>, StoreError> {
        // Built from constants only.
        let rows = sqlx::query::<Db>(sqlx::AssertSqlSafe(format!(
            "SELECT {REMOTE_COLUMNS} FROM a2a_remotes r JOIN agents a ON a.pk = r.agent_pk
             WHERE a.removed_at IS NULL ORDER BY r.agent_pk"
        )))
        .fetch_all(pool)
        .await?;
        rows.iter().map(remote).collect()
    }

    /// Adds or replaces (a refreshed card) the agent's row.
    pub(crate) async fn put(conn: &mut Conn, r: &RemoteAgentRecord) -> Result<(), StoreError> {
        sqlx::query::<Db>(
            "INSERT INTO a2a_remotes (agent_pk, team_pk, card_url, interface_url,
                                      \"authorization\", card, refreshed_at, created_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
             ON CONFLICT (agent_pk) DO UPDATE SET
                 card_url = excluded.card_url, interface_url = excluded.interface_url,
                 \"authorization\" = excluded.\"authorization\", card = excluded.card,
                 refreshed_at = excluded.refreshed_at",
        )
        .bind(r.agent_pk.0)
        .bind(r.team_pk.0)
        .bind(&r.card_url)
        .bind(&r.interface_url)
        .bind(&r.authorization)
        .bind(&r.card)
        .bind(r.refreshed_at.micros())
        .bind(r.created_at.micros())
        .execute(conn)
        .await?;
        Ok(())
    }
}
