//! What agents hold for a while: leases on named resources (`core/leases.rs`) and claims
//! on tasks offered to a role (`core/tasks/claims.rs`). Both end by time and when their
//! holder leaves the team; this is the server's own side of that — one sweep every second
//! and one give-back at a removal — so the two kinds of hold cannot drift apart in when
//! they end.

use std::sync::Arc;
use std::time::Duration;

use switchboard_types::time::Timestamp;
use tokio_util::sync::CancellationToken;

use super::{Core, CoreResult, Holds};
use crate::model::AgentRecord;

impl Holds<'_> {
    /// Ends what ran out by `now`: removes ended leases (they stopped counting at their
    /// end), takes back lapsed claims (open again, or failed on the last attempt) and
    /// gives back the claims of agents gone past the grace time. Answers how many leases
    /// and claims.
    pub async fn sweep(self, now: Timestamp) -> CoreResult<(u64, u64)> {
        let leases = self.core.sweep_leases(now).await?;
        let claims = self.core.sweep_claims(now).await?;
        let departed = self.core.give_back_departed(now).await?;
        Ok((leases, claims + departed))
    }

    /// Gives back, at once, everything an agent that left its team held: its leases end
    /// and the tasks it claimed go back to their role. Best effort after the removal's
    /// commit: what fails here ends by time (a lease of a non-member never counts).
    pub async fn release_all_of(self, agent: &AgentRecord) {
        if let Err(err) = self.core.release_leases_of(&Arc::new(agent.clone())).await {
            tracing::warn!(error = %err, "a removed agent's leases stay until the sweep");
        }
        if let Err(err) = self.core.give_back_claims_of(agent).await {
            tracing::warn!(error = %err, "a removed agent's claims wait for their lease to end");
        }
    }
}

/// Sweeps every `interval` until `stop` is cancelled.
pub async fn run(core: Core, interval: Duration, stop: CancellationToken) {
    loop {
        tokio::select! {
            () = stop.cancelled() => break,
            () = tokio::time::sleep(interval) => {}
        }
        let now = Timestamp::now();
        if let Err(err) = core.holds().sweep(now).await {
            tracing::warn!(error = %err, "sweep of leases and claims failed; retrying next interval");
        }
        // Approvals are not holds, but end by time on the same clock.
        if let Err(err) = core.expire_approvals(now).await {
            tracing::warn!(error = %err, "sweep of approvals failed; retrying next interval");
        }
    }
}
