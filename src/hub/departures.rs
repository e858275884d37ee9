//! Agents whose last live connection ended: what lets the server tell "gone" from
//! "between two requests" for what an agent holds (`core::holds`). A claim's holder
//! that had connections and lost them all, and stays away past a grace time, gives
//! its claims back at once instead of making the role wait for the lease to run out.

use std::sync::Mutex;

use switchboard_types::ids::AgentPk;
use switchboard_types::time::Timestamp;

use super::Hub;

/// Last disconnects not yet looked at, oldest first.
#[derive(Default)]
pub(super) struct Departures(Mutex<Vec<(AgentPk, Timestamp)>>);

impl Departures {
    pub(super) fn record(&self, agent_pk: AgentPk, at: Timestamp) {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push((agent_pk, at));
    }
}

impl Hub {
    /// The agents whose last connection here ended at or before `before` and that have
    /// none here now, each with when it left; taken, so each departure is answered once.
    /// A departure not yet due stays for a later call; an agent that came back and left
    /// again is answered at its later departure.
    pub fn take_departed(&self, before: Timestamp) -> Vec<(AgentPk, Timestamp)> {
        let due: Vec<(AgentPk, Timestamp)> = {
            let mut departures = self.departures.0.lock().unwrap_or_else(|p| p.into_inner());
            let split = departures.partition_point(|(_, at)| *at <= before);
            departures.drain(..split).collect()
        };
        if due.is_empty() {
            return due;
        }
        let agents = self.read();
        due.into_iter()
            .filter(|(agent, at)| {
                agents
                    .get(agent)
                    .is_some_and(|s| s.conns.is_empty() && s.last_seen == Some(*at))
            })
            .collect()
    }
}
