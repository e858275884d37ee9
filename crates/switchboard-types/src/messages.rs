//! The messaging contract's bodies: SEND_MESSAGE, MARK_MESSAGE_READ,
//! RESPOND_TO_MESSAGE, reading one message, and the message as a recipient sees it.

use crate::ids::{AgentId, MessageId};
use base64::Engine;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::decode::null_as_default;
use crate::error::{ErrorBody, ErrorCode};
use crate::routing::Route;
use crate::time::Timestamp;
use crate::validate::{check_message_text, check_optional, check_text};

/// Longest `content.text` (and response text, broadcast summary, assistance description).
pub const MAX_TEXT: usize = 2000;
/// Longest free-text detail fields (broadcast details and impact, assistance context).
pub const MAX_DETAIL: usize = 10_000;
pub const MAX_ATTACHMENTS: usize = 10;
/// Largest inline attachment, decoded.
pub const MAX_INLINE_ATTACHMENT: usize = 64 * 1024;
/// Largest sum of inline attachments of one message, decoded.
pub const MAX_INLINE_TOTAL: usize = 256 * 1024;
/// Most explicit recipients of one message (`["ALL"]` has no limit).
pub const MAX_RECIPIENTS: usize = 1000;
/// Most ids in one MARK_MESSAGE_READ.
pub const MAX_MARK: usize = 1000;
/// Longest `context_reference` and `thread_id`.
pub const MAX_REFERENCE: usize = 256;
/// Longest attachment name, in characters.
pub const MAX_ATTACHMENT_NAME: usize = 255;
/// Longest attachment media type.
pub const MAX_MEDIA_TYPE: usize = 255;
/// Longest attachment URL.
pub const MAX_ATTACHMENT_URL: usize = 2048;
/// The recipient list meaning "every member but the sender".
pub const ALL: &str = "ALL";

/// Derives the traits every wire enum of this module needs: serde and strum agreeing on
/// the text (so storage, query strings and JSON spell a value the same way).
macro_rules! wire_enum {
    ($case:tt; $(#[$meta:meta])* $vis:vis enum $name:ident { $($(#[$vmeta:meta])* $variant:ident),* $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize,
                 strum::IntoStaticStr, strum::EnumString, strum::VariantArray)]
        #[serde(rename_all = $case)]
        #[strum(serialize_all = $case)]
        #[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
        $vis enum $name { $($(#[$vmeta])* $variant),* }

        impl $name {
            /// The value as the wire and storage spell it.
            pub fn as_str(self) -> &'static str {
                self.into()
            }
        }
    };
}
pub(crate) use wire_enum;

wire_enum! {
    "lowercase";
    /// What a message is for (the contract's `message_type`).
    pub enum MessageType { Information, Request, Response, Coordination }
}

wire_enum! {
    "lowercase";
    /// The contract's priority levels (`normal` when not given).
    #[derive(Default)]
    pub enum Priority { Low, #[default] Normal, High, Urgent }
}

wire_enum! {
    "snake_case";
    /// Which operation produced an inbox entry.
    pub enum MessageKind {
        /// SEND_MESSAGE.
        Message,
        /// RESPOND_TO_MESSAGE.
        Response,
        /// BROADCAST_UPDATE.
        Broadcast,
        /// REQUEST_ASSISTANCE.
        AssistanceRequest,
        /// A task protocol notification (TaskRequest, TaskResponse, …).
        Task,
        /// A publish (MetaGPT-style): `cause_by`, `send_to`, and whether it is news.
        Publish,
    }
}

wire_enum! {
    "lowercase";
    /// How a responder answered (RESPOND_TO_MESSAGE `response_content.status`).
    pub enum ResponseStatus {
        Completed,
        /// More responses from the same responder may follow.
        Partial,
        Unable,
        Delegated,
    }
}

impl ResponseStatus {
    /// A final status closes the responder's part: it cannot respond again.
    pub fn is_final(self) -> bool {
        self != ResponseStatus::Partial
    }
}

wire_enum! {
    "snake_case";
    /// Order of GET_MESSAGES (`newest_first` when not given).
    #[derive(Default)]
    pub enum SortOrder { #[default] NewestFirst, OldestFirst }
}

/// A file or resource attached to a message: a URL, or a small inline payload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Attachment {
    /// File or resource name, 1–255 characters.
    #[cfg_attr(feature = "openapi", schema(example = "report.pdf"))]
    pub name: String,
    /// Media type, `type/subtype`.
    #[cfg_attr(feature = "openapi", schema(example = "application/pdf"))]
    pub media_type: String,
    /// Where to fetch it (http or https). Exactly one of `url` and `data`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// The content, base64 (at most 64 KiB decoded, 256 KiB for all of a message's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<String>,
}

impl Attachment {
    /// Checks the attachment at position `i`; returns its decoded inline size.
    fn validate(&self, i: usize) -> Result<usize, ErrorBody> {
        let field = |f: &str| format!("content.attachments[{i}].{f}");
        check_text(&field("name"), &self.name, MAX_ATTACHMENT_NAME)?;
        let (kind, sub) = self.media_type.split_once('/').unwrap_or(("", ""));
        if kind.is_empty()
            || sub.is_empty()
            || self.media_type.len() > MAX_MEDIA_TYPE
            || self.media_type.contains(char::is_whitespace)
        {
            return Err(ErrorBody::validation(
                &field("media_type"),
                "media_type must look like type/subtype, e.g. text/plain",
            ));
        }
        match (&self.url, &self.data) {
            (Some(url), None) => {
                let lower = url.to_ascii_lowercase();
                if !(lower.starts_with("http://") || lower.starts_with("https://"))
                    || url.chars().count() > MAX_ATTACHMENT_URL
                {
                    return Err(ErrorBody::validation(
                        &field("url"),
                        format!(
                            "url must be an http or https URL of at most {MAX_ATTACHMENT_URL} characters"
                        ),
                    ));
                }
                Ok(0)
            }
            (None, Some(data)) => {
                let bytes = base64::engine::general_purpose::STANDARD
                    .decode(data)
                    .map_err(|_| {
                        ErrorBody::validation(&field("data"), "data must be standard base64")
                    })?;
                if bytes.len() > MAX_INLINE_ATTACHMENT {
                    return Err(ErrorBody::new(
                        ErrorCode::MessageTooLong,
                        format!(
                            "an inline attachment may hold at most {MAX_INLINE_ATTACHMENT} bytes"
                        ),
                    )
                    .with("field", field("data"))
                    .with("max_bytes", MAX_INLINE_ATTACHMENT));
                }
                Ok(bytes.len())
            }
            _ => Err(ErrorBody::validation(
                &field("url"),
                "give exactly one of url and data",
            )),
        }
    }
}

/// A message's content (the contract's `content`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Content {
    /// Human-readable text, 1–2000 characters.
    #[cfg_attr(
        feature = "openapi",
        schema(example = "Can you review the parser change?")
    )]
    pub text: String,
    /// Structured payload: any JSON object (`{}` when not given).
    #[serde(default, deserialize_with = "null_as_default")]
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub data: Map<String, Value>,
    /// Files or resources (`[]` when not given).
    #[serde(default, deserialize_with = "null_as_default")]
    pub attachments: Vec<Attachment>,
}

