//! Row encoding shared by the SQLite modules: the message columns every message query
//! selects, JSON rows for the shared insert, and the content as stored.

use sqlx::Row;
use sqlx::sqlite::SqliteRow;
use switchboard_types::ids::{AgentPk, MessagePk, TeamPk};
use switchboard_types::messages::{Attachment, Content, ResponseStatus};
use switchboard_types::time::Timestamp;

use crate::store::StoreError;
use crate::store::records::{MessageRecord, PublishedRecord};

/// Reads a `0/1` column as a bool (SQLite has no boolean type).
pub(super) fn flag(value: i64) -> bool {
    value != 0
}

pub(super) const MESSAGE_COLUMNS: &str = "m.pk, m.message_id, m.team_pk, m.kind, m.sender_pk, m.sender_role, \
     m.message_type, m.priority, m.content, m.requires_response, m.response_deadline, \
     m.context_reference, m.thread_id, m.in_reply_to, m.response_status, m.created_at, \
     m.cause_by, m.send_to, m.instruct_content, m.via, m.route";

pub(super) fn corrupt(what: &str, value: &str) -> StoreError {
    StoreError::Corrupt(format!("{what} '{value}'"))
}

pub(super) fn parse<T: std::str::FromStr>(row: &SqliteRow, column: &str) -> Result<T, StoreError> {
    let text: String = row.try_get(column)?;
    text.parse().map_err(|_| corrupt(column, &text))
}

/// Reads the [`MESSAGE_COLUMNS`], which every message query selects first. By
/// position, not name: replay decodes a hundred thousand rows a second, and a lookup by
/// name per column showed in its profile.
pub(super) fn message_from_row(row: &SqliteRow) -> Result<MessageRecord, StoreError> {
    let text = |i: usize, what: &str| -> Result<String, StoreError> {
        row.try_get::<String, _>(i)
            .map_err(|e| StoreError::Corrupt(format!("{what}: {e}")))
    };
    let content: String = row.try_get(8)?;
    let content: Content = serde_json::from_str(&content)
        .map_err(|e| StoreError::Corrupt(format!("message content: {e}")))?;
    let enum_at = |i: usize, what: &str| -> Result<String, StoreError> { text(i, what) };
    let kind = enum_at(3, "kind")?;
    let message_type = enum_at(6, "message_type")?;
    let priority = enum_at(7, "priority")?;
    let response_status: Option<String> = row.try_get(14)?;
    let cause_by: Option<String> = row.try_get(16)?;
    let via: Option<String> = row.try_get(19)?;
    let route: Option<String> = row.try_get(20)?;
    let published = match cause_by {
        None => None,
        Some(cause_by) => {
            let send_to: Option<String> = row.try_get(17)?;
            let send_to: Vec<String> = serde_json::from_str(send_to.as_deref().unwrap_or("[]"))
                .map_err(|e| StoreError::Corrupt(format!("send_to: {e}")))?;
            let instruct: Option<String> = row.try_get(18)?;
            let instruct_content = instruct
                .map(|i| serde_json::from_str(&i))
                .transpose()
                .map_err(|e| StoreError::Corrupt(format!("instruct_content: {e}")))?;
            Some(PublishedRecord {
                cause_by,
                send_to,
                instruct_content,
            })
        }
    };
    Ok(MessageRecord {
        pk: MessagePk(row.try_get(0)?),
        message_id: row.try_get(1)?,
        team_pk: TeamPk(row.try_get(2)?),
        kind: kind.parse().map_err(|_| corrupt("kind", &kind))?,
        sender_pk: AgentPk(row.try_get(4)?),
        sender_role: row.try_get(5)?,
        message_type: message_type
            .parse()
            .map_err(|_| corrupt("message_type", &message_type))?,
        priority: priority
            .parse()
            .map_err(|_| corrupt("priority", &priority))?,
        content,
        requires_response: flag(row.try_get(9)?),
        response_deadline: row
            .try_get::<Option<i64>, _>(10)?
            .map(Timestamp::from_micros),
        context_reference: row.try_get(11)?,
        thread_id: row.try_get(12)?,
        in_reply_to: row.try_get(13)?,
        response_status: response_status
            .map(|s| {
                s.parse::<ResponseStatus>()
                    .map_err(|_| corrupt("response_status", &s))
            })
            .transpose()?,
        created_at: Timestamp::from_micros(row.try_get(15)?),
        published,
        via: via
            .map(|v| v.parse().map_err(|_| corrupt("via", &v)))
            .transpose()?,
        route: route
            .map(|r| r.parse().map_err(|_| corrupt("route", &r)))
            .transpose()?,
    })
}

/// Columns 1–17 of a row of `messages` as [`FLUSH_POSTS`] reads it (a tuple struct
/// serialises as a JSON array; plain tuples stop at 12 fields).
#[derive(serde::Serialize)]
pub(super) struct MessageColumns<'a>(
    pub(super) &'a str,
    pub(super) i64,
    pub(super) &'a str,
    pub(super) i64,
    pub(super) &'a str,
    pub(super) &'a str,
    pub(super) &'a str,
    pub(super) String,
    pub(super) i64,
    pub(super) Option<i64>,
    pub(super) &'a Option<String>,
    pub(super) &'a Option<String>,
    pub(super) &'a Option<String>,
    pub(super) Option<&'a str>,
    pub(super) String,
    pub(super) Option<&'a str>,
    pub(super) Option<&'a str>,
);

/// A JSON array of rows, built by appending serialised rows.
#[derive(Default)]
pub(super) struct JsonRows(Vec<u8>);

impl JsonRows {
    pub(super) fn push<T: serde::Serialize>(&mut self, row: &T) -> Result<(), StoreError> {
        self.0.push(if self.0.is_empty() { b'[' } else { b',' });
        serde_json::to_writer(&mut self.0, row)
            .map_err(|e| StoreError::Corrupt(format!("JSON row: {e}")))
    }

    /// Starts a row written piecewise with [`JsonRows::raw`]; the caller closes it.
    pub(super) fn open_row(&mut self) {
        self.0
            .extend_from_slice(if self.0.is_empty() { b"[[" } else { b",[" });
    }

    /// Appends JSON text that is already valid in place.
    pub(super) fn raw(&mut self, json: &str) {
        self.0.extend_from_slice(json.as_bytes());
    }

    pub(super) fn finish(mut self) -> Result<String, StoreError> {
        if self.0.is_empty() {
            self.0.push(b'[');
        }
        self.0.push(b']');
        // serde_json and the raw fragments (all `&str`) write UTF-8 only.
        String::from_utf8(self.0).map_err(|e| StoreError::Corrupt(format!("JSON rows: {e}")))
    }
}

/// Content as stored: empty `data` and `attachments` are left out (most messages have
/// neither) and come back as their defaults when read.
#[derive(serde::Serialize)]
pub(super) struct StoredContent<'a> {
    text: &'a str,
    #[serde(skip_serializing_if = "serde_json::Map::is_empty")]
    data: &'a serde_json::Map<String, serde_json::Value>,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    attachments: &'a [Attachment],
}

impl<'a> StoredContent<'a> {
    pub(super) fn of(content: &'a Content) -> Self {
        StoredContent {
            text: &content.text,
            data: &content.data,
            attachments: &content.attachments,
        }
    }
}

/// JSON text for a TEXT column.
pub(super) fn to_json<T: serde::Serialize + ?Sized>(value: &T) -> Result<String, StoreError> {
    serde_json::to_string(value).map_err(|e| StoreError::Corrupt(format!("JSON column: {e}")))
}
