//! The registry's storage (teams, agents, presence, queue cursors, outside agents, the
//! admin token), one implementation for both engines. A change of a team or an agent is
//! noted for the other nodes with its commit and answered once every live node has taken
//! it up (`note_registry` and `registry_barrier`: PostgreSQL's; on SQLite the process is
//! the only node and both do nothing).

use async_trait::async_trait;
use futures_util::future::BoxFuture;
use switchboard_types::ids::{AgentPk, TeamPk};
use switchboard_types::time::Timestamp;

use crate::model::{
    AdminTokenRecord, AgentRecord, PresenceRow, QueueCursorRow, RemoteAgentRecord, SecretHash,
    TeamRecord,
};
use crate::store::columns::{hash_from, set_at_from};
use crate::store::engine::{AfterCommit, Patch, Registry};
use crate::store::sql::settings::{ADMIN_TOKEN_HASH, ADMIN_TOKEN_SET_AT};
use crate::store::writer::Writes;
use crate::store::{NODE_EXPIRY, StoreError};

for_each_engine! {
    #[async_trait]
    impl Registry for Store {
        async fn admin_token(&self) -> Result<Option<AdminTokenRecord>, StoreError> {
            let Some(bytes) = engine::settings::get(&self.read, ADMIN_TOKEN_HASH).await? else {
                return Ok(None);
            };
            let set_at = engine::settings::get(&self.read, ADMIN_TOKEN_SET_AT).await?;
            Ok(Some(AdminTokenRecord {
                hash: hash_from(bytes)?,
                set_at: set_at_from(set_at),
            }))
        }

        async fn set_admin_hash(&self, hash: SecretHash, at: Timestamp) -> Result<(), StoreError> {
            on_conn!(self, write_then, |conn| {
                engine::settings::put(conn, ADMIN_TOKEN_HASH, &hash).await?;
                let at = at.micros().to_string();
                engine::settings::put(conn, ADMIN_TOKEN_SET_AT, at.as_bytes()).await
            })
        }

        async fn load_teams(&self) -> Result<Vec<TeamRecord>, StoreError> {
            engine::teams::load_all(&self.read).await
        }

        async fn load_agents(&self) -> Result<Vec<AgentRecord>, StoreError> {
            engine::agents::load_all(&self.read).await
        }

        async fn load_presence(&self) -> Result<Vec<PresenceRow>, StoreError> {
            engine::agents::load_presence(&self.read).await
        }

        /// Writes acknowledged cursors and last activity (a cursor never moves back).
        async fn save_presence(&self, rows: Vec<PresenceRow>) -> Result<(), StoreError> {
            self.write_self_contained(
                move |tx| {
                    Box::pin(
                        async move { engine::agents::save_presence(tx.conn().await?, &rows).await },
                    )
                },
                Ok,
            )
            .await
        }

        async fn queue_cursor(&self, agent: AgentPk, queue: String) -> Result<i64, StoreError> {
            engine::agents::queue_cursor(&self.read, agent, &queue).await
        }

        async fn deaf_queues(&self) -> Result<Vec<QueueCursorRow>, StoreError> {
            engine::agents::deaf_queues(&self.read).await
        }

        async fn save_queue_cursors(&self, rows: Vec<QueueCursorRow>) -> Result<(), StoreError> {
            on_conn!(self, write_self_contained, |conn| {
                engine::agents::save_queue_cursors(conn, &rows).await
            })
        }

        /// Inserts a team; `after` runs right after the commit (in commit order).
        /// [`StoreError::Conflict`] when the id is taken.
        async fn insert_team_boxed(
            &self,
            team: TeamRecord,
            after: AfterCommit<TeamRecord>,
        ) -> Result<(), StoreError> {
            self.change_registry(
                move |tx| {
                    Box::pin(async move {
                        let pk = engine::teams::insert(tx.conn().await?, &team).await?;
                        Ok(TeamRecord { pk, ..team })
                    })
                },
                after,
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
            self.change_registry(
                move |tx| {
                    Box::pin(async move {
                        let conn = tx.conn().await?;
                        let mut team = engine::teams::get(&mut *conn, pk).await?;
                        patch(&mut team)?;
                        engine::teams::update(conn, &team).await?;
                        Ok(team)
                    })
                },
                after,
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
            self.change_registry(
                move |tx| {
                    Box::pin(async move {
                        let pk = engine::agents::insert(tx.conn().await?, &agent).await?;
                        Ok(AgentRecord { pk, ..agent })
                    })
                },
                after,
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
            self.change_registry(
                move |tx| {
                    Box::pin(async move {
                        let conn = tx.conn().await?;
                        let mut agent = engine::agents::get(&mut *conn, pk).await?;
                        patch(&mut agent)?;
                        engine::agents::update(conn, &agent).await?;
                        Ok(agent)
                    })
                },
                after,
            )
            .await
        }

        /// Every outside agent whose registry agent is still a member.
        async fn remote_agents(&self) -> Result<Vec<RemoteAgentRecord>, StoreError> {
            engine::remotes::members(&self.read).await
        }

        async fn put_remote_agent(&self, remote: RemoteAgentRecord) -> Result<(), StoreError> {
            on_conn!(self, write_self_contained, |conn| engine::remotes::put(
                conn, &remote
            )
            .await)
        }
    }

    impl Store {
        /// A change of a team or an agent: `job` writes its row in the batch, the change
        /// is noted for the other nodes with the commit, `after` gets the row right after
        /// it, and the answer waits until every live node holds it — an addition too, as
        /// a lookup that misses reloads on its own but a list cannot tell what it misses
        /// (`nodes::read_your_writes`).
        async fn change_registry<T: Send + 'static>(
            &self,
            job: impl for<'c> FnOnce(&'c mut Tx) -> BoxFuture<'c, Result<T, StoreError>>
            + Send
            + 'static,
            after: AfterCommit<T>,
        ) -> Result<(), StoreError> {
            let written: Result<(), StoreError> = self
                .write_then(
                    move |tx: &mut Tx| -> BoxFuture<'_, Result<T, StoreError>> {
                        Box::pin(async move {
                            let row = job(&mut *tx).await?;
                            tx.note_registry();
                            Ok(row)
                        })
                    },
                    move |row| {
                        after(row);
                        Ok(())
                    },
                )
                .await;
            written?;
            self.registry_barrier(NODE_EXPIRY).await
        }
    }
}
