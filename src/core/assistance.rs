//! REQUEST_ASSISTANCE: ask for help, and learn who can give it.
//!
//! **Ranking.** A candidate's `capability_match` is the share of
//! `required_capabilities` it has (case-insensitive; 1.0 when none are required).
//! Candidates are ordered by `capability_match` (highest first), then availability
//! (`available`, then `busy`, then `unavailable`), then whether they are connected now
//! (connected first), then agent id. Agents with no
//! matching capability are left out of `potential_responders`, unless named in
//! `target_agents`.
//!
//! **Delivery.** With `target_agents`, the request goes to those agents only
//! (`broadcast_sent: false`). Without, it is broadcast to every other member of the team
//! (`broadcast_sent: true`). Either way it arrives as an inbox entry of
//! `kind: assistance_request` and `message_type: request` that requires a response, with
//! the deadline as its response deadline; the request id is that message's id, so
//! responders answer it with RESPOND_TO_MESSAGE.

use std::cmp::Ordering;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use utoipa::ToSchema;

use super::delivery::{DeliveryStatus, Idempotency, NewMessage, Outgoing};
use super::error::{CoreError, CoreResult};
use super::messages::{
    Content, MAX_DETAIL, MAX_TEXT, MessageKind, MessageType, Priority, check_message_text,
    null_as_default,
};
use super::registry::{AgentRecord, AgentStatus, Caller};
use super::time::Timestamp;
use super::{Core, check_text, ids};

/// The contract's `assistance_type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum AssistanceType {
    Expertise,
    Resources,
    Review,
    Collaboration,
}

/// The contract's `request_details`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RequestDetails {
    /// What assistance is needed, 1–2000 characters.
    pub description: String,
    /// Background (at most 10000 characters).
    #[serde(default, deserialize_with = "null_as_default")]
    pub context: String,
    /// When assistance is needed by (RFC 3339, in the future); becomes the request's
    /// response deadline.
    #[serde(default)]
    pub deadline: Option<Timestamp>,
    /// Defaults to `normal`.
    #[serde(default, deserialize_with = "null_as_default")]
    pub priority: Priority,
}

/// Body of REQUEST_ASSISTANCE (`POST /v1/assistance-requests`).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RequestAssistance {
    /// Must be the calling agent.
    pub requester_agent_id: String,
    pub assistance_type: AssistanceType,
    /// Ask only these members (then nothing is broadcast).
    #[serde(default, deserialize_with = "null_as_default")]
    pub target_agents: Vec<String>,
    /// Capabilities the helper needs (matched case-insensitively; may be empty).
    pub required_capabilities: Vec<String>,
    pub request_details: RequestDetails,
}

/// A candidate helper.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct PotentialResponder {
    pub agent_id: String,
    pub role: String,
    /// Share of the required capabilities the agent has, 0.0–1.0.
    pub capability_match: f64,
    pub availability: AgentStatus,
    /// Whether it has a live connection now (ours, beyond the contract).
    pub connected: bool,
}

/// Answer of REQUEST_ASSISTANCE.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct AssistanceResult {
    pub success: bool,
    /// The request's id (its message id; respond to it with RESPOND_TO_MESSAGE).
    pub request_id: String,
    /// Ranked best first (see the ranking rule).
    pub potential_responders: Vec<PotentialResponder>,
    /// True when the request went to the whole team rather than to `target_agents`.
    pub broadcast_sent: bool,
    pub timestamp: Timestamp,
    pub delivery_status: DeliveryStatus,
    pub error: Option<String>,
}

/// Share of `required` (lower-cased) that `agent` has.
pub(crate) fn capability_match(agent: &AgentRecord, required: &[String]) -> f64 {
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
    pub async fn request_assistance(
        &self,
        caller: &Caller,
        input: RequestAssistance,
        idempotency_key: Option<&str>,
    ) -> CoreResult<AssistanceResult> {
        let idem = Idempotency::new(idempotency_key, "request_assistance", &input)?;
        let (team, requester) =
            self.sender(caller, &input.requester_agent_id, "requester_agent_id")?;
        if let Some(answer) = self.replay(&requester, &idem).await? {
            return Ok(answer);
        }
        self.check_can_send(&team, &requester)?;
        check_message_text(
            "request_details.description",
            &input.request_details.description,
            MAX_TEXT,
        )?;
        if !input.request_details.context.is_empty() {
            check_message_text(
                "request_details.context",
                &input.request_details.context,
                MAX_DETAIL,
            )?;
        }
        for (i, capability) in input.required_capabilities.iter().enumerate() {
            check_text(
                &format!("required_capabilities[{i}]"),
                capability,
                super::agents::MAX_CAPABILITY,
            )?;
        }
        if let Some(deadline) = input.request_details.deadline
            && deadline <= Timestamp::now()
        {
            return Err(CoreError::validation(
                "request_details.deadline",
                "deadline must be in the future",
            ));
        }

        let targeted = !input.target_agents.is_empty();
        let candidates = if targeted {
            self.resolve_recipients(&team, &requester, &input.target_agents, "target_agents")?
        } else {
            self.registry()
                .members(team.pk)
                .into_iter()
                .filter(|a| a.pk != requester.pk)
                .collect()
        };
        let mut ranked: Vec<(f64, bool, &AgentRecord)> = candidates
            .iter()
            .map(|a| {
                (
                    capability_match(a, &input.required_capabilities),
                    self.hub().is_connected(a.pk),
                    a.as_ref(),
                )
            })
            .filter(|(score, _, _)| targeted || *score > 0.0)
            .collect();
        ranked.sort_by(|(sa, ca, a), (sb, cb, b)| {
            sb.partial_cmp(sa)
                .unwrap_or(Ordering::Equal)
                .then(availability_rank(a.status).cmp(&availability_rank(b.status)))
                .then(cb.cmp(ca))
                .then(a.agent_id.cmp(&b.agent_id))
        });
        let potential_responders: Vec<PotentialResponder> = ranked
            .iter()
            .map(|(score, connected, a)| PotentialResponder {
                agent_id: a.agent_id.clone(),
                role: a.role.clone(),
                capability_match: *score,
                availability: a.status,
                connected: *connected,
            })
            .collect();

        let mut data = Map::new();
        data.insert("assistance_type".into(), json!(input.assistance_type));
        data.insert(
            "required_capabilities".into(),
            json!(input.required_capabilities),
        );
        data.insert(
            "context".into(),
            Value::String(input.request_details.context),
        );
        data.insert("deadline".into(), json!(input.request_details.deadline));
        let message = NewMessage {
            message_id: ids::ordered_id("msg"),
            team_pk: team.pk,
            kind: MessageKind::AssistanceRequest,
            sender_pk: requester.pk,
            sender_role: requester.role.clone(),
            message_type: MessageType::Request,
            priority: input.request_details.priority,
            content: Content {
                text: input.request_details.description,
                data,
                attachments: Vec::new(),
            },
            requires_response: true,
            response_deadline: input.request_details.deadline,
            context_reference: None,
            thread_id: None,
            in_reply_to: None,
            response_status: None,
        };
        self.post(
            &requester,
            idem,
            Outgoing {
                message,
                recipients: candidates,
                response: None,
            },
            |_, _| Box::pin(async { Ok(()) }),
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
}
