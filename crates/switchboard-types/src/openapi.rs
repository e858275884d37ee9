//! The limits the validation enforces, written into the OpenAPI document.
//!
//! utoipa's attributes take only literals, so a length written there would be a second
//! copy of a constant that can drift. Instead this table names each constrained field
//! and takes its numbers from the same constants the `validate` functions use;
//! [`constrain`] writes them into the generated document and reports every rule whose
//! target is missing or of another shape, so a renamed field fails a test instead of
//! silently losing its documented limit.

use strum::VariantArray;
use utoipa::openapi::path::{Operation, Parameter};
use utoipa::openapi::schema::{Array, ArrayItems, KnownFormat, Object, Schema, SchemaFormat};
use utoipa::openapi::{OpenApi, RefOr};

use crate::agents::{AGENT_CAPABILITY_LIMITS, MAX_ADDRESS, MAX_ROLE};
use crate::approvals;
use crate::ids::MAX_ID_LEN;
use crate::inbox::MAX_PAGE;
use crate::messages::{
    MAX_ATTACHMENT_NAME, MAX_ATTACHMENT_URL, MAX_ATTACHMENTS, MAX_DETAIL, MAX_INLINE_ATTACHMENT,
    MAX_MARK, MAX_MEDIA_TYPE, MAX_RECIPIENTS, MAX_REFERENCE, MAX_TEXT, MessageKind, MessageType,
};
use crate::publish::{MAX_ADDRESSES, MAX_SEND_TO, MAX_TAG, MAX_WATCH};
use crate::task_state::TaskStatus;
use crate::tasks::{MAX_CALLBACK_URL, MAX_REASON, MAX_TASK_TEXT, REQUIRED_CAPABILITY_LIMITS};
use crate::teams::{MAX_CONTEXT_NAME, MAX_TEAM_NAME};
use crate::validate::{CapabilityLimits, MAX_IDEMPOTENCY_KEY};

/// The id rule of [`crate::ids::TeamId::parse`] (and of every id a client chooses) as a
/// pattern: the character set, and not `.` or `..` (which URL clients resolve away).
/// (Written without look-ahead, which not every generator of test data understands.)
pub const ID_PATTERN: &str =
    r"^(?:[A-Za-z0-9_-][A-Za-z0-9._-]*|\.[A-Za-z0-9_-][A-Za-z0-9._-]*|\.\.[A-Za-z0-9._-]+)$";

/// Canonical standard base64, as the decoder takes it: whole quanta, `=` padding only
/// at the end, and no stray bits in the last character before it ("AB==" is not).
pub const BASE64_PATTERN: &str =
    r"^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/][AQgw]==|[A-Za-z0-9+/]{2}[AEIMQUYcgkosw048]=)?$";

/// Text the validation trims before checking emptiness: at least one non-space.
///
/// Exactly what the validation's `trim` keeps, in a pattern ECMA-262 (the document's
/// readers) and Rust's regex read alike: their `\s` differ by U+0085, which Rust
/// trims and ECMA keeps, and U+FEFF, which ECMA's matches and Rust keeps (schemathesis
/// sent `"\u0085"` as a question, which the document allowed and the server refused).
pub const NOT_BLANK: &str = r"[^\s\u0085]|\ufeff";

/// No U+0000 anywhere: the rule of every string on every way in
/// (`switchboard_types::strict`), since no engine stores it alike. Written into every
/// string the document describes, so a generated client never sends one.
pub const NO_NUL: &str = r"^[^\u0000]*$";

/// [`NOT_BLANK`] and [`NO_NUL`] in one anchored pattern (JSON Schema's `pattern`
/// searches; one pattern per schema).
pub const TEXT_PATTERN: &str = r"^[^\u0000]*(?:[^\s\u0085\u0000]|\ufeff)[^\u0000]*$";

/// One part of a task reference: an id with each branch's length bound in the pattern.
const ID_PART: &str = r"(?:[A-Za-z0-9_-][A-Za-z0-9._-]{0,63}|\.[A-Za-z0-9_-][A-Za-z0-9._-]{0,62}|\.\.[A-Za-z0-9._-]{1,62})";

/// A W3C trace id: 32 lowercase hex digits, not all zero.
pub const TRACE_ID_PATTERN: &str = "^0*[1-9a-f][0-9a-f]*$";

