//! Spans as OTLP protobuf, written as they are built: a span's bytes are its only copy.
//!
//! A span is not kept as a struct of owned strings to be encoded later: at tens of
//! thousands of messages a second, those strings (each attribute's value, made on a
//! request's thread and freed on the exporter's) and the batches of records holding them
//! cost the server a tenth of its CPU per send — allocations, cross-thread frees, fresh
//! pages faulted in — for data read once. Here a span is written field by field into one
//! buffer from what the caller has at hand ([`OpenSpan`]), its end time patched in when
//! it ends; the sink keeps finished spans' bytes and the exporter wraps a batch of them
//! in an `ExportTraceServiceRequest` ([`request`]). The layout follows
//! `opentelemetry/proto/trace/v1/trace.proto`, fields in number order as the generated
//! structs write them; the tests check it against the structs' own encoding.

use switchboard_types::time::Timestamp;

/// Wire types (protobuf encoding).
const VARINT: u32 = 0;
const FIXED64: u32 = 1;
const LEN: u32 = 2;

/// `SpanKind.SPAN_KIND_SERVER`: every span is of a request the server handled.
const KIND_SERVER: u64 = 2;
/// `Status.StatusCode.STATUS_CODE_ERROR`.
const STATUS_ERROR: u64 = 2;
/// `ScopeSpans.spans`: the field every finished span is written as.
const SCOPE_SPANS_SPAN: u32 = 2;

/// Where a span sits: its trace, its own id and its parent's (ids as the bytes OTLP
/// sends), the `tracestate` it carries.
#[derive(Debug, Clone, Copy)]
pub struct Place<'a> {
    pub trace_id: [u8; 16],
    pub span_id: [u8; 8],
    pub parent_span_id: Option<[u8; 8]>,
    pub trace_state: Option<&'a str>,
}

/// A span being written: everything up to its attributes is in `bytes`, with the eight
/// bytes of its end time at `end_at` left to patch when it ends.
#[derive(Debug)]
pub struct OpenSpan {
    bytes: Vec<u8>,
    end_at: usize,
}

impl OpenSpan {
    /// A span named `name` that starts at `start`.
    pub fn new(place: Place<'_>, name: &str, start: Timestamp) -> OpenSpan {
        let mut bytes = Vec::with_capacity(384);
        self::bytes(&mut bytes, 1, &place.trace_id);
        self::bytes(&mut bytes, 2, &place.span_id);
        string(&mut bytes, 3, place.trace_state.unwrap_or_default());
        self::bytes(
            &mut bytes,
            4,
            place.parent_span_id.as_ref().map_or(&[], |p| &p[..]),
        );
        string(&mut bytes, 5, name);
        number(&mut bytes, 6, KIND_SERVER);
        fixed64(&mut bytes, 7, nanos(start));
        // Span.end_time_unix_nano: written now, in its place, and set when the span ends.
        tag(&mut bytes, 8, FIXED64);
        let end_at = bytes.len();
        bytes.extend_from_slice(&nanos(start).to_le_bytes());
        OpenSpan { bytes, end_at }
    }

    /// A string attribute (`Span.attributes`).
    pub fn attribute(&mut self, key: &str, value: &str) -> &mut OpenSpan {
        attribute(&mut self.bytes, 9, key, value);
        self
    }

    /// A string attribute made of `values` joined by commas, written without joining
    /// them first.
    pub fn attribute_list<'v>(
        &mut self,
        key: &str,
        values: impl Iterator<Item = &'v str> + Clone,
    ) -> &mut OpenSpan {
        let len = values
            .clone()
            .map(|v| v.len() + 1)
            .sum::<usize>()
            .saturating_sub(1);
        attribute_parts(&mut self.bytes, 9, key, values, len);
        self
    }

    /// The span ended at `end`, with an event `name` (and its agent) for each of
    /// `events`, and `error` (a code) when it records a failure.
    pub fn finish<'e>(
        mut self,
        end: Timestamp,
        events: impl Iterator<Item = (&'e str, &'e str)>,
        error: Option<&str>,
    ) -> Span {
        if let Some(slot) = self.bytes.get_mut(self.end_at..self.end_at + 8) {
            slot.copy_from_slice(&nanos(end).to_le_bytes());
        }
        let out = &mut self.bytes;
        for (name, agent) in events {
            message(out, 11, |event| {
                fixed64(event, 1, nanos(end));
                string(event, 2, name);
                attribute(event, 3, "switchboard.agent_id", agent);
            });
        }
        // Span.status, present (if empty: unset) on every span.
        message(out, 15, |status| {
            if let Some(code) = error {
                string(status, 2, code);
                number(status, 3, STATUS_ERROR);
            }
        });
        Span(self.bytes)
    }
}

/// A finished span's bytes (a `Span` message).
#[derive(Debug)]
pub struct Span(Vec<u8>);

impl Span {
    /// Appends the span to `batch` as a `ScopeSpans.spans` field: what [`request`] sends.
    pub fn write_to(&self, batch: &mut Vec<u8>) {
        tag(batch, SCOPE_SPANS_SPAN, LEN);
        varint(batch, self.0.len() as u64);
        batch.extend_from_slice(&self.0);
    }
}

