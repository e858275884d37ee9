//! OTLP/HTTP export of the core's spans (`--otlp-endpoint`, `docs/tracing.md`).
//!
//! One task reads the core's span sink, batches what arrived (up to [`BATCH`] spans, or
//! what came within [`LINGER`] of the first), and POSTs each batch as an
//! `ExportTraceServiceRequest` in protobuf (`application/x-protobuf`), the encoding every
//! collector accepts. A batch the collector refuses or cannot be reached for is dropped
//! and counted (`switchboard_otlp_dropped_spans_total`): telemetry never holds up or
//! fails a send.

use std::time::Duration;

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{
    AnyValue, InstrumentationScope, KeyValue, any_value::Value,
};
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::span::{Event, SpanKind};
use opentelemetry_proto::tonic::trace::v1::status::StatusCode;
use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span, Status};
use prost::Message;
use switchboard_types::time::Timestamp;
use tokio::sync::mpsc;

use crate::core::spans::{DROPPED, SpanRecord};

/// Most spans in one request.
pub const BATCH: usize = 512;
/// How long the first span of a batch waits for others.
pub const LINGER: Duration = Duration::from_millis(500);

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
pub async fn export(mut spans: mpsc::Receiver<SpanRecord>, url: String, node: String) {
    // The collector is the operator's own, so it may be on a private address.
    let client = match crate::core::egress::http_client(Duration::from_secs(10), true) {
        Ok(client) => client,
        Err(err) => {
            tracing::error!(error = %err, "the OTLP exporter could not start");
            return;
        }
    };
    let mut batch = Vec::with_capacity(BATCH);
    while let Some(first) = spans.recv().await {
        batch.push(first);
        let linger = tokio::time::sleep(LINGER);
        tokio::pin!(linger);
        while batch.len() < BATCH {
            tokio::select! {
                next = spans.recv() => match next {
                    Some(span) => batch.push(span),
                    None => break,
                },
                () = &mut linger => break,
            }
        }
        let count = batch.len();
        let body = request(std::mem::take(&mut batch), &node).encode_to_vec();
        let sent = client
            .post(&url)
            .header("content-type", "application/x-protobuf")
            .body(body)
            .send()
            .await;
        match sent {
            Ok(answer) if answer.status().is_success() => {}
            Ok(answer) => refused(count, &format!("status {}", answer.status())),
            Err(err) => refused(count, &err.to_string()),
        }
    }
}

fn refused(count: usize, why: &str) {
    tracing::warn!(
        spans = count,
        why,
        "the OTLP collector did not take a batch of spans"
    );
    metrics::counter!(DROPPED).increment(count as u64);
}

/// One request with `spans` of this service and node.
fn request(spans: Vec<SpanRecord>, node: &str) -> ExportTraceServiceRequest {
    let resource = Resource {
        attributes: vec![
            attribute("service.name", "switchboard".to_owned()),
            attribute("service.instance.id", node.to_owned()),
        ],
        ..Default::default()
    };
    let scope = InstrumentationScope {
        name: "switchboard".to_owned(),
        version: env!("CARGO_PKG_VERSION").to_owned(),
        ..Default::default()
    };
    ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            resource: Some(resource),
            scope_spans: vec![ScopeSpans {
                scope: Some(scope),
                spans: spans.into_iter().map(span).collect(),
                ..Default::default()
            }],
            ..Default::default()
        }],
    }
}

fn span(s: SpanRecord) -> Span {
    Span {
        trace_id: hex(&s.trace_id),
        span_id: hex(&s.span_id),
        parent_span_id: s.parent_span_id.as_deref().map(hex).unwrap_or_default(),
        trace_state: s.trace_state.unwrap_or_default(),
        name: s.name.to_owned(),
        kind: SpanKind::Server as i32,
        start_time_unix_nano: nanos(s.start),
        end_time_unix_nano: nanos(s.end),
        attributes: s
            .attributes
            .into_iter()
            .map(|(k, v)| attribute(k, v))
            .collect(),
        events: s
            .events
            .into_iter()
            .map(|(name, at, agent)| Event {
                time_unix_nano: nanos(at),
                name: name.to_owned(),
                attributes: vec![attribute("switchboard.agent_id", agent)],
                ..Default::default()
            })
            .collect(),
        status: Some(match s.error {
            Some(code) => Status {
                code: StatusCode::Error as i32,
                message: code,
            },
            None => Status::default(),
        }),
        ..Default::default()
    }
}

fn attribute(key: &str, value: String) -> KeyValue {
    KeyValue {
        key: key.to_owned(),
        value: Some(AnyValue {
            value: Some(Value::StringValue(value)),
        }),
        ..Default::default()
    }
}

fn nanos(at: Timestamp) -> u64 {
    u64::try_from(at.micros()).unwrap_or(0).saturating_mul(1000)
}

/// Hex digits as bytes (ids are lowercase hex; anything else gives no bytes).
fn hex(text: &str) -> Vec<u8> {
    (0..text.len() / 2)
        .map_while(|i| u8::from_str_radix(text.get(2 * i..2 * i + 2)?, 16).ok())
        .collect()
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
        assert_eq!(hex("00ff10"), vec![0, 255, 16]);
    }
}
