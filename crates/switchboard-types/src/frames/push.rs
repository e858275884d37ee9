//! Push frames: an inbox entry rendered once per message and spliced with each
//! recipient's `seq`, and the team activity frame.

use serde_json::{Map, Value};

use crate::messages::{MessageKind, MessageView};
use crate::tasks::TaskFrame;

/// The `team_activity` frame's text.
pub fn activity_frame(
    activity: &crate::publish::TeamActivity,
) -> Result<String, serde_json::Error> {
    serde_json::to_string(&serde_json::json!({"type": "team_activity", "activity": activity}))
}

/// How a pushed inbox entry is framed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PushKind {
    /// `{"type":"message","seq":N,"message":{"seq":N,…}}`.
    Message,
    /// `{"type":"<name>","seq":N,…the object's fields…}`: the task protocol's types.
    Task(TaskFrame),
}

/// A push frame from the entry's JSON object `body` (rendered once per message, shared
/// by all its recipients) and one recipient's `seq`. Spliced as text: a broadcast to a
/// thousand agents renders its body once, not a thousand times.
pub fn push_text(kind: PushKind, seq: i64, body: &str) -> String {
    // `body` is a JSON object: "{" + fields + "}"; `inner` is "fields}" (or "}").
    let inner = body.strip_prefix('{').unwrap_or("}");
    let sep = if inner.starts_with('}') { "" } else { "," };
    match kind {
        PushKind::Message => {
            format!(r#"{{"type":"message","seq":{seq},"message":{{"seq":{seq}{sep}{inner}}}"#)
        }
        PushKind::Task(frame) => {
            format!(r#"{{"type":"{}","seq":{seq}{sep}{inner}"#, frame.name())
        }
    }
}

/// What an inbox entry is pushed as: a task notification as its protocol type (the
/// object in `content.data`, with the entry's message id, time and trace), anything else
/// as a `message` frame carrying the view (without `seq`, which [`push_text`] adds).
pub fn push_body(view: &MessageView) -> Result<(PushKind, String), serde_json::Error> {
    if view.kind == MessageKind::Task
        && let Some(frame) = view
            .content
            .data
            .get("type")
            .and_then(Value::as_str)
            .and_then(TaskFrame::from_name)
    {
        let mut body = Map::with_capacity(view.content.data.len() + 1);
        for (key, value) in &view.content.data {
            if key != "type" {
                body.insert(key.clone(), value.clone());
            }
        }
        body.insert("message_id".into(), Value::from(&view.message_id));
        body.insert("timestamp".into(), serde_json::to_value(view.timestamp)?);
        // The notification's span: whoever acts on it continues the task's trace.
        for (key, value) in view.trace_fields() {
            body.insert(key.into(), Value::from(value));
        }
        return Ok((PushKind::Task(frame), serde_json::to_string(&body)?));
    }
    let body = if view.seq.is_some() {
        serde_json::to_string(&MessageView {
            seq: None,
            ..view.clone()
        })?
    } else {
        serde_json::to_string(view)?
    };
    Ok((PushKind::Message, body))
}

/// The whole push frame of an inbox entry for `seq`.
pub fn push_frame(seq: i64, view: &MessageView) -> Result<String, serde_json::Error> {
    let (kind, body) = push_body(view)?;
    Ok(push_text(kind, seq, &body))
}
