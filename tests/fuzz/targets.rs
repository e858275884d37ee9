//! The fuzz targets: each runs one input through a parser exactly as a request does and
//! checks what must hold whatever the input (a panic is caught by the driver).
//!
//! A target's seeds are the files of `fuzz/corpus/<target>/`. For `body` and `query`
//! the part of the file name before the first `.` says which type the input is for
//! (`send_message.1.json`), so every mutation of a seed stays aimed at its type.

use serde::de::DeserializeOwned;
use serde_json::Value;
use switchboard::core::cursor;
use switchboard::core::egress::urls;
use switchboard::transport::common::decode_query;
use switchboard_types::agents::{RegisterAgent, UpdateAgent};
use switchboard_types::assistance::RequestAssistance;
use switchboard_types::broadcasts::BroadcastUpdate;
use switchboard_types::decode::decode_json;
use switchboard_types::error::MAX_ECHO_CHARS;
use switchboard_types::inbox::InboxQuery;
use switchboard_types::messages::{MarkRead, RespondToMessage, SendMessage, SortOrder};
use switchboard_types::publish::{Publish, SetWatch, clean_subscription};
use switchboard_types::tasks::{
    Answer, Cancel, Clarify, Handoff, TaskQuery, TaskRequest, TaskResult,
};
use switchboard_types::teams::{CreateTeam, UpdateTeam};
use switchboard_types::validate::{MAX_IDEMPOTENCY_KEY, check_idempotency_key};
use switchboard_types::{ClientFrame, ErrorBody, ErrorCode, Timestamp};

/// A check: `Err` says what went wrong for this input.
pub type Check = fn(kind: &str, input: &[u8]) -> Result<(), String>;

pub const TARGETS: &[(&str, Check)] = &[
    ("body", body),
    ("query", query),
    ("frame", frame),
    ("cursor", cursors),
    ("timestamp", timestamp),
    ("idempotency_key", idempotency_key),
    ("callback_url", callback),
    ("stomp", stomp),
    ("wise_body", wise_body),
];

/// Words of Rust's type system that an error must never show a client (unless the
/// client wrote them itself), matched as whole words.
const RUST_WORDS: &[&str] = &[
    "struct", "enum", "Vec", "Option", "String", "i8", "i16", "i32", "i64", "u8", "u16", "u32",
    "u64", "f32", "f64", "usize", "isize", "BTreeMap", "HashMap", "alloc", "serde",
];

/// Whether `word` occurs in `text` with no letter, digit or `_` on either side.
fn has_word(text: &str, word: &str) -> bool {
    text.match_indices(word).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let after = text[at + word.len()..].chars().next();
        let part = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
        !part(before) && !part(after)
    })
}

/// Room for the note a bounded text ends with ("… (12345 more characters)").
const ELISION: usize = 40;

/// An error a client gets: a code, a message of bounded length in the words of the
/// API, and for a validation error the field it is about.
fn well_formed(err: &ErrorBody, input: &[u8]) -> Result<(), String> {
    let text = String::from_utf8_lossy(input);
    let body = serde_json::to_value(err).map_err(|e| e.to_string())?;
    let message = body["error_message"].as_str().unwrap_or_default();
    if message.is_empty() || message.chars().count() > 4 * MAX_ECHO_CHARS + ELISION {
        return Err(format!("error message empty or unbounded: {body}"));
    }
    for word in RUST_WORDS {
        if has_word(message, word) && !text.contains(word) {
            return Err(format!("error speaks Rust ({word}): {message}"));
        }
    }
    if err.error_code == ErrorCode::ValidationError
        && body["details"]["field"].as_str().is_none_or(str::is_empty)
    {
        return Err(format!("a validation error without its field: {body}"));
    }
    for (key, value) in body["details"].as_object().into_iter().flatten() {
        let chars = value.as_str().map_or(0, |s| s.chars().count());
        if chars > MAX_ECHO_CHARS + ELISION {
            return Err(format!("details.{key} echoes {chars} characters: {body}"));
        }
    }
    Ok(())
}

/// Decodes like the REST extractor, then validates like the core.
fn decoded<T: DeserializeOwned, R>(
    input: &[u8],
    validate: impl Fn(&T) -> Result<R, ErrorBody>,
) -> Result<(), String> {
    let refused = match decode_json::<T>(input) {
        Ok(body) => match validate(&body) {
            Ok(_) => return Ok(()),
            Err(err) => err,
        },
        Err(err) => err,
    };
    well_formed(&refused, input)
}

