//! What the PostgreSQL engine offers the core (the traits of [`crate::store::engine`],
//! one file per resource as on SQLite). Reads run on the pool; writes are jobs of this
//! node's group commit ([`super::writer`]). The lifecycle and the mechanisms that exist
//! because several nodes share the database are here.

mod messages;
mod tasks;

use std::time::Duration;

use switchboard_types::ids::AgentPk;
use switchboard_types::time::Timestamp;
use tokio::sync::mpsc;

use super::{PgStore, nodes};
use crate::model::{Change, NodeConnections};
use crate::store::StoreError;

impl PgStore {
    pub(crate) async fn ping(&self) -> Result<(), StoreError> {
        sqlx::query("SELECT 1").execute(&self.read).await?;
        Ok(())
    }

    /// Finishes queued writes and closes every connection.
    pub(crate) async fn close(&self) {
        self.listening.cancel();
        self.writer.close().await;
        self.read.close().await;
    }

    /// What the other nodes commit, for the one who pushes it to this node's live
    /// connections (the first caller gets it).
    pub(crate) fn take_changes(&self) -> Option<mpsc::Receiver<Vec<Change>>> {
        self.changes
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
    }

    /// Names this node (once): its own epochs are not waited for, and its listener does
    /// not read the registry again for them.
    pub(crate) fn set_node(&self, node: &str) {
        let _ = self.node.set(node.to_owned());
    }

    /// The newest registry epoch taken so far: read before a reload, recorded after it.
    pub(crate) async fn registry_epoch(&self) -> Result<i64, StoreError> {
        nodes::registry_epoch(&self.read).await
    }

    /// Writes `node`'s heartbeat alone (a node confirming its registry between two
    /// regular heartbeats).
    pub(crate) async fn heartbeat(&self, node: &str, now: Timestamp) -> Result<(), StoreError> {
        nodes::heartbeat(&self.read, node, now).await
    }

    /// Each outside agent is held by one node at a time (migration 0008).
    pub(crate) async fn hold_remote_agents(
        &self,
        node: &str,
        lease: Duration,
    ) -> Result<Option<Vec<AgentPk>>, StoreError> {
        nodes::hold_remote_agents(&self.read, node, lease)
            .await
            .map(Some)
    }

    /// Records that `node` holds the registry as of `epoch`.
    pub(crate) async fn registry_seen(&self, node: &str, epoch: i64) -> Result<(), StoreError> {
        nodes::registry_seen(&self.read, node, epoch, Timestamp::now()).await
    }

    pub(crate) async fn sync_connections(
        &self,
        node: String,
        mine: Vec<NodeConnections>,
        now: Timestamp,
        fresh_after: Timestamp,
    ) -> Result<Vec<NodeConnections>, StoreError> {
        let mut mine = mine;
        mine.sort_by_key(|c| c.agent);
        // The rows are rewritten only when they changed: with thousands of connections,
        // rewriting them every second was thousands of dead rows a second.
        let changed = self
            .connections_written
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            != Some(&mine);
        let write = changed.then_some(mine.as_slice());
        let theirs = nodes::sync_connections(&self.read, &node, write, now, fresh_after).await?;
        if changed {
            *self
                .connections_written
                .lock()
                .unwrap_or_else(|p| p.into_inner()) = Some(mine);
        }
        Ok(theirs)
    }
}