impl Content {
    /// Content with only a text.
    pub fn text(text: impl Into<String>) -> Content {
        Content {
            text: text.into(),
            ..Content::default()
        }
    }

    /// The text, the data and the attachments against their limits.
    pub fn validate(&self) -> Result<(), ErrorBody> {
        check_message_text("content.text", &self.text, MAX_TEXT)?;
        check_data_size("content.data", &self.data)?;
        if self.attachments.len() > MAX_ATTACHMENTS {
            return Err(ErrorBody::new(
                ErrorCode::MessageTooLong,
                format!("at most {MAX_ATTACHMENTS} attachments per message"),
            )
            .with("field", "content.attachments")
            .with("max", MAX_ATTACHMENTS));
        }
        let mut inline_total = 0;
        for (i, attachment) in self.attachments.iter().enumerate() {
            inline_total += attachment.validate(i)?;
        }
        if inline_total > MAX_INLINE_TOTAL {
            return Err(ErrorBody::new(
                ErrorCode::MessageTooLong,
                format!(
                    "inline attachments of one message may hold at most {MAX_INLINE_TOTAL} bytes"
                ),
            )
            .with("field", "content.attachments")
            .with("max_bytes", MAX_INLINE_TOTAL));
        }
        Ok(())
    }
}

/// Body of SEND_MESSAGE (`POST /v1/messages`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SendMessage {
    /// Must be the calling agent.
    #[cfg_attr(feature = "openapi", schema(example = "planner"))]
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub sender_agent_id: AgentId,
    /// Team members (not the sender), or `["ALL"]` for every member but the sender.
    #[cfg_attr(feature = "openapi", schema(example = json!(["coder"])))]
    #[cfg_attr(feature = "openapi", schema(value_type = Vec<String>))]
    pub recipient_agent_ids: Vec<AgentId>,
    pub message_type: MessageType,
    pub content: Content,
    /// Defaults to `normal`.
    #[serde(default, deserialize_with = "null_as_default")]
    pub priority: Priority,
    /// Whether the message expects a response (defaults to false).
    #[serde(default, deserialize_with = "null_as_default")]
    pub requires_response: bool,
    /// Reference to a shared context item (free text, at most 256 characters).
    #[serde(default)]
    pub context_reference: Option<String>,
    /// When a response is due; needs `requires_response`, must be in the future. After
    /// it, responses are refused with `RESPONSE_DEADLINE_PASSED`.
    #[serde(default)]
    pub response_deadline: Option<Timestamp>,
    /// Groups a conversation (at most 256 characters). Inherited from `in_reply_to`'s
    /// message when not given.
    #[serde(default)]
    pub thread_id: Option<String>,
    /// The message this one follows up on (one the sender sent or received).
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>))]
    pub in_reply_to: Option<MessageId>,
    /// Push it only by this transport (`websocket` or `stomp`); without it, a reply
    /// addressed only to its original's sender goes back the way the original came,
    /// and anything else goes to every live connection. Switchboard's extension.
    #[serde(default)]
    pub route: Option<Route>,
}

