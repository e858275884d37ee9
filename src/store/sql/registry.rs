//! The registry's storage (teams, agents, presence, queue cursors, outside agents, the
//! admin token), one implementation for both engines. The changes of a team or an agent,
//! which carry the caller's decision, are in `decided.rs`.

use switchboard_types::ids::AgentPk;
use switchboard_types::time::Timestamp;

use crate::model::{
    AdminTokenRecord, AgentRecord, PresenceRow, QueueCursorRow, RemoteAgentRecord, SecretHash,
    TeamRecord,
};
use crate::store::StoreError;
use crate::store::columns::{hash_from, set_at_from};
use crate::store::engine::Registry;
use crate::store::sql::settings::{ADMIN_TOKEN_HASH, ADMIN_TOKEN_SET_AT};
use crate::store::writer::Writes;

for_each_engine! {
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
}
