//! Messages, inbox entries and responses.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, OnceLock};

use sqlx::sqlite::SqliteRow;
use sqlx::{QueryBuilder, Row, Sqlite, SqliteConnection, SqliteExecutor};

use super::{StoreError, flag};
use crate::core::delivery::NewMessage;
use crate::core::messages::{
    Content, InboxFilter, InboxItem, MessageRecord, ResponseStatus, SortOrder,
};
use crate::core::time::Timestamp;

const MESSAGE_COLUMNS: &str = "m.pk, m.message_id, m.team_pk, m.kind, m.sender_pk, m.sender_role, \
     m.message_type, m.priority, m.content, m.requires_response, m.response_deadline, \
     m.context_reference, m.thread_id, m.in_reply_to, m.response_status, m.created_at";

fn corrupt(what: &str, value: &str) -> StoreError {
    StoreError::Corrupt(format!("{what} '{value}'"))
}

fn parse<T: std::str::FromStr>(row: &SqliteRow, column: &str) -> Result<T, StoreError> {
    let text: String = row.try_get(column)?;
    text.parse().map_err(|_| corrupt(column, &text))
}

/// Reads the [`MESSAGE_COLUMNS`], which every message query selects first. By
/// position, not name: replay decodes a hundred thousand rows a second, and a lookup by
/// name per column showed in its profile.
fn message_from_row(row: &SqliteRow) -> Result<MessageRecord, StoreError> {
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
    Ok(MessageRecord {
        pk: row.try_get(0)?,
        message_id: row.try_get(1)?,
        team_pk: row.try_get(2)?,
        kind: kind.parse().map_err(|_| corrupt("kind", &kind))?,
        sender_pk: row.try_get(4)?,
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
    })
}

/// Rows written together with a message.
#[derive(Default)]
pub struct PostExtras<'a> {
    /// `(original pk, responder pk, status)`: record the message as a response.
    pub response: Option<(i64, i64, ResponseStatus)>,
    /// `(agent pk, key, operation, request hash, answer)`: remember the first answer.
    pub idempotency: Option<(i64, &'a str, &'a str, &'a [u8; 32], &'a str)>,
}

/// The first answer to remember for an idempotency key.
#[derive(Debug, Clone)]
pub struct IdempotencyRow {
    pub agent_pk: i64,
    pub key: String,
    pub operation: &'static str,
    pub request_hash: [u8; 32],
    pub answer: String,
}

/// A message with its row already rendered, all but the two columns only the writer
/// knows (`pk` and `created_at`).
///
/// Rendering (the content as JSON, inside a JSON row) is the costliest part of a row;
/// done here, on the caller's thread, it runs in parallel across requests instead of on
/// the writer's thread, where every microsecond is spent once per message in series.
pub struct RenderedMessage {
    message: NewMessage,
    recipient_ids: Vec<String>,
    /// The JSON array elements 1–15 of [`FLUSH_POSTS`]'s message row, comma-separated,
    /// without brackets.
    columns: String,
}

impl RenderedMessage {
    pub fn new(
        message: NewMessage,
        recipient_ids: Vec<String>,
    ) -> Result<RenderedMessage, StoreError> {
        let m = &message;
        let row = to_json(&MessageColumns(
            &m.message_id,
            m.team_pk,
            m.kind.as_str(),
            m.sender_pk,
            &m.sender_role,
            m.message_type.as_str(),
            m.priority.as_str(),
            // JSON text inside a JSON string: `->>` hands SQLite the text as it is,
            // which is cheaper on SQLite's thread (the busiest) than re-rendering an
            // object.
            to_json(&StoredContent::of(&m.content))?,
            i64::from(m.requires_response),
            m.response_deadline.map(Timestamp::micros),
            &m.context_reference,
            &m.thread_id,
            &m.in_reply_to,
            m.response_status.map(ResponseStatus::as_str),
            to_json(&recipient_ids)?,
        ))?;
        let columns = row
            .strip_prefix('[')
            .and_then(|r| r.strip_suffix(']'))
            .ok_or_else(|| StoreError::Corrupt("a message row is not a JSON array".into()))?
            .to_owned();
        Ok(RenderedMessage {
            message,
            recipient_ids,
            columns,
        })
    }

    pub fn message(&self) -> &NewMessage {
        &self.message
    }
}

