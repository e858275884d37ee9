//! No stale "yes" across nodes (PostgreSQL with several nodes).
//!
//! A node answers from its copy of the registry. A miss is checked against the database
//! (`other_nodes::registry_current_since`); a hit could be stale: a token another node
//! revoked, a switch another node turned off. Two halves close that:
//!
//! * the node that changed the registry answers only after every node with a fresh
//!   heartbeat has read the registry at the change's epoch or later
//!   (`store::postgres::epoch`, at most `NODE_EXPIRY`);
//! * a node serves from its copy only while it is *confirmed*: it compared the
//!   database's newest epoch with the one it holds (or read the registry) less than
//!   [`FENCE`] ago, *and* that comparison began less than [`BEAT_TO_CONFIRM`] after a
//!   heartbeat of its own was written. The heartbeat writes, then confirms, every second.
//!   So a node another node stopped waiting for (its heartbeat older than
//!   `NODE_EXPIRY` = [`FENCE`] + [`BEAT_TO_CONFIRM`] + 1 s) holds no confirmation that
//!   could cover the change: it writes a heartbeat and reads the registry again before its
//!   next answer — a node paused with SIGSTOP included, and one that confirmed the moment
//!   it woke, before its heartbeat reached the database. If it cannot reach the database
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

/// How soon after its own heartbeat was written a confirmation must begin to count
/// (`FENCE + BEAT_TO_CONFIRM < NODE_EXPIRY`: a node that confirmed could not have had a
/// heartbeat older than the expiry in the database meanwhile).
pub const BEAT_TO_CONFIRM: Duration = Duration::from_secs(4);

/// The registry epoch this node holds, and when it was last confirmed current.
#[derive(Debug, Default)]
pub(super) struct Fence {
    state: Mutex<State>,
    /// One request at a time writes a heartbeat and confirms; the others wait for it
    /// and find the registry confirmed.
    confirming: tokio::sync::Mutex<()>,
}

#[derive(Debug, Default)]
struct State {
    /// The registry epoch held.
    seen: i64,
    /// When the newest confirmation that counts began.
    confirmed: Option<Instant>,
    /// When the newest heartbeats that reached the database began (a few: requests and
    /// the heartbeat task beat concurrently).
    beats: std::collections::VecDeque<Instant>,
}

impl State {
    /// Counts a confirmation begun at `at` if a heartbeat began at or before it, less
    /// than [`BEAT_TO_CONFIRM`] before.
    fn confirmed_at(&mut self, at: Instant) {
        if self
            .beats
            .iter()
            .any(|beat| at >= *beat && at.duration_since(*beat) < BEAT_TO_CONFIRM)
        {
            self.confirmed = self.confirmed.max(Some(at));
        }
    }
}

impl Fence {
    /// A registry read that started at `at`, after the epoch was `epoch`, succeeded.
    pub(super) fn applied(&self, epoch: i64, at: Instant) {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.seen = state.seen.max(epoch);
        state.confirmed_at(at);
    }

    /// A heartbeat that began at `at` reached the database.
    pub(super) fn beat(&self, at: Instant) {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.beats.push_back(at);
        if state.beats.len() > 16 {
            state.beats.pop_front();
        }
    }

    /// The database's newest epoch, read from `at` on, is `epoch`: confirmed when this
    /// node holds it.
    fn confirm(&self, epoch: i64, at: Instant) -> bool {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let held = epoch <= state.seen;
        if held {
            state.confirmed_at(at);
        }
        held
    }

    fn fresh(&self, now: Instant) -> bool {
        let state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state
            .confirmed
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
        let _one_at_a_time = self.inner.fence.confirming.lock().await;
        if self.inner.fence.fresh(Instant::now()) {
            return Ok(());
        }
        let beat = Instant::now();
        let confirmed = async {
            self.store()
                .heartbeat(
                    self.node().node_id().as_str(),
                    switchboard_types::time::Timestamp::now(),
                )
                .await?;
            self.inner.fence.beat(beat);
            self.confirm_registry().await
        };
        if let Err(err) = confirmed.await {
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

// A node that confirmed cannot have had a heartbeat older than the expiry meanwhile.
const _: () = assert!(FENCE.as_secs() + BEAT_TO_CONFIRM.as_secs() < NODE_EXPIRY.as_secs());

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::{BEAT_TO_CONFIRM, FENCE, Fence};

    /// A confirmation counts only soon after a heartbeat of this node reached the
    /// database (the checker's stale "yes": a node that woke from SIGSTOP confirmed
    /// before its heartbeat was written, so the changing node had not waited for it).
    #[test]
    fn a_confirmation_counts_only_after_a_recent_heartbeat() {
        let fence = Fence::default();
        let t0 = Instant::now();
        assert!(fence.confirm(0, t0), "nothing newer than held");
        assert!(!fence.fresh(t0), "but no heartbeat yet: not confirmed");
        fence.beat(t0);
        let late = t0 + BEAT_TO_CONFIRM + Duration::from_millis(1);
        fence.confirm(0, late);
        assert!(!fence.fresh(late), "too long after the heartbeat");
        fence.confirm(0, t0 + Duration::from_millis(10));
        assert!(fence.fresh(t0 + Duration::from_millis(20)));
        assert!(
            !fence.fresh(t0 + FENCE + Duration::from_millis(10)),
            "lapsed"
        );
        // A newer epoch than held is no confirmation at all.
        assert!(!fence.confirm(3, t0 + Duration::from_millis(30)));
    }
}
