//! A batch of spans as an OTLP `ExportTraceServiceRequest` in protobuf, written straight
//! from the core's [`SpanRecord`]s.
//!
//! Not through `opentelemetry-proto`'s message structs: those own every string, so a
//! span became some twenty small allocations (each attribute's key and value, each id,
//! each event) made and freed again just to be copied into the request, and at ten
//! thousand messages a second that copying cost the server more than the send's own
//! span. Here every field is written once into one buffer. The layout follows
//! `opentelemetry/proto/trace/v1/trace.proto`; the tests check it against the structs'
//! own encoding.

use switchboard_types::time::Timestamp;

use crate::core::spans::SpanRecord;

/// Wire types (protobuf encoding).
const VARINT: u32 = 0;
const FIXED64: u32 = 1;
const LEN: u32 = 2;

/// `SpanKind.SPAN_KIND_SERVER`: every span is of a request the server handled.
const KIND_SERVER: u64 = 2;
/// `Status.StatusCode.STATUS_CODE_ERROR`.
const STATUS_ERROR: u64 = 2;

/// The request for `spans` of this service on `node` (`service.instance.id`).
pub fn encode(spans: &[SpanRecord], node: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(128 + spans.len() * 384);
    // ExportTraceServiceRequest.resource_spans
    message(&mut out, 1, |resource_spans| {
        // ResourceSpans.resource
        message(resource_spans, 1, |resource| {
            attribute(resource, 1, "service.name", "switchboard");
            attribute(resource, 1, "service.instance.id", node);
        });
        // ResourceSpans.scope_spans
        message(resource_spans, 2, |scope_spans| {
            message(scope_spans, 1, |scope| {
                string(scope, 1, "switchboard");
                string(scope, 2, env!("CARGO_PKG_VERSION"));
            });
            for record in spans {
                message(scope_spans, 2, |out| span(out, record));
            }
        });
    });
    out
}

/// One `Span`, its fields in the order the structs write them.
fn span(out: &mut Vec<u8>, s: &SpanRecord) {
    bytes(out, 1, &s.trace_id);
    bytes(out, 2, &s.span_id);
    string(out, 3, s.trace_state.as_deref().unwrap_or_default());
    bytes(out, 4, s.parent_span_id.as_ref().map_or(&[], |p| &p[..]));
    string(out, 5, s.name);
    number(out, 6, KIND_SERVER);
    fixed64(out, 7, nanos(s.start));
    fixed64(out, 8, nanos(s.end));
    for (key, value) in &s.attributes {
        attribute(out, 9, key, value.as_text());
    }
    for (name, at, agent) in &s.events {
        message(out, 11, |event| {
            fixed64(event, 1, nanos(*at));
            string(event, 2, name);
            attribute(event, 3, "switchboard.agent_id", agent);
        });
    }
    // Span.status, present (if empty: unset) on every span.
    message(out, 15, |status| {
        if let Some(code) = &s.error {
            string(status, 2, code);
            number(status, 3, STATUS_ERROR);
        }
    });
}

/// A `KeyValue` with a string value, as field `field`.
fn attribute(out: &mut Vec<u8>, field: u32, key: &str, value: &str) {
    message(out, field, |kv| {
        string(kv, 1, key);
        // KeyValue.value: an AnyValue whose oneof is set even to an empty string.
        message(kv, 2, |any| {
            tag(any, 1, LEN);
            varint(any, value.len() as u64);
            any.extend_from_slice(value.as_bytes());
        });
    });
}

/// A nested message as field `field`: `body` writes it, then its length goes before it
/// (moving the few bytes written; cheaper than measuring every message twice).
fn message(out: &mut Vec<u8>, field: u32, body: impl FnOnce(&mut Vec<u8>)) {
    tag(out, field, LEN);
    let start = out.len();
    body(out);
    let mut len = (out.len() - start) as u64;
    let mut prefix = [0u8; 10];
    let mut used = 0;
    while len >= 0x80 {
        prefix[used] = (len & 0x7f) as u8 | 0x80;
        len >>= 7;
        used += 1;
    }
    prefix[used] = len as u8;
    out.splice(start..start, prefix[..=used].iter().copied());
}

/// A string field; an empty one is not written (proto3's default).
fn string(out: &mut Vec<u8>, field: u32, value: &str) {
    bytes(out, field, value.as_bytes());
}

/// A bytes field; an empty one is not written (proto3's default).
fn bytes(out: &mut Vec<u8>, field: u32, value: &[u8]) {
    if value.is_empty() {
        return;
    }
    tag(out, field, LEN);
    varint(out, value.len() as u64);
    out.extend_from_slice(value);
}

/// A varint field (an enum); zero is not written.
fn number(out: &mut Vec<u8>, field: u32, value: u64) {
    if value != 0 {
        tag(out, field, VARINT);
        varint(out, value);
    }
}

/// A `fixed64` field; zero is not written.
fn fixed64(out: &mut Vec<u8>, field: u32, value: u64) {
    if value != 0 {
        tag(out, field, FIXED64);
        out.extend_from_slice(&value.to_le_bytes());
    }
}

