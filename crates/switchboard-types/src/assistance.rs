//! REQUEST_ASSISTANCE: ask for help, and learn who can give it.

use crate::ids::{AgentId, MessageId};
use serde::{Deserialize, Serialize};

use crate::agents::{AGENT_CAPABILITY_LIMITS, AgentStatus};
use crate::decode::null_as_default;
use crate::error::ErrorBody;
use crate::messages::{DeliveryStatus, MAX_DETAIL, MAX_RECIPIENTS, MAX_TEXT, Priority, wire_enum};
use crate::time::Timestamp;
use crate::validate::{check_message_text, clean_capabilities};

wire_enum! {
    "lowercase";
    /// The contract's `assistance_type`.
    pub enum AssistanceType { Expertise, Resources, Review, Collaboration }
}

/// The contract's `request_details`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
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
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RequestAssistance {
    /// Must be the calling agent.
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub requester_agent_id: AgentId,
    pub assistance_type: AssistanceType,
    /// Ask only these members (then nothing is broadcast).
    #[serde(default, deserialize_with = "null_as_default")]
    #[cfg_attr(feature = "openapi", schema(value_type = Vec<String>))]
    pub target_agents: Vec<AgentId>,
    /// Capabilities the helper needs (matched case-insensitively; may be empty; at most
    /// 64, each 1–100 characters).
    pub required_capabilities: Vec<String>,
    pub request_details: RequestDetails,
}

impl RequestAssistance {
    /// Texts, capabilities and the deadline (which must lie after `now`); returns the
    /// capabilities cleaned.
    pub fn validate(&self, now: Timestamp) -> Result<Vec<String>, ErrorBody> {
        let details = &self.request_details;
        check_message_text(
            "request_details.description",
            &details.description,
            MAX_TEXT,
        )?;
        if !details.context.is_empty() {
            check_message_text("request_details.context", &details.context, MAX_DETAIL)?;
        }
        if self.target_agents.len() > MAX_RECIPIENTS {
            return Err(ErrorBody::validation(
                "target_agents",
                format!("at most {MAX_RECIPIENTS} target agents"),
            )
            .with("max", MAX_RECIPIENTS));
        }
        let capabilities = clean_capabilities(
            "required_capabilities",
            self.required_capabilities.clone(),
            AGENT_CAPABILITY_LIMITS,
        )?;
        if let Some(deadline) = details.deadline
            && deadline <= now
        {
            return Err(ErrorBody::validation(
                "request_details.deadline",
                "deadline must be in the future",
            ));
        }
        Ok(capabilities)
    }
}

/// A candidate helper.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PotentialResponder {
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub agent_id: AgentId,
    pub role: String,
    /// Share of the required capabilities the agent has, 0.0–1.0.
    pub capability_match: f64,
    pub availability: AgentStatus,
    /// Whether it has a live connection now (ours, beyond the contract).
    pub connected: bool,
}

/// Answer of REQUEST_ASSISTANCE.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AssistanceResult {
    pub success: bool,
    /// The request's id (its message id; respond to it with RESPOND_TO_MESSAGE).
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub request_id: MessageId,
    /// Ranked best first (see the ranking rule).
    pub potential_responders: Vec<PotentialResponder>,
    /// True when the request went to the whole team rather than to `target_agents`.
    pub broadcast_sent: bool,
    pub timestamp: Timestamp,
    pub delivery_status: DeliveryStatus,
    pub error: Option<String>,
}
