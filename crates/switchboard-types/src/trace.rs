//! W3C Trace Context (`traceparent`, `tracestate`): how one piece of work is followed
//! across every agent and transport it touches.
//!
//! Every message belongs to a trace. A send that carries a valid `traceparent` (an HTTP
//! header, a WebSocket frame field, a STOMP header) joins the caller's trace as a child
//! of the caller's span; one that answers another message (`in_reply_to`, a response,
//! the thread it continues) is a child of that message; anything else starts a trace.
//! Each message is a span of its own, and is handed out with a `traceparent` naming it,
//! so whoever acts on it continues the same trace. `docs/tracing.md` says where.

use std::fmt;

use serde::{Deserialize, Serialize};

/// A parsed `traceparent`: the trace and the span the next hop is a child of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TraceParent {
    /// 32 lowercase hex digits, not all zero.
    pub trace_id: [u8; 32],
    /// 16 lowercase hex digits, not all zero.
    pub span_id: [u8; 16],
    /// The trace flags (`01`: sampled).
    pub flags: u8,
}

/// Most bytes of `tracestate` kept (the W3C limit is 512).
pub const MAX_TRACESTATE: usize = 512;

fn lower_hex(bytes: &[u8]) -> bool {
    bytes
        .iter()
        .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(b))
}

fn all_zero(bytes: &[u8]) -> bool {
    bytes.iter().all(|b| *b == b'0')
}

impl TraceParent {
    /// Parses a `traceparent` value as the W3C recommendation says a receiver does:
    /// version `00` is exactly `00-<32 hex>-<16 hex>-<2 hex>`, lowercase, with neither id
    /// all zeros; a higher version (not `ff`) is read the same way from its first 55
    /// characters, and what follows must start with `-`. `None` for anything else: the
    /// caller then starts a new trace and drops `tracestate`.
    pub fn parse(value: &str) -> Option<TraceParent> {
        let v = value.trim_matches([' ', '\t']).as_bytes();
        if v.len() < 55 || !lower_hex(&v[0..2]) || &v[0..2] == b"ff" {
            return None;
        }
        let version_00 = &v[0..2] == b"00";
        if (version_00 && v.len() != 55) || (!version_00 && v.len() > 55 && v[55] != b'-') {
            return None;
        }
        if v[2] != b'-' || v[35] != b'-' || v[52] != b'-' {
            return None;
        }
        let (trace, span, flags) = (&v[3..35], &v[36..52], &v[53..55]);
        if !lower_hex(trace) || !lower_hex(span) || !lower_hex(flags) {
            return None;
        }
        if all_zero(trace) || all_zero(span) {
            return None;
        }
        let mut parsed = TraceParent {
            trace_id: [0; 32],
            span_id: [0; 16],
            flags: u8::from_str_radix(std::str::from_utf8(flags).ok()?, 16).ok()?,
        };
        parsed.trace_id.copy_from_slice(trace);
        parsed.span_id.copy_from_slice(span);
        Some(parsed)
    }

    /// The trace id as text.
    pub fn trace_id(&self) -> &str {
        std::str::from_utf8(&self.trace_id).unwrap_or_default()
    }

    /// The span id as text.
    pub fn span_id(&self) -> &str {
        std::str::from_utf8(&self.span_id).unwrap_or_default()
    }

    /// A span of `trace_id` (32 lowercase hex digits) with id `span_id` (16), sampled;
    /// `None` when either is not of that form.
    pub fn new(trace_id: &str, span_id: &str) -> Option<TraceParent> {
        TraceParent::parse(&format!("00-{trace_id}-{span_id}-01"))
    }
}

impl fmt::Display for TraceParent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "00-{}-{}-{:02x}",
            self.trace_id(),
            self.span_id(),
            self.flags
        )
    }
}

/// A `tracestate` worth carrying on: at most [`MAX_TRACESTATE`] bytes of printable
/// ASCII, at most 32 list members (the W3C limits); anything else is dropped whole.
pub fn tracestate(value: &str) -> Option<String> {
    let value = value.trim_matches([' ', '\t']);
    let printable = value.bytes().all(|b| (b' '..=b'~').contains(&b));
    let members = value.split(',').filter(|m| !m.trim().is_empty()).count();
    (!value.is_empty() && value.len() <= MAX_TRACESTATE && printable && members <= 32)
        .then(|| value.to_owned())
}

