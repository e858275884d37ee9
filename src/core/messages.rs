//! The messaging contract: SEND_MESSAGE, GET_MESSAGES, MARK_MESSAGE_READ,
//! RESPOND_TO_MESSAGE, and reading one message.
//!
//! A message is stored once; each recipient gets an inbox entry with its own sequence
//! number and read flag. Broadcasts, responses, assistance requests and task
//! notifications are messages too (`kind` tells them apart), so an agent's inbox shows
//! everything it received, in order.

use std::collections::HashSet;
use std::sync::Arc;

use base64::Engine;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Value};
use utoipa::{IntoParams, ToSchema};

use super::delivery::{DeliveryStatus, Idempotency, NewMessage, Outgoing, Posted};
use super::error::{CoreError, CoreResult, ErrorCode};
use super::registry::{AgentRecord, Caller, TeamRecord};
use super::time::Timestamp;
use super::{Core, ids};
use crate::hub::{Event, FrameKind, frame_of};
use crate::store;

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
pub const MAX_REFERENCE: usize = 256;
/// The recipient list meaning "every member but the sender".
pub const ALL: &str = "ALL";

/// What a message is for (the contract's `message_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum MessageType {
    Information,
    Request,
    Response,
    Coordination,
}

/// The contract's priority levels.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Priority {
    Low,
    #[default]
    Normal,
    High,
    Urgent,
}

/// Which operation produced an inbox entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
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
}

/// How a responder answered (RESPOND_TO_MESSAGE `response_content.status`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum ResponseStatus {
    Completed,
    /// More responses from the same responder may follow.
    Partial,
    Unable,
    Delegated,
}

impl ResponseStatus {
    /// A final status closes the responder's part: it cannot respond again.
    pub fn is_final(self) -> bool {
        self != ResponseStatus::Partial
    }
}

/// Order of GET_MESSAGES.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum SortOrder {
    #[default]
    NewestFirst,
    OldestFirst,
}

macro_rules! text_enum {
    ($($ty:ty { $($variant:ident = $text:literal),* $(,)? })*) => {$(
        impl $ty {
            pub fn as_str(self) -> &'static str {
                match self { $(<$ty>::$variant => $text),* }
            }
        }
        impl std::str::FromStr for $ty {
            type Err = ();
            fn from_str(s: &str) -> Result<Self, ()> {
                match s { $($text => Ok(<$ty>::$variant),)* _ => Err(()) }
            }
        }
    )*};
}

text_enum! {
    MessageType { Information = "information", Request = "request", Response = "response", Coordination = "coordination" }
    Priority { Low = "low", Normal = "normal", High = "high", Urgent = "urgent" }
    MessageKind { Message = "message", Response = "response", Broadcast = "broadcast", AssistanceRequest = "assistance_request", Task = "task" }
    ResponseStatus { Completed = "completed", Partial = "partial", Unable = "unable", Delegated = "delegated" }
}

/// Reads `null` like an absent field: many clients send `None` for "not given".
pub(crate) fn null_as_default<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

/// A file or resource attached to a message: a URL, or a small inline payload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Attachment {
    /// File or resource name, 1–255 characters.
    #[schema(example = "report.pdf")]
    pub name: String,
    /// Media type, `type/subtype`.
    #[schema(example = "application/pdf")]
    pub media_type: String,
    /// Where to fetch it (http or https). Exactly one of `url` and `data`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// The content, base64 (at most 64 KiB decoded, 256 KiB for all of a message's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<String>,
}

/// A message's content (the contract's `content`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Content {
    /// Human-readable text, 1–2000 characters.
    #[schema(example = "Can you review the parser change?")]
    pub text: String,
    /// Structured payload: any JSON object (`{}` when not given).
    #[serde(default, deserialize_with = "null_as_default")]
    #[schema(value_type = Object)]
    pub data: Map<String, Value>,
    /// Files or resources (`[]` when not given).
    #[serde(default, deserialize_with = "null_as_default")]
    pub attachments: Vec<Attachment>,
}

/// Body of SEND_MESSAGE (`POST /v1/messages`).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SendMessage {
    /// Must be the calling agent.
    #[schema(example = "planner")]
    pub sender_agent_id: String,
    /// Team members (not the sender), or `["ALL"]` for every member but the sender.
    #[schema(example = json!(["coder"]))]
    pub recipient_agent_ids: Vec<String>,
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
    pub in_reply_to: Option<String>,
}

/// Answer of SEND_MESSAGE.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct SendResult {
    pub success: bool,
    pub message_id: String,
    /// When the message was committed.
    pub timestamp: Timestamp,
    pub delivery_status: DeliveryStatus,
    /// Always null on success (the contract's field).
    pub error: Option<String>,
}