fn tag(out: &mut Vec<u8>, field: u32, wire: u32) {
    varint(out, u64::from(field << 3 | wire));
}

fn varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value & 0x7f) as u8 | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

fn nanos(at: Timestamp) -> u64 {
    u64::try_from(at.micros()).unwrap_or(0).saturating_mul(1000)
}

#[cfg(test)]
mod tests {
    use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
    use opentelemetry_proto::tonic::common::v1::{
        AnyValue, InstrumentationScope, KeyValue, any_value::Value,
    };
    use opentelemetry_proto::tonic::resource::v1::Resource;
    use opentelemetry_proto::tonic::trace::v1::span::{Event, SpanKind};
    use opentelemetry_proto::tonic::trace::v1::status::StatusCode;
    use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span, Status};
    use prost::Message;
    use switchboard_types::ids::AgentId;

    use super::*;
    use crate::core::spans::Attr;

    /// The same request built from the generated structs: what a collector decodes.
    fn reference(spans: &[SpanRecord], node: &str) -> ExportTraceServiceRequest {
        let kv = |key: &str, value: &str| KeyValue {
            key: key.to_owned(),
            value: Some(AnyValue {
                value: Some(Value::StringValue(value.to_owned())),
            }),
            ..Default::default()
        };
        let span = |s: &SpanRecord| Span {
            trace_id: s.trace_id.to_vec(),
            span_id: s.span_id.to_vec(),
            parent_span_id: s.parent_span_id.map(|p| p.to_vec()).unwrap_or_default(),
            trace_state: s.trace_state.clone().unwrap_or_default(),
            name: s.name.to_owned(),
            kind: SpanKind::Server as i32,
            start_time_unix_nano: nanos(s.start),
            end_time_unix_nano: nanos(s.end),
            attributes: s
                .attributes
                .iter()
                .map(|(k, v)| kv(k, v.as_text()))
                .collect(),
            events: s
                .events
                .iter()
                .map(|(name, at, agent)| Event {
                    time_unix_nano: nanos(*at),
                    name: (*name).to_owned(),
                    attributes: vec![kv("switchboard.agent_id", agent)],
                    ..Default::default()
                })
                .collect(),
            status: Some(match &s.error {
                Some(code) => Status {
                    code: StatusCode::Error as i32,
                    message: code.clone(),
                },
                None => Status::default(),
            }),
            ..Default::default()
        };
        ExportTraceServiceRequest {
            resource_spans: vec![ResourceSpans {
                resource: Some(Resource {
                    attributes: vec![
                        kv("service.name", "switchboard"),
                        kv("service.instance.id", node),
                    ],
                    ..Default::default()
                }),
                scope_spans: vec![ScopeSpans {
                    scope: Some(InstrumentationScope {
                        name: "switchboard".to_owned(),
                        version: env!("CARGO_PKG_VERSION").to_owned(),
                        ..Default::default()
                    }),
                    spans: spans.iter().map(span).collect(),
                    ..Default::default()
                }],
                ..Default::default()
            }],
        }
    }

    fn spans() -> Vec<SpanRecord> {
        let now = Timestamp::now();
        let message = SpanRecord {
            trace_id: [0x4b; 16],
            span_id: [0xa1; 8],
            parent_span_id: Some([0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7]),
            trace_state: Some("congo=t61rcWkgMzE".to_owned()),
            name: "switchboard.message",
            start: now,
            end: now,
            attributes: vec![
                ("switchboard.sender_agent_id", "planner".to_owned().into()),
                ("switchboard.kind", Attr::Word("information")),
                // Long enough that its length takes two bytes.
                ("switchboard.recipient_agent_ids", "r,".repeat(100).into()),
                ("switchboard.team_id", Attr::Word("")),
            ],
            events: vec![("pushed", now, AgentId::from("coder".to_owned()))],
            error: None,
        };
        let refused = SpanRecord {
            trace_id: [1; 16],
            span_id: [2; 8],
            parent_span_id: None,
            trace_state: None,
            name: "switchboard.refused",
            start: now,
            end: now,
            attributes: vec![("switchboard.error_code", "LOOP_DETECTED".to_owned().into())],
            events: Vec::new(),
            error: Some("LOOP_DETECTED".to_owned()),
        };
        // Enough spans that the request's own lengths take three bytes.
        let mut spans = vec![message.clone(), refused];
        spans.extend(std::iter::repeat_n(message, 300));
        spans
    }

    #[test]
    fn a_batch_decodes_as_the_generated_structs_say_and_encodes_the_same_bytes() {
        let spans = spans();
        let written = encode(&spans, "node-1");
        let decoded = ExportTraceServiceRequest::decode(&written[..]).expect("decodes");
        let expected = reference(&spans, "node-1");
        assert_eq!(decoded, expected);
        assert_eq!(written, expected.encode_to_vec(), "field for field");
        assert!(written.len() > 1 << 14, "{}", written.len());
        let empty = encode(&[], "n");
        assert_eq!(
            ExportTraceServiceRequest::decode(&empty[..]).expect("decodes"),
            reference(&[], "n")
        );
    }
}
