//! BROADCAST_UPDATE: an update to every other member of the team.
//!
//! A broadcast is an inbox entry of `kind: broadcast` for each recipient: its
//! `content.text` is the summary and `content.data` carries `update_type`, `urgency`,
//! `details`, `impact` and `action_required`. Urgency maps to the inbox priority so
//! priority filters work across kinds: info and attention → normal, action_required →
//! high, critical → urgent.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use utoipa::ToSchema;

use super::delivery::{DeliveryStatus, Idempotency, NewMessage, Outgoing};
use super::error::CoreResult;
use super::messages::{
    Content, MAX_DETAIL, MAX_TEXT, MessageKind, MessageType, Priority, check_message_text,
    null_as_default,
};
use super::registry::Caller;
use super::time::Timestamp;
use super::{Core, ids};

/// The contract's `update_type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum UpdateType {
    Progress,
    Discovery,
    Issue,
    Completion,
}

/// The contract's `urgency`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Urgency {
    Info,
    Attention,
    ActionRequired,
    Critical,
}

impl Urgency {
    fn priority(self) -> Priority {
        match self {
            Urgency::Info | Urgency::Attention => Priority::Normal,
            Urgency::ActionRequired => Priority::High,
            Urgency::Critical => Priority::Urgent,
        }
    }
}

/// The contract's broadcast `content`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
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
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BroadcastUpdate {
    /// Must be the calling agent.
    pub sender_agent_id: String,
    pub update_type: UpdateType,
    pub content: BroadcastContent,
    pub urgency: Urgency,
}

/// Answer of BROADCAST_UPDATE.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct BroadcastResult {
    pub success: bool,
    /// The broadcast's id (its message id).
    pub broadcast_id: String,
    /// Every member it went to (all but the sender).
    pub recipients: Vec<String>,
    pub timestamp: Timestamp,
    pub delivery_status: DeliveryStatus,
    pub error: Option<String>,
}

impl Core {
    /// BROADCAST_UPDATE.
    pub async fn broadcast(
        &self,
        caller: &Caller,
        input: BroadcastUpdate,
        idempotency_key: Option<&str>,
    ) -> CoreResult<BroadcastResult> {
        let idem = Idempotency::new(idempotency_key, "broadcast_update", &input)?;
        let (team, sender) = self.sender(caller, &input.sender_agent_id, "sender_agent_id")?;
        if let Some(answer) = self.replay(&sender, &idem).await? {
            return Ok(answer);
        }
        self.check_can_send(&team, &sender)?;
        check_message_text("content.summary", &input.content.summary, MAX_TEXT)?;
        if !input.content.details.is_empty() {
            check_message_text("content.details", &input.content.details, MAX_DETAIL)?;
        }
        if !input.content.impact.is_empty() {
            check_message_text("content.impact", &input.content.impact, MAX_DETAIL)?;
        }
        let recipients: Vec<_> = self
            .registry()
            .members(team.pk)
            .into_iter()
            .filter(|a| a.pk != sender.pk)
            .collect();
        let names: Vec<String> = recipients.iter().map(|a| a.agent_id.clone()).collect();
        let mut data = Map::new();
        data.insert("update_type".into(), json!(input.update_type));
        data.insert("urgency".into(), json!(input.urgency));
        data.insert("details".into(), Value::String(input.content.details));
        data.insert("impact".into(), Value::String(input.content.impact));
        data.insert(
            "action_required".into(),
            Value::Bool(input.content.action_required),
        );
        let message = NewMessage {
            message_id: ids::ordered_id("msg"),
            team_pk: team.pk,
            kind: MessageKind::Broadcast,
            sender_pk: sender.pk,
            sender_role: sender.role.clone(),
            message_type: MessageType::Information,
            priority: input.urgency.priority(),
            content: Content {
                text: input.content.summary,
                data,
                attachments: Vec::new(),
            },
            requires_response: false,
            response_deadline: None,
            context_reference: None,
            thread_id: None,
            in_reply_to: None,
            response_status: None,
        };
        self.post(
            &sender,
            idem,
            Outgoing {
                message,
                recipients,
                response: None,
            },
            |_, _| Box::pin(async { Ok(()) }),
            move |p| BroadcastResult {
                success: true,
                broadcast_id: p.message_id.clone(),
                recipients: names,
                timestamp: p.timestamp,
                delivery_status: p.delivery.clone(),
                error: None,
            },
        )
        .await
    }
}