/// A message as one recipient sees it (an entry of GET_MESSAGES).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct MessageView {
    pub message_id: String,
    pub kind: MessageKind,
    /// The recipient's sequence number of this entry (its cursor); absent when the
    /// caller is not a recipient (a sender reading its own message).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seq: Option<i64>,
    pub sender_agent_id: String,
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
    pub in_reply_to: Option<String>,
    /// For `kind: response`, the responder's status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_status: Option<ResponseStatus>,
}

/// A message as stored, without per-recipient state.
#[derive(Debug, Clone)]
pub struct MessageRecord {
    pub pk: i64,
    pub message_id: String,
    pub team_pk: i64,
    pub kind: MessageKind,
    pub sender_pk: i64,
    pub sender_role: String,
    pub message_type: MessageType,
    pub priority: Priority,
    pub content: Content,
    pub requires_response: bool,
    pub response_deadline: Option<Timestamp>,
    pub context_reference: Option<String>,
    pub thread_id: Option<String>,
    pub in_reply_to: Option<String>,
    pub response_status: Option<ResponseStatus>,
    pub created_at: Timestamp,
}

/// One inbox entry: the message and the recipient's state of it.
#[derive(Debug, Clone)]
pub struct InboxItem {
    pub seq: i64,
    pub read_at: Option<Timestamp>,
    pub message: MessageRecord,
}

/// Filters of GET_MESSAGES. Lists are comma-separated in a query string and arrays in
/// JSON (WebSocket frames).
#[derive(Debug, Clone, Default, Serialize, Deserialize, IntoParams, ToSchema)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct InboxQuery {
    /// The contract's `agent_id`: optional here (the token names the caller); when
    /// given it must be the caller.
    pub agent_id: Option<String>,
    /// Only these message types, e.g. `request,coordination`.
    #[param(value_type = Option<String>, example = "request,coordination")]
    #[schema(value_type = Option<Vec<MessageType>>)]
    pub message_types: Option<CommaList<MessageType>>,
    /// Only from these agents, e.g. `planner,coder`.
    #[param(value_type = Option<String>)]
    #[schema(value_type = Option<Vec<String>>)]
    pub senders: Option<CommaList<String>>,
    /// Only this priority.
    pub priority: Option<Priority>,
    /// Only messages the caller has not marked read.
    pub unread_only: Option<bool>,
    /// Only messages sent after this time (RFC 3339).
    #[param(value_type = Option<String>)]
    pub since_timestamp: Option<Timestamp>,
    /// Page size, 1–100 (default 50).
    pub limit: Option<i64>,
    /// `newest_first` (default) or `oldest_first`.
    pub sort_order: Option<SortOrder>,
    /// `next_cursor` of the previous page; continues that walk with the same filters.
    pub cursor: Option<String>,
    /// Only these kinds, e.g. `broadcast,response` (ours, beyond the contract).
    #[param(value_type = Option<String>)]
    #[schema(value_type = Option<Vec<MessageKind>>)]
    pub kinds: Option<CommaList<MessageKind>>,
    /// Only this conversation.
    pub thread_id: Option<String>,
    /// Only entries after this sequence number (the `seq` of the last entry already
    /// handled), oldest first: how a polling client continues where it stopped, also
    /// past the last page. Needs `sort_order=oldest_first`; not with `cursor`.
    pub after_seq: Option<i64>,
}

/// A list given as `a,b,c` (query strings) or `["a", "b", "c"]` (JSON).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct CommaList<T>(pub Vec<T>);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for CommaList<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw<T> {
            Text(String),
            List(Vec<T>),
        }
        match Raw::<T>::deserialize(deserializer)? {
            Raw::List(items) => Ok(CommaList(items)),
            Raw::Text(text) => text
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(|item| {
                    T::deserialize(serde::de::value::StringDeserializer::<
                        serde::de::value::Error,
                    >::new(item.to_owned()))
                    .map_err(|e| serde::de::Error::custom(format!("'{item}': {e}")))
                })
                .collect::<Result<Vec<T>, D::Error>>()
                .map(CommaList),
        }
    }
}

/// Answer of GET_MESSAGES.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct InboxPage {
    pub success: bool,
    pub messages: Vec<MessageView>,
    /// Every entry matching the filters, ignoring `limit` and `cursor`.
    pub total_count: i64,
    /// The unread ones among them.
    pub unread_count: i64,
    /// Pass as `cursor` to get the next page; null on the last page.
    pub next_cursor: Option<String>,
    pub error: Option<String>,
}

/// Body of MARK_MESSAGE_READ (`POST /v1/messages/read`).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct MarkRead {
    /// Must be the calling agent.
    pub agent_id: String,
    /// 1–1000 message ids.
    pub message_ids: Vec<String>,
}

