//! Which node acts for an outside agent. On SQLite one process is the only node and acts
//! for every one. With several nodes on PostgreSQL, each outside agent is held by one
//! node at a time: the holder renews its hold every [`HOLD_EVERY`]; a hold lasts
//! [`HOLD_FOR`], so when the holder dies (or cannot reach the database) another node
//! takes the agent over within `HOLD_FOR + HOLD_EVERY`. Without it every node acted for
//! every outside agent it had read at its start, and a task given to one was forwarded
//! once per node.

use std::time::Duration;

use super::Delegation;

/// How long a hold lasts without renewal.
pub const HOLD_FOR: Duration = Duration::from_secs(15);
/// How often a node renews its holds and takes up agents nobody holds.
pub const HOLD_EVERY: Duration = Duration::from_secs(5);

// A hold is renewed at least twice before it runs out.
const _: () = assert!(HOLD_EVERY.as_secs() * 2 < HOLD_FOR.as_secs());

impl Delegation {
    /// Acts for the outside agents this node holds, until the server stops: at once,
    /// then every [`HOLD_EVERY`].
    pub async fn resume(self) {
        let mut every = tokio::time::interval(crate::ticks::every(HOLD_EVERY));
        loop {
            tokio::select! {
                _ = every.tick() => {}
                () = self.stop.cancelled() => return,
            }
            self.hold().await;
        }
    }

    /// Takes or renews this node's holds; starts acting for the agents held (a new
    /// registration included), stops for those held no more. When the database cannot
    /// say, this node stops acting for all of them: another node may take them over once
    /// the holds run out.
    pub(super) async fn hold(&self) {
        let held = match self.core.remotes().hold_remote_agents(HOLD_FOR).await {
            Ok(held) => held,
            Err(err) => {
                tracing::warn!(error = %err, "outside A2A agents: holds not renewed; stopping here");
                self.stop_unless(|_| false);
                return;
            }
        };
        let remotes = match self.core.remotes().remote_agents().await {
            Ok(remotes) => remotes,
            Err(err) => {
                tracing::error!(error = %err, "outside A2A agents could not be read");
                return;
            }
        };
        if let Some(held) = &held {
            self.stop_unless(|pk| held.contains(pk));
        }
        for remote in remotes {
            if held.as_ref().is_none_or(|h| h.contains(&remote.agent_pk)) {
                self.start(remote);
            }
        }
    }

    /// Stops acting for every running agent `keep` says no to.
    fn stop_unless(&self, keep: impl Fn(&switchboard_types::ids::AgentPk) -> bool) {
        let Ok(mut running) = self.running.lock() else {
            return;
        };
        running.retain(|pk, stop| {
            let kept = keep(pk);
            if !kept {
                tracing::info!(
                    agent_pk = pk.0,
                    "outside A2A agent now held by another node"
                );
                stop.cancel();
            }
            kept
        });
    }
}
