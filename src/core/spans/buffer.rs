//! Where the core hands its finished spans, and where the exporter takes them from.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::Notify;

use super::wire::Span;

/// Spans waiting for the exporter at most (eight batches, about 5 MB); more are dropped.
pub const SINK_CAPACITY: usize = 16384;
/// Most spans the exporter takes at once (one OTLP request, about 600 KB).
///
/// Large, because what a request costs is mostly per request, on both ends: against a
/// collector on the same machine, batches of 128 cost SEND_MESSAGE about 6 % more of its
/// rate than batches of 512, and 2048 about 2 % less (`docs/benchmarks.md`). Collectors
/// take far larger requests (the OpenTelemetry Collector's default limit is 20 MiB).
pub const BATCH: usize = 2048;
/// How long a span waits for a batch to fill before it is sent anyway.
pub const LINGER: Duration = Duration::from_millis(500);
/// Bytes a batch's buffer starts with: a message's span takes about 300.
const BATCH_BYTES: usize = BATCH * 384;
/// Emptied buffers kept for the next batches.
const SPARE: usize = 2;

/// Spans dropped because the exporter fell behind or is gone.
pub const DROPPED: &str = "switchboard_otlp_dropped_spans_total";

/// Where the core hands its spans: finished spans' bytes, a batch at a time.
///
/// Not a channel: a channel wakes its reader for every span, and at tens of thousands of
/// messages a second those wake-ups (a worker unparked, a context switch, for one span)
/// cost the server a tenth of its send rate. The buffer wakes the exporter only when a
/// batch is full; otherwise the exporter comes by every [`LINGER`].
#[derive(Debug, Clone)]
pub struct SpanSink(Arc<Buffer>);

#[derive(Debug, Default)]
struct Buffer {
    waiting: Mutex<Waiting>,
    /// Told when the buffer holds a full batch.
    full: Notify,
}

#[derive(Debug, Default)]
struct Waiting {
    /// Oldest first; only the last may be partly filled.
    batches: VecDeque<Batch>,
    /// Spans in them.
    spans: usize,
    /// Sent batches' buffers, for the next ones: a batch's buffer is large, and a fresh
    /// one is fresh pages to fault in every time.
    spare: Vec<Vec<u8>>,
}

/// Finished spans, one after another as `ScopeSpans.spans` fields: the body of one
/// request ([`super::wire::request`]).
#[derive(Debug, Default)]
pub struct Batch {
    pub bytes: Vec<u8>,
    pub spans: usize,
}

/// A sink and the exporter's end of it.
pub fn sink() -> (SpanSink, SpanSource) {
    let buffer = Arc::new(Buffer::default());
    metrics::counter!(DROPPED).increment(0);
    (SpanSink(buffer.clone()), SpanSource(buffer))
}

impl SpanSink {
    /// Hands a span over without waiting (a full buffer drops it, counted).
    pub fn emit(&self, span: Span) {
        let mut waiting = self
            .0
            .waiting
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if waiting.spans >= SINK_CAPACITY {
            drop(waiting);
            metrics::counter!(DROPPED).increment(1);
            return;
        }
        let filled = waiting.push(&span);
        drop(waiting);
        if filled {
            self.0.full.notify_waiters();
        }
    }
}

impl Waiting {
    /// Appends `span` to the newest batch (or a new one); whether that filled it.
    fn push(&mut self, span: &Span) -> bool {
        if self.batches.back().is_none_or(|b| b.spans >= BATCH) {
            let bytes = self
                .spare
                .pop()
                .unwrap_or_else(|| Vec::with_capacity(BATCH_BYTES));
            self.batches.push_back(Batch { bytes, spans: 0 });
        }
        let Some(batch) = self.batches.back_mut() else {
            return false;
        };
        span.write_to(&mut batch.bytes);
        batch.spans += 1;
        self.spans += 1;
        batch.spans == BATCH
    }
}

/// The exporter's end of a [`SpanSink`].
#[derive(Debug)]
pub struct SpanSource(Arc<Buffer>);

