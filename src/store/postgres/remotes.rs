//! Outside A2A agents on PostgreSQL (migration 0008 holds them one node at a time).

use sqlx::AssertSqlSafe;
use sqlx::postgres::{PgConnection, PgExecutor};

use crate::model::RemoteAgentRecord;
use crate::store::StoreError;
use crate::store::columns::{REMOTE_COLUMNS, remote};

pub(super) async fn members<'e>(
    ex: impl PgExecutor<'e>,
) -> Result<Vec<RemoteAgentRecord>, StoreError> {
    let sql = format!(
        "SELECT {REMOTE_COLUMNS} FROM a2a_remotes r JOIN agents a ON a.pk = r.agent_pk
         WHERE a.removed_at IS NULL ORDER BY r.agent_pk"
    );
    let rows = sqlx::query(AssertSqlSafe(sql)).fetch_all(ex).await?;
    rows.iter().map(remote).collect()
}

pub(super) async fn put(conn: &mut PgConnection, r: &RemoteAgentRecord) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO a2a_remotes (agent_pk, team_pk, card_url, interface_url, \"authorization\",
                                  card, refreshed_at, created_at)
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
