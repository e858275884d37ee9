//! Spans for an OpenTelemetry collector (`--otlp-endpoint`, `docs/tracing.md`).
//!
//! The core hands finished spans to a [`SpanSink`] and never waits for it: a full sink
//! drops the span (counted), so a slow or absent collector costs a send nothing. Without
//! `--otlp-endpoint` there is no sink and no span is even built. What receives them and
//! speaks OTLP is `crate::otlp`.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use switchboard_types::ids::{AgentId, TeamPk};
use switchboard_types::time::Timestamp;
use tokio::sync::Notify;

use super::Core;
use crate::model::trace::{hex_bytes, own_span_bytes};
use crate::model::{AgentRecord, DueCallback, MessageTrace, NewMessage, TaskRecord, TeamRecord};

/// A finished span: ids as the bytes OTLP sends (a send formats no hex for its span),
/// times, and attributes naming the team, agents and ids involved — never content.
#[derive(Debug, Clone)]
pub struct SpanRecord {
    pub trace_id: [u8; 16],
    pub span_id: [u8; 8],
    pub parent_span_id: Option<[u8; 8]>,
    pub trace_state: Option<String>,
    pub name: &'static str,
    pub start: Timestamp,
    pub end: Timestamp,
    pub attributes: Vec<(&'static str, Attr)>,
    /// Events inside the span: a name, when, and one attribute (`agent_id`).
    pub events: Vec<(&'static str, Timestamp, AgentId)>,
    /// Set when the span records a refusal: its error code.
    pub error: Option<String>,
}

/// An attribute's value as the core has it at hand: what it can hand over without
/// copying stays uncopied until the exporter writes it (a span is built on the send path
/// and dropped on the exporter's thread, so every string made for it is an allocation on
/// one thread freed on another).
#[derive(Debug, Clone)]
pub enum Attr {
    Text(String),
    Word(&'static str),
    /// The team's id.
    Team(Arc<TeamRecord>),
}

impl Attr {
    /// The value as the collector gets it.
    pub fn as_text(&self) -> &str {
        match self {
            Attr::Text(text) => text,
            Attr::Word(word) => word,
            Attr::Team(team) => team.team_id.as_str(),
        }
    }
}

impl From<String> for Attr {
    fn from(text: String) -> Attr {
        Attr::Text(text)
    }
}

/// Where the core hands its spans: a buffer the exporter empties a batch at a time.
///
/// Not a channel: a channel wakes its reader for every span, and at tens of thousands of
/// messages a second those wake-ups (a worker unparked, a context switch, for one span)
/// cost the server a tenth of its send rate. The buffer wakes the exporter only when a
/// batch is full; otherwise the exporter comes by every [`LINGER`].
#[derive(Debug, Clone)]
pub struct SpanSink(Arc<Buffer>);

#[derive(Debug, Default)]
struct Buffer {
    spans: Mutex<Vec<SpanRecord>>,
    /// Told when the buffer holds a full batch.
    full: Notify,
}

/// Spans waiting for the exporter at most; more are dropped.
pub const SINK_CAPACITY: usize = 8192;
/// Most spans the exporter takes at once (one OTLP request).
pub const BATCH: usize = 512;
/// How long a span waits for a batch to fill before it is sent anyway.
pub const LINGER: Duration = Duration::from_millis(500);

/// Spans dropped because the exporter fell behind or is gone.
pub const DROPPED: &str = "switchboard_otlp_dropped_spans_total";

/// A sink and the exporter's end of it.
pub fn sink() -> (SpanSink, SpanSource) {
    let buffer = Arc::new(Buffer::default());
    metrics::counter!(DROPPED).increment(0);
    (SpanSink(buffer.clone()), SpanSource(buffer))
}

impl SpanSink {
    /// Hands a span over without waiting (a full buffer drops it, counted).
    pub fn emit(&self, span: SpanRecord) {
        let mut spans = self.0.spans.lock().unwrap_or_else(PoisonError::into_inner);
        if spans.len() >= SINK_CAPACITY {
            drop(spans);
            metrics::counter!(DROPPED).increment(1);
            return;
        }
        spans.push(span);
        let filled = spans.len() == BATCH;
        drop(spans);
        if filled {
            self.0.full.notify_waiters();
        }
    }
}

/// The exporter's end of a [`SpanSink`].
#[derive(Debug)]
pub struct SpanSource(Arc<Buffer>);

impl SpanSource {
    /// The next batch (at most [`BATCH`] spans, oldest first): at once when a full one
    /// is waiting, else what arrived by the time one filled or [`LINGER`] passed. `None`
    /// once every sink is gone and nothing is left.
    pub async fn next_batch(&self) -> Option<Vec<SpanRecord>> {
        loop {
            // Listening before looking: a batch that fills between the two still wakes
            // this end (`notify_waiters` keeps no permit for a later listener, so a batch
            // taken while no one listened leaves no stale wake-up behind).
            let filled = self.0.full.notified();
            tokio::pin!(filled);
            filled.as_mut().enable();
            if let Some(batch) = self.take(BATCH) {
                return Some(batch);
            }
            // Only this end left: no span can come any more.
            if Arc::strong_count(&self.0) == 1 {
                return self.take(1);
            }
            tokio::select! {
                () = filled => {}
                () = tokio::time::sleep(LINGER) => {}
            }
            if let Some(batch) = self.take(1) {
                return Some(batch);
            }
        }
    }

    /// The oldest spans, at most a batch, when at least `least` are waiting.
    fn take(&self, least: usize) -> Option<Vec<SpanRecord>> {
        let mut spans = self.0.spans.lock().unwrap_or_else(PoisonError::into_inner);
        if spans.is_empty() || spans.len() < least {
            return None;
        }
        let rest = if spans.len() > BATCH {
            spans.split_off(BATCH)
        } else {
            Vec::with_capacity(BATCH)
        };
        Some(std::mem::replace(&mut *spans, rest))
    }
}

impl Core {
    /// The sink, when spans are exported: callers build a span only when there is one.
    pub(super) fn spans(&self) -> Option<&SpanSink> {
        self.inner.spans.as_ref()
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
/// one `id` starts), its own span id and its parent's, as bytes.
fn place(id: &str, trace: Option<&MessageTrace>) -> ([u8; 16], [u8; 8], Option<[u8; 8]>) {
    let (own, span) = own_span_bytes(id);
    let (trace_id, parent) = trace_bytes(trace);
    (trace_id.unwrap_or(own), span, parent)
}

/// The trace and the parent span `trace` names, as bytes (none for what it names none of).
fn trace_bytes(trace: Option<&MessageTrace>) -> (Option<[u8; 16]>, Option<[u8; 8]>) {
    let Some(trace) = trace else {
        return (None, None);
    };
    let parent = trace.parent.as_deref().and_then(hex_bytes);
    (hex_bytes(&trace.trace_id), parent)
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
        let mut attributes = Vec::with_capacity(6);
        attributes.extend([
            ("switchboard.team_id", team_attr(self, sender.team_pk)),
            (
                "switchboard.sender_agent_id",
                sender.agent_id.to_string().into(),
            ),
            (
                "switchboard.recipient_agent_ids",
                recipient_ids.join(",").into(),
            ),
            ("switchboard.message_id", id.to_owned().into()),
            ("switchboard.kind", Attr::Word(message.kind.as_str())),
        ]);
        if let Some(via) = message.via {
            attributes.push(("switchboard.via", Attr::Word(via.as_str())));
        }
        let (trace_id, span_id, parent_span_id) = place(id, trace);
        let now = Timestamp::now();
        let span = SpanRecord {
            trace_id,
            span_id,
            parent_span_id,
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
        let (trace_id, parent_span_id) = trace_bytes(trace.as_ref());
        let now = Timestamp::now();
        sink.emit(SpanRecord {
            trace_id: trace_id.unwrap_or_else(random_bytes),
            span_id: random_bytes(),
            parent_span_id,
            trace_state: trace.and_then(|t| t.state),
            name: "switchboard.refused",
            start: now,
            end: now,
            attributes: vec![
                ("switchboard.sender_agent_id", agent.to_string().into()),
                ("switchboard.error_code", code.to_owned().into()),
                (why.0, why.1.into()),
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
        let mut attributes = vec![
            ("switchboard.team_id", team_attr(self, task.team_pk)),
            (
                "switchboard.originating_agent_id",
                self.agent_name(task.originator_pk).to_string().into(),
            ),
            ("switchboard.task_id", id.to_owned().into()),
            ("switchboard.status", Attr::Word(task.status.as_str())),
        ];
        if let Some(assignee) = task.assignee_pk {
            attributes.push((
                "switchboard.assignee_agent_id",
                self.agent_name(assignee).to_string().into(),
            ));
        }
        let (trace_id, span_id, parent_span_id) = place(id, trace);
        let span = SpanRecord {
            trace_id,
            span_id,
            parent_span_id,
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
            ("switchboard.task_id", id.to_owned().into()),
            ("switchboard.delivery", callback.pk.to_string().into()),
            (
                "switchboard.attempt",
                (callback.attempts + 1).to_string().into(),
            ),
            (
                "switchboard.receiver",
                Attr::Word(if callback.webhook_pk.is_some() {
                    "webhook"
                } else {
                    "callback_url"
                }),
            ),
        ];
        if !status.is_empty() {
            attributes.push(("http.response.status_code", status.into()));
        }
        let (trace_id, task_span, _) = place(id, trace);
        sink.emit(SpanRecord {
            trace_id,
            span_id: random_bytes(),
            parent_span_id: Some(task_span),
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

/// The team's id as an attribute (empty for a team the registry no longer has).
fn team_attr(core: &Core, team: TeamPk) -> Attr {
    core.registry()
        .team(team)
        .map_or(Attr::Word(""), Attr::Team)
}

/// Ends a message's span at its commit, with an event per recipient it was pushed to
/// (the recipients' ids are moved in, not copied: see [`Attr`]).
pub(super) fn finish(span: PendingSpan, pushed_to: Vec<AgentId>) {
    let Some((sink, mut span)) = span else { return };
    span.end = Timestamp::now();
    span.events = pushed_to
        .into_iter()
        .map(|agent| ("pushed", span.end, agent))
        .collect();
    sink.emit(span);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(n: usize) -> SpanRecord {
        SpanRecord {
            trace_id: random_bytes(),
            span_id: (n as u64).to_be_bytes(),
            parent_span_id: None,
            trace_state: None,
            name: "switchboard.message",
            start: Timestamp::now(),
            end: Timestamp::now(),
            attributes: Vec::new(),
            events: Vec::new(),
            error: None,
        }
    }

    #[tokio::test(start_paused = true)]
    async fn the_exporter_gets_full_batches_at_once_and_the_rest_after_the_linger() {
        let (sink, source) = sink();
        for n in 0..BATCH + 3 {
            sink.emit(record(n));
        }
        let started = tokio::time::Instant::now();
        let full = source.next_batch().await.expect("a batch");
        assert_eq!(full.len(), BATCH);
        assert_eq!(full[0].span_id, [0; 8], "oldest first");
        assert_eq!(
            started.elapsed(),
            Duration::ZERO,
            "a full batch goes at once"
        );
        let rest = source.next_batch().await.expect("the rest");
        assert_eq!(rest.len(), 3);
        assert_eq!(rest[0].span_id, (BATCH as u64).to_be_bytes());
        assert_eq!(
            started.elapsed(),
            LINGER,
            "a partial one waits for the linger"
        );
        // A batch that fills while the exporter waits wakes it at once.
        let source = Arc::new(source);
        let waiting = tokio::spawn({
            let source = source.clone();
            async move { source.next_batch().await.map(|b| b.len()) }
        });
        tokio::task::yield_now().await;
        let filling = tokio::time::Instant::now();
        for n in 0..BATCH {
            sink.emit(record(n));
        }
        assert_eq!(waiting.await.ok().flatten(), Some(BATCH));
        assert!(filling.elapsed() < LINGER, "{:?}", filling.elapsed());
        sink.emit(record(0));
        drop(sink);
        assert_eq!(source.next_batch().await.map(|b| b.len()), Some(1));
        assert!(source.next_batch().await.is_none(), "no sink: the end");
    }

    #[test]
    fn a_full_buffer_drops_what_comes_next() {
        let (sink, source) = sink();
        for n in 0..SINK_CAPACITY + 5 {
            sink.emit(record(n));
        }
        let waiting = source.0.spans.lock().map(|s| s.len()).unwrap_or(0);
        assert_eq!(waiting, SINK_CAPACITY);
    }
}