impl SpanSource {
    /// The next batch (at most [`BATCH`] spans, oldest first): at once when a full one
    /// is waiting, else what arrived by the time one filled or [`LINGER`] passed. `None`
    /// once every sink is gone and nothing is left.
    pub async fn next_batch(&self) -> Option<Batch> {
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

    /// Gives a sent batch's buffer back for a later batch.
    pub fn recycle(&self, mut bytes: Vec<u8>) {
        bytes.clear();
        let mut waiting = self
            .0
            .waiting
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if waiting.spare.len() < SPARE {
            waiting.spare.push(bytes);
        }
    }

    /// The oldest batch, when it holds at least `least` spans.
    fn take(&self, least: usize) -> Option<Batch> {
        let mut waiting = self
            .0
            .waiting
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if waiting.batches.front()?.spans < least.max(1) {
            return None;
        }
        let batch = waiting.batches.pop_front()?;
        waiting.spans = waiting.spans.saturating_sub(batch.spans);
        Some(batch)
    }
}

#[cfg(test)]
mod tests {
    use switchboard_types::time::Timestamp;

    use super::super::wire::{OpenSpan, Place};
    use super::*;

    fn span(n: usize) -> Span {
        let place = Place {
            trace_id: [7; 16],
            span_id: (n as u64 + 1).to_be_bytes(),
            parent_span_id: None,
            trace_state: None,
        };
        let now = Timestamp::now();
        OpenSpan::new(place, "switchboard.message", now).finish(now, std::iter::empty(), None)
    }

    /// Span `n` as a batch holds it.
    fn entry(n: usize) -> Vec<u8> {
        let mut bytes = Vec::new();
        span(n).write_to(&mut bytes);
        bytes
    }

    #[tokio::test(start_paused = true)]
    async fn the_exporter_gets_full_batches_at_once_and_the_rest_after_the_linger() {
        let (sink, source) = sink();
        for n in 0..BATCH + 3 {
            sink.emit(span(n));
        }
        let started = tokio::time::Instant::now();
        let full = source.next_batch().await.expect("a batch");
        assert_eq!(full.spans, BATCH);
        assert!(full.bytes.starts_with(&entry(0)[..20]), "oldest first");
        assert_eq!(
            started.elapsed(),
            Duration::ZERO,
            "a full batch goes at once"
        );
        let rest = source.next_batch().await.expect("the rest");
        assert_eq!(rest.spans, 3);
        assert!(rest.bytes.starts_with(&entry(BATCH)[..20]));
        assert_eq!(
            started.elapsed(),
            LINGER,
            "a partial one waits for the linger"
        );
        // A sent batch's buffer is used again.
        let capacity = full.bytes.capacity();
        source.recycle(full.bytes);
        // A batch that fills while the exporter waits wakes it at once.
        let source = Arc::new(source);
        let waiting = tokio::spawn({
            let source = source.clone();
            async move { source.next_batch().await }
        });
        tokio::task::yield_now().await;
        let filling = tokio::time::Instant::now();
        for n in 0..BATCH {
            sink.emit(span(n));
        }
        let refilled = waiting.await.ok().flatten().expect("a batch");
        assert_eq!(refilled.spans, BATCH);
        assert_eq!(refilled.bytes.capacity(), capacity, "the spare buffer");
        assert!(filling.elapsed() < LINGER, "{:?}", filling.elapsed());
        sink.emit(span(0));
        drop(sink);
        assert_eq!(source.next_batch().await.map(|b| b.spans), Some(1));
        assert!(source.next_batch().await.is_none(), "no sink: the end");
    }

    #[test]
    fn a_full_buffer_drops_what_comes_next() {
        let (sink, source) = sink();
        for n in 0..SINK_CAPACITY + 5 {
            sink.emit(span(n));
        }
        let waiting = source.0.waiting.lock().map(|w| w.spans).unwrap_or(0);
        assert_eq!(waiting, SINK_CAPACITY);
        let batches = source
            .0
            .waiting
            .lock()
            .map(|w| w.batches.len())
            .unwrap_or(0);
        assert_eq!(batches, SINK_CAPACITY / BATCH);
    }
}
