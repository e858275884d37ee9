//! BROADCAST_UPDATE: an update to every other member of the team.

use crate::ids::{AgentId, MessageId};
use serde::{Deserialize, Serialize};

use crate::decode::null_as_default;
use crate::error::ErrorBody;
use crate::messages::{DeliveryStatus, MAX_DETAIL, MAX_TEXT, Priority, wire_enum};
use crate::time::Timestamp;
use crate::validate::check_message_text;

wire_enum! {
    "lowercase";
    /// The contract's `update_type`.
    pub enum UpdateType { Progress, Discovery, Issue, Completion }
}

wire_enum! {
    "snake_case";
    /// The contract's `urgency`.
    pub enum Urgency { Info, Attention, ActionRequired, Critical }
}

impl Urgency {
    /// The inbox priority of a broadcast, so priority filters work across kinds: info
    /// and attention → normal, action_required → high, critical → urgent.
    pub fn priority(self) -> Priority {
        match self {
            Urgency::Info | Urgency::Attention => Priority::Normal,
            Urgency::ActionRequired => Priority::High,
            Urgency::Critical => Priority::Urgent,
        }
    }
}

/// The contract's broadcast `content`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct BroadcastContent {
    /// Brief summary, 1–2000 characters.
    pub summary: String,
    /// Detailed information (at most 10000 characters).
    #[serde(default, deserialize_with = "null_as_default")]
    pub details: String,
    /// Impact on team objectives (at most 10000 characters).
    #[serde(default, deserialize_with = "null_as_default")]
    pub impact: String,
    /// Whether members need to act (defaults to false).
    #[serde(default, deserialize_with = "null_as_default")]
    pub action_required: bool,
}

/// Body of BROADCAST_UPDATE (`POST /v1/broadcasts`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct BroadcastUpdate {
    /// Must be the calling agent.
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub sender_agent_id: AgentId,
    pub update_type: UpdateType,
    pub content: BroadcastContent,
    pub urgency: Urgency,
}

impl BroadcastUpdate {
    /// The summary, and the details and impact when given, against their limits.
    pub fn validate(&self) -> Result<(), ErrorBody> {
        check_message_text("content.summary", &self.content.summary, MAX_TEXT)?;
        if !self.content.details.is_empty() {
            check_message_text("content.details", &self.content.details, MAX_DETAIL)?;
        }
        if !self.content.impact.is_empty() {
            check_message_text("content.impact", &self.content.impact, MAX_DETAIL)?;
        }
        Ok(())
    }
}

/// Answer of BROADCAST_UPDATE.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct BroadcastResult {
    pub success: bool,
    /// The broadcast's id (its message id).
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub broadcast_id: MessageId,
    /// Every member it went to (all but the sender).
    #[cfg_attr(feature = "openapi", schema(value_type = Vec<String>))]
    pub recipients: Vec<AgentId>,
    pub timestamp: Timestamp,
    pub delivery_status: DeliveryStatus,
    pub error: Option<String>,
}