impl SendMessage {
    /// A message with the required fields; the rest at their defaults.
    pub fn new(sender: &str, to: &[&str], message_type: MessageType, text: &str) -> SendMessage {
        SendMessage {
            sender_agent_id: sender.into(),
            recipient_agent_ids: to.iter().map(|s| AgentId::from(*s)).collect(),
            message_type,
            content: Content::text(text),
            priority: Priority::default(),
            requires_response: false,
            context_reference: None,
            response_deadline: None,
            thread_id: None,
            in_reply_to: None,
            route: None,
        }
    }

    /// The shape of the recipient list: not empty, `ALL` alone, at most
    /// [`MAX_RECIPIENTS`] names. Returns whether it means the whole team.
    pub fn validate_recipients(&self) -> Result<bool, ErrorBody> {
        let ids = &self.recipient_agent_ids;
        if ids.is_empty() {
            return Err(ErrorBody::validation(
                "recipient_agent_ids",
                "give at least one recipient, or [\"ALL\"]",
            ));
        }
        if ids.iter().any(|r| r == ALL) {
            if ids.len() > 1 {
                return Err(ErrorBody::validation(
                    "recipient_agent_ids",
                    "\"ALL\" must be the only entry of recipient_agent_ids",
                ));
            }
            return Ok(true);
        }
        if ids.len() > MAX_RECIPIENTS {
            return Err(ErrorBody::validation(
                "recipient_agent_ids",
                format!("at most {MAX_RECIPIENTS} recipients; use [\"ALL\"] for the whole team"),
            ));
        }
        Ok(false)
    }

    /// Content, references and the deadline (which must lie after `now`).
    pub fn validate_fields(&self, now: Timestamp) -> Result<(), ErrorBody> {
        self.content.validate()?;
        check_optional("context_reference", &self.context_reference, MAX_REFERENCE)?;
        check_optional("thread_id", &self.thread_id, MAX_REFERENCE)?;
        if let Some(deadline) = self.response_deadline {
            if !self.requires_response {
                return Err(ErrorBody::validation(
                    "response_deadline",
                    "a response_deadline needs requires_response: true",
                ));
            }
            if deadline <= now {
                return Err(ErrorBody::validation(
                    "response_deadline",
                    "response_deadline must be in the future",
                ));
            }
        }
        Ok(())
    }
}

/// The contract's `delivery_status`. Whatever the lists say, every entry was stored
/// first: the lists tell how it will reach each recipient.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct DeliveryStatus {
    /// Handed to a live connection of the agent for pushing: the entry sits in that
    /// connection's outbox and is written to its socket next. Not a receipt: if the
    /// connection closes before writing it (an outbox overflow, 4008, or a dropped
    /// network), the entry comes with the replay when the agent reconnects.
    #[cfg_attr(feature = "openapi", schema(value_type = Vec<String>))]
    pub delivered_to: Vec<AgentId>,
    /// Cannot receive: its (or the team's) communication is disabled, or it was removed.
    #[cfg_attr(feature = "openapi", schema(value_type = Vec<String>))]
    pub failed_delivery: Vec<AgentId>,
    /// Stored in the agent's inbox; pushed when it connects.
    #[cfg_attr(feature = "openapi", schema(value_type = Vec<String>))]
    pub pending_delivery: Vec<AgentId>,
}

/// Answer of SEND_MESSAGE.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SendResult {
    pub success: bool,
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub message_id: MessageId,
    /// When the message was committed.
    pub timestamp: Timestamp,
    pub delivery_status: DeliveryStatus,
    /// Always null on success (the contract's field).
    pub error: Option<String>,
}