/// The name of the schema every free-form JSON value (`data`, `result_data`, …) refers
/// to: any JSON, with no NUL in a string or a key, at any depth.
pub const JSON_VALUE: &str = "JsonValue";

/// What the server enforces on one field or parameter.
#[derive(Debug, Clone, Copy)]
pub enum Rule {
    /// A client-chosen id (agents, teams, tasks).
    Id,
    /// Free text, not blank, at most this many characters.
    Text(usize),
    /// Empty, or free text that is not blank, of at most this many characters.
    MaybeText(usize),
    /// Any string of at most this many characters.
    UpTo(usize),
    /// A list of `min..=max` entries, each following `each`.
    List {
        min: usize,
        max: usize,
        each: Option<&'static Rule>,
    },
    /// A capability list.
    Capabilities(CapabilityLimits),
    /// An `http(s)` URL of at most this many characters.
    HttpUrl(usize),
    /// `type/subtype`.
    MediaType,
    /// Standard base64 of at most this many decoded bytes.
    Base64(usize),
    /// `limit`: a page of 1 to [`MAX_PAGE`].
    PageSize,
    /// A sequence number or cursor position: 0 or more.
    NonNegative,
    /// An RFC 3339 timestamp.
    DateTime,
    /// An `Idempotency-Key`: 1 to [`MAX_IDEMPOTENCY_KEY`] visible ASCII characters.
    IdempotencyKey,
    /// A comma-separated list of these values (spaces and empty entries ignored).
    CommaList(fn() -> Vec<&'static str>),
    /// A comma-separated list of free-text entries.
    CommaText,
    /// A task reference: an id, or `id@originator`.
    TaskRef,
    /// A W3C trace id.
    TraceId,
    /// A lease's resource: a name or a path pattern (`leases::Pattern::parse`).
    Resource,
    /// A list of `min..=max` distinct entries, each following `each`.
    Distinct {
        min: usize,
        max: usize,
        each: &'static Rule,
    },
}

const ID: &Rule = &Rule::Id;
/// An address, a tag or a watch entry.
const TAG: &Rule = &Rule::Text(MAX_TAG);
const ADDRESSES: Rule = Rule::List {
    min: 0,
    max: MAX_ADDRESSES,
    each: Some(TAG),
};
const WATCH: Rule = Rule::List {
    min: 0,
    max: MAX_WATCH,
    each: Some(TAG),
};

/// Schema fields: (schema, property, rule).
pub const FIELDS: &[(&str, &str, Rule)] = &[
    ("CreateTeam", "team_id", Rule::Id),
    ("CreateTeam", "name", Rule::Text(MAX_TEAM_NAME)),
    ("UpdateTeam", "name", Rule::Text(MAX_TEAM_NAME)),
    (
        "UpdateTeam",
        "stomp_default_context",
        Rule::UpTo(MAX_CONTEXT_NAME),
    ),
    ("RegisterAgent", "agent_id", Rule::Id),
    ("RegisterAgent", "role", Rule::Text(MAX_ROLE)),
    (
        "RegisterAgent",
        "capabilities",
        Rule::Capabilities(AGENT_CAPABILITY_LIMITS),
    ),
    ("RegisterAgent", "address", Rule::UpTo(MAX_ADDRESS)),
    ("UpdateAgent", "role", Rule::Text(MAX_ROLE)),
    (
        "UpdateAgent",
        "capabilities",
        Rule::Capabilities(AGENT_CAPABILITY_LIMITS),
    ),
    ("UpdateAgent", "address", Rule::UpTo(MAX_ADDRESS)),
    ("SendMessage", "sender_agent_id", Rule::Id),
    (
        "SendMessage",
        "recipient_agent_ids",
        Rule::List {
            min: 1,
            max: MAX_RECIPIENTS,
            each: Some(ID),
        },
    ),
    (
        "SendMessage",
        "context_reference",
        Rule::Text(MAX_REFERENCE),
    ),
    ("SendMessage", "thread_id", Rule::Text(MAX_REFERENCE)),
    ("Content", "text", Rule::Text(MAX_TEXT)),
    (
        "Content",
        "attachments",
        Rule::List {
            min: 0,
            max: MAX_ATTACHMENTS,
            each: None,
        },
    ),
    ("Attachment", "name", Rule::Text(MAX_ATTACHMENT_NAME)),
    ("Attachment", "media_type", Rule::MediaType),
    ("Attachment", "url", Rule::HttpUrl(MAX_ATTACHMENT_URL)),
    ("Attachment", "data", Rule::Base64(MAX_INLINE_ATTACHMENT)),
    ("MarkRead", "agent_id", Rule::Id),
    (
        "MarkRead",
        "message_ids",
        Rule::List {
            min: 1,
            max: MAX_MARK,
            each: None,
        },
    ),
    ("RespondToMessage", "responder_agent_id", Rule::Id),
    (
        "RespondToMessage",
        "additional_recipients",
        Rule::List {
            min: 0,
            max: MAX_RECIPIENTS,
            each: Some(ID),
        },
    ),
    ("ResponseContent", "text", Rule::Text(MAX_TEXT)),
    ("BroadcastUpdate", "sender_agent_id", Rule::Id),
    ("BroadcastContent", "summary", Rule::Text(MAX_TEXT)),
    ("BroadcastContent", "details", Rule::MaybeText(MAX_DETAIL)),
    ("BroadcastContent", "impact", Rule::MaybeText(MAX_DETAIL)),
    ("RequestAssistance", "requester_agent_id", Rule::Id),
    (
        "RequestAssistance",
        "required_capabilities",
        Rule::Capabilities(AGENT_CAPABILITY_LIMITS),
    ),
    (
        "RequestAssistance",
        "target_agents",
        Rule::List {
            min: 0,
            max: MAX_RECIPIENTS,
            each: Some(ID),
        },
    ),
    ("RequestDetails", "description", Rule::Text(MAX_TEXT)),
    ("RequestDetails", "context", Rule::MaybeText(MAX_DETAIL)),
    ("TaskRequest", "task_id", Rule::Id),
    ("TaskRequest", "description", Rule::Text(MAX_TASK_TEXT)),
    ("TaskRequest", "originating_agent_id", Rule::Id),
    ("TaskRequest", "target_agent_id", Rule::Id),
    (
        "TaskRequest",
        "required_capabilities",
        Rule::Capabilities(REQUIRED_CAPABILITY_LIMITS),
    ),
    ("TaskRequest", "callback_url", Rule::UpTo(MAX_CALLBACK_URL)),
    ("TaskRequest", "parent_task_id", Rule::TaskRef),
    ("TaskRequest", "assignee_role", Rule::Text(MAX_ROLE)),
    ("ReleaseTask", "reason", Rule::Text(MAX_REASON)),
    ("LoopGuard", "supervisor_agent_id", Rule::Id),
    ("Handoff", "current_agent_id", Rule::Id),
    ("Handoff", "new_agent_id", Rule::Id),
    ("Handoff", "reason", Rule::Text(MAX_REASON)),
    ("Clarify", "question", Rule::Text(MAX_TASK_TEXT)),
    ("Answer", "answer", Rule::Text(MAX_TASK_TEXT)),
    ("Cancel", "reason", Rule::Text(MAX_REASON)),
    ("RegisterAgent", "addresses", ADDRESSES),
    ("RegisterAgent", "watch", WATCH),
    ("UpdateAgent", "addresses", ADDRESSES),
    ("UpdateAgent", "watch", WATCH),
    ("SetWatch", "agent_id", Rule::Id),
    ("SetWatch", "addresses", ADDRESSES),
    ("SetWatch", "watch", WATCH),
    ("Publish", "sender_agent_id", Rule::Id),
    ("Publish", "cause_by", Rule::Text(MAX_TAG)),
    (
        "Publish",
        "send_to",
        Rule::List {
            min: 1,
            max: MAX_SEND_TO,
            each: Some(TAG),
        },
    ),
    ("Publish", "thread_id", Rule::Text(MAX_REFERENCE)),
    (
        "RequestApproval",
        "summary",
        Rule::Text(approvals::MAX_SUMMARY_CHARS),
    ),
    (
        "RequestApproval",
        "details",
        Rule::UpTo(approvals::MAX_DETAILS_CHARS),
    ),
    (
        "RequestApproval",
        "options",
        Rule::Distinct {
            min: 2,
            max: approvals::MAX_OPTIONS,
            each: &Rule::Text(approvals::MAX_OPTION_CHARS),
        },
    ),
    ("RequestApproval", "task_id", Rule::TaskRef),
    (
        "DecideApproval",
        "decision",
        Rule::Text(approvals::MAX_OPTION_CHARS),
    ),
    (
        "DecideApproval",
        "comment",
        Rule::UpTo(approvals::MAX_COMMENT_CHARS),
    ),
    (
        "UpdateTeam",
        "approvers",
        Rule::List {
            min: 0,
            max: approvals::MAX_APPROVERS,
            each: Some(ID),
        },
    ),
    ("AcquireLease", "resource", Rule::Resource),
    (
        "AcquireLease",
        "reason",
        Rule::UpTo(crate::leases::MAX_REASON_CHARS),
    ),
];

/// Bodies of which at least one field must be given (the PATCH bodies).
pub const NOT_EMPTY: &[&str] = &["UpdateTeam", "UpdateAgent", "SetWatch"];

/// Parameters, by name wherever they appear.
pub const PARAMETERS: &[(&str, Rule)] = &[
    ("team_id", Rule::Id),
    ("agent_id", Rule::Id),
    ("task_id", Rule::Id),
    ("limit", Rule::PageSize),
    ("after_seq", Rule::NonNegative),
    ("after", Rule::NonNegative),
    ("trace_id", Rule::TraceId),
    ("since", Rule::NonNegative),
    ("since_timestamp", Rule::DateTime),
    ("cause_by", Rule::Text(MAX_TAG)),
    ("Idempotency-Key", Rule::IdempotencyKey),
    ("message_types", Rule::CommaList(names::<MessageType>)),
    ("kinds", Rule::CommaList(names::<MessageKind>)),
    ("status", Rule::CommaList(names::<TaskStatus>)),
    ("senders", Rule::CommaText),
    ("capability", Rule::CommaText),
    ("resource", Rule::Resource),
    ("holder", Rule::Id),
    ("asked_by", Rule::Id),
    ("q", Rule::Text(crate::search::MAX_QUERY_CHARS)),
    ("sender", Rule::Id),
    ("recipient", Rule::Id),
    ("until_timestamp", Rule::DateTime),
    ("assignee_role", Rule::Text(MAX_ROLE)),
];

/// `status` on the agent list is one value, not a list: the enum itself says so.
const ENUM_PARAMETERS: &[(&str, &str)] = &[
    ("/v1/teams/{team_id}/agents", "status"),
    ("/v1/approvals", "status"),
];

fn names<T: VariantArray + Copy + Into<&'static str>>() -> Vec<&'static str> {
    T::VARIANTS.iter().map(|v| (*v).into()).collect()
}

/// Writes every rule into `doc`; returns one line for each rule that found no target
/// of its shape (empty when the table and the document agree).
pub fn constrain(doc: &mut OpenApi) -> Vec<String> {
    let mut problems = Vec::new();
    let Some(components) = doc.components.as_mut() else {
        return vec!["the document has no components".to_owned()];
    };
    let schemas = &mut components.schemas;
    for (schema, property, rule) in FIELDS {
        let target = match schemas.get_mut(*schema) {
            Some(RefOr::T(Schema::Object(object))) => object.properties.get_mut(*property),
            _ => None,
        };
        if !target.is_some_and(|field| apply(field, rule)) {
            problems.push(format!("{schema}.{property}: no field of that shape"));
        }
    }
    for schema in NOT_EMPTY {
        match schemas.get_mut(*schema) {
            Some(RefOr::T(Schema::Object(object))) => object.min_properties = Some(1),
            _ => problems.push(format!("{schema}: no such object")),
        }
    }
    let mut used = vec![false; PARAMETERS.len()];
    for (path, item) in doc.paths.paths.iter_mut() {
        for operation in operations(item) {
            for parameter in operation.parameters.iter_mut().flatten() {
                if let RefOr::T(parameter) = parameter {
                    constrain_parameter(path, parameter, &mut used);
                }
            }
        }
    }
    for ((name, _), used) in PARAMETERS.iter().zip(used) {
        if !used {
            problems.push(format!("parameter {name}: in no operation"));
        }
    }
    crate::openapi_rules::state_the_rest(doc, &mut problems);
    problems
}

pub(crate) fn operations(
    item: &mut utoipa::openapi::PathItem,
) -> impl Iterator<Item = &mut Operation> {
    [
        &mut item.get,
        &mut item.put,
        &mut item.post,
        &mut item.delete,
        &mut item.patch,
    ]
    .into_iter()
    .filter_map(Option::as_mut)
}

fn constrain_parameter(path: &str, parameter: &mut Parameter, used: &mut [bool]) {
    if ENUM_PARAMETERS.contains(&(path, parameter.name.as_str())) {
        return;
    }
    let Some(i) = PARAMETERS.iter().position(|(n, _)| *n == parameter.name) else {
        return;
    };
    if let Some(schema) = parameter.schema.as_mut()
        && apply(schema, &PARAMETERS[i].1)
    {
        used[i] = true;
    }
}

/// Applies `rule` to a field's schema; false when the schema is not of the rule's shape.
fn apply(schema: &mut RefOr<Schema>, rule: &Rule) -> bool {
    match (schema, rule) {
        (RefOr::T(Schema::Array(array)), Rule::List { min, max, each }) => {
            list(array, *min, *max, *each)
        }
        (RefOr::T(Schema::Array(array)), Rule::Distinct { min, max, each }) => {
            array.unique_items = true;
            list(array, *min, *max, Some(each))
        }
        (RefOr::T(Schema::Array(array)), Rule::Capabilities(limits)) => list(
            array,
            0,
            limits.max_count,
            Some(&Rule::Text(limits.max_len)),
        ),
        (RefOr::T(Schema::Object(object)), rule) => apply_scalar(object, rule),
        _ => false,
    }
}

fn list(array: &mut Array, min: usize, max: usize, each: Option<&Rule>) -> bool {
    array.min_items = (min > 0).then_some(min);
    array.max_items = Some(max);
    match (&mut array.items, each) {
        (ArrayItems::RefOrSchema(item), Some(each)) => apply(item, each),
        (_, None) => true,
        _ => false,
    }
}

fn apply_scalar(object: &mut Object, rule: &Rule) -> bool {
    match *rule {
        Rule::Id => text(object, 1, MAX_ID_LEN, Some(ID_PATTERN.into())),
        Rule::Text(max) => text(object, 1, max, Some(TEXT_PATTERN.into())),
        Rule::MaybeText(max) => text(object, 0, max, Some(format!("^$|{TEXT_PATTERN}"))),
        Rule::UpTo(max) => text(object, 0, max, Some(NO_NUL.into())),
        Rule::HttpUrl(max) => text(
            object,
            0,
            max,
            Some(r"^[Hh][Tt][Tt][Pp][Ss]?://[^\u0000]*$".into()),
        ),
        Rule::MediaType => text(
            object,
            3,
            MAX_MEDIA_TYPE,
            Some(r"^[^\s/\u0000]+/[^\s\u0000]+$".into()),
        ),
        Rule::TaskRef => text(
            object,
            1,
            2 * MAX_ID_LEN + 1,
            Some(format!("^{ID_PART}(?:@{ID_PART})?$")),
        ),
        Rule::TraceId => text(object, 32, 32, Some(TRACE_ID_PATTERN.into())),
        Rule::Resource => text(
            object,
            1,
            crate::leases::MAX_RESOURCE_CHARS,
            Some(crate::leases::RESOURCE_PATTERN.into()),
        ),
        Rule::Base64(bytes) => text(
            object,
            0,
            bytes.div_ceil(3) * 4,
            Some(BASE64_PATTERN.into()),
        ),
        Rule::IdempotencyKey => text(object, 1, MAX_IDEMPOTENCY_KEY, Some("^[!-~]+$".into())),
        Rule::CommaList(values) => {
            let one = format!("(?:{})", values().join("|"));
            let pattern = format!(r"^\s*{one}?\s*(?:,\s*{one}?\s*)*$");
            text(object, 0, usize::MAX, Some(pattern))
        }
        Rule::CommaText => text(object, 0, usize::MAX, Some(NO_NUL.into())),
        Rule::DateTime => {
            object.format = Some(SchemaFormat::KnownFormat(KnownFormat::DateTime));
            true
        }
        Rule::PageSize => {
            object.minimum = Some(1.into());
            object.maximum = Some(MAX_PAGE.into());
            true
        }
        Rule::NonNegative => {
            object.minimum = Some(0.into());
            true
        }
        Rule::List { .. } | Rule::Distinct { .. } | Rule::Capabilities(_) => false,
    }
}

/// Length bounds (in characters, as JSON Schema and the validation count them) and an
/// optional pattern; `usize::MAX` means no stated maximum.
fn text(object: &mut Object, min: usize, max: usize, pattern: Option<String>) -> bool {
    object.min_length = (min > 0).then_some(min);
    object.max_length = (max < usize::MAX).then_some(max);
    object.pattern = pattern;
    true
}
