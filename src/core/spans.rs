//! Spans for an OpenTelemetry collector (`--otlp-endpoint`, `docs/tracing.md`).
//!
//! The core hands finished spans to a [`SpanSink`] and never waits for it: a full sink
//! drops the span (counted), so a slow or absent collector costs a send nothing. Without
//! `--otlp-endpoint` there is no sink and no span is even built. What receives them and
//! speaks OTLP is `crate::otlp`.

use switchboard_types::ids::AgentId;
use switchboard_types::time::Timestamp;
use tokio::sync::mpsc;

use super::Core;
use crate::model::trace::{own_trace_id, span_id};
use crate::model::{AgentRecord, DueCallback, NewMessage, TaskRecord};

/// A finished span: ids as lowercase hex (trace 32 digits, span 16), times, and
/// attributes naming the team, agents and ids involved — never content.
#[derive(Debug, Clone)]
pub struct SpanRecord {
    pub trace_id: String,
    pub span_id: String,
    pub parent_span_id: Option<String>,
    pub trace_state: Option<String>,
    pub name: &'static str,
    pub start: Timestamp,
    pub end: Timestamp,
    pub attributes: Vec<(&'static str, String)>,
    /// Events inside the span: a name, when, and one attribute (`agent_id`).
    pub events: Vec<(&'static str, Timestamp, String)>,
    /// Set when the span records a refusal: its error code.
    pub error: Option<String>,
}

/// Where the core hands its spans.
#[derive(Debug, Clone)]
pub struct SpanSink(mpsc::Sender<SpanRecord>);

/// Spans waiting for the exporter at most; more are dropped.
pub const SINK_CAPACITY: usize = 8192;

/// A sink and the receiving end its exporter reads.
pub fn sink() -> (SpanSink, mpsc::Receiver<SpanRecord>) {
    let (tx, rx) = mpsc::channel(SINK_CAPACITY);
    metrics::counter!(DROPPED).increment(0);
    (SpanSink(tx), rx)
}

/// Spans dropped because the exporter fell behind or is gone.
pub const DROPPED: &str = "switchboard_otlp_dropped_spans_total";

impl SpanSink {
    /// Hands a span over without waiting.
    pub fn emit(&self, span: SpanRecord) {
        if self.0.try_send(span).is_err() {
            metrics::counter!(DROPPED).increment(1);
        }
    }
}

impl Core {
    /// The sink, when spans are exported: callers build a span only when there is one.
    pub(super) fn spans(&self) -> Option<&SpanSink> {
        self.inner.spans.as_ref()
    }
}

/// A random id of `bytes` bytes as lowercase hex (never all zeros).
pub(super) fn random_id(bytes: usize) -> String {
    loop {
        let id: String = (0..bytes)
            .map(|_| format!("{:02x}", rand::random::<u8>()))
            .collect();
        if id.bytes().any(|b| b != b'0') {
            return id;
        }
    }
}

/// A message's span waiting for its commit: it ends, and is handed over, when the
/// message's pushes are sent (`delivery::Pushes::send`).
pub(super) type PendingSpan = Option<(SpanSink, SpanRecord)>;

impl Core {
    /// The span of a message about to be written by `sender` to `recipient_ids` (when
    /// spans are exported): the message's own span in its trace, with who and what.
    pub(super) fn message_span(
        &self,
        sender: &AgentRecord,
        message: &NewMessage,
        recipient_ids: &[AgentId],
    ) -> PendingSpan {
        let sink = self.spans()?.clone();
        let trace = message.trace.as_ref();
        let id = message.message_id.as_str();
        let team = self.registry().team(sender.team_pk);
        let mut attributes = vec![
            (
                "switchboard.team_id",
                team.map(|t| t.team_id.to_string()).unwrap_or_default(),
            ),
            ("switchboard.sender_agent_id", sender.agent_id.to_string()),
            ("switchboard.recipient_agent_ids", recipient_ids.join(",")),
            ("switchboard.message_id", id.to_owned()),
            ("switchboard.kind", message.kind.as_str().to_owned()),
        ];
        if let Some(via) = message.via {
            attributes.push(("switchboard.via", via.as_str().to_owned()));
        }
        let now = Timestamp::now();
        let span = SpanRecord {
            trace_id: trace.map_or_else(|| own_trace_id(id), |t| t.trace_id.clone()),
            span_id: span_id(id),
            parent_span_id: trace.and_then(|t| t.parent.clone()),
            trace_state: trace.and_then(|t| t.state.clone()),
            name: "switchboard.message",
            start: now,
            end: now,
            attributes,
            events: Vec::new(),
            error: None,
        };
        Some((sink, span))
    }

    /// The span of a send refused with `code` (the loop guard's, a budget's), in the
    /// request's trace or a new one.
    pub(super) fn refusal_span(&self, agent: &AgentId, code: &str, why: (&'static str, String)) {
        let Some(sink) = self.spans() else { return };
        let trace = self.trace_for(None);
        let now = Timestamp::now();
        sink.emit(SpanRecord {
            trace_id: trace
                .as_ref()
                .map_or_else(|| random_id(16), |t| t.trace_id.clone()),
            span_id: random_id(8),
            parent_span_id: trace.as_ref().and_then(|t| t.parent.clone()),
            trace_state: trace.and_then(|t| t.state),
            name: "switchboard.refused",
            start: now,
            end: now,
            attributes: vec![
                ("switchboard.sender_agent_id", agent.to_string()),
                ("switchboard.error_code", code.to_owned()),
                why,
            ],
            events: Vec::new(),
            error: Some(code.to_owned()),
        });
    }
}

impl Core {
    /// The span of a task about to be submitted (when spans are exported), ended at its
    /// commit: its notifications are its children.
    pub(super) fn task_span(&self, task: &TaskRecord) -> PendingSpan {
        let sink = self.spans()?.clone();
        let id = task.task_id.as_str();
        let trace = task.trace.as_ref();
        let team = self.registry().team(task.team_pk);
        let mut attributes = vec![
            (
                "switchboard.team_id",
                team.map(|t| t.team_id.to_string()).unwrap_or_default(),
            ),
            (
                "switchboard.originating_agent_id",
                self.agent_name(task.originator_pk).to_string(),
            ),
            ("switchboard.task_id", id.to_owned()),
            ("switchboard.status", task.status.as_str().to_owned()),
        ];
        if let Some(assignee) = task.assignee_pk {
            attributes.push((
                "switchboard.assignee_agent_id",
                self.agent_name(assignee).to_string(),
            ));
        }
        let span = SpanRecord {
            trace_id: trace.map_or_else(|| own_trace_id(id), |t| t.trace_id.clone()),
            span_id: span_id(id),
            parent_span_id: trace.and_then(|t| t.parent.clone()),
            trace_state: trace.and_then(|t| t.state.clone()),
            name: "switchboard.task",
            start: task.created_at,
            end: task.created_at,
            attributes,
            events: Vec::new(),
            error: None,
        };
        Some((sink, span))
    }

    /// The span of one callback or push-notification attempt about a task, a child of
    /// the task's: from when it was taken up to its outcome (an error when it failed).
    pub(super) fn callback_span(
        &self,
        callback: &DueCallback,
        outcome: &Result<i64, (Option<i64>, String)>,
    ) {
        let Some(sink) = self.spans() else { return };
        let trace = callback.trace.as_ref();
        let id = callback.task_id.as_str();
        let status = match outcome {
            Ok(status) | Err((Some(status), _)) => status.to_string(),
            Err((None, _)) => String::new(),
        };
        let mut attributes = vec![
            ("switchboard.task_id", id.to_owned()),
            ("switchboard.delivery", callback.pk.to_string()),
            ("switchboard.attempt", (callback.attempts + 1).to_string()),
            (
                "switchboard.receiver",
                if callback.webhook_pk.is_some() {
                    "webhook"
                } else {
                    "callback_url"
                }
                .to_owned(),
            ),
        ];
        if !status.is_empty() {
            attributes.push(("http.response.status_code", status));
        }
        sink.emit(SpanRecord {
            trace_id: trace.map_or_else(|| own_trace_id(id), |t| t.trace_id.clone()),
            span_id: random_id(8),
            parent_span_id: Some(span_id(id)),
            trace_state: trace.and_then(|t| t.state.clone()),
            name: "switchboard.callback",
            start: callback.taken_at,
            end: Timestamp::now(),
            attributes,
            events: Vec::new(),
            error: outcome.as_ref().err().map(|(_, why)| why.clone()),
        });
    }
}

/// Ends a message's span at its commit, with an event per recipient it was pushed to.
pub(super) fn finish(span: PendingSpan, pushed_to: &[AgentId]) {
    let Some((sink, mut span)) = span else { return };
    span.end = Timestamp::now();
    span.events = pushed_to
        .iter()
        .map(|agent| ("pushed", span.end, agent.to_string()))
        .collect();
    sink.emit(span);
}
