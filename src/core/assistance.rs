//! REQUEST_ASSISTANCE: ask for help, and learn who can give it.
//!
//! **Ranking.** A candidate's `capability_match` is the share of
//! `required_capabilities` it has (case-insensitive; 1.0 when none are required).
//! Candidates are ordered by `capability_match` (highest first), then availability
//! (`available`, then `busy`, then `unavailable`), then whether they are connected now
//! (connected first), then agent id. Agents with no matching capability are left out of
//! `potential_responders`, unless named in `target_agents`.
//!
//! **Delivery.** With `target_agents`, the request goes to those agents only
//! (`broadcast_sent: false`). Without, it is broadcast to every other member of the team
//! (`broadcast_sent: true`). Either way it arrives as an inbox entry of
//! `kind: assistance_request` and `message_type: request` that requires a response, with
//! the deadline as its response deadline; the request id is that message's id, so
//! responders answer it with RESPOND_TO_MESSAGE.

use std::cmp::Ordering;
use std::sync::Arc;

use serde_json::{Map, Value, json};
use switchboard_types::agents::AgentStatus;
use switchboard_types::assistance::{AssistanceResult, PotentialResponder, RequestAssistance};
use switchboard_types::messages::{Content, MessageKind, MessageType};
use switchboard_types::time::Timestamp;

use super::delivery::{Outgoing, SendRequest, Sending};
use super::{Caller, Core, CoreResult, ids};
use crate::model::{AgentRecord, NewMessage};
use std::ops::ControlFlow;
use switchboard_types::MessageOpName;

/// Share of `required` that `agent` has (1.0 when nothing is required).
pub(super) fn capability_match(agent: &AgentRecord, required: &[String]) -> f64 {
    if required.is_empty() {
        return 1.0;
    }
    let have = required.iter().filter(|c| agent.has_capability(c)).count();
    have as f64 / required.len() as f64
}

fn availability_rank(status: AgentStatus) -> u8 {
    match status {
        AgentStatus::Available => 0,
        AgentStatus::Busy => 1,
        AgentStatus::Unavailable => 2,
    }
}

impl Core {
    /// REQUEST_ASSISTANCE.
    pub(super) async fn request_assistance(
        &self,
        caller: &Caller,
        input: RequestAssistance,
        idempotency_key: Option<&str>,
    ) -> CoreResult<AssistanceResult> {
        let request = SendRequest::new(MessageOpName::RequestAssistance, idempotency_key, &input)
            .claimed(&input.requester_agent_id, "requester_agent_id");
        let Sending {
            team,
            sender: requester,
            idem,
        } = match self.start_sending(caller, request).await? {
            ControlFlow::Break(answer) => return Ok(answer),
            ControlFlow::Continue(sending) => sending,
        };
        let required = input.validate(Timestamp::now())?;
        let targeted = !input.target_agents.is_empty();
        let candidates = if targeted {
            self.resolve_recipients(&team, &requester, &input.target_agents, "target_agents")?
        } else {
            self.others(&team, &requester)
        };
        let potential_responders = self.rank(&candidates, &required, targeted);
        let details = input.request_details;
        let mut data = Map::new();
        data.insert("assistance_type".into(), json!(input.assistance_type));
        data.insert("required_capabilities".into(), json!(required));
        data.insert("context".into(), Value::String(details.context));
        data.insert("deadline".into(), json!(details.deadline));
        let content = Content {
            text: details.description,
            data,
            attachments: Vec::new(),
        };
        let message = NewMessage::new(
            ids::ordered_id("msg").into(),
            &requester,
            MessageKind::AssistanceRequest,
            MessageType::Request,
            content,
        )
        .priority(details.priority)
        .requires_response(true, details.deadline)
        .traced(self.trace_for(None))
        .routed(caller.via(), None);
        let outgoing = Outgoing {
            message,
            recipients: candidates,
            response: None,
            spends_budget: true,
        };
        self.post(
            &requester,
            idem,
            outgoing,
            |_| Ok(()),
            move |p| AssistanceResult {
                success: true,
                request_id: p.message_id.clone(),
                potential_responders,
                broadcast_sent: !targeted,
                timestamp: p.timestamp,
                delivery_status: p.delivery.clone(),
                error: None,
            },
        )
        .await
    }

    /// Candidates ranked by the module's rule; those with no matching capability are
    /// left out unless they were named.
    fn rank(
        &self,
        candidates: &[Arc<AgentRecord>],
        required: &[String],
        named: bool,
    ) -> Vec<PotentialResponder> {
        let mut ranked: Vec<(f64, bool, &AgentRecord)> = candidates
            .iter()
            .map(|a| {
                let share = capability_match(a, required);
                (share, self.hub().is_connected(a.pk), a.as_ref())
            })
            .filter(|(share, _, _)| named || *share > 0.0)
            .collect();
        ranked.sort_by(|(sa, ca, a), (sb, cb, b)| {
            sb.partial_cmp(sa)
                .unwrap_or(Ordering::Equal)
                .then(availability_rank(a.status).cmp(&availability_rank(b.status)))
                .then(cb.cmp(ca))
                .then(a.agent_id.cmp(&b.agent_id))
        });
        ranked
            .into_iter()
            .map(|(share, connected, a)| PotentialResponder {
                agent_id: a.agent_id.clone(),
                role: a.role.clone(),
                capability_match: share,
                availability: a.status,
                connected,
            })
            .collect()
    }
}