/// Answer of MARK_MESSAGE_READ. Ids keep the order they were given in.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct MarkReadResult {
    pub success: bool,
    /// Marked read by this call.
    pub marked_read: Vec<String>,
    /// Unknown, or not addressed to the caller (existence is not revealed).
    pub not_found: Vec<String>,
    /// Were read before this call.
    pub already_read: Vec<String>,
    pub error: Option<String>,
}

/// The contract's `response_content`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ResponseContent {
    /// 1–2000 characters.
    pub text: String,
    #[serde(default, deserialize_with = "null_as_default")]
    #[schema(value_type = Object)]
    pub data: Map<String, Value>,
    pub status: ResponseStatus,
}

/// Body of RESPOND_TO_MESSAGE (`POST /v1/messages/{message_id}/responses`).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RespondToMessage {
    /// Must be the calling agent, a recipient of the original.
    pub responder_agent_id: String,
    /// Optional here (the path names it); when given it must match the path.
    #[serde(default)]
    pub original_message_id: Option<String>,
    pub response_content: ResponseContent,
    /// Further members to send the response to, beyond the original's sender.
    #[serde(default, deserialize_with = "null_as_default")]
    pub additional_recipients: Vec<String>,
}

/// Answer of RESPOND_TO_MESSAGE.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct RespondResult {
    pub success: bool,
    pub response_message_id: String,
    /// Whether the original now records this response (always true on success).
    pub original_message_updated: bool,
    pub timestamp: Timestamp,
    pub delivery_status: DeliveryStatus,
    pub error: Option<String>,
}

/// One response recorded on an original message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ResponseRecord {
    pub response_message_id: String,
    pub responder_agent_id: String,
    pub status: ResponseStatus,
    pub timestamp: Timestamp,
}

/// Answer of `GET /v1/messages/{message_id}`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct MessageDetail {
    pub success: bool,
    pub message: MessageView,
    /// Who it was addressed to.
    pub recipient_agent_ids: Vec<String>,
    /// For the sender only: recipients that marked it read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_by: Option<Vec<String>>,
    /// Responses to it, oldest first.
    pub responses: Vec<ResponseRecord>,
}

/// Checks a text field of the contract: not blank (`VALIDATION_ERROR`), at most
/// [`MAX_TEXT`] characters (`MESSAGE_TOO_LONG`).
pub(crate) fn check_message_text(field: &str, text: &str, max: usize) -> CoreResult<()> {
    if text.trim().is_empty() {
        return Err(CoreError::validation(
            field,
            format!("{field} must not be empty"),
        ));
    }
    let length = text.chars().count();
    if length > max {
        return Err(CoreError::new(
            ErrorCode::MessageTooLong,
            format!("{field} has {length} characters; at most {max} are allowed"),
        )
        .with("field", field)
        .with("max", max)
        .with("length", length));
    }
    Ok(())
}

/// Checks an optional short free-text field.
pub(crate) fn check_optional(field: &str, value: &Option<String>, max: usize) -> CoreResult<()> {
    match value {
        Some(v) if v.chars().count() > max => Err(CoreError::validation(
            field,
            format!("{field} must be at most {max} characters"),
        )),
        Some(v) if v.trim().is_empty() => Err(CoreError::validation(
            field,
            format!("{field} must not be empty when given"),
        )),
        _ => Ok(()),
    }
}

fn check_attachments(attachments: &[Attachment]) -> CoreResult<()> {
    if attachments.len() > MAX_ATTACHMENTS {
        return Err(CoreError::new(
            ErrorCode::MessageTooLong,
            format!("at most {MAX_ATTACHMENTS} attachments per message"),
        )
        .with("field", "content.attachments")
        .with("max", MAX_ATTACHMENTS));
    }
    let mut inline_total = 0;
    for (i, a) in attachments.iter().enumerate() {
        let field = |f: &str| format!("content.attachments[{i}].{f}");
        if a.name.trim().is_empty() || a.name.chars().count() > 255 {
            return Err(CoreError::validation(
                &field("name"),
                "name must be 1 to 255 characters",
            ));
        }
        let (kind, sub) = a.media_type.split_once('/').unwrap_or(("", ""));
        if kind.is_empty()
            || sub.is_empty()
            || a.media_type.len() > 255
            || a.media_type.contains(char::is_whitespace)
        {
            return Err(CoreError::validation(
                &field("media_type"),
                "media_type must look like type/subtype, e.g. text/plain",
            ));
        }
        match (&a.url, &a.data) {
            (Some(url), None) => {
                let lower = url.to_ascii_lowercase();
                if !(lower.starts_with("http://") || lower.starts_with("https://"))
                    || url.len() > 2048
                {
                    return Err(CoreError::validation(
                        &field("url"),
                        "url must be an http or https URL of at most 2048 characters",
                    ));
                }
            }
            (None, Some(data)) => {
                let bytes = base64::engine::general_purpose::STANDARD
                    .decode(data)
                    .map_err(|_| {
                        CoreError::validation(&field("data"), "data must be standard base64")
                    })?;
                if bytes.len() > MAX_INLINE_ATTACHMENT {
                    return Err(CoreError::new(
                        ErrorCode::MessageTooLong,
                        format!(
                            "an inline attachment may hold at most {MAX_INLINE_ATTACHMENT} bytes"
                        ),
                    )
                    .with("field", field("data"))
                    .with("max_bytes", MAX_INLINE_ATTACHMENT));
                }
                inline_total += bytes.len();
            }
            _ => {
                return Err(CoreError::validation(
                    &field("url"),
                    "give exactly one of url and data",
                ));
            }
        }
    }
    if inline_total > MAX_INLINE_TOTAL {
        return Err(CoreError::new(
            ErrorCode::MessageTooLong,
            format!("inline attachments of one message may hold at most {MAX_INLINE_TOTAL} bytes"),
        )
        .with("field", "content.attachments")
        .with("max_bytes", MAX_INLINE_TOTAL));
    }
    Ok(())
}

