//! Wise Agents' queues on Switchboard's inbox: which destinations exist, which inbox
//! entries each queue carries, and how a `WiseAgentMessage` maps onto a Switchboard
//! message and back.
//!
//! An agent's inbox is read as two queues. `/queue/response/<agent>` carries what is a
//! response (RESPOND_TO_MESSAGE answers, and messages whose `message_type` is
//! `response`); `/queue/request/<agent>` carries everything else. A `SEND` to a request
//! queue is stored with `message_type: request`, one to a response queue with
//! `message_type: response`, so a message goes back out on the queue it came in on. Wise
//! Agents' own, finer `_message_type` travels in `content.data`.

use serde_json::{Map, Value};
use switchboard_types::messages::{
    Content, MAX_TEXT, MessageKind, MessageType, MessageView, SendMessage,
};

use super::wise::{MESSAGE_TYPES, WiseMessage};

/// Role given to an agent registered by its first subscription on a team bridge.
pub const WISE_ROLE: &str = "wise-agent";

/// One of an agent's two queues.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Queue {
    Request,
    Response,
}

impl Queue {
    /// The queue's name in destinations and in the stored cursor.
    pub fn as_str(self) -> &'static str {
        match self {
            Queue::Request => "request",
            Queue::Response => "response",
        }
    }

    /// Which queue an inbox entry belongs to.
    pub fn of(view: &MessageView) -> Queue {
        if view.kind == MessageKind::Response || view.message_type == MessageType::Response {
            Queue::Response
        } else {
            Queue::Request
        }
    }
}

/// A destination this server knows: an agent's queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Destination {
    pub queue: Queue,
    pub agent_id: String,
}

impl Destination {
    /// `/queue/request/<agent>` or `/queue/response/<agent>`; anything else is `None`.
    pub fn parse(destination: &str) -> Option<Destination> {
        let rest = destination.strip_prefix("/queue/")?;
        let (queue, agent_id) = rest.split_once('/')?;
        let queue = match queue {
            "request" => Queue::Request,
            "response" => Queue::Response,
            _ => return None,
        };
        if agent_id.is_empty() || agent_id.contains('/') {
            return None;
        }
        Some(Destination {
            queue,
            agent_id: agent_id.to_owned(),
        })
    }

    pub fn to_header(&self) -> String {
        format!("/queue/{}/{}", self.queue.as_str(), self.agent_id)
    }
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
    wise: &WiseMessage,
    raw: &str,
) -> SendMessage {
    let mut data = Map::new();
    let field = |v: &Option<String>| v.clone().map_or(Value::Null, Value::String);
    data.insert("_chat_id".into(), field(&wise.chat_id));
    data.insert("_context_name".into(), field(&wise.context_name));
    data.insert("_message".into(), field(&wise.message));
    data.insert("_message_type".into(), field(&wise.message_type));
    data.insert("_route_response_to".into(), field(&wise.route_response_to));
    data.insert("_sender".into(), field(&wise.sender));
    data.insert("_tool_id".into(), field(&wise.tool_id));
    data.insert(RAW_BODY_KEY.into(), Value::String(raw.to_owned()));
    let text = match wise.message.as_deref() {
        None | Some("") => EMPTY_TEXT.to_owned(),
        Some(text) => text.chars().take(MAX_TEXT).collect(),
    };
    let message_type = match to.queue {
        Queue::Request => MessageType::Request,
        Queue::Response => MessageType::Response,
    };
    let mut message = SendMessage::new(sender, &[to.agent_id.as_str()], message_type, &text);
    message.content = Content {
        text,
        data,
        attachments: Vec::new(),
    };
    message.context_reference = wise.context_name.clone();
    message.thread_id = wise.chat_id.clone();
    message
}

/// The `WiseAgentMessage` a Wise Agents receiver gets for an inbox entry. `_sender` is
/// always the stored sender (never what a client claimed); the other fields come from
/// the Wise mapping when the message came from Wise Agents, from Switchboard's fields
/// otherwise.
pub fn to_wise(view: &MessageView) -> WiseMessage {
    let data = &view.content.data;
    let text_field = |key: &str| data.get(key).and_then(Value::as_str).map(str::to_owned);
    // A message that came from Wise Agents keeps its own type, null included.
    let from_wise = data.contains_key(RAW_BODY_KEY);
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
    WiseMessage {
        chat_id: text_field("_chat_id").or_else(|| view.thread_id.clone()),
        context_name: text_field("_context_name").or_else(|| view.context_reference.clone()),
        message: Some(text_field("_message").unwrap_or_else(|| view.content.text.clone())),
        message_type,
        route_response_to: text_field("_route_response_to"),
        sender: Some(view.sender_agent_id.clone()),
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
                queue: Queue::Request,
                agent_id: "Agent1".into()
            })
        );
        assert_eq!(
            Destination::parse("/queue/response/a.b-c").map(|d| d.queue),
            Some(Queue::Response)
        );
        for bad in [
            "/queue/request/",
            "/queue/other/A",
            "/topic/request/A",
            "/queue/request/A/B",
            "queue/request/A",
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
            message_type: Some("ALERT".into()),
            route_response_to: None,
            sender: Some("A".into()),
            tool_id: None,
        };
        let to = Destination::parse("/queue/response/B").unwrap_or_else(|| unreachable!());
        let message = to_send_message("A", &to, &wise, "raw body");
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
