//! Where a message sits in its trace (`docs/tracing.md`).
//!
//! A message is a span; its span id and, when it starts a trace, its trace id come from
//! its own id (an ordered id is 32 hex digits: the trace id, and its last 16 — random —
//! the span id), so a message that starts a trace stores nothing for it. One that joins
//! a trace stores the trace id, its parent span and the `tracestate` it came with.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use switchboard_types::trace::{TraceContext, TraceParent};

/// A message's place in a trace it did not start.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MessageTrace {
    #[serde(rename = "t")]
    pub trace_id: String,
    /// The span it is a child of.
    #[serde(rename = "p", default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
    /// The `tracestate` it came with (or its parent's), handed on as it was.
    #[serde(rename = "s", default, skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
    /// The caller did not sample the trace (its `traceparent`'s `sampled` flag was
    /// unset, here or where the trace came from): no span of it is exported, and it is
    /// handed on unsampled, so the agents' own tracers leave it out too instead of
    /// exporting children of spans no collector has.
    #[serde(rename = "u", default, skip_serializing_if = "std::ops::Not::not")]
    pub unsampled: bool,
}

impl MessageTrace {
    /// Whether spans of `trace` are exported: a trace the server starts is sampled.
    pub fn sampled(trace: Option<&MessageTrace>) -> bool {
        trace.is_none_or(|t| !t.unsampled)
    }
}

/// The W3C `sampled` trace flag.
const SAMPLED: u8 = 0x01;

/// The 16 bytes an id names: an ordered id's (`msg_<32 hex>`, `task_<32 hex>`) 32 hex
/// digits, any other id's digest.
fn id_bytes(id: &str) -> [u8; 16] {
    // The digits after the last `_` (or the whole id): exactly 32 of them, so the last
    // 32 bytes with an `_` or nothing in front — read without splitting the id.
    let ordered = id.len().checked_sub(32).and_then(|start| {
        let tail = id.get(start..)?;
        let fronted = start == 0 || id.as_bytes().get(start - 1) == Some(&b'_');
        fronted.then(|| hex_bytes(tail)).flatten()
    });
    if let Some(bytes) = ordered {
        return bytes;
    }
    let digest = Sha256::digest(id.as_bytes());
    let mut bytes = [0; 16];
    bytes.copy_from_slice(&digest[..16]);
    bytes
}

/// `N` bytes from exactly `2 * N` hex digits (either case, no sign); anything else
/// gives none: a stored trace id read as the bytes a span is written with.
pub fn hex_bytes<const N: usize>(digits: &str) -> Option<[u8; N]> {
    let mut bytes = [0; N];
    hex::decode_to_slice(digits, &mut bytes).ok()?;
    Some(bytes)
}

/// The trace id of a trace that `message_id` starts.
pub fn own_trace_id(message_id: &str) -> String {
    hex::encode(id_bytes(message_id))
}

/// The span id of `message_id`.
pub fn span_id(message_id: &str) -> String {
    hex::encode(own_span_bytes(message_id).1)
}

/// The trace id a trace `message_id` starts would have, and its span id, as bytes: the
/// one reading of the id both come from (what a span for an exporter carries, so a send
/// formats neither).
pub fn own_span_bytes(message_id: &str) -> ([u8; 16], [u8; 8]) {
    let id = id_bytes(message_id);
    let (high, low) = id.split_at(8);
    // Never all zeros (the W3C rule): the other half then.
    let half = if low.iter().all(|b| *b == 0) {
        high
    } else {
        low
    };
    let mut span = [0; 8];
    span.copy_from_slice(half);
    (id, span)
}

/// The trace a message joins: the caller's (a valid `traceparent` it came with), else
/// the one of the message it answers (`answers`: its id and stored trace), else none —
/// it starts its own.
pub fn join(
    context: Option<&TraceContext>,
    answers: Option<(&str, Option<&MessageTrace>)>,
) -> Option<MessageTrace> {
    if let Some(ctx) = context
        && let Some(parent) = ctx.parent
    {
        return Some(MessageTrace {
            trace_id: parent.trace_id().to_owned(),
            parent: Some(parent.span_id().to_owned()),
            state: ctx.state.clone(),
            unsampled: parent.flags & SAMPLED == 0,
        });
    }
    let (id, trace) = answers?;
    Some(MessageTrace {
        trace_id: trace.map_or_else(|| own_trace_id(id), |t| t.trace_id.clone()),
        parent: Some(span_id(id)),
        state: trace.and_then(|t| t.state.clone()),
        unsampled: !MessageTrace::sampled(trace),
    })
}

/// The `traceparent` a message is handed out with: its own span, so whoever acts on it
/// continues the trace as its child — sampled unless the trace came unsampled.
pub fn traceparent(message_id: &str, trace: Option<&MessageTrace>) -> String {
    let trace_id = trace.map_or_else(|| own_trace_id(message_id), |t| t.trace_id.clone());
    TraceParent::new(&trace_id, &span_id(message_id))
        .map(|mut t| {
            if !MessageTrace::sampled(trace) {
                t.flags &= !SAMPLED;
            }
            t.to_string()
        })
        .unwrap_or_default()
}