/// Validates a message's content (text and attachments).
pub(crate) fn check_content(content: &Content) -> CoreResult<()> {
    check_message_text("content.text", &content.text, MAX_TEXT)?;
    check_attachments(&content.attachments)
}

/// Opaque page cursor: the sort order and the last sequence number returned.
fn encode_cursor(order: SortOrder, seq: i64) -> String {
    let raw = format!("v1:{}:{seq}", order_tag(order));
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(raw)
}

fn order_tag(order: SortOrder) -> &'static str {
    match order {
        SortOrder::NewestFirst => "n",
        SortOrder::OldestFirst => "o",
    }
}

fn decode_cursor(cursor: &str, order: SortOrder) -> CoreResult<i64> {
    let invalid =
        || CoreError::validation("cursor", "cursor is not a next_cursor this server gave out");
    let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(cursor)
        .map_err(|_| invalid())?;
    let raw = String::from_utf8(raw).map_err(|_| invalid())?;
    let mut parts = raw.split(':');
    match (
        parts.next(),
        parts.next(),
        parts.next().map(str::parse::<i64>),
        parts.next(),
    ) {
        (Some("v1"), Some(tag), Some(Ok(seq)), None) if tag == order_tag(order) => Ok(seq),
        (Some("v1"), Some(_), Some(Ok(_)), None) => Err(CoreError::validation(
            "cursor",
            "this cursor belongs to the other sort_order; keep the sort_order of the first page",
        )),
        _ => Err(invalid()),
    }
}

/// The SQL-ready form of an inbox query.
#[derive(Debug, Clone, Default)]
pub struct InboxFilter {
    pub message_types: Option<Vec<MessageType>>,
    pub sender_pks: Option<Vec<i64>>,
    pub priority: Option<Priority>,
    pub unread_only: bool,
    pub since: Option<Timestamp>,
    pub kinds: Option<Vec<MessageKind>>,
    pub thread_id: Option<String>,
}

