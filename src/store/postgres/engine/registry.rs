//! Teams, agents, presence and outside agents on PostgreSQL. A registry change (an
//! addition too) answers only once every live node has taken it up ([`PgStore::registry_barrier`]).

use async_trait::async_trait;
use switchboard_types::ids::{AgentPk, TeamPk};
use switchboard_types::time::Timestamp;

use super::super::{PgStore, agents, remotes, settings, teams};
use super::write;
use crate::model::{
    AdminTokenRecord, AgentRecord, PresenceRow, QueueCursorRow, RemoteAgentRecord, SecretHash,
    TeamRecord,
};
use crate::store::columns::hash_from;
use crate::store::engine::{AfterCommit, Patch, Registry};
use crate::store::writer::Writes;
use crate::store::{NODE_EXPIRY, StoreError};

#[async_trait]
impl Registry for PgStore {
    async fn admin_token(&self) -> Result<Option<AdminTokenRecord>, StoreError> {
        let Some(bytes) =
            settings::get(&self.read, crate::store::sql::settings::ADMIN_TOKEN_HASH).await?
        else {
            return Ok(None);
        };
        let set_at =
            settings::get(&self.read, crate::store::sql::settings::ADMIN_TOKEN_SET_AT).await?;
        Ok(Some(AdminTokenRecord {
            hash: hash_from(bytes)?,
            set_at: crate::store::columns::set_at_from(set_at),
        }))
    }

    async fn set_admin_hash(&self, hash: SecretHash, at: Timestamp) -> Result<(), StoreError> {
        write!(self, |conn| {
            settings::put(conn, crate::store::sql::settings::ADMIN_TOKEN_HASH, &hash).await?;
            let at = at.micros().to_string();
            settings::put(
                conn,
                crate::store::sql::settings::ADMIN_TOKEN_SET_AT,
                at.as_bytes(),
            )
            .await
        })
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

    async fn save_presence(&self, rows: Vec<PresenceRow>) -> Result<(), StoreError> {
        write!(self, |conn| agents::save_presence(conn, &rows).await)
    }

    async fn queue_cursor(&self, agent: AgentPk, queue: String) -> Result<i64, StoreError> {
        agents::queue_cursor(&self.read, agent, &queue).await
    }

    async fn deaf_queues(&self) -> Result<Vec<QueueCursorRow>, StoreError> {
        agents::deaf_queues(&self.read).await
    }

    async fn save_queue_cursors(&self, rows: Vec<QueueCursorRow>) -> Result<(), StoreError> {
        write!(self, |conn| agents::save_queue_cursors(conn, &rows).await)
    }

    async fn insert_team_boxed(
        &self,
        team: TeamRecord,
        after: AfterCommit<TeamRecord>,
    ) -> Result<(), StoreError> {
        let written: Result<(), StoreError> = self
            .write_then(
                move |tx| {
                    Box::pin(async move {
                        let pk = teams::insert(tx.conn().await?, &team).await?;
                        tx.note_registry();
                        Ok(TeamRecord { pk, ..team })
                    })
                },
                move |team| {
                    after(team);
                    Ok(())
                },
            )
            .await;
        written?;
        // An addition waits too: a lookup that misses reloads on its own, but a list
        // cannot tell what it misses (`nodes::read_your_writes`).
        self.registry_barrier(NODE_EXPIRY).await
    }

    async fn update_team_boxed(
        &self,
        pk: TeamPk,
        patch: Patch<TeamRecord>,
        after: AfterCommit<TeamRecord>,
    ) -> Result<(), StoreError> {
        let written: Result<(), StoreError> = self
            .write_then(
                move |tx| {
                    Box::pin(async move {
                        let conn = tx.conn().await?;
                        let mut team = teams::get(&mut *conn, pk).await?;
                        patch(&mut team)?;
                        teams::update(conn, &team).await?;
                        tx.note_registry();
                        Ok(team)
                    })
                },
                move |team| {
                    after(team);
                    Ok(())
                },
            )
            .await;
        written?;
        self.registry_barrier(NODE_EXPIRY).await
    }

    async fn insert_agent_boxed(
        &self,
        agent: AgentRecord,
        after: AfterCommit<AgentRecord>,
    ) -> Result<(), StoreError> {
        let written: Result<(), StoreError> = self
            .write_then(
                move |tx| {
                    Box::pin(async move {
                        let pk = agents::insert(tx.conn().await?, &agent).await?;
                        tx.note_registry();
                        Ok(AgentRecord { pk, ..agent })
                    })
                },
                move |agent| {
                    after(agent);
                    Ok(())
                },
            )
            .await;
        written?;
        // An addition waits too: a lookup that misses reloads on its own, but a list
        // cannot tell what it misses (`nodes::read_your_writes`).
        self.registry_barrier(NODE_EXPIRY).await
    }

    async fn update_agent_boxed(
        &self,
        pk: AgentPk,
        patch: Patch<AgentRecord>,
        after: AfterCommit<AgentRecord>,
    ) -> Result<(), StoreError> {
        let written: Result<(), StoreError> = self
            .write_then(
                move |tx| {
                    Box::pin(async move {
                        let conn = tx.conn().await?;
                        let mut agent = agents::get(&mut *conn, pk).await?;
                        patch(&mut agent)?;
                        agents::update(conn, &agent).await?;
                        tx.note_registry();
                        Ok(agent)
                    })
                },
                move |agent| {
                    after(agent);
                    Ok(())
                },
            )
            .await;
        written?;
        self.registry_barrier(NODE_EXPIRY).await
    }

    async fn remote_agents(&self) -> Result<Vec<RemoteAgentRecord>, StoreError> {
        remotes::members(&self.read).await
    }

    async fn put_remote_agent(&self, remote: RemoteAgentRecord) -> Result<(), StoreError> {
        write!(self, |conn| remotes::put(conn, &remote).await)
    }
}