fn body(kind: &str, input: &[u8]) -> Result<(), String> {
    let now = Timestamp::now();
    match kind {
        "create_team" => decoded(input, CreateTeam::validate),
        "update_team" => decoded(input, UpdateTeam::validate),
        "register_agent" => decoded(input, RegisterAgent::validate),
        "update_agent" => decoded(input, UpdateAgent::validate),
        "send_message" => decoded(input, |m: &SendMessage| {
            m.validate_recipients()?;
            m.validate_fields(now)
        }),
        "mark_read" => decoded(input, MarkRead::validate),
        "respond" => decoded(input, |r: &RespondToMessage| r.validate("msg_fuzz")),
        "broadcast" => decoded(input, BroadcastUpdate::validate),
        "assistance" => decoded(input, |r: &RequestAssistance| r.validate(now)),
        "submit_task" => decoded(input, TaskRequest::validate),
        "handoff" => decoded(input, Handoff::validate),
        "clarify" => decoded(input, Clarify::validate),
        "answer" => decoded(input, Answer::validate),
        "cancel" => decoded(input, Cancel::validate),
        "report" => decoded(input, |_: &TaskResult| Ok::<(), ErrorBody>(())),
        "publish" => decoded(input, |p: &Publish| p.validate().map(drop)),
        "set_watch" => decoded(input, |s: &SetWatch| {
            clean_subscription(&s.addresses, &s.watch).map(drop)
        }),
        other => Err(format!("no body type {other}: name the seed after one")),
    }
}

fn query(kind: &str, input: &[u8]) -> Result<(), String> {
    let text = String::from_utf8_lossy(input);
    let refused = match kind {
        "inbox" => decode_query::<InboxQuery>(&text).and_then(|q| q.page_size().map(drop)),
        "tasks" => decode_query::<TaskQuery>(&text)
            .and_then(|q| switchboard_types::inbox::page_size(q.limit).map(drop)),
        other => return Err(format!("no query type {other}: name the seed after one")),
    };
    match refused {
        Ok(()) => Ok(()),
        Err(err) => well_formed(&err, input),
    }
}

/// A frame decodes, or is refused with an `ErrorMessage` that names what is wrong; a
/// decoded operation frame keeps its `request_id`.
fn frame(_: &str, input: &[u8]) -> Result<(), String> {
    let text = String::from_utf8_lossy(input);
    match ClientFrame::decode(&text) {
        Ok(_) => Ok(()),
        Err(bad) => {
            let shown = serde_json::to_value(&bad.error).map_err(|e| e.to_string())?;
            if shown["details"]["field"].as_str().is_none_or(str::is_empty) {
                return Err(format!("a refused frame without its field: {shown}"));
            }
            well_formed(&bad.error, input)
        }
    }
}

/// A cursor is one this server made (it decodes to what was encoded) or a `cursor`
/// validation error.
fn cursors(_: &str, input: &[u8]) -> Result<(), String> {
    let text = String::from_utf8_lossy(input);
    for order in [SortOrder::NewestFirst, SortOrder::OldestFirst] {
        match cursor::decode_inbox(&text, order) {
            Ok(seq) => {
                let again = cursor::encode_inbox(order, seq);
                if cursor::decode_inbox(&again, order).ok() != Some(seq) {
                    return Err(format!("inbox cursor {seq} does not round-trip"));
                }
            }
            Err(err) => field_is(&err.into_body(), "cursor")?,
        }
    }
    match cursor::decode_task(&text) {
        Ok(task) if task.0 <= 0 => Err(format!("task cursor to {task}")),
        Ok(_) => Ok(()),
        Err(err) => field_is(&err.into_body(), "cursor"),
    }
}

fn field_is(err: &ErrorBody, field: &str) -> Result<(), String> {
    match err.details.get("field").and_then(Value::as_str) {
        Some(f) if f == field => Ok(()),
        other => Err(format!("error names {other:?}, not {field}")),
    }
}