impl Core {
    /// SEND_MESSAGE.
    pub async fn send_message(
        &self,
        caller: &Caller,
        input: SendMessage,
        idempotency_key: Option<&str>,
    ) -> CoreResult<SendResult> {
        let idem = Idempotency::new(idempotency_key, "send_message", &input)?;
        let (team, sender) = self.sender(caller, &input.sender_agent_id, "sender_agent_id")?;
        if let Some(answer) = self.replay(&sender, &idem).await? {
            return Ok(answer);
        }
        self.check_can_send(&team, &sender)?;

        if input.recipient_agent_ids.is_empty() {
            return Err(CoreError::validation(
                "recipient_agent_ids",
                "give at least one recipient, or [\"ALL\"]",
            ));
        }
        let recipients = if input.recipient_agent_ids.iter().any(|r| r == ALL) {
            if input.recipient_agent_ids.len() > 1 {
                return Err(CoreError::validation(
                    "recipient_agent_ids",
                    "\"ALL\" must be the only entry of recipient_agent_ids",
                ));
            }
            self.registry()
                .members(team.pk)
                .into_iter()
                .filter(|a| a.pk != sender.pk)
                .collect()
        } else {
            if input.recipient_agent_ids.len() > MAX_RECIPIENTS {
                return Err(CoreError::validation(
                    "recipient_agent_ids",
                    format!(
                        "at most {MAX_RECIPIENTS} recipients; use [\"ALL\"] for the whole team"
                    ),
                ));
            }
            self.resolve_recipients(
                &team,
                &sender,
                &input.recipient_agent_ids,
                "recipient_agent_ids",
            )?
        };
        check_content(&input.content)?;
        check_optional("context_reference", &input.context_reference, MAX_REFERENCE)?;
        check_optional("thread_id", &input.thread_id, MAX_REFERENCE)?;
        if let Some(deadline) = input.response_deadline {
            if !input.requires_response {
                return Err(CoreError::validation(
                    "response_deadline",
                    "a response_deadline needs requires_response: true",
                ));
            }
            if deadline <= Timestamp::now() {
                return Err(CoreError::validation(
                    "response_deadline",
                    "response_deadline must be in the future",
                ));
            }
        }
        let mut thread_id = input.thread_id.clone();
        if let Some(reply_to) = &input.in_reply_to {
            let original = self.visible_message(&team, &sender, reply_to).await?;
            if thread_id.is_none() {
                thread_id = Some(original.thread_id.unwrap_or(original.message_id));
            }
        }

        let message = NewMessage {
            message_id: ids::ordered_id("msg"),
            team_pk: team.pk,
            kind: MessageKind::Message,
            sender_pk: sender.pk,
            sender_role: sender.role.clone(),
            message_type: input.message_type,
            priority: input.priority,
            content: input.content,
            requires_response: input.requires_response,
            response_deadline: input.response_deadline,
            context_reference: input.context_reference,
            thread_id,
            in_reply_to: input.in_reply_to,
            response_status: None,
        };
        let posted = self
            .post(
                &sender,
                idem,
                Outgoing {
                    message,
                    recipients,
                    response: None,
                },
                |_, _| Box::pin(async { Ok(()) }),
                |p: &Posted| SendResult {
                    success: true,
                    message_id: p.message_id.clone(),
                    timestamp: p.timestamp,
                    delivery_status: p.delivery.clone(),
                    error: None,
                },
            )
            .await?;
        Ok(posted)
    }

    /// GET_MESSAGES: the caller's inbox, filtered, one page at a time.
    pub async fn get_messages(&self, caller: &Caller, query: InboxQuery) -> CoreResult<InboxPage> {
        let (team, me) = self.acting_agent(caller)?;
        if let Some(agent_id) = &query.agent_id
            && *agent_id != me.agent_id
        {
            return Err(CoreError::forbidden(
                "agent_id must be the calling agent: an inbox is read by its owner",
            ));
        }
        let limit = query.limit.unwrap_or(50);
        if !(1..=100).contains(&limit) {
            return Err(
                CoreError::validation("limit", "limit must be between 1 and 100")
                    .with("value", limit),
            );
        }
        let order = query.sort_order.unwrap_or_default();
        let after = match (query.after_seq, query.cursor.as_deref()) {
            (Some(_), Some(_)) => {
                return Err(CoreError::validation(
                    "after_seq",
                    "give after_seq or cursor, not both",
                ));
            }
            (Some(seq), None) => {
                if seq < 0 {
                    return Err(CoreError::validation(
                        "after_seq",
                        "after_seq is not negative",
                    ));
                }
                if order != SortOrder::OldestFirst {
                    return Err(CoreError::validation(
                        "after_seq",
                        "after_seq needs sort_order=oldest_first",
                    ));
                }
                Some(seq)
            }
            (None, cursor) => cursor.map(|c| decode_cursor(c, order)).transpose()?,
        };
        let sender_pks = query.senders.map(|CommaList(ids)| {
            ids.iter()
                .filter_map(|id| self.registry().agent_pk_by_id(team.pk, id))
                .collect::<Vec<_>>()
        });
        let filter = InboxFilter {
            message_types: query.message_types.map(|l| l.0),
            sender_pks,
            priority: query.priority,
            unread_only: query.unread_only.unwrap_or(false),
            since: query.since_timestamp,
            kinds: query.kinds.map(|l| l.0),
            thread_id: query.thread_id,
        };
        let reader = self.store().reader();
        let (total_count, unread_count) =
            store::messages::count_inbox(reader, me.pk, &filter).await?;
        let mut items =
            store::messages::list_inbox(reader, me.pk, &filter, order, after, limit + 1).await?;
        let next_cursor = if items.len() as i64 > limit {
            items.truncate(limit as usize);
            items.last().map(|last| encode_cursor(order, last.seq))
        } else {
            None
        };
        Ok(InboxPage {
            success: true,
            messages: items
                .iter()
                .map(|item| self.view(item.message.clone(), Some(item.seq), item.read_at.is_some()))
                .collect(),
            total_count,
            unread_count,
            next_cursor,
            error: None,
        })
    }

