//! Teams, agents, presence and outside agents on SQLite.

use async_trait::async_trait;
use switchboard_types::ids::{AgentPk, TeamPk};
use switchboard_types::time::Timestamp;

use super::super::{SqliteStore, agents, remotes, settings, teams};
use crate::model::{
    AdminTokenRecord, AgentRecord, PresenceRow, QueueCursorRow, RemoteAgentRecord, SecretHash,
    TeamRecord,
};
use crate::store::StoreError;
use crate::store::engine::{AfterCommit, Patch, Registry};
use crate::store::writer::Writes;

#[async_trait]
impl Registry for SqliteStore {
    async fn admin_token(&self) -> Result<Option<AdminTokenRecord>, StoreError> {
        let Some(bytes) =
            settings::get(&self.read, crate::store::sql::settings::ADMIN_TOKEN_HASH).await?
        else {
            return Ok(None);
        };
        let set_at =
            settings::get(&self.read, crate::store::sql::settings::ADMIN_TOKEN_SET_AT).await?;
        Ok(Some(AdminTokenRecord {
            hash: crate::store::columns::hash_from(bytes)?,
            set_at: crate::store::columns::set_at_from(set_at),
        }))
    }

    async fn set_admin_hash(&self, hash: SecretHash, at: Timestamp) -> Result<(), StoreError> {
        self.write_then(
            move |tx| {
                Box::pin(async move {
                    let conn = tx.conn().await?;
                    settings::put(conn, crate::store::sql::settings::ADMIN_TOKEN_HASH, &hash)
                        .await?;
                    let at = at.micros().to_string();
                    settings::put(
                        conn,
                        crate::store::sql::settings::ADMIN_TOKEN_SET_AT,
                        at.as_bytes(),
                    )
                    .await
                })
            },
            Ok,
        )
        .await
    }

    async fn load_teams(&self) -> Result<Vec<TeamRecord>, StoreError> {
        teams::load_all(&self.read).await
    }

    async fn load_agents(&self) -> Result<Vec<AgentRecord>, StoreError> {
        agents::load_all(&self.read).await
    }

    async fn load_presence(&self) -> Result<Vec<PresenceRow>, StoreError> {
        agents::load_presence(&self.read).await
    }

    /// Writes acknowledged cursors and last activity (a cursor never moves back).
    async fn save_presence(&self, rows: Vec<PresenceRow>) -> Result<(), StoreError> {
        self.write_self_contained(
            move |tx| Box::pin(async move { agents::save_presence(tx.conn().await?, &rows).await }),
            Ok,
        )
        .await
    }

    async fn queue_cursor(&self, agent: AgentPk, queue: String) -> Result<i64, StoreError> {
        agents::queue_cursor(&self.read, agent, &queue).await
    }

    async fn deaf_queues(&self) -> Result<Vec<QueueCursorRow>, StoreError> {
        agents::deaf_queues(&self.read).await
    }

    async fn save_queue_cursors(&self, rows: Vec<QueueCursorRow>) -> Result<(), StoreError> {
        self.write_self_contained(
            move |tx| {
                Box::pin(async move { agents::save_queue_cursors(tx.conn().await?, &rows).await })
            },
            Ok,
        )
        .await
    }

    /// Inserts a team; `after` runs right after the commit (in commit order).
    /// [`StoreError::Conflict`] when the id is taken.
    async fn insert_team_boxed(
        &self,
        team: TeamRecord,
        after: AfterCommit<TeamRecord>,
    ) -> Result<(), StoreError> {
        self.write_then(
            move |tx| {
                Box::pin(async move {
                    let pk = teams::insert(tx.conn().await?, &team).await?;
                    Ok(TeamRecord { pk, ..team })
                })
            },
            move |team| {
                after(team);
                Ok(())
            },
        )
        .await
    }

    /// Changes a team as `patch` decides, on the row as the transaction sees it (so
    /// concurrent patches compose).
    async fn update_team_boxed(
        &self,
        pk: TeamPk,
        patch: Patch<TeamRecord>,
        after: AfterCommit<TeamRecord>,
    ) -> Result<(), StoreError> {
        self.write_then(
            move |tx| {
                Box::pin(async move {
                    let conn = tx.conn().await?;
                    let mut team = teams::get(&mut *conn, pk).await?;
                    patch(&mut team)?;
                    teams::update(conn, &team).await?;
                    Ok(team)
                })
            },
            move |team| {
                after(team);
                Ok(())
            },
        )
        .await
    }

    /// Inserts an agent (taking over the row of a removed one with the same id).
    /// [`StoreError::Conflict`] when a member has the id.
    async fn insert_agent_boxed(
        &self,
        agent: AgentRecord,
        after: AfterCommit<AgentRecord>,
    ) -> Result<(), StoreError> {
        self.write_then(
            move |tx| {
                Box::pin(async move {
                    let pk = agents::insert(tx.conn().await?, &agent).await?;
                    Ok(AgentRecord { pk, ..agent })
                })
            },
            move |agent| {
                after(agent);
                Ok(())
            },
        )
        .await
    }

    /// Changes an agent (removal included) as `patch` decides, on the row as the
    /// transaction sees it.
    async fn update_agent_boxed(
        &self,
        pk: AgentPk,
        patch: Patch<AgentRecord>,
        after: AfterCommit<AgentRecord>,
    ) -> Result<(), StoreError> {
        self.write_then(
            move |tx| {
                Box::pin(async move {
                    let conn = tx.conn().await?;
                    let mut agent = agents::get(&mut *conn, pk).await?;
                    patch(&mut agent)?;
                    agents::update(conn, &agent).await?;
                    Ok(agent)
                })
            },
            move |agent| {
                after(agent);
                Ok(())
            },
        )
        .await
    }

    /// Every outside agent whose registry agent is still a member.
    async fn remote_agents(&self) -> Result<Vec<RemoteAgentRecord>, StoreError> {
        remotes::members(&self.read).await
    }

    async fn put_remote_agent(&self, remote: RemoteAgentRecord) -> Result<(), StoreError> {
        self.write_self_contained(
            move |tx| Box::pin(async move { remotes::put(tx.conn().await?, &remote).await }),
            Ok,
        )
        .await
    }
}
