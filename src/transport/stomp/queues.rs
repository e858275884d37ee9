//! The destinations this server has, which inbox entries each carries, and how a
//! `WiseAgentMessage` (or any other body) maps onto a Switchboard message and back.
//!
//! An agent's inbox is read as queues. `/queue/response/<agent>` carries what is a
//! response (RESPOND_TO_MESSAGE answers, and messages whose `message_type` is
//! `response`); `/queue/request/<agent>` carries everything else that did not come
//! through a plain queue or a topic. A `SEND` to a request queue is stored with
//! `message_type: request`, one to a response queue with `message_type: response`, so a
//! message goes back out on the queue it came in on; Wise Agents' own, finer
//! `_message_type` travels in `content.data`. Those two are Wise Agents' and take only
//! Wise bodies.
//!
//! Two more carry any body, for other STOMP clients: `/queue/<agent>` (a plain message to
//! that agent) and `/topic/<tag>` (a publish under `cause_by = <tag>` to the whole team;
//! a subscription gets every publish of that tag). Their entries are marked with the
//! destination in `content.data.stomp_destination` and keep the body as it came.

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde_json::{Map, Value};
use switchboard_types::messages::{
    Content, MAX_TEXT, MessageKind, MessageType, MessageView, SendMessage,
};
use switchboard_types::publish::Publish;

use super::wise::{MESSAGE_TYPES, WiseMessage};
use crate::core::queues::QueueName;

/// Role given to an agent registered by its first subscription on a team bridge.
pub const WISE_ROLE: &str = "wise-agent";

/// Key of the destination a plain or topic message was sent to, in `content.data`.
pub const DESTINATION_KEY: &str = "stomp_destination";
/// Key of a body that is not UTF-8, base64, in `content.data`.
const BASE64_KEY: &str = "stomp_body_base64";
/// Key of the sender's `content-type`, in `content.data`.
const CONTENT_TYPE_KEY: &str = "stomp_content_type";
/// Key of the sender's own headers (an object, name → value), in `content.data`.
const HEADERS_KEY: &str = "stomp_headers";

/// Headers a `SEND` carries that are the protocol's or the server's, never relayed as a
/// sender's own: STOMP's frame headers, and the ones the server writes on `MESSAGE`.
fn reserved(name: &str) -> bool {
    matches!(
        name,
        "destination"
            | "content-type"
            | "content-length"
            | "receipt"
            | "transaction"
            | "id"
            | "ack"
            | "subscription"
            | "message-id"
            | "receipt-id"
            | "message"
            | "traceparent"
            | "tracestate"
    ) || name.starts_with("switchboard-")
}

/// A sender's own headers of a `SEND`, as a broker keeps them: each name once (the
/// first, as STOMP reads repeats), none of the reserved ones, none with a control
/// character (a line end in a value would forge a header on a 1.0 connection).
pub fn own_headers(headers: &[(String, String)]) -> Map<String, Value> {
    let mut own = Map::new();
    for (name, value) in headers {
        let clean = |s: &str| !s.chars().any(char::is_control);
        if !reserved(name) && clean(name) && clean(value) && !own.contains_key(name) {
            own.insert(name.clone(), Value::String(value.clone()));
        }
    }
    own
}

/// The sender's own headers of a plain or topic entry, to go out after the server's.
pub fn plain_headers(view: &MessageView) -> impl Iterator<Item = (&str, &str)> {
    view.content
        .data
        .get(HEADERS_KEY)
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .filter(|(name, _)| !reserved(name) && !name.chars().any(char::is_control))
        .filter_map(|(name, value)| {
            let value = value.as_str()?;
            (!value.chars().any(char::is_control)).then_some((name.as_str(), value))
        })
}

/// Whether a Wise body is required (and written) on this queue: Wise Agents' own.
pub fn is_wise(queue: &QueueName) -> bool {
    queue.presence().is_some()
}

