//! The team's timeline, marking read, the final-response check and the batch insert on
//! PostgreSQL (the reads the engines share: `store/sql/messages.rs`).

use std::collections::HashMap;
use std::time::{Duration, Instant};
use switchboard_types::ids::{AgentId, MessageId};

use sqlx::AssertSqlSafe;
use sqlx::postgres::{PgConnection, PgPool};
use switchboard_types::ids::{AgentPk, MessagePk, TeamPk};
use switchboard_types::time::Timestamp;

use crate::model::{
    IdempotencyClaim, MarkOutcome, NewMessage, PostResult, ResponseLink, TrafficRow, TrafficSpec,
};
use crate::store::StoreError;
use crate::store::columns::{Columns, MESSAGE_COLUMNS, StoredContent, to_json};
use crate::store::columns::{traffic_row, traffic_weight};

pub(crate) use crate::store::sql::messages::postgres::*;

/// The messages a timeline may show: those written by transactions older (by
/// transaction id, taken at a transaction's first write) than every one still running.
/// Keys are taken when a row is written, not when it
/// commits, so with several writers (nodes) a later key can commit first; a reader that
/// went by keys alone would move past an earlier one still on its way, for good
/// (migration 0014).
const SETTLED: &str = "m.tx < pg_snapshot_xmin(pg_current_snapshot())";
/// The opposite of [`SETTLED`]: committed (so seen) but not yet shown.
const UNSETTLED: &str = "m.tx >= pg_snapshot_xmin(pg_current_snapshot())";

/// How long a timeline read waits for messages already committed to settle: they are
/// held back only by transactions that were running when they committed (a few
/// milliseconds, unless something holds a transaction open), and a message its sender
/// was just told is committed should show on the next read.
const SETTLE_WAIT: Duration = Duration::from_secs(2);