    /// Reads one message: its sender or a recipient (others get `MESSAGE_NOT_FOUND`).
    pub async fn get_message(
        &self,
        caller: &Caller,
        message_id: &str,
    ) -> CoreResult<MessageDetail> {
        let (team, me) = self.acting_agent(caller)?;
        let reader = self.store().reader();
        let message = store::messages::find(reader, team.pk, message_id)
            .await?
            .ok_or_else(|| message_not_found(message_id))?;
        let entry = store::messages::inbox_entry(reader, me.pk, message.pk).await?;
        if entry.is_none() && message.sender_pk != me.pk {
            return Err(message_not_found(message_id));
        }
        let recipient_agent_ids = store::messages::recipient_ids(reader, message.pk).await?;
        let read_by = if message.sender_pk == me.pk {
            let pks = store::messages::read_by(reader, message.pk).await?;
            Some(
                pks.into_iter()
                    .filter_map(|pk| self.registry().agent(pk))
                    .map(|a| a.agent_id.clone())
                    .collect(),
            )
        } else {
            None
        };
        let responses = store::messages::responses_to(reader, message.pk)
            .await?
            .into_iter()
            .map(
                |(response_message_id, responder_pk, status, timestamp)| ResponseRecord {
                    response_message_id,
                    responder_agent_id: self.agent_name(responder_pk),
                    status,
                    timestamp,
                },
            )
            .collect();
        let (seq, read) = entry.map_or((None, false), |(seq, read_at)| {
            (Some(seq), read_at.is_some())
        });
        Ok(MessageDetail {
            success: true,
            message: self.view(message, seq, read),
            recipient_agent_ids,
            read_by,
            responses,
        })
    }

    /// MARK_MESSAGE_READ.
    pub async fn mark_read(&self, caller: &Caller, input: MarkRead) -> CoreResult<MarkReadResult> {
        let (_team, me) = self.acting_agent(caller)?;
        if input.agent_id != me.agent_id {
            return Err(CoreError::forbidden(
                "agent_id must be the calling agent: agents mark only their own messages",
            ));
        }
        if input.message_ids.is_empty() {
            return Err(CoreError::validation(
                "message_ids",
                "give at least one message id",
            ));
        }
        if input.message_ids.len() > MAX_MARK {
            return Err(CoreError::validation(
                "message_ids",
                format!("at most {MAX_MARK} ids per call"),
            ));
        }
        let mut seen = HashSet::new();
        let ids: Vec<String> = input
            .message_ids
            .into_iter()
            .filter(|id| seen.insert(id.clone()))
            .collect();
        let agent_pk = me.pk;
        let now = Timestamp::now();
        let (marked_read, already_read, not_found) = self
            .store()
            .write_self_contained(
                move |tx| {
                    Box::pin(async move {
                        store::messages::mark_read(tx.conn().await?, agent_pk, &ids, now).await
                    })
                },
                Ok,
            )
            .await
            .map_err(CoreError::from)?;
        Ok(MarkReadResult {
            success: true,
            marked_read,
            not_found,
            already_read,
            error: None,
        })
    }