/// A message as one recipient sees it (an entry of GET_MESSAGES).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct MessageView {
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub message_id: MessageId,
    pub kind: MessageKind,
    /// The recipient's sequence number of this entry (its cursor); absent when the
    /// caller is not a recipient (a sender reading its own message).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seq: Option<i64>,
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub sender_agent_id: AgentId,
    /// The sender's role when it sent the message.
    pub sender_role: String,
    pub message_type: MessageType,
    pub content: Content,
    pub priority: Priority,
    pub timestamp: Timestamp,
    /// Whether the caller marked it read.
    pub read_status: bool,
    pub requires_response: bool,
    pub response_deadline: Option<Timestamp>,
    pub context_reference: Option<String>,
    pub thread_id: Option<String>,
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>))]
    pub in_reply_to: Option<MessageId>,
    /// For `kind: response`, the responder's status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_status: Option<ResponseStatus>,
    /// For `kind: publish` (MetaGPT's names): the action that produced it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cause_by: Option<String>,
    /// For `kind: publish`: the sender's agent id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>))]
    pub sent_from: Option<AgentId>,
    /// For `kind: publish`: the address set it was sent to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub send_to: Option<Vec<String>>,
    /// For `kind: publish`: the action's structured output, if it had one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instruct_content: Option<serde_json::Value>,
    /// For `kind: publish`: whether it is news for the caller (it watches `cause_by`,
    /// or `send_to` names it); absent for the sender reading its own message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub news: Option<bool>,
    /// The only transport this message is pushed by, when it has a route (given by the
    /// sender, or a reply going back the way its original came).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub route: Option<Route>,
    /// W3C `traceparent` naming this message's span in its trace: whoever acts on the
    /// message sends it back (header, frame field, STOMP header) to continue the trace
    /// (`docs/tracing.md`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "openapi",
        schema(example = "00-019ac5f2b6d07c53a1e0c2b7d9f4e813-a1e0c2b7d9f4e813-01")
    )]
    pub traceparent: Option<String>,
    /// W3C `tracestate` the trace came with, handed on unchanged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tracestate: Option<String>,
}

impl MessageView {
    /// Its `traceparent` and `tracestate`, those present, as name and value: what any
    /// transport writes to hand the trace on.
    pub fn trace_fields(&self) -> impl Iterator<Item = (&'static str, &str)> {
        crate::trace::fields(&self.traceparent, &self.tracestate)
    }
}

/// Body of MARK_MESSAGE_READ (`POST /v1/messages/read`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct MarkRead {
    /// Must be the calling agent.
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub agent_id: AgentId,
    /// 1–1000 message ids.
    #[cfg_attr(feature = "openapi", schema(value_type = Vec<String>))]
    pub message_ids: Vec<MessageId>,
}

impl MarkRead {
    /// 1 to [`MAX_MARK`] ids.
    pub fn validate(&self) -> Result<(), ErrorBody> {
        if self.message_ids.is_empty() {
            return Err(ErrorBody::validation(
                "message_ids",
                "give at least one message id",
            ));
        }
        if self.message_ids.len() > MAX_MARK {
            return Err(ErrorBody::validation(
                "message_ids",
                format!("at most {MAX_MARK} ids per call"),
            ));
        }
        Ok(())
    }
}

/// Answer of MARK_MESSAGE_READ. Ids keep the order they were given in.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct MarkReadResult {
    pub success: bool,
    /// Marked read by this call.
    #[cfg_attr(feature = "openapi", schema(value_type = Vec<String>))]
    pub marked_read: Vec<MessageId>,
    /// Unknown, or not addressed to the caller (existence is not revealed).
    #[cfg_attr(feature = "openapi", schema(value_type = Vec<String>))]
    pub not_found: Vec<MessageId>,
    /// Were read before this call.
    #[cfg_attr(feature = "openapi", schema(value_type = Vec<String>))]
    pub already_read: Vec<MessageId>,
    pub error: Option<String>,
}

/// Answer of `GET /v1/messages/{message_id}`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct MessageDetail {
    pub success: bool,
    pub message: MessageView,
    /// Who it was addressed to.
    #[cfg_attr(feature = "openapi", schema(value_type = Vec<String>))]
    pub recipient_agent_ids: Vec<AgentId>,
    /// For the sender only: recipients that marked it read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Vec<String>>))]
    pub read_by: Option<Vec<AgentId>>,
    /// Responses to it, oldest first.
    pub responses: Vec<ResponseRecord>,
}

mod responses;
#[cfg(test)]
mod tests;
mod weight;

pub use responses::*;

pub use weight::{MAX_DATA_BYTES, MAX_PAGE_BYTES, check_data_size};
