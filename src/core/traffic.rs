//! The operator's view of a team's traffic: every message in the order it was stored,
//! for the team key (and the admin). The console's timeline follows it.

use switchboard_types::ids::TeamId;
use switchboard_types::inbox::page_size;
use switchboard_types::traffic::{TrafficEntry, TrafficPage, TrafficQuery};

use crate::core::{Caller, Core, CoreError, CoreResult, Need};
use crate::model::TrafficSpec;

impl Core {
    /// One page of the team's messages: after `query.after` oldest first, or the newest.
    pub(super) async fn team_traffic(
        &self,
        caller: &Caller,
        team_id: &TeamId,
        query: TrafficQuery,
    ) -> CoreResult<TrafficPage> {
        let team = self.team_for(caller, team_id, Need::Manage)?;
        let limit = page_size(query.limit)?;
        if let Some(after) = query.after.filter(|a| *a < 0) {
            return Err(
                CoreError::validation("after", "after must be 0 or more").with("value", after)
            );
        }
        let spec = TrafficSpec {
            after: query.after,
            limit: limit + 1,
        };
        // A page keeps the byte bound as the inbox's does: cut short, it says there is
        // more.
        let page = self.store().team_traffic(team.pk, spec).await?;
        let mut rows = page.rows;
        let more = rows.len() as i64 > limit || page.cut;
        rows.truncate(limit as usize);
        if query.after.is_none() {
            // The newest page was read newest first; it is shown oldest first.
            rows.reverse();
        }
        let next_after = rows
            .last()
            .map_or(query.after.unwrap_or(0), |r| r.message.pk.0);
        let entries = rows
            .into_iter()
            .map(|row| TrafficEntry {
                position: row.message.pk.0,
                message: self.view(row.message, None, false, None),
                recipient_agent_ids: row.recipients,
            })
            .collect();
        Ok(TrafficPage {
            success: true,
            entries,
            next_after,
            more: more && query.after.is_some(),
        })
    }
}