/// A timestamp that parses is RFC 3339 and survives a round trip through our own
/// rendering unchanged.
fn timestamp(_: &str, input: &[u8]) -> Result<(), String> {
    let text = String::from_utf8_lossy(input);
    let Some(at) = Timestamp::parse(&text) else {
        return Ok(());
    };
    let rendered = serde_json::to_value(at).map_err(|e| e.to_string())?;
    let again = rendered.as_str().and_then(Timestamp::parse);
    if again != Some(at) {
        return Err(format!(
            "{text:?} parsed to {rendered}, which reads back as {again:?}"
        ));
    }
    if chrono::DateTime::parse_from_rfc3339(text.trim()).is_err() {
        return Err(format!("{text:?} was accepted but is not RFC 3339"));
    }
    Ok(())
}

/// The rule and the documented pattern agree on every key.
fn idempotency_key(_: &str, input: &[u8]) -> Result<(), String> {
    let text = String::from_utf8_lossy(input);
    let documented = !text.is_empty()
        && text.len() <= MAX_IDEMPOTENCY_KEY
        && text.bytes().all(|b| (b'!'..=b'~').contains(&b));
    match check_idempotency_key(&text) {
        Ok(()) if !documented => Err(format!("{text:?} accepted against the documented rule")),
        Err(_) if documented => Err(format!("{text:?} refused though the rule allows it")),
        Ok(()) => Ok(()),
        Err(err) => field_is(&err, "Idempotency-Key"),
    }
}

/// An accepted callback URL is http(s), bounded, carries no credentials, and if its
/// host is an address, that address is public.
fn callback(_: &str, input: &[u8]) -> Result<(), String> {
    let text = String::from_utf8_lossy(input);
    let url = match urls::check(&text, false) {
        Ok(url) => url,
        Err(err) => return field_is(&err.into_body(), "callback_url"),
    };
    if !matches!(url.scheme(), "http" | "https") || text.len() > 2048 {
        return Err(format!("accepted {text:?}"));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(format!("accepted credentials in {text:?}"));
    }
    let ip = match url.host() {
        Some(url::Host::Ipv4(ip)) => Some(std::net::IpAddr::V4(ip)),
        Some(url::Host::Ipv6(ip)) => Some(std::net::IpAddr::V6(ip)),
        _ => None,
    };
    match ip {
        Some(ip) if !switchboard::core::egress::ip_ranges::is_public(ip) => {
            Err(format!("accepted non-public {ip} in {text:?}"))
        }
        _ => Ok(()),
    }
}

/// STOMP bytes from a client: decoded into frames and heart-beats or refused with an
/// error, never a panic; every frame decoded encodes and decodes back to itself.
fn stomp(_kind: &str, input: &[u8]) -> Result<(), String> {
    use bytes::BytesMut;
    use switchboard::transport::stomp::frame::{Incoming, Limits, StompCodec};
    use tokio_util::codec::{Decoder, Encoder};
    let mut codec = StompCodec::new(Limits {
        max_frame_bytes: 4096,
        max_headers: 16,
        max_header_bytes: 512,
    });
    let mut buf = BytesMut::from(input);
    loop {
        match codec.decode(&mut buf) {
            Ok(Some(Incoming::Frame(frame))) => {
                let mut out = BytesMut::new();
                codec
                    .encode(Some(frame.clone()), &mut out)
                    .map_err(|e| e.to_string())?;
                let mut again = StompCodec::new(Limits {
                    max_frame_bytes: usize::MAX,
                    max_headers: usize::MAX,
                    max_header_bytes: usize::MAX,
                });
                again.version = codec.version;
                match again.decode(&mut out) {
                    // A body without content-length ends at its first NUL: only frames
                    // without NULs in their body come back whole.
                    Ok(Some(Incoming::Frame(back))) if back == frame => {}
                    _ if frame.body.contains(&0) => {}
                    other => return Err(format!("{frame:?} came back as {other:?}")),
                }
            }
            Ok(Some(Incoming::HeartBeat)) => {}
            Ok(None) | Err(_) => return Ok(()),
        }
    }
}

/// A Wise Agents body: passes the gate or is refused with a reason, never a panic; what
/// passes, written back out, passes again with the same fields.
fn wise_body(_kind: &str, input: &[u8]) -> Result<(), String> {
    use switchboard::transport::stomp::wise::check;
    match check(input, 64 * 1024) {
        Ok(message) => match check(message.to_yaml().as_bytes(), usize::MAX) {
            Ok(back) if back == message => Ok(()),
            other => Err(format!("{message:?} written back reads as {other:?}")),
        },
        Err(_) => Ok(()),
    }
}