/// A message waiting for the batch's shared insert (see [`crate::store::writer`]).
pub struct StagedPost {
    rendered: RenderedMessage,
    /// Who gets an inbox entry.
    pub agent_pks: Vec<i64>,
    pub created_at: Timestamp,
    /// `(original pk, responder pk, status)` when the message is a response.
    pub response: Option<(i64, i64, ResponseStatus)>,
    pub idempotency: Option<IdempotencyRow>,
    slot: PostSlot,
}

impl StagedPost {
    pub fn new(
        rendered: RenderedMessage,
        agent_pks: Vec<i64>,
        created_at: Timestamp,
        response: Option<(i64, i64, ResponseStatus)>,
        idempotency: Option<IdempotencyRow>,
    ) -> StagedPost {
        StagedPost {
            rendered,
            agent_pks,
            created_at,
            response,
            idempotency,
            slot: PostSlot::default(),
        }
    }

    pub(crate) fn slot(&self) -> PostSlot {
        self.slot.clone()
    }
}

/// What a staged post became: its `pk` and the `(agent pk, seq)` of its inbox entries.
#[derive(Debug, Clone)]
pub struct PostResult {
    pub pk: i64,
    pub entries: Vec<(i64, i64)>,
}

/// Filled by the flush; read after the commit.
#[derive(Clone, Default)]
pub struct PostSlot(Arc<OnceLock<Result<PostResult, String>>>);

impl PostSlot {
    /// The outcome, once flushed; an error if the post could not be written or was
    /// never flushed (its batch failed first).
    pub fn outcome(&self) -> Result<PostResult, StoreError> {
        match self.0.get() {
            Some(Ok(result)) => Ok(result.clone()),
            Some(Err(reason)) => Err(StoreError::PostFailed(reason.clone())),
            None => Err(StoreError::Dropped),
        }
    }

    fn fill(&self, outcome: Result<PostResult, String>) {
        let _ = self.0.set(outcome);
    }
}

/// Message pks and per-agent inbox sequence numbers, handed out by the writer.
///
/// The writer is the only writer, so it can number rows itself instead of asking SQL
/// (`MAX(seq) + 1` per entry, `RETURNING` per row): that made the shared insert several
/// times cheaper. Counters are loaded lazily from the database and dropped after any
/// rollback, so they can never run ahead of what is committed.
#[derive(Default)]
pub struct IdCounters {
    last_message_pk: Option<i64>,
    last_seq: HashMap<i64, i64>,
}

impl IdCounters {
    pub fn forget(&mut self) {
        self.last_message_pk = None;
        self.last_seq.clear();
    }

    /// Makes sure the counters cover `posts`, reading what is missing in one query each.
    async fn load(
        &mut self,
        conn: &mut SqliteConnection,
        posts: &[StagedPost],
    ) -> Result<(), StoreError> {
        if self.last_message_pk.is_none() {
            let max: i64 = sqlx::query_scalar("SELECT COALESCE(MAX(pk), 0) FROM messages")
                .fetch_one(&mut *conn)
                .await?;
            self.last_message_pk = Some(max);
        }
        let mut missing: Vec<i64> = posts
            .iter()
            .flat_map(|p| p.agent_pks.iter().copied())
            .filter(|a| !self.last_seq.contains_key(a))
            .collect();
        if !missing.is_empty() {
            missing.sort_unstable();
            missing.dedup();
            let rows = sqlx::query(
                "SELECT j.value, COALESCE((SELECT MAX(i.seq) FROM inbox i WHERE i.agent_pk = j.value), 0)
                 FROM json_each(?) j",
            )
            .bind(to_json(&missing)?)
            .fetch_all(&mut *conn)
            .await?;
            for row in rows {
                self.last_seq.insert(row.try_get(0)?, row.try_get(1)?);
            }
        }
        Ok(())
    }
}