/// The W3C fields a view carries on (`traceparent`, then `tracestate`), those present:
/// every way a view leaves — push frame fields, STOMP headers, A2A metadata, the headers
/// of a call about a task — writes the same names from this one list.
pub fn fields<'a>(
    traceparent: &'a Option<String>,
    tracestate: &'a Option<String>,
) -> impl Iterator<Item = (&'static str, &'a str)> {
    [("traceparent", traceparent), ("tracestate", tracestate)]
        .into_iter()
        .filter_map(|(name, value)| value.as_deref().map(|v| (name, v)))
}

/// The trace context a request came with: its parent span, and `tracestate` only when
/// `traceparent` was valid.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TraceContext {
    pub parent: Option<TraceParent>,
    pub state: Option<String>,
}

impl TraceContext {
    /// From the two values as received (absent or invalid `traceparent`: no parent, and
    /// `tracestate` ignored, as the recommendation says).
    pub fn from_values(traceparent: Option<&str>, tracestate: Option<&str>) -> TraceContext {
        let parent = traceparent.and_then(TraceParent::parse);
        let state = parent.and(tracestate.and_then(self::tracestate));
        TraceContext { parent, state }
    }
}

/// `GET /v1/traces/{trace_id}`: the messages and tasks of a trace, from the server's own
/// records.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TraceView {
    pub success: bool,
    pub trace_id: String,
    /// The hops in the order they were stored (at most 1000).
    pub hops: Vec<TraceHop>,
    /// The tasks of the trace in the order they were submitted (at most 1000): a task's
    /// notifications are hops whose parent is the task's span.
    #[serde(default)]
    pub tasks: Vec<TraceTask>,
    /// Whether the trace has more hops or tasks than shown.
    pub more: bool,
}

/// One task of a trace: who asked whom, its state, and its place in the trace — never
/// its description or data.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TraceTask {
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub task_id: crate::ids::TaskId,
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub originating_agent_id: crate::ids::AgentId,
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>))]
    pub assignee_agent_id: Option<crate::ids::AgentId>,
    pub status: crate::task_state::TaskStatus,
    pub created_at: crate::time::Timestamp,
    pub updated_at: crate::time::Timestamp,
    /// The task's span.
    pub span_id: String,
    /// The span it is a child of: the caller's, or its parent task's (`null`: it started
    /// the trace).
    pub parent_span_id: Option<String>,
}

/// One message of a trace: who sent it to whom, by which transport, and its place in
/// the trace — never its content.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TraceHop {
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub message_id: crate::ids::MessageId,
    pub kind: crate::messages::MessageKind,
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub sender_agent_id: crate::ids::AgentId,
    #[cfg_attr(feature = "openapi", schema(value_type = Vec<String>))]
    pub recipient_agent_ids: Vec<crate::ids::AgentId>,
    pub timestamp: crate::time::Timestamp,
    /// This message's span.
    pub span_id: String,
    /// The span it is a child of: the message it answers, or the caller's own span
    /// (`null`: it started the trace).
    pub parent_span_id: Option<String>,
    /// The transport it arrived by (`null`: the server wrote it).
    pub via: Option<crate::routing::Via>,
    pub thread_id: Option<String>,
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>))]
    pub in_reply_to: Option<crate::ids::MessageId>,
}

/// Whether `trace_id` is a trace id: 32 lowercase hex digits, not all zero.
pub fn is_trace_id(trace_id: &str) -> bool {
    trace_id.len() == 32 && lower_hex(trace_id.as_bytes()) && !all_zero(trace_id.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn the_recommendations_example_round_trips() {
        let parsed = TraceParent::parse(GOOD).expect("valid");
        assert_eq!(parsed.trace_id(), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(parsed.span_id(), "00f067aa0ba902b7");
        assert_eq!(parsed.flags, 1);
        assert_eq!(parsed.to_string(), GOOD);
    }

    #[test]
    fn malformed_values_are_ignored() {
        for bad in [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01",
            "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x",
        ] {
            assert_eq!(TraceParent::parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn a_later_version_is_read_by_its_version_00_part() {
        let later = "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-what-comes";
        let parsed = TraceParent::parse(later).expect("a later version");
        assert_eq!(parsed.to_string(), GOOD);
    }

    #[test]
    fn tracestate_goes_only_with_a_valid_traceparent() {
        let ctx = TraceContext::from_values(Some(GOOD), Some("congo=t61rcWkgMzE"));
        assert_eq!(ctx.state.as_deref(), Some("congo=t61rcWkgMzE"));
        let ctx = TraceContext::from_values(Some("nonsense"), Some("congo=t61rcWkgMzE"));
        assert_eq!(ctx, TraceContext::default());
        assert_eq!(tracestate(&"a=b,".repeat(40)), None);
        assert_eq!(tracestate("a=\u{7f}"), None);
    }
}