    /// RESPOND_TO_MESSAGE.
    pub async fn respond(
        &self,
        caller: &Caller,
        message_id: &str,
        input: RespondToMessage,
        idempotency_key: Option<&str>,
    ) -> CoreResult<RespondResult> {
        let idem = Idempotency::new(idempotency_key, "respond_to_message", &(message_id, &input))?;
        let (team, responder) =
            self.sender(caller, &input.responder_agent_id, "responder_agent_id")?;
        if let Some(answer) = self.replay(&responder, &idem).await? {
            return Ok(answer);
        }
        if let Some(original_id) = &input.original_message_id
            && original_id != message_id
        {
            return Err(CoreError::validation(
                "original_message_id",
                "original_message_id must match the message id in the path",
            ));
        }
        self.check_can_send(&team, &responder)?;
        check_message_text(
            "response_content.text",
            &input.response_content.text,
            MAX_TEXT,
        )?;

        let reader = self.store().reader();
        let original = store::messages::find(reader, team.pk, message_id)
            .await?
            .ok_or_else(|| message_not_found(message_id))?;
        if store::messages::inbox_entry(reader, responder.pk, original.pk)
            .await?
            .is_none()
        {
            return Err(CoreError::new(
                ErrorCode::InvalidRecipient,
                format!(
                    "'{}' was not a recipient of message {message_id}",
                    responder.agent_id
                ),
            )
            .with("invalid_ids", vec![responder.agent_id.clone()])
            .suggest("Only recipients of a message can respond to it."));
        }
        if !original.requires_response {
            return Err(CoreError::new(
                ErrorCode::ResponseNotRequired,
                format!("message {message_id} does not require a response"),
            )
            .with("message_id", message_id));
        }
        check_deadline(&original, Timestamp::now())?;

        let mut recipients: Vec<Arc<AgentRecord>> = Vec::new();
        let mut failed_extra = Vec::new();
        match self.registry().agent(original.sender_pk) {
            Some(sender) if sender.is_member() => recipients.push(sender),
            Some(gone) => failed_extra.push(gone.agent_id.clone()),
            None => {}
        }
        let extra = self.resolve_recipients(
            &team,
            &responder,
            &input.additional_recipients,
            "additional_recipients",
        )?;
        for agent in extra {
            if !recipients.iter().any(|r| r.pk == agent.pk) {
                recipients.push(agent);
            }
        }

        let status = input.response_content.status;
        let message = NewMessage {
            message_id: ids::ordered_id("msg"),
            team_pk: team.pk,
            kind: MessageKind::Response,
            sender_pk: responder.pk,
            sender_role: responder.role.clone(),
            message_type: MessageType::Response,
            priority: original.priority,
            content: Content {
                text: input.response_content.text,
                data: input.response_content.data,
                attachments: Vec::new(),
            },
            requires_response: false,
            response_deadline: None,
            context_reference: original.context_reference.clone(),
            thread_id: Some(
                original
                    .thread_id
                    .clone()
                    .unwrap_or_else(|| original.message_id.clone()),
            ),
            in_reply_to: Some(original.message_id.clone()),
            response_status: Some(status),
        };
        let original_for_job = original.clone();
        let responder_pk = responder.pk;
        let responder_id = responder.agent_id.clone();
        self.post(
            &responder,
            idem,
            Outgoing { message, recipients, response: Some((original.pk, status)) },
            move |tx, now| {
                Box::pin(async move {
                    // Checked inside the transaction, so two racing responses cannot both
                    // pass: the second sees the first.
                    let earlier = store::messages::response_statuses(tx.conn().await?, original_for_job.pk, responder_pk).await?;
                    if earlier.iter().any(|s| s.is_final()) {
                        return Err(CoreError::new(
                            ErrorCode::Conflict,
                            format!("'{responder_id}' already gave a final response to {}", original_for_job.message_id),
                        )
                        .with("message_id", original_for_job.message_id.as_str())
                        .suggest("Only 'partial' responses may be followed by more; send a new message instead."));
                    }
                    check_deadline(&original_for_job, now)
                })
            },
            move |p: &Posted| {
                let mut delivery = p.delivery.clone();
                delivery.failed_delivery.extend(failed_extra.iter().cloned());
                RespondResult {
                    success: true,
                    response_message_id: p.message_id.clone(),
                    original_message_updated: true,
                    timestamp: p.timestamp,
                    delivery_status: delivery,
                    error: None,
                }
            },
        )
        .await
    }

    /// The agent's inbox entries after sequence number `after`, oldest first, at most
    /// `limit`, as `(seq, frame)`: what a reconnecting connection replays. Frames are
    /// rendered here directly (not through a shared [`Event`]): each is sent once.
    pub async fn inbox_after(
        &self,
        agent_pk: i64,
        after: i64,
        limit: i64,
    ) -> CoreResult<Vec<(i64, String)>> {
        let items = store::messages::list_inbox(
            self.store().reader(),
            agent_pk,
            &InboxFilter::default(),
            SortOrder::OldestFirst,
            Some(after),
            limit,
        )
        .await?;
        Ok(items
            .into_iter()
            .map(|item| {
                if item.message.kind == MessageKind::Task
                    && let Some((kind, body)) = super::tasks::notice_frame(
                        &item.message.message_id,
                        item.message.created_at,
                        &item.message.content,
                    )
                {
                    return (item.seq, frame_of(kind, item.seq, &body));
                }
                let view = self.view(item.message, None, item.read_at.is_some());
                let body = serde_json::to_string(&view).unwrap_or_else(|_| "{}".to_owned());
                (item.seq, frame_of(FrameKind::Message, item.seq, &body))
            })
            .collect())
    }

    /// A message the agent may refer to (it sent or received it), or `MESSAGE_NOT_FOUND`.
    async fn visible_message(
        &self,
        team: &TeamRecord,
        agent: &AgentRecord,
        message_id: &str,
    ) -> CoreResult<MessageRecord> {
        let reader = self.store().reader();
        let message = store::messages::find(reader, team.pk, message_id)
            .await?
            .ok_or_else(|| message_not_found(message_id))?;
        if message.sender_pk == agent.pk
            || store::messages::inbox_entry(reader, agent.pk, message.pk)
                .await?
                .is_some()
        {
            Ok(message)
        } else {
            Err(message_not_found(message_id))
        }
    }

