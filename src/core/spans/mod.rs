//! Spans for an OpenTelemetry collector (`--otlp-endpoint`, `docs/tracing.md`).
//!
//! The core writes each span as protobuf while it builds it ([`wire`]) and hands the
//! finished bytes to a [`SpanSink`] without waiting for it: a full sink drops the span
//! (counted), so a slow or absent collector costs a send nothing. Without
//! `--otlp-endpoint` there is no sink and no span is even built. What sends them to the
//! collector is `crate::otlp`.

use switchboard_types::ids::{AgentId, TeamPk};
use switchboard_types::time::Timestamp;

use super::Core;
use crate::model::trace::{hex_bytes, own_span_bytes};
use crate::model::{AgentRecord, DueCallback, MessageTrace, NewMessage, TaskRecord};

mod buffer;
pub mod wire;

pub use buffer::{BATCH, Batch, DROPPED, LINGER, SINK_CAPACITY, SpanSink, SpanSource, sink};
use wire::{OpenSpan, Place};

impl Core {
    /// The sink, when spans are exported: callers build a span only when there is one.
    pub(super) fn spans(&self) -> Option<&SpanSink> {
        self.inner.spans.as_ref()
    }

    /// The sink for a span of `trace`: none when spans are not exported, or when the
    /// trace came unsampled (W3C `sampled` flag unset) — the caller's tracer decided
    /// against recording it, so a span of ours would hang from a parent no collector has
    /// (the trace is still kept in our own records, `GET /v1/traces/{trace_id}`).
    fn sampled(&self, trace: Option<&MessageTrace>) -> Option<&SpanSink> {
        self.spans().filter(|_| MessageTrace::sampled(trace))
    }
}

/// A random id of `N` bytes (never all zeros, the W3C rule).
fn random_bytes<const N: usize>() -> [u8; N] {
    loop {
        let id: [u8; N] = rand::random();
        if id.iter().any(|b| *b != 0) {
            return id;
        }
    }
}

/// A random trace id as lowercase hex (never all zeros): one the server starts for what
/// its own id cannot name.
pub(super) fn random_trace_id() -> String {
    hex::encode(random_bytes::<16>())
}

/// Where the span of `id` (a message's, a task's) sits: its trace (`trace`'s, else the
/// one `id` starts), its own span id and its parent's.
fn place<'t>(id: &str, trace: Option<&'t MessageTrace>) -> Place<'t> {
    let (own, span_id) = own_span_bytes(id);
    let (trace_id, parent_span_id) = trace_bytes(trace);
    Place {
        trace_id: trace_id.unwrap_or(own),
        span_id,
        parent_span_id,
        trace_state: trace.and_then(|t| t.state.as_deref()),
    }
}

/// The trace and the parent span `trace` names, as bytes (none for what it names none of).
fn trace_bytes(trace: Option<&MessageTrace>) -> (Option<[u8; 16]>, Option<[u8; 8]>) {
    let Some(trace) = trace else {
        return (None, None);
    };
    let parent = trace.parent.as_deref().and_then(hex_bytes);
    (hex_bytes(&trace.trace_id), parent)
}

/// A span waiting for its commit: it ends, and is handed over, when the send that made
/// it gets its answer back (`Core::post`), or a task's notice its pushes
/// (`delivery::Pushes::send`).
pub(super) type PendingSpan = Option<(SpanSink, OpenSpan)>;

impl Core {
    /// The span of a message about to be written by `sender` to `recipient_ids` (when
    /// spans are exported and its trace is sampled): the message's own span in its
    /// trace, with who and what.
    pub(super) fn message_span(
        &self,
        sender: &AgentRecord,
        message: &NewMessage,
        recipient_ids: &[AgentId],
    ) -> PendingSpan {
        let sink = self.sampled(message.trace.as_ref())?.clone();
        let id = message.message_id.as_str();
        let place = place(id, message.trace.as_ref());
        let mut span = OpenSpan::new(place, "switchboard.message", Timestamp::now());
        self.team_attribute(&mut span, sender.team_pk)
            .attribute("switchboard.sender_agent_id", sender.agent_id.as_str())
            .attribute_list(
                "switchboard.recipient_agent_ids",
                recipient_ids.iter().map(AgentId::as_str),
            )
            .attribute("switchboard.message_id", id)
            .attribute("switchboard.kind", message.kind.as_str());
        if let Some(via) = message.via {
            span.attribute("switchboard.via", via.as_str());
        }
        Some((sink, span))
    }