const FLUSH_POSTS: &str = "
    SAVEPOINT flush;
    INSERT INTO messages (pk, message_id, team_pk, kind, sender_pk, sender_role, message_type,
                          priority, content, requires_response, response_deadline,
                          context_reference, thread_id, in_reply_to, response_status,
                          recipient_ids, created_at)
    SELECT j.value->>0, j.value->>1, j.value->>2, j.value->>3, j.value->>4, j.value->>5,
           j.value->>6, j.value->>7, j.value->>8, j.value->>9, j.value->>10, j.value->>11,
           j.value->>12, j.value->>13, j.value->>14, j.value->>15, j.value->>16
    FROM jsonb_each(?) j;
    INSERT INTO inbox (agent_pk, seq, message_pk, sender_pk, kind, message_type, priority, created_at)
    SELECT e.value->>0, e.value->>1, m.pk, m.sender_pk, m.kind, m.message_type, m.priority, m.created_at
    FROM jsonb_each(?) j CROSS JOIN messages m CROSS JOIN jsonb_each(j.value, '$[1]') e
    WHERE m.pk = j.value->>0;
    INSERT INTO responses (original_pk, response_pk, responder_pk, status, created_at)
    SELECT j.value->>0, j.value->>1, j.value->>2, j.value->>3, j.value->>4
    FROM jsonb_each(?) j;
    INSERT INTO idempotency_keys (agent_pk, key, operation, request_hash, answer, created_at)
    SELECT j.value->>0, j.value->>1, j.value->>2, unhex(j.value->>3), j.value->>4, j.value->>5
    FROM jsonb_each(?) j;
    RELEASE flush;";

/// [`FLUSH_POSTS`] opening and committing the transaction: a whole batch of staged
/// posts in one round trip.
static FLUSH_POSTS_IN_TRANSACTION: LazyLock<String> =
    LazyLock::new(|| format!("BEGIN IMMEDIATE;{FLUSH_POSTS}\n    COMMIT;"));

/// [`FLUSH_POSTS`] committing an already open transaction.
static FLUSH_POSTS_AND_COMMIT: LazyLock<String> =
    LazyLock::new(|| format!("{FLUSH_POSTS}\n    COMMIT;"));

/// Writes every staged post with the few constant statements of [`FLUSH_POSTS`] (rows
/// passed as JSON arrays, walked with `jsonb_each` so each row is parsed once, not once
/// per column), inside a savepoint, with pks and sequence numbers from
/// `ids` (per agent in staging order, so in commit order). If the shared insert fails,
/// it is rolled back and each post is written on its own ([`post`]), so one bad post
/// fails alone. Every post's slot is filled either way.
pub async fn flush_posts(
    conn: &mut SqliteConnection,
    ids: &mut IdCounters,
    posts: Vec<StagedPost>,
) {
    match flush_together(conn, ids, &posts, FLUSH_POSTS).await {
        Ok(results) => fill(&posts, results),
        Err(err) => {
            tracing::warn!(error = %err, posts = posts.len(), "shared insert failed; writing posts one by one");
            ids.forget();
            if let Err(undo) = sqlx::raw_sql("ROLLBACK TO flush; RELEASE flush")
                .execute(&mut *conn)
                .await
            {
                tracing::debug!(error = %undo, "rolling back a failed shared insert");
            }
            one_by_one(conn, &posts).await;
        }
    }
}

/// Like [`flush_posts`], and commits the transaction in the same round trip (opening it
/// first when `begin`). An error means the transaction did not commit; the caller rolls
/// back.
pub async fn flush_posts_and_commit(
    conn: &mut SqliteConnection,
    ids: &mut IdCounters,
    posts: Vec<StagedPost>,
    begin: bool,
) -> Result<(), StoreError> {
    let sql = if begin {
        &FLUSH_POSTS_IN_TRANSACTION
    } else {
        &FLUSH_POSTS_AND_COMMIT
    };
    match flush_together(conn, ids, &posts, sql.as_str()).await {
        Ok(results) => {
            fill(&posts, results);
            Ok(())
        }
        Err(err) => {
            ids.forget();
            // If the flush's savepoint still exists, the shared insert failed and the
            // transaction is open: isolate the bad post(s) and commit the rest.
            // Otherwise BEGIN or COMMIT failed and the batch is lost.
            if sqlx::raw_sql("ROLLBACK TO flush; RELEASE flush")
                .execute(&mut *conn)
                .await
                .is_ok()
            {
                tracing::warn!(error = %err, posts = posts.len(), "shared insert failed; writing posts one by one");
                one_by_one(conn, &posts).await;
                sqlx::raw_sql("COMMIT").execute(&mut *conn).await?;
                Ok(())
            } else {
                for p in &posts {
                    p.slot.fill(Err(err.to_string()));
                }
                Err(err)
            }
        }
    }
}

fn fill(posts: &[StagedPost], results: Vec<PostResult>) {
    for (post, result) in posts.iter().zip(results) {
        post.slot.fill(Ok(result));
    }
}

