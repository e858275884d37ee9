//! Communication metrics of a team (the contract's F9, "performance monitoring via
//! communication metrics"): per agent, what it sent and received, what it has not read,
//! how many responses it gave and how fast.

use std::collections::HashMap;
use switchboard_types::ids::TeamId;

use switchboard_types::ids::AgentPk;
use switchboard_types::metrics::{AgentCommMetrics, TeamMetrics};
use switchboard_types::time::Timestamp;

use super::{Caller, Core, CoreResult, Need};

/// Median of `values` (not sorted on entry).
fn median(values: &mut [i64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    values.sort_unstable();
    let mid = values.len() / 2;
    Some(if values.len().is_multiple_of(2) {
        (values[mid - 1] + values[mid]) as f64 / 2.0
    } else {
        values[mid] as f64
    })
}

impl Core {
    /// Per-agent communication metrics (any member, the team key, the admin).
    pub(super) async fn team_metrics(
        &self,
        caller: &Caller,
        team_id: &TeamId,
    ) -> CoreResult<TeamMetrics> {
        let team = self.team_for(caller, team_id, Need::Read)?;
        let counts = self.store().team_counts(team.pk).await?;
        let mut latencies: HashMap<AgentPk, Vec<i64>> = HashMap::new();
        for latency in self.store().response_latencies(team.pk).await? {
            latencies
                .entry(latency.responder)
                .or_default()
                .push(latency.micros);
        }
        let agents = self
            .registry()
            .members(team.pk)
            .iter()
            .map(|a| {
                let c = counts.get(&a.pk).copied().unwrap_or_default();
                let mut times = latencies.remove(&a.pk).unwrap_or_default();
                AgentCommMetrics {
                    agent_id: a.agent_id.clone(),
                    sent: c.sent,
                    received: c.received,
                    unread: c.unread,
                    responses_given: c.responded,
                    median_response_time_ms: median(&mut times).map(|us| us / 1000.0),
                }
            })
            .collect();
        Ok(TeamMetrics {
            success: true,
            team_id: team.team_id.clone(),
            agents,
            generated_at: Timestamp::now(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::median;

    #[test]
    fn median_of_odd_even_and_empty() {
        assert_eq!(median(&mut [5, 1, 3]), Some(3.0));
        assert_eq!(median(&mut [4, 1, 3, 2]), Some(2.5));
        assert_eq!(median(&mut []), None);
    }
}