/// Whether an entry of the subscriber's inbox belongs to this queue (never one
/// routed to another transport).
pub fn carries(queue: &QueueName, view: &MessageView) -> bool {
    let marker = view
        .content
        .data
        .get(DESTINATION_KEY)
        .and_then(Value::as_str);
    let response = view.kind == MessageKind::Response || view.message_type == MessageType::Response;
    match queue {
        QueueName::Request => marker.is_none() && !response,
        QueueName::Response => marker.is_none() && response,
        QueueName::Plain => marker.is_some_and(|m| m.starts_with("/queue/")),
        QueueName::Topic(tag) => {
            view.kind == MessageKind::Publish && view.cause_by.as_deref() == Some(tag)
        }
    }
}

/// A destination this server knows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Destination {
    pub queue: QueueName,
    /// Whose queue it is; `None` for a topic (the subscriber's own inbox).
    pub agent_id: Option<String>,
}

impl Destination {
    /// `/queue/request/<agent>`, `/queue/response/<agent>`, `/queue/<agent>` or
    /// `/topic/<tag>`; anything else is `None`.
    pub fn parse(destination: &str) -> Option<Destination> {
        if let Some(tag) = destination.strip_prefix("/topic/") {
            return (!tag.is_empty()).then(|| Destination {
                queue: QueueName::Topic(tag.to_owned()),
                agent_id: None,
            });
        }
        let rest = destination.strip_prefix("/queue/")?;
        let (queue, agent_id) = match rest.split_once('/') {
            Some(("request", agent)) => (QueueName::Request, agent),
            Some(("response", agent)) => (QueueName::Response, agent),
            Some(_) => return None,
            None => (QueueName::Plain, rest),
        };
        if agent_id.is_empty() || agent_id.contains('/') {
            return None;
        }
        Some(Destination {
            queue,
            agent_id: Some(agent_id.to_owned()),
        })
    }

    pub fn to_header(&self) -> String {
        let agent = self.agent_id.as_deref().unwrap_or_default();
        match &self.queue {
            QueueName::Request => format!("/queue/request/{agent}"),
            QueueName::Response => format!("/queue/response/{agent}"),
            QueueName::Plain => format!("/queue/{agent}"),
            QueueName::Topic(tag) => format!("/topic/{tag}"),
        }
    }
}

/// The content of a message sent to a plain queue or a topic: the body as text when it
/// is UTF-8 without a NUL (cut at the contract's length for `text`, whole in `data`),
/// else base64 (a NUL is stored by neither engine as text; kept this way the body still
/// comes back byte for byte).
pub fn plain_content(
    destination: &str,
    body: &[u8],
    content_type: Option<&str>,
    headers: Map<String, Value>,
) -> Content {
    let mut data = Map::new();
    if !headers.is_empty() {
        data.insert(HEADERS_KEY.into(), Value::Object(headers));
    }
    data.insert(
        DESTINATION_KEY.into(),
        Value::String(destination.to_owned()),
    );
    // Stored only as a header can carry it (no control character, NUL included: no
    // engine stores a NUL alike); `plain_body` checks again on the way out.
    if let Some(content_type) = content_type.filter(|t| !t.chars().any(char::is_control)) {
        data.insert(
            CONTENT_TYPE_KEY.into(),
            Value::String(content_type.to_owned()),
        );
    }
    let text = match std::str::from_utf8(body).ok().filter(|t| !t.contains('\0')) {
        Some(text) => {
            data.insert(RAW_BODY_KEY.into(), Value::String(text.to_owned()));
            match text {
                "" => EMPTY_TEXT.to_owned(),
                text => text.chars().take(MAX_TEXT).collect(),
            }
        }
        None => {
            data.insert(BASE64_KEY.into(), Value::String(BASE64.encode(body)));
            format!("({} bytes, not text)", body.len())
        }
    };
    Content {
        text,
        data,
        attachments: Vec::new(),
    }
}

/// A plain message to an agent's `/queue/<agent>`.
pub fn to_plain_message(sender: &str, to: &str, content: Content) -> SendMessage {
    let mut message = SendMessage::new(sender, &[to], MessageType::Information, "");
    message.content = content;
    message
}

/// A publish to a topic: the whole team, `cause_by` the tag.
pub fn to_publish(tag: &str, content: Content) -> Publish {
    let mut publish = Publish::new(tag, "");
    publish.content = content;
    publish
}