/// The request for `spans` (finished spans' bytes, one after another) of this service on
/// `node` (`service.instance.id`).
pub fn request(spans: &[u8], node: &str) -> Vec<u8> {
    let mut resource = Vec::with_capacity(64);
    // ResourceSpans.resource
    message(&mut resource, 1, |resource| {
        attribute(resource, 1, "service.name", "switchboard");
        attribute(resource, 1, "service.instance.id", node);
    });
    let mut scope = Vec::with_capacity(32);
    // ScopeSpans.scope
    message(&mut scope, 1, |scope| {
        string(scope, 1, "switchboard");
        string(scope, 2, env!("CARGO_PKG_VERSION"));
    });
    let scope_spans = scope.len() + spans.len();
    let resource_spans = resource.len() + 1 + varint_len(scope_spans) + scope_spans;
    let mut out = Vec::with_capacity(resource_spans + 16);
    // ExportTraceServiceRequest.resource_spans, then ResourceSpans.scope_spans
    tag(&mut out, 1, LEN);
    varint(&mut out, resource_spans as u64);
    out.extend_from_slice(&resource);
    tag(&mut out, 2, LEN);
    varint(&mut out, scope_spans as u64);
    out.extend_from_slice(&scope);
    out.extend_from_slice(spans);
    out
}

/// Bytes a varint of `value` takes.
fn varint_len(value: usize) -> usize {
    let bits = usize::BITS - value.leading_zeros();
    (bits.max(1) as usize).div_ceil(7)
}

/// A `KeyValue` with a string value, as field `field`.
fn attribute(out: &mut Vec<u8>, field: u32, key: &str, value: &str) {
    attribute_parts(out, field, key, [value], value.len());
}

/// A `KeyValue` with a string value, as field `field`: `parts` joined by commas, `len`
/// bytes in all.
///
/// A span's usual attribute (a short key, a value of an id's length) has every length
/// in one byte, known before writing: it is written straight through, in four copies,
/// without [`message`]'s patching — every send writes half a dozen.
fn attribute_parts<'v>(
    out: &mut Vec<u8>,
    field: u32,
    key: &str,
    parts: impl IntoIterator<Item = &'v str>,
    len: usize,
) {
    // AnyValue: its string's tag and length, then the string.
    let any = 2 + len;
    // KeyValue: the key's tag, length and bytes, then the value's tag, length and bytes.
    let kv = 2 + key.len() + 2 + any;
    if field < 16 && !key.is_empty() && kv < 128 {
        out.reserve(2 + kv);
        out.extend_from_slice(&[(field << 3 | LEN) as u8, kv as u8, KEY_TAG, key.len() as u8]);
        out.extend_from_slice(key.as_bytes());
        out.extend_from_slice(&[VALUE_TAG, any as u8, STRING_TAG, len as u8]);
        joined(out, parts);
        return;
    }
    message(out, field, |kv| {
        string(kv, 1, key);
        // KeyValue.value: an AnyValue whose oneof is set even to an empty string.
        message(kv, 2, |any| {
            tag(any, 1, LEN);
            varint(any, len as u64);
            joined(any, parts);
        });
    });
}

/// `KeyValue.key`, `KeyValue.value` and `AnyValue.string_value`'s tags.
const KEY_TAG: u8 = 1 << 3 | LEN as u8;
const VALUE_TAG: u8 = 2 << 3 | LEN as u8;
const STRING_TAG: u8 = 1 << 3 | LEN as u8;

/// `parts` joined by commas.
fn joined<'v>(out: &mut Vec<u8>, parts: impl IntoIterator<Item = &'v str>) {
    for (i, part) in parts.into_iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(part.as_bytes());
    }
}