/// One page of the team's messages with their recipients, in the order of (writing
/// transaction, key) and settled only ([`SETTLED`]): after `spec.after` (a key a page
/// gave: the walk resumes after its row; after one retention has removed since, or any
/// other number, from the team's oldest message, which shows messages again rather
/// than skip one), oldest first; without it the newest, newest first. A walk of
/// `messages_by_team_tx`. Messages committed but not yet settled are waited for first,
/// up to [`SETTLE_WAIT`]; those written after this read began are not.
pub(crate) async fn traffic(
    pool: &PgPool,
    team: TeamPk,
    spec: TrafficSpec,
) -> Result<crate::model::Bounded<TrafficRow>, StoreError> {
    let waiting: Option<String> = sqlx::query_scalar(AssertSqlSafe(format!(
        "SELECT max(m.tx)::text FROM messages m WHERE m.team_pk = $1 AND {UNSETTLED}"
    )))
    .bind(team.0)
    .fetch_one(pool)
    .await?;
    if let Some(newest) = waiting {
        let deadline = Instant::now() + SETTLE_WAIT;
        while Instant::now() < deadline {
            let settled: bool =
                sqlx::query_scalar("SELECT pg_snapshot_xmin(pg_current_snapshot()) > $1::xid8")
                    .bind(&newest)
                    .fetch_one(pool)
                    .await?;
            if settled {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
    let select = format!(
        "SELECT {MESSAGE_COLUMNS}, m.recipient_ids FROM messages m \
         WHERE m.team_pk = $1 AND {SETTLED}"
    );
    let bounded = crate::store::paging::bounded;
    match spec.after {
        Some(after) => {
            let sql = format!(
                "{select} AND (m.tx, m.pk) > (COALESCE((SELECT c.tx FROM messages c \
                 WHERE c.pk = $2 AND c.team_pk = $1), '0'::xid8), $2) \
                 ORDER BY m.tx, m.pk LIMIT $3"
            );
            let query = sqlx::query(AssertSqlSafe(sql))
                .bind(team.0)
                .bind(after)
                .bind(spec.limit);
            bounded(query.fetch(pool), traffic_weight, traffic_row).await
        }
        None => {
            let sql = format!("{select} ORDER BY m.tx DESC, m.pk DESC LIMIT $2");
            let query = sqlx::query(AssertSqlSafe(sql))
                .bind(team.0)
                .bind(spec.limit);
            bounded(query.fetch(pool), traffic_weight, traffic_row).await
        }
    }
}

pub(crate) async fn mark_read(
    conn: &mut PgConnection,
    agent: AgentPk,
    message_ids: &[MessageId],
    now: Timestamp,
) -> Result<MarkOutcome, StoreError> {
    let rows = sqlx::query(
        "SELECT m.message_id, i.message_pk, i.read_at
         FROM messages m JOIN inbox i ON i.message_pk = m.pk AND i.agent_pk = $1
         WHERE m.message_id = ANY($2)",
    )
    .bind(agent.0)
    .bind(
        message_ids
            .iter()
            .map(MessageId::as_str)
            .collect::<Vec<_>>(),
    )
    .fetch_all(&mut *conn)
    .await?;
    let mut state: HashMap<MessageId, bool> = HashMap::with_capacity(rows.len());
    let mut to_mark = Vec::new();
    for row in &rows {
        let read = row.opt_int("read_at")?.is_some();
        if !read {
            to_mark.push(row.int("message_pk")?);
        }
        state.insert(MessageId::from(row.text("message_id")?), read);
    }
    if !to_mark.is_empty() {
        sqlx::query(
            "UPDATE inbox SET read_at = $1
             WHERE agent_pk = $2 AND read_at IS NULL AND message_pk = ANY($3)",
        )
        .bind(now.micros())
        .bind(agent.0)
        .bind(to_mark)
        .execute(&mut *conn)
        .await?;
    }
    Ok(MarkOutcome::of(message_ids, &state))
}

/// A message and everything written with it.
pub(super) struct Post<'a> {
    pub(super) message: &'a NewMessage,
    pub(super) recipient_ids: &'a [AgentId],
    pub(super) deliver_to: &'a [AgentPk],
    pub(super) created_at: Timestamp,
    pub(super) response: Option<ResponseLink>,
    /// An idempotency key's claim and the answer to remember with it.
    pub(super) key: Option<(&'a IdempotencyClaim, &'a str)>,
}

/// The message and its inbox entries in one statement: the entries are numbered by the
/// `inbox_number` trigger (migration 0002), in recipient order, so two writers lock
/// recipients' counters in the same order.
const INSERT_MESSAGE: &str = "
    WITH m AS (
        INSERT INTO messages (message_id, team_pk, kind, sender_pk, sender_role, message_type,
                              priority, content, requires_response, response_deadline,
                              context_reference, thread_id, in_reply_to, response_status,
                              recipient_ids, created_at, cause_by, send_to, instruct_content,
                              via, route, chain, trace_id, trace)
        VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17,
                $18, $19, $20, $21, $24, $25, $26)
        RETURNING pk),
    i AS (
        INSERT INTO inbox (agent_pk, seq, message_pk, sender_pk, kind, message_type, priority,
                           created_at, news, cause_by, thread_id)
        SELECT r.agent, 0, m.pk, $4, $3, $6, $7, $16, NOT (r.agent = ANY($23)), $17, $12
        FROM m CROSS JOIN (SELECT unnest($22::bigint[]) AS agent ORDER BY 1) r
        ORDER BY r.agent
        RETURNING agent_pk, seq)
    SELECT m.pk, i.agent_pk, i.seq FROM m LEFT JOIN i ON true";

/// Writes one post; its key and the `(agent, seq)` of each inbox entry come back.
pub(super) async fn insert_post(
    conn: &mut PgConnection,
    p: &Post<'_>,
) -> Result<PostResult, StoreError> {
    let m = p.message;
    let at = p.created_at.micros();
    let publish = m.published.as_ref();
    let quiet: Vec<i64> = publish.map_or(Vec::new(), |p| p.quiet.iter().map(|a| a.0).collect());
    let deliver: Vec<i64> = p.deliver_to.iter().map(|a| a.0).collect();
    let rows = sqlx::query(INSERT_MESSAGE)
        .bind(&*m.message_id)
        .bind(m.team_pk.0)
        .bind(m.kind.as_str())
        .bind(m.sender_pk.0)
        .bind(&m.sender_role)
        .bind(m.message_type.as_str())
        .bind(m.priority.as_str())
        .bind(to_json(&StoredContent::of(&m.content))?)
        .bind(m.requires_response)
        .bind(m.response_deadline.map(Timestamp::micros))
        .bind(&m.context_reference)
        .bind(&m.thread_id)
        .bind(m.in_reply_to.as_deref())
        .bind(m.response_status.map(|s| s.as_str()))
        .bind(to_json(p.recipient_ids)?)
        .bind(at)
        .bind(publish.map(|p| p.cause_by.clone()))
        .bind(publish.map(|p| to_json(&p.send_to)).transpose()?)
        .bind(
            publish
                .and_then(|p| p.instruct_content.as_ref())
                .map(to_json)
                .transpose()?,
        )
        .bind(m.via.map(|v| v.as_str()))
        .bind(m.route.map(|r| r.as_str()))
        .bind(deliver)
        .bind(quiet)
        .bind(m.chain.as_ref().map(to_json).transpose()?)
        .bind(m.trace.as_ref().map(|t| t.trace_id.clone()))
        .bind(m.trace.as_ref().map(to_json).transpose()?)
        .fetch_all(&mut *conn)
        .await?;
    let (pk, entries) = inserted(&rows)?;
    if let Some(link) = p.response {
        sqlx::query(
            "INSERT INTO responses (original_pk, response_pk, responder_pk, status, created_at)
             VALUES ($1, $2, $3, $4, $5)",
        )
        .bind(link.original.0)
        .bind(pk.0)
        .bind(link.responder.0)
        .bind(link.status.as_str())
        .bind(at)
        .execute(&mut *conn)
        .await?;
    }
    if let Some((claim, answer)) = p.key {
        sqlx::query(
            "INSERT INTO idempotency_keys (agent_pk, key, operation, request_hash, answer,
                                           created_at)
             VALUES ($1, $2, $3, $4, $5, $6)",
        )
        .bind(claim.agent.0)
        .bind(&claim.key)
        .bind(claim.operation)
        .bind(claim.request_hash.as_slice())
        .bind(answer)
        .bind(at)
        .execute(&mut *conn)
        .await?;
    }
    Ok(PostResult { pk, entries })
}

/// The message's key and its entries' `(agent, seq)` from [`INSERT_MESSAGE`]'s rows.
fn inserted(
    rows: &[sqlx::postgres::PgRow],
) -> Result<(MessagePk, Vec<(AgentPk, i64)>), StoreError> {
    let first = rows
        .first()
        .ok_or_else(|| StoreError::Corrupt("the message insert returned no pk".into()))?;
    let pk = MessagePk(first.int(0)?);
    let mut entries = Vec::with_capacity(rows.len());
    for row in rows {
        if let Some(agent) = row.opt_int(1)? {
            entries.push((AgentPk(agent), row.int(2)?));
        }
    }
    Ok((pk, entries))
}