/// The W3C headers a request made on behalf of `id` (a task: its callbacks, its push
/// notifications, its delegation to an outside agent) carries: its `traceparent`, and
/// its `tracestate` when it has one.
pub fn headers(id: &str, trace: Option<&MessageTrace>) -> Vec<(&'static str, String)> {
    let mut headers = vec![("traceparent", traceparent(id, trace))];
    if let Some(state) = trace.and_then(|t| t.state.clone()) {
        headers.push(("tracestate", state));
    }
    headers
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_ordered_id_names_its_trace_and_span() {
        let id = "msg_019ac5f2b6d07c53a1e0c2b7d9f4e813";
        assert_eq!(own_trace_id(id), "019ac5f2b6d07c53a1e0c2b7d9f4e813");
        assert_eq!(span_id(id), "a1e0c2b7d9f4e813");
        assert_eq!(
            traceparent(id, None),
            "00-019ac5f2b6d07c53a1e0c2b7d9f4e813-a1e0c2b7d9f4e813-01"
        );
        // Any other id gets a digest of itself, still a valid traceparent.
        assert!(TraceParent::parse(&traceparent("hello", None)).is_some());
        // An id whose random half is zeros is named by its other half.
        assert_eq!(
            span_id("msg_019ac5f2b6d07c530000000000000000"),
            "019ac5f2b6d07c53"
        );
        assert_eq!(hex_bytes::<2>("00fF"), Some([0, 255]));
        assert_eq!(hex_bytes::<2>("00f"), None);
        assert_eq!(hex_bytes::<2>("00fg"), None);
        // A sign is no digit (`u8::from_str_radix` would have taken it).
        assert_eq!(hex_bytes::<2>("+0ff"), None);
    }

    /// The tail check reads ids exactly as a split at the last `_` did: every place of
    /// the `_`, ids too short, too long or not ASCII.
    #[test]
    fn ids_read_as_a_split_at_the_last_underscore_read_them() {
        let split = |id: &str| {
            let mut bytes = [0; 16];
            let tail = id.rsplit('_').next().unwrap_or(id);
            hex::decode_to_slice(tail, &mut bytes).ok().map(|()| bytes)
        };
        let digits = "019ac5f2b6d07c53a1e0c2b7d9f4e813";
        for id in [
            digits.to_owned(),
            format!("msg_{digits}"),
            format!("__{digits}"),
            format!("ab{digits}"),
            format!("msg_{}", &digits[1..]),
            format!("msg_{digits}_"),
            format!("msg_{digits}0"),
            format!("é{digits}"),
            format!("msg_{}g", &digits[1..]),
            "msg_é".repeat(9),
        ] {
            let ours = id_bytes(&id);
            match split(&id) {
                Some(bytes) => assert_eq!(ours, bytes, "{id}"),
                None => assert_eq!(ours[..], Sha256::digest(id.as_bytes())[..16], "{id}"),
            }
        }
    }

    #[test]
    fn the_callers_context_wins_over_what_the_message_answers() {
        let ctx = TraceContext::from_values(
            Some("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"),
            Some("k=v"),
        );
        let original = "msg_019ac5f2b6d07c53a1e0c2b7d9f4e813";
        let joined = join(Some(&ctx), Some((original, None))).expect("joined");
        assert_eq!(joined.trace_id, "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(joined.parent.as_deref(), Some("00f067aa0ba902b7"));
        assert_eq!(joined.state.as_deref(), Some("k=v"));
        let reply = join(None, Some((original, None))).expect("a reply");
        assert_eq!(reply.trace_id, "019ac5f2b6d07c53a1e0c2b7d9f4e813");
        assert_eq!(reply.parent.as_deref(), Some("a1e0c2b7d9f4e813"));
        let deeper = join(None, Some(("msg_x", Some(&joined)))).expect("deeper");
        assert_eq!(deeper.trace_id, joined.trace_id);
        assert_eq!(deeper.state.as_deref(), Some("k=v"));
        assert_eq!(join(Some(&TraceContext::default()), None), None);
    }

    #[test]
    fn an_unsampled_trace_stays_unsampled_down_the_chain_and_says_so() {
        let ctx = TraceContext::from_values(
            Some("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"),
            None,
        );
        let asked = join(Some(&ctx), None).expect("joined");
        assert!(asked.unsampled);
        assert!(!MessageTrace::sampled(Some(&asked)));
        let id = "msg_019ac5f2b6d07c53a1e0c2b7d9f4e813";
        assert_eq!(
            traceparent(id, Some(&asked)),
            "00-4bf92f3577b34da6a3ce929d0e0e4736-a1e0c2b7d9f4e813-00"
        );
        // A reply to it is unsampled too, and so is what its headers hand on.
        let reply = join(None, Some((id, Some(&asked)))).expect("a reply");
        assert!(reply.unsampled);
        assert!(headers("x", Some(&reply))[0].1.ends_with("-00"));
        // Other flags than `sampled` do not decide it; a trace of our own is sampled.
        let other = TraceContext::from_values(
            Some("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-03"),
            None,
        );
        assert!(!join(Some(&other), None).expect("joined").unsampled);
        assert!(MessageTrace::sampled(None));
        // What was stored before the flag existed reads as sampled; sampled stores nothing.
        let old: MessageTrace =
            serde_json::from_str(r#"{"t":"4bf92f3577b34da6a3ce929d0e0e4736"}"#).expect("old row");
        assert!(!old.unsampled);
        let stored = serde_json::to_string(&join(None, Some((id, None)))).expect("json");
        assert!(!stored.contains("\"u\""), "{stored}");
        assert!(
            serde_json::to_string(&asked)
                .expect("json")
                .contains("\"u\":true")
        );
    }
}