    /// The agent id of any agent ever registered (removed ones too).
    pub(crate) fn agent_name(&self, pk: i64) -> String {
        self.registry()
            .agent(pk)
            .map_or_else(|| format!("agent#{pk}"), |a| a.agent_id.clone())
    }

    /// A stored message as a recipient sees it.
    pub(crate) fn view(&self, m: MessageRecord, seq: Option<i64>, read: bool) -> MessageView {
        MessageView {
            sender_agent_id: self.agent_name(m.sender_pk),
            message_id: m.message_id,
            kind: m.kind,
            seq,
            sender_role: m.sender_role,
            message_type: m.message_type,
            content: m.content,
            priority: m.priority,
            timestamp: m.created_at,
            read_status: read,
            requires_response: m.requires_response,
            response_deadline: m.response_deadline,
            context_reference: m.context_reference,
            thread_id: m.thread_id,
            in_reply_to: m.in_reply_to,
            response_status: m.response_status,
        }
    }
}

/// A message about to be written, as its recipients will see it (before its sequence
/// number is known).
pub(crate) fn view_of(m: &NewMessage, sender_agent_id: &str, timestamp: Timestamp) -> MessageView {
    MessageView {
        message_id: m.message_id.clone(),
        kind: m.kind,
        seq: None,
        sender_agent_id: sender_agent_id.to_owned(),
        sender_role: m.sender_role.clone(),
        message_type: m.message_type,
        content: m.content.clone(),
        priority: m.priority,
        timestamp,
        read_status: false,
        requires_response: m.requires_response,
        response_deadline: m.response_deadline,
        context_reference: m.context_reference.clone(),
        thread_id: m.thread_id.clone(),
        in_reply_to: m.in_reply_to.clone(),
        response_status: m.response_status,
    }
}

/// The push of an inbox entry (serialised once, on first use, and shared by all
/// recipients; each frame adds its own `seq`): a task notification as its protocol
/// type, anything else as a `message` frame carrying the view.
pub(crate) fn event_for(message: &NewMessage, sender_id: &str, timestamp: Timestamp) -> Arc<Event> {
    if message.kind == MessageKind::Task
        && let Some((kind, body)) =
            super::tasks::notice_frame(&message.message_id, timestamp, &message.content)
    {
        return Event::new(kind, move || body.clone());
    }
    let mut view = view_of(message, sender_id, timestamp);
    view.seq = None;
    Event::new(FrameKind::Message, move || {
        serde_json::to_string(&view).unwrap_or_else(|_| "{}".to_owned())
    })
}

fn check_deadline(original: &MessageRecord, now: Timestamp) -> CoreResult<()> {
    match original.response_deadline {
        Some(deadline) if now > deadline => Err(CoreError::new(
            ErrorCode::ResponseDeadlinePassed,
            format!(
                "the response deadline of {} was {deadline}",
                original.message_id
            ),
        )
        .with("message_id", original.message_id.as_str())
        .with("response_deadline", deadline.to_string())),
        _ => Ok(()),
    }
}

pub(crate) fn message_not_found(message_id: &str) -> CoreError {
    CoreError::new(
        ErrorCode::MessageNotFound,
        format!("message '{message_id}' does not exist"),
    )
    .with("message_id", message_id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip_and_keep_their_order() {
        let c = encode_cursor(SortOrder::NewestFirst, 42);
        assert_eq!(decode_cursor(&c, SortOrder::NewestFirst).ok(), Some(42));
        assert!(decode_cursor(&c, SortOrder::OldestFirst).is_err());
        assert!(decode_cursor("garbage!", SortOrder::NewestFirst).is_err());
    }

    #[test]
    fn comma_lists_read_strings_and_arrays() {
        let from_text: CommaList<MessageType> =
            serde_json::from_value(serde_json::json!("request, information")).expect("text");
        assert_eq!(
            from_text.0,
            vec![MessageType::Request, MessageType::Information]
        );
        let from_list: CommaList<MessageType> =
            serde_json::from_value(serde_json::json!(["coordination"])).expect("list");
        assert_eq!(from_list.0, vec![MessageType::Coordination]);
        assert!(
            serde_json::from_value::<CommaList<MessageType>>(serde_json::json!("nope")).is_err()
        );
    }

    #[test]
    fn text_limits_distinguish_empty_from_too_long() {
        assert_eq!(
            check_message_text("t", " ", MAX_TEXT).map_err(|e| e.error_code),
            Err(ErrorCode::ValidationError)
        );
        assert_eq!(
            check_message_text("t", &"é".repeat(2001), MAX_TEXT).map_err(|e| e.error_code),
            Err(ErrorCode::MessageTooLong)
        );
        assert!(check_message_text("t", &"é".repeat(2000), MAX_TEXT).is_ok());
    }
}
