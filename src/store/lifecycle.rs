//! The store's lifecycle, and the mechanisms that exist only where several nodes share
//! the database: each is a `match` on the engine, and SQLite's arm says what it does
//! instead (nothing, mostly — this process is the only node).

use std::time::Duration;

use switchboard_types::ids::AgentPk;
use switchboard_types::time::Timestamp;
use tokio::sync::mpsc;

use super::{Store, StoreError};
use crate::model::{Change, NodeConnections};

impl Store {
    /// Whether the database answers (readiness).
    pub async fn ping(&self) -> Result<(), StoreError> {
        match self {
            Store::Sqlite(sqlite) => sqlite.ping().await,
            Store::Postgres(pg) => pg.ping().await,
        }
    }

    /// Finishes queued writes and closes every connection.
    pub async fn close(&self) {
        match self {
            Store::Sqlite(sqlite) => sqlite.close().await,
            Store::Postgres(pg) => pg.close().await,
        }
    }

    /// Whether other processes may write the same database: what this process holds in
    /// memory may then lag behind what is committed.
    pub fn shared(&self) -> bool {
        matches!(self, Store::Postgres(_))
    }

    /// What other nodes commit, as it is heard (the first caller gets it); none on
    /// SQLite.
    pub fn take_changes(&self) -> Option<mpsc::Receiver<Vec<Change>>> {
        match self {
            Store::Sqlite(_) => None,
            Store::Postgres(pg) => pg.take_changes(),
        }
    }

    /// Names this node to the store: its own registry epochs are neither waited for nor
    /// read back.
    pub fn set_node(&self, node: &str) {
        if let Store::Postgres(pg) = self {
            pg.set_node(node);
        }
    }

    /// The newest registry epoch: a node reads it before it reloads the registry, and
    /// records it after (0 on SQLite, where nothing else changes the registry).
    pub async fn registry_epoch(&self) -> Result<i64, StoreError> {
        match self {
            Store::Sqlite(_) => Ok(0),
            Store::Postgres(pg) => pg.registry_epoch().await,
        }
    }

    /// Writes `node`'s heartbeat alone (no other node reads it on SQLite).
    pub async fn heartbeat(&self, node: &str, now: Timestamp) -> Result<(), StoreError> {
        match self {
            Store::Sqlite(_) => Ok(()),
            Store::Postgres(pg) => pg.heartbeat(node, now).await,
        }
    }

    /// Records that `node` holds the registry as of `epoch` (no one waits for it on
    /// SQLite).
    pub async fn registry_seen(&self, node: &str, epoch: i64) -> Result<(), StoreError> {
        match self {
            Store::Sqlite(_) => Ok(()),
            Store::Postgres(pg) => pg.registry_seen(node, epoch).await,
        }
    }

    /// The outside A2A agents `node` acts for: those it holds now (taken or renewed for
    /// `lease`; each is held by one node at a time), or `None` on SQLite, where this
    /// process is the only node and acts for every one.
    pub async fn hold_remote_agents(
        &self,
        node: &str,
        lease: Duration,
    ) -> Result<Option<Vec<AgentPk>>, StoreError> {
        match self {
            Store::Sqlite(_) => Ok(None),
            Store::Postgres(pg) => pg.hold_remote_agents(node, lease).await,
        }
    }

    /// Writes this node's live connections and heartbeat, and reads those of the other
    /// nodes whose heartbeat is newer than `fresh_after` (none on SQLite).
    pub async fn sync_connections(
        &self,
        node: String,
        mine: Vec<NodeConnections>,
        now: Timestamp,
        fresh_after: Timestamp,
    ) -> Result<Vec<NodeConnections>, StoreError> {
        match self {
            Store::Sqlite(_) => Ok(Vec::new()),
            Store::Postgres(pg) => pg.sync_connections(node, mine, now, fresh_after).await,
        }
    }
}
