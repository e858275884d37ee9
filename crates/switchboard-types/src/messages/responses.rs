//! RESPOND_TO_MESSAGE: its body and answer, and the responses an original records.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::{DeliveryStatus, MAX_RECIPIENTS, MAX_TEXT, ResponseStatus};
use crate::decode::null_as_default;
use crate::error::ErrorBody;
use crate::ids::{AgentId, MessageId};
use crate::routing::Route;
use crate::time::Timestamp;
use crate::validate::check_message_text;

/// The contract's `response_content`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ResponseContent {
    /// 1–2000 characters.
    pub text: String,
    #[serde(default, deserialize_with = "null_as_default")]
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub data: Map<String, Value>,
    pub status: ResponseStatus,
}

/// Body of RESPOND_TO_MESSAGE (`POST /v1/messages/{message_id}/responses`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RespondToMessage {
    /// Must be the calling agent, a recipient of the original.
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub responder_agent_id: AgentId,
    /// Optional here (the path names it); when given it must match the path.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>))]
    pub original_message_id: Option<MessageId>,
    pub response_content: ResponseContent,
    /// Further members to send the response to, beyond the original's sender.
    #[serde(default, deserialize_with = "null_as_default")]
    #[cfg_attr(feature = "openapi", schema(value_type = Vec<String>))]
    pub additional_recipients: Vec<AgentId>,
    /// Push it only by this transport; without it, a response to the original's sender
    /// alone goes back the way the original came. Switchboard's extension.
    #[serde(default)]
    pub route: Option<Route>,
}

impl RespondToMessage {
    /// The path's message id agrees with the body's, and the text is within limits.
    pub fn validate(&self, message_id: &str) -> Result<(), ErrorBody> {
        if let Some(original_id) = &self.original_message_id
            && original_id != message_id
        {
            return Err(ErrorBody::validation(
                "original_message_id",
                "original_message_id must match the message id in the path",
            ));
        }
        if self.additional_recipients.len() > MAX_RECIPIENTS {
            return Err(ErrorBody::validation(
                "additional_recipients",
                format!("at most {MAX_RECIPIENTS} additional recipients"),
            )
            .with("max", MAX_RECIPIENTS));
        }
        check_message_text(
            "response_content.text",
            &self.response_content.text,
            MAX_TEXT,
        )
    }
}

/// Answer of RESPOND_TO_MESSAGE.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RespondResult {
    pub success: bool,
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub response_message_id: MessageId,
    /// Whether the original now records this response (always true on success).
    pub original_message_updated: bool,
    pub timestamp: Timestamp,
    pub delivery_status: DeliveryStatus,
    pub error: Option<String>,
}

/// One response recorded on an original message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ResponseRecord {
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub response_message_id: MessageId,
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub responder_agent_id: AgentId,
    pub status: ResponseStatus,
    pub timestamp: Timestamp,
}