/// The slow path: each post on its own, in its own savepoint.
async fn one_by_one(conn: &mut SqliteConnection, posts: &[StagedPost]) {
    for p in posts {
        let extras = PostExtras {
            response: p.response,
            idempotency: p.idempotency.as_ref().map(|i| {
                (
                    i.agent_pk,
                    i.key.as_str(),
                    i.operation,
                    &i.request_hash,
                    i.answer.as_str(),
                )
            }),
        };
        let outcome = post(
            conn,
            &p.rendered.message,
            &p.rendered.recipient_ids,
            &p.agent_pks,
            p.created_at,
            &extras,
        )
        .await
        .map(|(pk, entries)| PostResult { pk, entries })
        .map_err(|e| e.to_string());
        p.slot.fill(outcome);
    }
}

async fn flush_together(
    conn: &mut SqliteConnection,
    ids: &mut IdCounters,
    posts: &[StagedPost],
    sql: &str,
) -> Result<Vec<PostResult>, StoreError> {
    ids.load(conn, posts).await?;
    let mut next_pk = ids.last_message_pk.unwrap_or(0);
    // This flush's numbers, merged into the counters only once the rows are written.
    let mut seqs: HashMap<i64, i64> = HashMap::new();
    // Rows are serialised straight into one JSON array per table (tuples, no
    // intermediate `Value` trees): this runs for every message on the writer's thread.
    let mut messages = JsonRows::default();
    let mut number = itoa::Buffer::new();
    let mut entries = JsonRows::default();
    let mut responses = JsonRows::default();
    let mut keys = JsonRows::default();
    let mut results = Vec::with_capacity(posts.len());
    for p in posts {
        next_pk += 1;
        // `[pk, <rendered columns>, created_at]`
        messages.open_row();
        messages.raw(number.format(next_pk));
        messages.raw(",");
        messages.raw(&p.rendered.columns);
        messages.raw(",");
        messages.raw(number.format(p.created_at.micros()));
        messages.raw("]");
        let mut mine = Vec::with_capacity(p.agent_pks.len());
        for agent in &p.agent_pks {
            let seq = seqs
                .entry(*agent)
                .or_insert_with(|| ids.last_seq.get(agent).copied().unwrap_or(0));
            *seq += 1;
            mine.push((*agent, *seq));
        }
        // `[pk, [[agent, seq], …]]`: the message's row is looked up once for all its
        // entries (a broadcast has a hundred), not once per entry.
        entries.push(&(next_pk, &mine))?;
        if let Some((original_pk, responder_pk, status)) = p.response {
            responses.push(&(
                original_pk,
                next_pk,
                responder_pk,
                status.as_str(),
                p.created_at.micros(),
            ))?;
        }
        if let Some(i) = &p.idempotency {
            keys.push(&(
                i.agent_pk,
                &i.key,
                i.operation,
                hex::encode(i.request_hash),
                &i.answer,
                p.created_at.micros(),
            ))?;
        }
        results.push(PostResult {
            pk: next_pk,
            entries: mine,
        });
    }
    sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(messages.finish())
        .bind(entries.finish())
        .bind(responses.finish())
        .bind(keys.finish())
        .execute(&mut *conn)
        .await?;
    // Only now, with the rows written, do the counters move on.
    ids.last_message_pk = Some(next_pk);
    ids.last_seq.extend(seqs);
    Ok(results)
}

/// Columns 1–15 of a row of `messages` as [`FLUSH_POSTS`] reads it (a tuple struct
/// serialises as a JSON array; plain tuples stop at 12 fields).
#[derive(serde::Serialize)]
struct MessageColumns<'a>(
    &'a str,
    i64,
    &'a str,
    i64,
    &'a str,
    &'a str,
    &'a str,
    String,
    i64,
    Option<i64>,
    &'a Option<String>,
    &'a Option<String>,
    &'a Option<String>,
    Option<&'a str>,
    String,
);

/// A JSON array of rows, built by appending serialised rows.
#[derive(Default)]
struct JsonRows(Vec<u8>);

impl JsonRows {
    fn push<T: serde::Serialize>(&mut self, row: &T) -> Result<(), StoreError> {
        self.0.push(if self.0.is_empty() { b'[' } else { b',' });
        serde_json::to_writer(&mut self.0, row)
            .map_err(|e| StoreError::Corrupt(format!("JSON row: {e}")))
    }

    /// Starts a row written piecewise with [`JsonRows::raw`]; the caller closes it.
    fn open_row(&mut self) {
        self.0
            .extend_from_slice(if self.0.is_empty() { b"[[" } else { b",[" });
    }

    /// Appends JSON text that is already valid in place.
    fn raw(&mut self, json: &str) {
        self.0.extend_from_slice(json.as_bytes());
    }