/// A nested message as field `field`: `body` writes it after a one-byte length, set
/// when it is known; a body of 128 bytes or more (rare: a span's nested messages are
/// short) moves itself to make room for a longer one. Cheaper than measuring every
/// message twice, or inserting every length in front of what was written.
fn message(out: &mut Vec<u8>, field: u32, body: impl FnOnce(&mut Vec<u8>)) {
    tag(out, field, LEN);
    let at = out.len();
    out.push(0);
    body(out);
    let len = out.len() - at - 1;
    let need = varint_len(len);
    if need > 1 {
        out.resize(out.len() + need - 1, 0);
        out.copy_within(at + 1..at + 1 + len, at + need);
    }
    let mut rest = len;
    let slots = out.get_mut(at..at + need).unwrap_or_default();
    for (i, slot) in slots.iter_mut().enumerate() {
        let more = if i + 1 < need { 0x80 } else { 0 };
        *slot = (rest & 0x7f) as u8 | more;
        rest >>= 7;
    }
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
    use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Status};
    use prost::Message;

    use super::*;

    /// A span as a test describes it; an attribute named `*_ids` is written as a list.
    #[derive(Clone)]
    struct Given {
        place: Place<'static>,
        name: &'static str,
        start: Timestamp,
        end: Timestamp,
        attributes: Vec<(&'static str, String)>,
        events: Vec<(&'static str, &'static str)>,
        error: Option<&'static str>,
    }

    fn ours(given: &Given) -> Span {
        let mut span = OpenSpan::new(given.place, given.name, given.start);
        for (key, value) in &given.attributes {
            if key.ends_with("_ids") {
                span.attribute_list(key, value.split(','));
            } else {
                span.attribute(key, value);
            }
        }
        span.finish(given.end, given.events.iter().copied(), given.error)
    }

    /// The same request built from the generated structs: what a collector decodes.
    fn reference(spans: &[Given], node: &str) -> ExportTraceServiceRequest {
        let kv = |key: &str, value: &str| KeyValue {
            key: key.to_owned(),
            value: Some(AnyValue {
                value: Some(Value::StringValue(value.to_owned())),
            }),
            ..Default::default()
        };
        let span = |s: &Given| opentelemetry_proto::tonic::trace::v1::Span {
            trace_id: s.place.trace_id.to_vec(),
            span_id: s.place.span_id.to_vec(),
            parent_span_id: s
                .place
                .parent_span_id
                .map(|p| p.to_vec())
                .unwrap_or_default(),
            trace_state: s.place.trace_state.unwrap_or_default().to_owned(),
            name: s.name.to_owned(),
            kind: SpanKind::Server as i32,
            start_time_unix_nano: nanos(s.start),
            end_time_unix_nano: nanos(s.end),
            attributes: s.attributes.iter().map(|(k, v)| kv(k, v)).collect(),
            events: s
                .events
                .iter()
                .map(|(name, agent)| Event {
                    time_unix_nano: nanos(s.end),
                    name: (*name).to_owned(),
                    attributes: vec![kv("switchboard.agent_id", agent)],
                    ..Default::default()
                })
                .collect(),
            status: Some(match s.error {
                Some(code) => Status {
                    code: StatusCode::Error as i32,
                    message: code.to_owned(),
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

    fn spans() -> Vec<Given> {
        let start = Timestamp::now();
        let end = Timestamp::from_micros(start.micros() + 1234);
        let message = Given {
            place: Place {
                trace_id: [0x4b; 16],
                span_id: [0xa1; 8],
                parent_span_id: Some([0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7]),
                trace_state: Some("congo=t61rcWkgMzE"),
            },
            name: "switchboard.message",
            start,
            end,
            attributes: vec![
                ("switchboard.sender_agent_id", "planner".to_owned()),
                ("switchboard.kind", "information".to_owned()),
                // Long enough that its length takes two bytes.
                ("switchboard.recipient_agent_ids", vec!["r"; 100].join(",")),
                ("switchboard.sender_ids", "one".to_owned()),
                ("switchboard.team_id", String::new()),
                // Either side of where a `KeyValue` stops fitting a one-byte length.
                ("switchboard.sender_agent_id", "s".repeat(94)),
                ("switchboard.sender_agent_id", "s".repeat(95)),
            ],
            events: vec![("pushed", "coder"), ("pushed", "tester")],
            error: None,
        };
        let refused = Given {
            place: Place {
                trace_id: [1; 16],
                span_id: [2; 8],
                parent_span_id: None,
                trace_state: None,
            },
            name: "switchboard.refused",
            start,
            end: start,
            attributes: vec![
                ("switchboard.error_code", "LOOP_DETECTED".to_owned()),
                // Long enough that its lengths take three bytes.
                ("switchboard.watcher_ids", vec!["w"; 9000].join(",")),
            ],
            events: Vec::new(),
            error: Some("LOOP_DETECTED"),
        };
        // Enough spans that the request's own lengths take three bytes.
        let mut spans = vec![message.clone(), refused];
        spans.extend(std::iter::repeat_n(message, 300));
        spans
    }

    #[test]
    fn a_batch_decodes_as_the_generated_structs_say_and_encodes_the_same_bytes() {
        let spans = spans();
        let mut batch = Vec::new();
        for span in &spans {
            ours(span).write_to(&mut batch);
        }
        let written = request(&batch, "node-1");
        let decoded = ExportTraceServiceRequest::decode(&written[..]).expect("decodes");
        let expected = reference(&spans, "node-1");
        assert_eq!(decoded, expected);
        assert_eq!(written, expected.encode_to_vec(), "field for field");
        assert!(written.len() > 1 << 16, "{}", written.len());
        let empty = request(&[], "n");
        assert_eq!(
            ExportTraceServiceRequest::decode(&empty[..]).expect("decodes"),
            reference(&[], "n")
        );
    }

    #[test]
    fn varint_lengths_are_counted_as_written() {
        for value in [
            0usize,
            1,
            127,
            128,
            16_383,
            16_384,
            2_097_152,
            usize::MAX >> 1,
        ] {
            let mut out = Vec::new();
            varint(&mut out, value as u64);
            assert_eq!(varint_len(value), out.len(), "{value}");
        }
    }
}