/// The body and content type of a plain or topic entry: the body as it came, or the
/// text for a message that came another way.
pub fn plain_body(view: &MessageView) -> (Vec<u8>, String) {
    let data = &view.content.data;
    // A peer wrote it (a STOMP SEND's header, or REST's `content.data`): only a plain
    // media type goes out as a header; anything with a control character (a line end
    // that would start a forged header, a NUL that would end the frame) is not one.
    let content_type = data
        .get(CONTENT_TYPE_KEY)
        .and_then(Value::as_str)
        .filter(|t| t.len() <= 255 && !t.chars().any(char::is_control))
        .unwrap_or("text/plain;charset=utf-8")
        .to_owned();
    if let Some(text) = data.get(RAW_BODY_KEY).and_then(Value::as_str) {
        return (text.as_bytes().to_vec(), content_type);
    }
    if let Some(bytes) = data
        .get(BASE64_KEY)
        .and_then(Value::as_str)
        .and_then(|b| BASE64.decode(b).ok())
    {
        return (bytes, content_type);
    }
    (view.content.text.as_bytes().to_vec(), content_type)
}

/// The text a message without text is stored with (the contract needs 1 character).
const EMPTY_TEXT: &str = "(empty)";

/// Key of the body as it arrived, byte for byte, in `content.data`.
pub const RAW_BODY_KEY: &str = "stomp_body";

/// The Switchboard message a Wise Agents `SEND` becomes: `_message` is the text (cut at
/// the contract's 2,000 characters; the whole of it stays in `content.data`), the whole
/// mapping and the raw body are `content.data`, `_context_name` is the
/// `context_reference` and `_chat_id` the `thread_id`.
pub fn to_send_message(
    sender: &str,
    to: &Destination,
    wise: WiseMessage,
    raw: &str,
) -> SendMessage {
    let text = match wise.text() {
        None | Some("") => EMPTY_TEXT.to_owned(),
        Some(text) => text.chars().take(MAX_TEXT).collect(),
    };
    let context_reference = wise.context_name.clone();
    let thread_id = wise.chat_id.clone();
    let mut data = wise_fields(wise);
    data.insert(RAW_BODY_KEY.into(), Value::String(raw.to_owned()));
    let message_type = match to.queue {
        QueueName::Response => MessageType::Response,
        _ => MessageType::Request,
    };
    let agent = to.agent_id.as_deref().unwrap_or_default();
    // The text goes in with the data below, not copied here first.
    let mut message = SendMessage::new(sender, &[agent], message_type, "");
    message.content = Content {
        text,
        data,
        attachments: Vec::new(),
    };
    message.context_reference = context_reference;
    message.thread_id = thread_id;
    message
}

/// A Wise message's fields as JSON; a nested `_message` as an object of its own. Takes
/// the message: its strings move into the JSON, not copied.
fn wise_fields(wise: WiseMessage) -> Map<String, Value> {
    let field = |v: Option<String>| v.map_or(Value::Null, Value::String);
    let mut data = Map::new();
    data.insert("_chat_id".into(), field(wise.chat_id));
    data.insert("_context_name".into(), field(wise.context_name));
    let message = match wise.nested {
        Some(nested) => Value::Object(wise_fields(*nested)),
        None => field(wise.message),
    };
    data.insert("_message".into(), message);
    data.insert("_message_type".into(), field(wise.message_type));
    data.insert("_route_response_to".into(), field(wise.route_response_to));
    data.insert("_sender".into(), field(wise.sender));
    data.insert("_tool_id".into(), field(wise.tool_id));
    data
}

/// A nested `_message` stored by [`wise_fields`], back as a message (to the gate's
/// depth: nothing deeper was ever stored from a Wise body, and no deeper one is read).
fn nested_from(fields: &Map<String, Value>, depth: usize) -> Option<Box<WiseMessage>> {
    let text = |key: &str| fields.get(key).and_then(Value::as_str).map(str::to_owned);
    let nested = match fields.get("_message") {
        Some(Value::Object(inner)) if depth + 1 < super::wise::MAX_NESTING => {
            nested_from(inner, depth + 1)
        }
        _ => None,
    };
    Some(Box::new(WiseMessage {
        chat_id: text("_chat_id"),
        context_name: text("_context_name"),
        message: text("_message"),
        nested,
        message_type: text("_message_type").filter(|t| MESSAGE_TYPES.contains(&t.as_str())),
        route_response_to: text("_route_response_to"),
        sender: text("_sender"),
        tool_id: text("_tool_id"),
    }))
}