    fn finish(mut self) -> String {
        if self.0.is_empty() {
            self.0.push(b'[');
        }
        self.0.push(b']');
        // serde_json writes UTF-8 only.
        String::from_utf8(self.0).unwrap_or_default()
    }
}

const POST_MESSAGE: &str = "SAVEPOINT post;
    INSERT INTO messages (message_id, team_pk, kind, sender_pk, sender_role, message_type, priority,
                          content, requires_response, response_deadline, context_reference,
                          thread_id, in_reply_to, response_status, recipient_ids, created_at)
    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING pk;";

const POST_INBOX: &str = "
    INSERT INTO inbox (agent_pk, seq, message_pk, sender_pk, kind, message_type, priority, created_at)
    SELECT r.value,
           COALESCE((SELECT MAX(i.seq) FROM inbox i WHERE i.agent_pk = r.value), 0) + 1,
           (SELECT pk FROM messages WHERE message_id = ?), ?, ?, ?, ?, ?
    FROM json_each(?) r
    RETURNING agent_pk, seq;";

const POST_RESPONSE: &str = "
    INSERT INTO responses (original_pk, response_pk, responder_pk, status, created_at)
    VALUES (?, (SELECT pk FROM messages WHERE message_id = ?), ?, ?, ?);";

const POST_IDEMPOTENCY: &str = "
    INSERT INTO idempotency_keys (agent_pk, key, operation, request_hash, answer, created_at)
    VALUES (?, ?, ?, ?, ?, ?);";

/// Writes one message, its inbox entries and `extras` in one query inside its own
/// savepoint, rolled back on any failure so nothing is left behind. The slow path of
/// [`flush_posts`], used to isolate a post that makes the shared insert fail. Returns the
/// message's `pk` and the `(agent pk, seq)` of each inbox entry.
pub async fn post(
    conn: &mut SqliteConnection,
    m: &NewMessage,
    recipient_ids: &[String],
    agent_pks: &[i64],
    created_at: Timestamp,
    extras: &PostExtras<'_>,
) -> Result<(i64, Vec<(i64, i64)>), StoreError> {
    let content = to_json(&StoredContent::of(&m.content))?;
    let recipients = to_json(recipient_ids)?;
    let agents = to_json(agent_pks)?;

    let mut sql = String::with_capacity(1024);
    sql.push_str(POST_MESSAGE);
    if !agent_pks.is_empty() {
        sql.push_str(POST_INBOX);
    }
    if extras.response.is_some() {
        sql.push_str(POST_RESPONSE);
    }
    if extras.idempotency.is_some() {
        sql.push_str(POST_IDEMPOTENCY);
    }
    sql.push_str("\n    RELEASE post;");

    let mut q = sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(&m.message_id)
        .bind(m.team_pk)
        .bind(m.kind.as_str())
        .bind(m.sender_pk)
        .bind(&m.sender_role)
        .bind(m.message_type.as_str())
        .bind(m.priority.as_str())
        .bind(content)
        .bind(m.requires_response)
        .bind(m.response_deadline.map(Timestamp::micros))
        .bind(&m.context_reference)
        .bind(&m.thread_id)
        .bind(&m.in_reply_to)
        .bind(m.response_status.map(ResponseStatus::as_str))
        .bind(recipients)
        .bind(created_at.micros());
    if !agent_pks.is_empty() {
        q = q
            .bind(&m.message_id)
            .bind(m.sender_pk)
            .bind(m.kind.as_str())
            .bind(m.message_type.as_str())
            .bind(m.priority.as_str())
            .bind(created_at.micros())
            .bind(agents);
    }
    if let Some((original_pk, responder_pk, status)) = extras.response {
        q = q
            .bind(original_pk)
            .bind(&m.message_id)
            .bind(responder_pk)
            .bind(status.as_str())
            .bind(created_at.micros());
    }
    if let Some((agent_pk, key, operation, hash, answer)) = extras.idempotency {
        q = q
            .bind(agent_pk)
            .bind(key)
            .bind(operation)
            .bind(hash.as_slice())
            .bind(answer)
            .bind(created_at.micros());
    }
    let rows = match q.fetch_all(&mut *conn).await {
        Ok(rows) => rows,
        Err(err) => {
            // Undo whatever statements of the query ran before the failing one.
            if let Err(undo) = sqlx::raw_sql("ROLLBACK TO post; RELEASE post")
                .execute(&mut *conn)
                .await
            {
                tracing::warn!(error = %undo, "rolling back a failed post");
            }
            return Err(err.into());
        }
    };
    let mut rows = rows.iter();
    let pk: i64 = rows
        .next()
        .ok_or_else(|| StoreError::Corrupt("the message insert returned no pk".into()))?
        .try_get(0)?;
    let entries = rows
        .map(|r| Ok((r.try_get::<i64, _>(0)?, r.try_get::<i64, _>(1)?)))
        .collect::<Result<Vec<_>, StoreError>>()?;
    Ok((pk, entries))
}