    /// The span of a send refused with `code` (the loop guard's, a budget's), in the
    /// request's trace (unless it came unsampled) or a new one.
    pub(super) fn refusal_span(&self, agent: &AgentId, code: &str, why: (&'static str, String)) {
        if self.spans().is_none() {
            return;
        }
        let trace = self.trace_for(None);
        let Some(sink) = self.sampled(trace.as_ref()) else {
            return;
        };
        let (trace_id, parent_span_id) = trace_bytes(trace.as_ref());
        let place = Place {
            trace_id: trace_id.unwrap_or_else(random_bytes),
            span_id: random_bytes(),
            parent_span_id,
            trace_state: trace.as_ref().and_then(|t| t.state.as_deref()),
        };
        let now = Timestamp::now();
        let mut span = OpenSpan::new(place, "switchboard.refused", now);
        span.attribute("switchboard.sender_agent_id", agent.as_str())
            .attribute("switchboard.error_code", code)
            .attribute(why.0, &why.1);
        sink.emit(span.finish(now, std::iter::empty(), Some(code)));
    }
}

impl Core {
    /// The span of a task about to be submitted (when spans are exported and its trace is
    /// sampled), ended at its commit: its notifications are its children.
    pub(super) fn task_span(&self, task: &TaskRecord) -> PendingSpan {
        let sink = self.sampled(task.trace.as_ref())?.clone();
        let id = task.task_id.as_str();
        let place = place(id, task.trace.as_ref());
        let mut span = OpenSpan::new(place, "switchboard.task", task.created_at);
        self.team_attribute(&mut span, task.team_pk)
            .attribute(
                "switchboard.originating_agent_id",
                self.agent_name(task.originator_pk).as_str(),
            )
            .attribute("switchboard.task_id", id)
            .attribute("switchboard.status", task.status.as_str());
        if let Some(assignee) = task.assignee_pk {
            span.attribute(
                "switchboard.assignee_agent_id",
                self.agent_name(assignee).as_str(),
            );
        }
        Some((sink, span))
    }

    /// The span of one callback or push-notification attempt about a task, a child of
    /// the task's: from when it was taken up to its outcome (an error when it failed).
    pub(super) fn callback_span(
        &self,
        callback: &DueCallback,
        outcome: &Result<i64, (Option<i64>, String)>,
    ) {
        let trace = callback.trace.as_ref();
        let Some(sink) = self.sampled(trace) else {
            return;
        };
        let id = callback.task_id.as_str();
        let task = place(id, trace);
        let place = Place {
            span_id: random_bytes(),
            parent_span_id: Some(task.span_id),
            ..task
        };
        let mut span = OpenSpan::new(place, "switchboard.callback", callback.taken_at);
        span.attribute("switchboard.task_id", id)
            .attribute("switchboard.delivery", &callback.pk.to_string())
            .attribute("switchboard.attempt", &(callback.attempts + 1).to_string())
            .attribute(
                "switchboard.receiver",
                if callback.webhook_pk.is_some() {
                    "webhook"
                } else {
                    "callback_url"
                },
            );
        if let Ok(status) | Err((Some(status), _)) = outcome {
            span.attribute("http.response.status_code", &status.to_string());
        }
        let error = outcome.as_ref().err().map(|(_, why)| why.as_str());
        sink.emit(span.finish(Timestamp::now(), std::iter::empty(), error));
    }
}

impl Core {
    /// The team's id on `span` (empty for a team the registry no longer has).
    fn team_attribute<'s>(&self, span: &'s mut OpenSpan, team: TeamPk) -> &'s mut OpenSpan {
        let team = self.registry().team(team);
        span.attribute(
            "switchboard.team_id",
            team.as_ref().map_or("", |t| t.team_id.as_str()),
        )
    }
}

/// Ends a message's span at its commit, with an event per recipient it was pushed to.
pub(super) fn finish(span: PendingSpan, pushed_to: &[AgentId]) {
    let Some((sink, span)) = span else { return };
    let events = pushed_to.iter().map(|agent| ("pushed", agent.as_str()));
    sink.emit(span.finish(Timestamp::now(), events, None));
}