/// Whether a message came from Wise Agents (a Wise body sent to an agent's queue).
pub fn from_wise(view: &MessageView) -> bool {
    let data = &view.content.data;
    data.contains_key(RAW_BODY_KEY) && !data.contains_key(DESTINATION_KEY)
}

/// The `WiseAgentMessage` a Wise Agents receiver gets for an inbox entry. `_sender` is
/// always the stored sender (never what a client claimed); the other fields come from
/// the Wise mapping when the message came from Wise Agents, from Switchboard's fields
/// otherwise.
pub fn to_wise(view: &MessageView) -> WiseMessage {
    let data = &view.content.data;
    let text_field = |key: &str| data.get(key).and_then(Value::as_str).map(str::to_owned);
    // A message that came from Wise Agents keeps its own type, null included.
    let from_wise = from_wise(view);
    let message_type = text_field("_message_type")
        .filter(|t| MESSAGE_TYPES.contains(&t.as_str()))
        .or_else(|| {
            if from_wise {
                return None;
            }
            match view.message_type {
                MessageType::Request => Some("QUERY"),
                MessageType::Response => Some("RESPONSE"),
                MessageType::Information | MessageType::Coordination => None,
            }
            .map(str::to_owned)
        });
    // A forwarded message (`PassThroughClientAgent`) goes on as it came: nested.
    let nested = match data.get("_message") {
        Some(Value::Object(inner)) if from_wise => nested_from(inner, 1),
        _ => None,
    };
    let message = match nested {
        Some(_) => None,
        None => Some(text_field("_message").unwrap_or_else(|| view.content.text.clone())),
    };
    WiseMessage {
        chat_id: text_field("_chat_id").or_else(|| view.thread_id.clone()),
        context_name: text_field("_context_name").or_else(|| view.context_reference.clone()),
        message,
        nested,
        message_type,
        route_response_to: text_field("_route_response_to"),
        sender: Some(view.sender_agent_id.to_string()),
        tool_id: text_field("_tool_id"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn destinations_are_an_agents_two_queues() {
        assert_eq!(
            Destination::parse("/queue/request/Agent1"),
            Some(Destination {
                queue: QueueName::Request,
                agent_id: Some("Agent1".into())
            })
        );
        assert_eq!(
            Destination::parse("/queue/response/a.b-c").map(|d| d.queue),
            Some(QueueName::Response)
        );
        assert_eq!(
            Destination::parse("/queue/A").map(|d| (d.queue, d.agent_id)),
            Some((QueueName::Plain, Some("A".into())))
        );
        assert_eq!(
            Destination::parse("/topic/review.code").map(|d| (d.queue, d.agent_id)),
            Some((QueueName::Topic("review.code".into()), None))
        );
        for bad in [
            "/queue/request/",
            "/queue/other/A",
            "/queue/",
            "/topic/",
            "/queue/request/A/B",
            "queue/request/A",
            "/exchange/x",
        ] {
            assert_eq!(Destination::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_wise_message_keeps_every_field_and_the_raw_body() {
        let wise = WiseMessage {
            chat_id: Some("chat".into()),
            context_name: Some("ctx".into()),
            message: Some("x".repeat(MAX_TEXT + 5)),
            nested: None,
            message_type: Some("ALERT".into()),
            route_response_to: None,
            sender: Some("A".into()),
            tool_id: None,
        };
        let to = Destination::parse("/queue/response/B").unwrap_or_else(|| unreachable!());
        let message = to_send_message("A", &to, wise.clone(), "raw body");
        assert_eq!(message.message_type, MessageType::Response);
        assert_eq!(message.content.text.chars().count(), MAX_TEXT);
        assert_eq!(
            message.content.data["_message"].as_str().map(str::len),
            Some(MAX_TEXT + 5)
        );
        assert_eq!(message.content.data["_tool_id"], Value::Null);
        assert_eq!(message.content.data[RAW_BODY_KEY], "raw body");
        assert_eq!(message.thread_id.as_deref(), Some("chat"));
        assert_eq!(message.context_reference.as_deref(), Some("ctx"));
    }
}