/// Content as stored: empty `data` and `attachments` are left out (most messages have
/// neither) and come back as their defaults when read.
#[derive(serde::Serialize)]
struct StoredContent<'a> {
    text: &'a str,
    #[serde(skip_serializing_if = "serde_json::Map::is_empty")]
    data: &'a serde_json::Map<String, serde_json::Value>,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    attachments: &'a [crate::core::messages::Attachment],
}

impl<'a> StoredContent<'a> {
    fn of(content: &'a Content) -> Self {
        StoredContent {
            text: &content.text,
            data: &content.data,
            attachments: &content.attachments,
        }
    }
}

/// JSON text for a TEXT column.
fn to_json<T: serde::Serialize + ?Sized>(value: &T) -> Result<String, StoreError> {
    serde_json::to_string(value).map_err(|e| StoreError::Corrupt(format!("JSON column: {e}")))
}

/// A message of a team by id.
pub async fn find<'e, E: SqliteExecutor<'e>>(
    ex: E,
    team_pk: i64,
    message_id: &str,
) -> Result<Option<MessageRecord>, StoreError> {
    let sql = format!(
        "SELECT {MESSAGE_COLUMNS} FROM messages m WHERE m.message_id = ? AND m.team_pk = ?"
    );
    sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(message_id)
        .bind(team_pk)
        .fetch_optional(ex)
        .await?
        .as_ref()
        .map(message_from_row)
        .transpose()
}

/// The agent's inbox entry for a message: `(seq, read_at)`.
pub async fn inbox_entry<'e, E: SqliteExecutor<'e>>(
    ex: E,
    agent_pk: i64,
    message_pk: i64,
) -> Result<Option<(i64, Option<Timestamp>)>, StoreError> {
    let row = sqlx::query("SELECT seq, read_at FROM inbox WHERE message_pk = ? AND agent_pk = ?")
        .bind(message_pk)
        .bind(agent_pk)
        .fetch_optional(ex)
        .await?;
    row.map(|r| {
        Ok((
            r.try_get::<i64, _>("seq")?,
            r.try_get::<Option<i64>, _>("read_at")?
                .map(Timestamp::from_micros),
        ))
    })
    .transpose()
}

/// The agent ids a message was addressed to.
pub async fn recipient_ids<'e, E: SqliteExecutor<'e>>(
    ex: E,
    message_pk: i64,
) -> Result<Vec<String>, StoreError> {
    let text: String = sqlx::query_scalar("SELECT recipient_ids FROM messages WHERE pk = ?")
        .bind(message_pk)
        .fetch_one(ex)
        .await?;
    serde_json::from_str(&text).map_err(|e| StoreError::Corrupt(format!("recipient_ids: {e}")))
}

/// Agents that marked a message read.
pub async fn read_by<'e, E: SqliteExecutor<'e>>(
    ex: E,
    message_pk: i64,
) -> Result<Vec<i64>, StoreError> {
    Ok(sqlx::query_scalar(
        "SELECT agent_pk FROM inbox WHERE message_pk = ? AND read_at IS NOT NULL ORDER BY read_at",
    )
    .bind(message_pk)
    .fetch_all(ex)
    .await?)
}

/// Responses recorded on a message, oldest first:
/// `(response message id, responder pk, status, timestamp)`.
pub async fn responses_to<'e, E: SqliteExecutor<'e>>(
    ex: E,
    original_pk: i64,
) -> Result<Vec<(String, i64, ResponseStatus, Timestamp)>, StoreError> {
    let rows = sqlx::query(
        "SELECT m.message_id, r.responder_pk, r.status, r.created_at
         FROM responses r JOIN messages m ON m.pk = r.response_pk
         WHERE r.original_pk = ? ORDER BY r.created_at, r.response_pk",
    )
    .bind(original_pk)
    .fetch_all(ex)
    .await?;
    rows.iter()
        .map(|r| {
            Ok((
                r.try_get("message_id")?,
                r.try_get("responder_pk")?,
                parse(r, "status")?,
                Timestamp::from_micros(r.try_get("created_at")?),
            ))
        })
        .collect()
}

