//! Outside A2A agents (migration 0017).

use sqlx::SqliteConnection;

use crate::model::RemoteAgentRecord;
use crate::store::StoreError;
use crate::store::columns::{REMOTE_COLUMNS, remote};

/// Adds or replaces (a refreshed card) the agent's row.
pub(super) async fn put(
    conn: &mut SqliteConnection,
    r: &RemoteAgentRecord,
) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO a2a_remotes (agent_pk, team_pk, card_url, interface_url, authorization,
                                  card, refreshed_at, created_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?)
         ON CONFLICT (agent_pk) DO UPDATE SET
             card_url = excluded.card_url, interface_url = excluded.interface_url,
             authorization = excluded.authorization, card = excluded.card,
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

/// Every outside agent whose registry agent is still a member.
pub(super) async fn members(pool: &sqlx::SqlitePool) -> Result<Vec<RemoteAgentRecord>, StoreError> {
    // Built from constants only.
    let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
        "SELECT {REMOTE_COLUMNS} FROM a2a_remotes r JOIN agents a ON a.pk = r.agent_pk
         WHERE a.removed_at IS NULL ORDER BY r.agent_pk"
    )))
    .fetch_all(pool)
    .await?;
    rows.iter().map(remote).collect()
}
