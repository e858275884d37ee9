//! The slow path of the shared insert: one post on its own, in its own savepoint, used
//! to isolate a post that makes the batch's insert fail so that it fails alone.

use std::sync::LazyLock;

use sqlx::{Row, SqliteConnection};
use switchboard_types::ids::{AgentPk, MessagePk};

use super::message_row::{MESSAGE_BINDS, MESSAGE_ROW};
use super::message_staging::StagedPost;
use super::rows::{Query, to_json, values_list};
use crate::model::PostResult;
use crate::store::StoreError;

/// The message row ([`MESSAGE_ROW`], bound by
/// [`RenderedMessage::bind_row`](super::message_row::RenderedMessage::bind_row)).
static POST_MESSAGE: LazyLock<String> = LazyLock::new(|| {
    let row = values_list(MESSAGE_BINDS, 1);
    format!(
        "SAVEPOINT post;
    INSERT INTO messages ({MESSAGE_ROW})
    VALUES {row} RETURNING pk;"
    )
});

const POST_INBOX: &str = "
    INSERT INTO inbox (agent_pk, seq, message_pk, sender_pk, kind, message_type, priority,
                       created_at, cause_by, thread_id, news)
    SELECT r.value,
           COALESCE((SELECT c.last_seq FROM inbox_counts c WHERE c.agent_pk = r.value), 0) + 1,
           (SELECT pk FROM messages WHERE message_id = ?), ?, ?, ?, ?, ?, ?, ?,
           r.value NOT IN (SELECT q.value FROM json_each(?) q)
    FROM json_each(?) r
    RETURNING agent_pk, seq;";

const POST_RESPONSE: &str = "
    INSERT INTO responses (original_pk, response_pk, responder_pk, status, created_at)
    VALUES (?, (SELECT pk FROM messages WHERE message_id = ?), ?, ?, ?);";

const POST_IDEMPOTENCY: &str = "
    INSERT INTO idempotency_keys (agent_pk, key, operation, request_hash, answer, created_at)
    VALUES (?, ?, ?, ?, ?, ?);";

/// Writes one post (its message, inbox entries, response link and idempotency key) in
/// one query inside its own savepoint, rolled back on any failure so nothing is left
/// behind. Returns the message's key and the `(agent, seq)` of each inbox entry.
pub(super) async fn message_staging_one(
    conn: &mut SqliteConnection,
    p: &StagedPost,
) -> Result<PostResult, StoreError> {
    let mut sql = String::with_capacity(1024);
    sql.push_str(&POST_MESSAGE);
    if !p.deliver_to.is_empty() {
        sql.push_str(POST_INBOX);
    }
    if p.response.is_some() {
        sql.push_str(POST_RESPONSE);
    }
    if p.idempotency.is_some() {
        sql.push_str(POST_IDEMPOTENCY);
    }
    sql.push_str("\n    RELEASE post;");
    let query = bind_post(sqlx::query(sqlx::AssertSqlSafe(sql)), p)?;
    let rows = match query.fetch_all(&mut *conn).await {
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
        .map(|r| Ok((AgentPk(r.try_get(0)?), r.try_get::<i64, _>(1)?)))
        .collect::<Result<Vec<_>, StoreError>>()?;
    Ok(PostResult {
        pk: MessagePk(pk),
        entries,
    })
}

/// Binds the parameters of the statements [`message_staging_one`] chose, in their order.
fn bind_post<'q>(q: Query<'q>, p: &'q StagedPost) -> Result<Query<'q>, StoreError> {
    let m = &p.rendered.message;
    let at = p.created_at.micros();
    let mut q = p.rendered.bind_row(q, p.created_at);
    let publish = m.published.as_ref();
    if !p.deliver_to.is_empty() {
        let quiet = publish.map_or(&[][..], |p| p.quiet.as_slice());
        q = q
            .bind(&*m.message_id)
            .bind(m.sender_pk.0)
            .bind(m.kind.as_str())
            .bind(m.message_type.as_str())
            .bind(m.priority.as_str())
            .bind(at)
            .bind(publish.map(|p| p.cause_by.clone()))
            .bind(&m.thread_id)
            .bind(to_json(quiet)?)
            .bind(to_json(&p.deliver_to)?);
    }
    if let Some(link) = p.response {
        q = q
            .bind(link.original.0)
            .bind(&*m.message_id)
            .bind(link.responder.0)
            .bind(link.status.as_str())
            .bind(at);
    }
    if let Some(i) = &p.idempotency {
        q = q
            .bind(i.claim.agent.0)
            .bind(&i.claim.key)
            .bind(i.claim.operation)
            .bind(i.claim.request_hash.as_slice())
            .bind(&i.answer)
            .bind(at);
    }
    Ok(q)
}