/// Statuses of the responses one responder gave to a message.
pub async fn response_statuses(
    conn: &mut SqliteConnection,
    original_pk: i64,
    responder_pk: i64,
) -> Result<Vec<ResponseStatus>, StoreError> {
    let rows =
        sqlx::query("SELECT status FROM responses WHERE original_pk = ? AND responder_pk = ?")
            .bind(original_pk)
            .bind(responder_pk)
            .fetch_all(conn)
            .await?;
    rows.iter().map(|r| parse(r, "status")).collect()
}

/// Marks the agent's entries of `message_ids` read. Returns `(marked, already_read,
/// not_found)`, each in the order the ids were given. A message not addressed to the
/// agent counts as not found and is not touched.
pub async fn mark_read(
    conn: &mut SqliteConnection,
    agent_pk: i64,
    message_ids: &[String],
    now: Timestamp,
) -> Result<(Vec<String>, Vec<String>, Vec<String>), StoreError> {
    let ids = to_json(message_ids)?;
    let rows = sqlx::query(
        "SELECT m.message_id, i.message_pk, i.read_at
         FROM messages m JOIN inbox i ON i.message_pk = m.pk AND i.agent_pk = ?
         WHERE m.message_id IN (SELECT value FROM json_each(?))",
    )
    .bind(agent_pk)
    .bind(&ids)
    .fetch_all(&mut *conn)
    .await?;
    let mut state: HashMap<String, bool> = HashMap::with_capacity(rows.len());
    let mut to_mark = Vec::new();
    for row in &rows {
        let id: String = row.try_get("message_id")?;
        let read: Option<i64> = row.try_get("read_at")?;
        if read.is_none() {
            to_mark.push(row.try_get::<i64, _>("message_pk")?);
        }
        state.insert(id, read.is_some());
    }
    if !to_mark.is_empty() {
        let pks = to_json(&to_mark)?;
        sqlx::query(
            "UPDATE inbox SET read_at = ?
             WHERE agent_pk = ? AND read_at IS NULL AND message_pk IN (SELECT value FROM json_each(?))",
        )
        .bind(now.micros())
        .bind(agent_pk)
        .bind(pks)
        .execute(&mut *conn)
        .await?;
    }
    let (mut marked, mut already, mut missing) = (Vec::new(), Vec::new(), Vec::new());
    for id in message_ids {
        match state.get(id) {
            Some(false) => marked.push(id.clone()),
            Some(true) => already.push(id.clone()),
            None => missing.push(id.clone()),
        }
    }
    Ok((marked, already, missing))
}

/// Appends the filter's conditions (on `inbox i`, and `messages m` for the thread).
fn push_filter(q: &mut QueryBuilder<Sqlite>, agent_pk: i64, f: &InboxFilter) {
    q.push(" WHERE i.agent_pk = ").push_bind(agent_pk);
    fn push_in<T: ToString>(q: &mut QueryBuilder<Sqlite>, column: &str, values: &[T]) {
        if values.is_empty() {
            // An empty allow-list matches nothing.
            q.push(" AND 0");
            return;
        }
        q.push(format_args!(" AND {column} IN ("));
        let mut list = q.separated(", ");
        for v in values {
            list.push_bind(v.to_string());
        }
        q.push(")");
    }
    if let Some(types) = &f.message_types {
        let names: Vec<&str> = types.iter().map(|t| t.as_str()).collect();
        push_in(q, "i.message_type", &names);
    }
    if let Some(kinds) = &f.kinds {
        let names: Vec<&str> = kinds.iter().map(|k| k.as_str()).collect();
        push_in(q, "i.kind", &names);
    }
    if let Some(senders) = &f.sender_pks {
        if senders.is_empty() {
            q.push(" AND 0");
        } else {
            q.push(" AND i.sender_pk IN (");
            let mut list = q.separated(", ");
            for pk in senders {
                list.push_bind(*pk);
            }
            q.push(")");
        }
    }
    if let Some(priority) = f.priority {
        q.push(" AND i.priority = ").push_bind(priority.as_str());
    }
    if f.unread_only {
        q.push(" AND i.read_at IS NULL");
    }
    if let Some(since) = f.since {
        q.push(" AND i.created_at > ").push_bind(since.micros());
    }
    if let Some(thread) = &f.thread_id {
        q.push(" AND m.thread_id = ").push_bind(thread.clone());
    }
}

