//! No stale "yes" across nodes (PostgreSQL with several nodes).
//!
//! A node answers from its copy of the registry. A miss is checked against the database
//! (`elsewhere::registry_current_since`); a hit could be stale: a token another node
//! revoked, a switch another node turned off. Two halves close that:
//!
//! * the node that changed the registry answers only after every node with a fresh
//!   heartbeat has read the registry at the change's epoch or later
//!   (`store::postgres::epoch`, at most `NODE_EXPIRY`);
//! * a node serves from its copy only while it is *confirmed*: it compared the
//!   database's newest epoch with the one it holds (or read the registry) less than
//!   [`FENCE`] ago. The heartbeat confirms every second, before it writes the heartbeat,
//!   so a node whose heartbeat the changing node took for dead (older than `NODE_EXPIRY`,
//!   twice [`FENCE`]) is unconfirmed by then and reads the registry again before its
//!   next answer — a node paused with SIGSTOP included. If it cannot reach the database
//!   it answers `503 UNAVAILABLE`, not a stale yes.
//!
//! The rule: a confirmation that started at instant X (an epoch read showing nothing
//! newer than what is held, or a registry read that started at X) covers every change
//! whose epoch was taken before X, and every change's answer comes after its epoch.

use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use switchboard_types::ErrorCode;

use super::{Core, CoreError, CoreResult};
use crate::store::{NODE_EXPIRY, StoreError};

/// How long a confirmation holds: half the heartbeat expiry, so it has lapsed before
/// another node stops waiting for this one.
pub const FENCE: Duration = Duration::from_secs(NODE_EXPIRY.as_secs() / 2);

/// The registry epoch this node holds, and when it was last confirmed current.
#[derive(Debug, Default)]
pub(super) struct Fence {
    state: Mutex<(i64, Option<Instant>)>,
}

impl Fence {
    /// A registry read that started at `at`, after the epoch was `epoch`, succeeded.
    pub(super) fn applied(&self, epoch: i64, at: Instant) {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.0 = state.0.max(epoch);
        state.1 = state.1.max(Some(at));
    }

    /// The database's newest epoch, read from `at` on, is `epoch`: confirmed when this
    /// node holds it.
    fn confirm(&self, epoch: i64, at: Instant) -> bool {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let held = epoch <= state.0;
        if held {
            state.1 = state.1.max(Some(at));
        }
        held
    }

    fn fresh(&self, now: Instant) -> bool {
        let state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state
            .1
            .is_some_and(|at| now.saturating_duration_since(at) < FENCE)
    }
}

impl Core {
    /// Before anything is answered from the registry (several nodes): confirms it is
    /// current when the last confirmation lapsed. One uncontended lock otherwise.
    pub(super) async fn fence(&self) -> CoreResult<()> {
        if !self.store().shared() || self.inner.fence.fresh(Instant::now()) {
            return Ok(());
        }
        if let Err(err) = self.confirm_registry().await {
            tracing::warn!(error = %err, "this node cannot confirm its registry is current");
        }
        if self.inner.fence.fresh(Instant::now()) {
            return Ok(());
        }
        Err(CoreError::new(
            ErrorCode::Unavailable,
            "this node cannot confirm with the database that its registry is current",
        ))
    }

    /// Compares the database's newest registry epoch with the one held, and reads the
    /// registry again when it is behind (the heartbeat calls this every second).
    pub(super) async fn confirm_registry(&self) -> Result<(), StoreError> {
        let started = Instant::now();
        let epoch = self.store().registry_epoch().await?;
        if !self.inner.fence.confirm(epoch, started) {
            self.registry_current_since(started).await;
        }
        Ok(())
    }
}
