//! OTLP/HTTP export of the core's spans (`--otlp-endpoint`, `docs/tracing.md`).
//!
//! One task takes the core's spans a batch at a time (up to `spans::BATCH`, sent when
//! full or about `spans::LINGER` after its first span at the latest) and POSTs each as an
//! `ExportTraceServiceRequest` in protobuf (`application/x-protobuf`, the spans written
//! by `core::spans::wire` as they were built), the encoding every collector accepts. A
//! batch the collector refuses or cannot be reached for is dropped and counted
//! (`switchboard_otlp_dropped_spans_total`), logged once per [`WARN_EVERY`] at most, and
//! the collector is left to rest before the next try: telemetry never holds up or fails
//! a send, floods the log, or hammers a collector that is down.

use std::time::{Duration, Instant};

use crate::core::spans::{DROPPED, SpanSource, wire};

/// Least time between two warnings about refused batches (a collector that is down
/// refuses every batch, several a second).
pub const WARN_EVERY: Duration = Duration::from_secs(60);

/// Where the spans go: `endpoint` as given when its path ends in `/v1/traces`, otherwise
/// with `/v1/traces` added (as `OTEL_EXPORTER_OTLP_ENDPOINT` is read).
pub fn traces_url(endpoint: &str) -> String {
    let trimmed = endpoint.trim_end_matches('/');
    if trimmed.ends_with("/v1/traces") {
        trimmed.to_owned()
    } else {
        format!("{trimmed}/v1/traces")
    }
}

/// Exports what `spans` receives to `url` until the sink is dropped; `node` names this
/// process (`service.instance.id`).
pub async fn export(spans: SpanSource, url: String, node: String) {
    // The collector is the operator's own, so it may be on a private address.
    let client = match crate::core::egress::http_client(Duration::from_secs(10), true) {
        Ok(client) => client,
        Err(err) => {
            tracing::error!(error = %err, "the OTLP exporter could not start");
            return;
        }
    };
    let mut refusals = Refusals::default();
    while let Some(batch) = spans.next_batch().await {
        let count = batch.spans;
        if refusals.resting() {
            metrics::counter!(DROPPED).increment(count as u64);
            spans.recycle(batch.bytes);
            continue;
        }
        let body = wire::request(&batch.bytes, &node);
        spans.recycle(batch.bytes);
        let sent = client
            .post(&url)
            .header("content-type", "application/x-protobuf")
            .body(body)
            .send()
            .await;
        match sent {
            Ok(answer) if answer.status().is_success() => refusals.taken(),
            Ok(answer) => refusals.count(count, || format!("status {}", answer.status())),
            Err(err) => refusals.count(count, || err.to_string()),
        }
    }
}

/// Batches the collector did not take: all counted, a warning now and then, and a rest
/// before the next try ([`REST_FIRST`], doubling up to [`REST_MOST`]) during which
/// batches are dropped unsent — a collector that is down is not asked again for every
/// batch, and costs the server no request while it is down.
#[derive(Default)]
struct Refusals {
    warned: Option<Instant>,
    /// Batches refused since the last warning.
    quiet: u64,
    rest: Duration,
    until: Option<Instant>,
}

/// The first rest after a refused batch.
pub const REST_FIRST: Duration = Duration::from_secs(1);
/// The longest rest between two tries.
pub const REST_MOST: Duration = Duration::from_secs(30);

impl Refusals {
    fn resting(&self) -> bool {
        self.until.is_some_and(|until| Instant::now() < until)
    }

    fn taken(&mut self) {
        self.rest = Duration::ZERO;
        self.until = None;
    }

    fn count(&mut self, spans: usize, why: impl FnOnce() -> String) {
        metrics::counter!(DROPPED).increment(spans as u64);
        self.rest = (self.rest * 2).clamp(REST_FIRST, REST_MOST);
        self.until = Some(Instant::now() + self.rest);
        self.quiet += 1;
        if self.warned.is_some_and(|at| at.elapsed() < WARN_EVERY) {
            return;
        }
        tracing::warn!(
            batches = self.quiet,
            spans,
            why = why(),
            "the OTLP collector did not take spans (batches refused since the last warning; \
             all counted in switchboard_otlp_dropped_spans_total; next try after a rest)"
        );
        self.warned = Some(Instant::now());
        self.quiet = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_endpoint_gets_the_traces_path_once() {
        assert_eq!(
            traces_url("http://127.0.0.1:4318"),
            "http://127.0.0.1:4318/v1/traces"
        );
        assert_eq!(
            traces_url("http://127.0.0.1:4318/v1/traces/"),
            "http://127.0.0.1:4318/v1/traces"
        );
    }

    #[test]
    fn a_refused_batch_rests_the_exporter_longer_each_time_until_one_is_taken() {
        let mut refusals = Refusals::default();
        assert!(!refusals.resting());
        refusals.count(3, || "refused".to_owned());
        assert!(refusals.resting());
        assert_eq!(refusals.rest, REST_FIRST);
        refusals.count(3, || "refused".to_owned());
        assert_eq!(refusals.rest, REST_FIRST * 2);
        for _ in 0..10 {
            refusals.count(3, || "refused".to_owned());
        }
        assert_eq!(refusals.rest, REST_MOST);
        // One warning, then quiet: the later refusals are counted for the next one.
        assert_eq!(refusals.quiet, 11);
        refusals.taken();
        assert!(!refusals.resting());
        refusals.count(3, || "refused".to_owned());
        assert_eq!(refusals.rest, REST_FIRST);
    }
}