/// How many entries match (ignoring paging) and how many of those are unread.
pub async fn count_inbox<'e, E: SqliteExecutor<'e>>(
    ex: E,
    agent_pk: i64,
    f: &InboxFilter,
) -> Result<(i64, i64), StoreError> {
    let mut q = QueryBuilder::<Sqlite>::new(
        "SELECT COUNT(*), COALESCE(SUM(i.read_at IS NULL), 0) FROM inbox i",
    );
    if f.thread_id.is_some() {
        q.push(" JOIN messages m ON m.pk = i.message_pk");
    }
    push_filter(&mut q, agent_pk, f);
    let row = q.build().fetch_one(ex).await?;
    Ok((row.try_get(0)?, row.try_get(1)?))
}

/// One page of the inbox, after the cursor `after` (a sequence number) in `order`.
pub async fn list_inbox<'e, E: SqliteExecutor<'e>>(
    ex: E,
    agent_pk: i64,
    f: &InboxFilter,
    order: SortOrder,
    after: Option<i64>,
    limit: i64,
) -> Result<Vec<InboxItem>, StoreError> {
    let mut q = QueryBuilder::<Sqlite>::new(format!(
        "SELECT {MESSAGE_COLUMNS}, i.seq, i.read_at FROM inbox i JOIN messages m ON m.pk = i.message_pk"
    ));
    push_filter(&mut q, agent_pk, f);
    match (order, after) {
        (SortOrder::NewestFirst, Some(seq)) => {
            q.push(" AND i.seq < ").push_bind(seq);
        }
        (SortOrder::OldestFirst, Some(seq)) => {
            q.push(" AND i.seq > ").push_bind(seq);
        }
        _ => {}
    }
    q.push(match order {
        SortOrder::NewestFirst => " ORDER BY i.seq DESC",
        SortOrder::OldestFirst => " ORDER BY i.seq ASC",
    });
    q.push(" LIMIT ").push_bind(limit);
    let rows = q.build().fetch_all(ex).await?;
    rows.iter()
        .map(|row| {
            Ok(InboxItem {
                seq: row.try_get("seq")?,
                read_at: row
                    .try_get::<Option<i64>, _>("read_at")?
                    .map(Timestamp::from_micros),
                message: message_from_row(row)?,
            })
        })
        .collect()
}

/// Per-agent counts of a team.
#[derive(Debug, Clone, Copy, Default)]
pub struct Counts {
    pub sent: i64,
    pub received: i64,
    pub unread: i64,
}

/// Sent, received and unread counts of every agent of a team, by agent pk.
pub async fn team_counts<'e, E: SqliteExecutor<'e> + Copy>(
    ex: E,
    team_pk: i64,
) -> Result<HashMap<i64, Counts>, StoreError> {
    let mut counts: HashMap<i64, Counts> = HashMap::new();
    let sent = sqlx::query(
        "SELECT sender_pk, COUNT(*) FROM messages WHERE team_pk = ? GROUP BY sender_pk",
    )
    .bind(team_pk)
    .fetch_all(ex)
    .await?;
    for row in sent {
        counts.entry(row.try_get(0)?).or_default().sent = row.try_get(1)?;
    }
    let received = sqlx::query(
        "SELECT i.agent_pk, COUNT(*), COALESCE(SUM(i.read_at IS NULL), 0)
         FROM inbox i JOIN agents a ON a.pk = i.agent_pk
         WHERE a.team_pk = ? GROUP BY i.agent_pk",
    )
    .bind(team_pk)
    .fetch_all(ex)
    .await?;
    for row in received {
        let c = counts.entry(row.try_get(0)?).or_default();
        c.received = row.try_get(1)?;
        c.unread = row.try_get(2)?;
    }
    Ok(counts)
}

/// `(responder pk, microseconds from original to response)` for every response in a team.
pub async fn response_latencies<'e, E: SqliteExecutor<'e>>(
    ex: E,
    team_pk: i64,
) -> Result<Vec<(i64, i64)>, StoreError> {
    let rows = sqlx::query(
        "SELECT r.responder_pk, r.created_at - o.created_at
         FROM responses r JOIN messages o ON o.pk = r.original_pk
         WHERE o.team_pk = ?",
    )
    .bind(team_pk)
    .fetch_all(ex)
    .await?;
    rows.iter()
        .map(|r| Ok((r.try_get(0)?, r.try_get(1)?)))
        .collect()
}
