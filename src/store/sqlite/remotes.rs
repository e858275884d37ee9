//! Outside A2A agents (migration 0017).

use sqlx::sqlite::SqliteRow;
use sqlx::{Row, SqliteConnection};
use switchboard_types::ids::{AgentPk, TeamPk};
use switchboard_types::time::Timestamp;

use super::SqliteStore;
use crate::store::StoreError;
use crate::store::remotes::RemoteAgentRecord;

fn from_row(row: &SqliteRow) -> Result<RemoteAgentRecord, StoreError> {
    Ok(RemoteAgentRecord {
        agent_pk: AgentPk(row.try_get("agent_pk")?),
        team_pk: TeamPk(row.try_get("team_pk")?),
        card_url: row.try_get("card_url")?,
        interface_url: row.try_get("interface_url")?,
        authorization: row.try_get("authorization")?,
        card: row.try_get("card")?,
        refreshed_at: Timestamp::from_micros(row.try_get("refreshed_at")?),
        created_at: Timestamp::from_micros(row.try_get("created_at")?),
    })
}

/// Adds or replaces (a refreshed card) the agent's row.
async fn put(conn: &mut SqliteConnection, r: &RemoteAgentRecord) -> Result<(), StoreError> {
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

impl SqliteStore {
    /// Every outside agent whose registry agent is still a member.
    pub async fn remote_agents(&self) -> Result<Vec<RemoteAgentRecord>, StoreError> {
        let rows = sqlx::query(
            "SELECT r.* FROM a2a_remotes r JOIN agents a ON a.pk = r.agent_pk
             WHERE a.removed_at IS NULL ORDER BY r.agent_pk",
        )
        .fetch_all(&self.read)
        .await?;
        rows.iter().map(from_row).collect()
    }

    pub async fn put_remote_agent(&self, remote: RemoteAgentRecord) -> Result<(), StoreError> {
        self.write_self_contained(
            move |tx| Box::pin(async move { put(tx.conn().await?, &remote).await }),
            Ok,
        )
        .await
    }
}
