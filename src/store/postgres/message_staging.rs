//! Posts staged for the batch's shared insert, as on SQLite (`store::sqlite::message_staging`):
//! statements, not rows, are what cost — on PostgreSQL each is a round trip to the
//! server, and a post written on its own took four (its savepoint, its statement, the
//! release). A post job stages its message here; the writer writes the whole batch's
//! with three or four statements over arrays, before the commit or before any later
//! job touches the connection, so every statement still sees all earlier jobs' writes.
//!
//! **Numbering.** The flush's statement locks every counter row it will touch
//! (recipients, senders, responders) in `agent_pk` order, then takes each recipient's
//! next seqs with one `UPDATE … RETURNING` for the whole batch: the locks are held until
//! the commit, so seqs are gap-free and commit in their order with several nodes
//! writing, and two nodes' flushes never wait on each other in a cycle. Entries are
//! inserted with their numbers (the `inbox_number` trigger numbers only entries
//! inserted with seq 0).
//!
//! If the shared insert fails (a duplicate id), it is rolled back to its savepoint and
//! each post is written on its own ([`super::messages::insert_post`], in a savepoint of
//! its own), so one bad post fails alone.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, OnceLock};
use switchboard_types::ids::{AgentId, MessageId};

use sqlx::Row;
use sqlx::postgres::PgConnection;
use switchboard_types::ids::{AgentPk, MessagePk};
use switchboard_types::time::Timestamp;

use super::listen::Notes;
use super::messages::{Post, insert_post};
use super::writer::{BEGIN_ALONE, BEGIN_SHARED, NOW_ALONE};
use crate::model::{IdempotencyClaim, NewMessage, PostResult, ResponseLink};
use crate::store::StoreError;
use crate::store::columns::StoredContent;
use crate::store::columns::to_json;

/// A message waiting for the batch's shared insert.
pub(super) struct StagedPost {
    pub(super) message: NewMessage,
    pub(super) recipient_ids: Vec<AgentId>,
    pub(super) deliver_to: Vec<AgentPk>,
    pub(super) created_at: Timestamp,
    pub(super) response: Option<ResponseLink>,
    pub(super) key: Option<(IdempotencyClaim, String)>,
    pub(super) slot: PostSlot,
}

/// Filled by the flush; read after the commit.
#[derive(Clone, Default)]
pub(super) struct PostSlot(Arc<OnceLock<Result<PostResult, Arc<StoreError>>>>);

impl PostSlot {
    /// What the post became; an error if it could not be written or was never flushed.
    pub(super) fn outcome(&self) -> Result<PostResult, StoreError> {
        match self.0.get() {
            Some(Ok(result)) => Ok(result.clone()),
            Some(Err(cause)) => Err(StoreError::PostFailed(cause.clone())),
            None => Err(StoreError::Dropped),
        }
    }

    fn fill(&self, outcome: Result<PostResult, Arc<StoreError>>) {
        let _ = self.0.set(outcome);
    }
}

/// The whole shared insert in one statement: lock every counter row the flush touches
/// (recipients, senders, responders) in key order; take each recipient's seqs and count
/// its entries (all unread) with one UPDATE, which hands back the number before them;
/// insert the messages and their entries, each entry numbered `base + k` (its `k`-th
/// place among the recipient's entries of this flush, counted by the writer). Returns
/// each message's key (`m`) and each recipient's base (`s`).
const INSERT_MESSAGES: &str = "
    WITH locked AS (
        SELECT agent_pk FROM inbox_counts WHERE agent_pk = ANY($26)
        ORDER BY agent_pk FOR UPDATE),
    taken AS (
        UPDATE inbox_counts c
        SET last_seq = c.last_seq + u.n, total = c.total + u.n, unread = c.unread + u.n,
            quiet_total = c.quiet_total + u.q, quiet_unread = c.quiet_unread + u.q
        FROM unnest($27::bigint[], $28::bigint[], $29::bigint[]) AS u(agent, n, q)
        WHERE c.agent_pk = u.agent AND c.agent_pk IN (SELECT agent_pk FROM locked)
        RETURNING c.agent_pk, c.last_seq - u.n AS base),
    m AS (
        INSERT INTO messages (message_id, team_pk, kind, sender_pk, sender_role, message_type,
                              priority, content, requires_response, response_deadline,
                              context_reference, thread_id, in_reply_to, response_status,
                              recipient_ids, created_at, cause_by, send_to, instruct_content,
                              via, route, chain, trace_id, trace)
        SELECT * FROM unnest($1::text[], $2::bigint[], $3::text[], $4::bigint[], $5::text[],
                             $6::text[], $7::text[], $8::text[], $9::bool[], $10::bigint[],
                             $11::text[], $12::text[], $13::text[], $14::text[], $15::text[],
                             $16::bigint[], $17::text[], $18::text[], $19::text[], $20::text[],
                             $21::text[], $30::text[], $31::text[], $32::text[])
        RETURNING pk, message_id, sender_pk, kind, message_type, priority, created_at,
                  cause_by, thread_id),
    i AS (
        INSERT INTO inbox (agent_pk, seq, message_pk, sender_pk, kind, message_type, priority,
                           created_at, news, cause_by, thread_id)
        SELECT e.agent, t.base + e.k, m.pk, m.sender_pk, m.kind, m.message_type, m.priority,
               m.created_at, e.news, m.cause_by, m.thread_id
        FROM unnest($22::text[], $23::bigint[], $24::bigint[], $25::bool[])
             AS e(message_id, agent, k, news)
        JOIN m USING (message_id)
        JOIN taken t ON t.agent_pk = e.agent)
    SELECT 'm', message_id, pk FROM m
    UNION ALL SELECT 's', agent_pk::text, base FROM taken";

/// Writes every staged post and fills each slot: inside the open transaction, or
/// opening it first (`begin`), and committing it after (`commit`), with those statements
/// sent in the same round trips as the flush's own savepoint (three round trips for a
/// batch of posts). An error means nothing of the transaction can be kept.
pub(super) async fn flush(
    conn: &mut PgConnection,
    posts: Vec<StagedPost>,
    begin: bool,
    commit: bool,
    notes: &mut Notes,
) -> Result<(), StoreError> {
    // A batch that is all posts commits here, with nothing run before or after.
    let open = match (begin, commit) {
        (true, true) => format!("{BEGIN_SHARED}; SAVEPOINT flush"),
        (true, false) => format!("{BEGIN_ALONE}; SAVEPOINT flush"),
        (false, _) => "SAVEPOINT flush".to_owned(),
    };
    sqlx::raw_sql(sqlx::AssertSqlSafe(open))
        .execute(&mut *conn)
        .await?;
    match together(conn, &posts).await {
        Ok(results) => {
            for result in &results {
                notes.entries(result);
            }
            let close = if commit {
                format!("RELEASE flush; {}COMMIT", notes.statements())
            } else {
                "RELEASE flush".to_owned()
            };
            sqlx::raw_sql(sqlx::AssertSqlSafe(close))
                .execute(&mut *conn)
                .await?;
            for (post, result) in posts.iter().zip(results) {
                post.slot.fill(Ok(result));
            }
            Ok(())
        }
        Err(err) => {
            err.log_fallback("posts one by one", posts.len());
            let undo = format!("ROLLBACK TO flush; RELEASE flush; {NOW_ALONE}");
            sqlx::raw_sql(sqlx::AssertSqlSafe(undo))
                .execute(&mut *conn)
                .await?;
            let mut outcomes = Vec::with_capacity(posts.len());
            for p in &posts {
                outcomes.push(one(conn, p).await.map_err(Arc::new));
            }
            for result in outcomes.iter().flatten() {
                notes.entries(result);
            }
            if commit {
                let close = format!("{}COMMIT", notes.statements());
                sqlx::raw_sql(sqlx::AssertSqlSafe(close))
                    .execute(&mut *conn)
                    .await?;
            }
            for (p, outcome) in posts.iter().zip(outcomes) {
                p.slot.fill(outcome);
            }
            Ok(())
        }
    }
}

/// One post in its own savepoint: written whole or not at all.
async fn one(conn: &mut PgConnection, p: &StagedPost) -> Result<PostResult, StoreError> {
    sqlx::raw_sql("SAVEPOINT post").execute(&mut *conn).await?;
    let post = Post {
        message: &p.message,
        recipient_ids: &p.recipient_ids,
        deliver_to: &p.deliver_to,
        created_at: p.created_at,
        response: p.response,
        key: p.key.as_ref().map(|(c, a)| (c, a.as_str())),
    };
    match insert_post(conn, &post).await {
        Ok(result) => {
            sqlx::raw_sql("RELEASE post").execute(&mut *conn).await?;
            Ok(result)
        }
        Err(err) => {
            sqlx::raw_sql("ROLLBACK TO post; RELEASE post")
                .execute(&mut *conn)
                .await?;
            Err(err)
        }
    }
}

/// The shared insert; what each post became, in staging order.
async fn together(
    conn: &mut PgConnection,
    posts: &[StagedPost],
) -> Result<Vec<PostResult>, StoreError> {
    let (mut rows, places) = MessageRows::of(posts)?;
    let chains = std::mem::take(&mut rows.chains);
    let traces = std::mem::take(&mut rows.traces);
    let trace_ids = std::mem::take(&mut rows.trace_ids);
    let counters = Counters::of(posts);
    let returned = counters
        .bind(rows.bind(sqlx::query(INSERT_MESSAGES)))
        .bind(chains)
        .bind(trace_ids)
        .bind(traces)
        .fetch_all(&mut *conn)
        .await?;
    let mut pks: HashMap<MessageId, i64> = HashMap::with_capacity(posts.len());
    let mut bases: HashMap<i64, i64> = HashMap::with_capacity(counters.agents.len());
    for r in &returned {
        let what: String = r.try_get(0)?;
        let key: String = r.try_get(1)?;
        let value: i64 = r.try_get(2)?;
        if what == "m" {
            pks.insert(MessageId::from(key), value);
        } else {
            let agent = key
                .parse()
                .map_err(|_| StoreError::Corrupt(format!("agent key '{key}'")))?;
            bases.insert(agent, value);
        }
    }
    if bases.len() != counters.agents.len() {
        // A recipient without a counter row: the one-by-one path says which post.
        return Err(StoreError::Missing);
    }
    let results = places
        .into_iter()
        .zip(posts)
        .map(|(entries, p)| {
            let pk = pks.get(&p.message.message_id).copied().ok_or_else(|| {
                StoreError::Corrupt("a staged message came back without its key".into())
            })?;
            let entries = entries
                .into_iter()
                .map(|(agent, k)| {
                    let base = bases.get(&agent.0).ok_or(StoreError::Missing)?;
                    Ok((agent, base + k))
                })
                .collect::<Result<Vec<_>, StoreError>>()?;
            Ok(PostResult {
                pk: MessagePk(pk),
                entries,
            })
        })
        .collect::<Result<Vec<_>, StoreError>>()?;
    links(conn, posts, &results).await?;
    Ok(results)
}

/// The counter rows a flush locks, and each recipient's entries (all, and those that
/// are not news).
struct Counters {
    touched: Vec<i64>,
    agents: Vec<i64>,
    entries: Vec<i64>,
    quiet: Vec<i64>,
}

impl Counters {
    fn of(posts: &[StagedPost]) -> Counters {
        let mut per_agent: BTreeMap<i64, (i64, i64)> = BTreeMap::new();
        let mut touched: Vec<i64> = Vec::new();
        for p in posts {
            let quiet = p.message.published.as_ref().map(|x| x.quiet.as_slice());
            for a in &p.deliver_to {
                let counts = per_agent.entry(a.0).or_default();
                counts.0 += 1;
                counts.1 += i64::from(quiet.is_some_and(|q| q.binary_search(a).is_ok()));
            }
            touched.push(p.message.sender_pk.0);
            if let Some(link) = p.response {
                touched.push(link.responder.0);
            }
        }
        touched.extend(per_agent.keys());
        touched.sort_unstable();
        touched.dedup();
        Counters {
            touched,
            agents: per_agent.keys().copied().collect(),
            entries: per_agent.values().map(|c| c.0).collect(),
            quiet: per_agent.values().map(|c| c.1).collect(),
        }
    }

    fn bind<'q>(
        &self,
        q: sqlx::query::Query<'q, sqlx::Postgres, sqlx::postgres::PgArguments>,
    ) -> sqlx::query::Query<'q, sqlx::Postgres, sqlx::postgres::PgArguments> {
        q.bind(self.touched.clone())
            .bind(self.agents.clone())
            .bind(self.entries.clone())
            .bind(self.quiet.clone())
    }
}

/// The response links and idempotency keys of the flush, once the messages have keys.
async fn links(
    conn: &mut PgConnection,
    posts: &[StagedPost],
    results: &[PostResult],
) -> Result<(), StoreError> {
    let mut responses = ResponseRows::default();
    let mut keys = KeyRows::default();
    for (p, r) in posts.iter().zip(results) {
        let at = p.created_at.micros();
        if let Some(link) = p.response {
            responses.originals.push(link.original.0);
            responses.responses.push(r.pk.0);
            responses.responders.push(link.responder.0);
            responses.statuses.push(link.status.as_str());
            responses.times.push(at);
        }
        if let Some((claim, answer)) = &p.key {
            keys.agents.push(claim.agent.0);
            keys.keys.push(&claim.key);
            keys.operations.push(claim.operation);
            keys.hashes.push(claim.request_hash.to_vec());
            keys.answers.push(answer);
            keys.times.push(at);
        }
    }
    if !responses.originals.is_empty() {
        sqlx::query(
            "INSERT INTO responses (original_pk, response_pk, responder_pk, status, created_at)
             SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::bigint[], $4::text[],
                                  $5::bigint[])",
        )
        .bind(responses.originals)
        .bind(responses.responses)
        .bind(responses.responders)
        .bind(responses.statuses)
        .bind(responses.times)
        .execute(&mut *conn)
        .await?;
    }
    if !keys.agents.is_empty() {
        sqlx::query(
            "INSERT INTO idempotency_keys (agent_pk, key, operation, request_hash, answer,
                                           created_at)
             SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[], $4::bytea[],
                                  $5::text[], $6::bigint[])",
        )
        .bind(keys.agents)
        .bind(keys.keys)
        .bind(keys.operations)
        .bind(keys.hashes)
        .bind(keys.answers)
        .bind(keys.times)
        .execute(&mut *conn)
        .await?;
    }
    Ok(())
}

/// The response links of a flush, one array per column.
#[derive(Default)]
struct ResponseRows<'a> {
    originals: Vec<i64>,
    responses: Vec<i64>,
    responders: Vec<i64>,
    statuses: Vec<&'a str>,
    times: Vec<i64>,
}

/// The idempotency keys of a flush, one array per column.
#[derive(Default)]
struct KeyRows<'a> {
    agents: Vec<i64>,
    keys: Vec<&'a str>,
    operations: Vec<&'a str>,
    hashes: Vec<Vec<u8>>,
    answers: Vec<&'a str>,
    times: Vec<i64>,
}

/// Each post's inbox entries, `(agent, place among the agent's entries of the flush)`.
type Places = Vec<Vec<(AgentPk, i64)>>;

/// The columns of [`INSERT_MESSAGES`], one array each.
#[derive(Default)]
struct MessageRows {
    ids: Vec<String>,
    teams: Vec<i64>,
    kinds: Vec<&'static str>,
    senders: Vec<i64>,
    roles: Vec<String>,
    types: Vec<&'static str>,
    priorities: Vec<&'static str>,
    contents: Vec<String>,
    requires: Vec<bool>,
    deadlines: Vec<Option<i64>>,
    contexts: Vec<Option<String>>,
    threads: Vec<Option<String>>,
    replies: Vec<Option<String>>,
    statuses: Vec<Option<&'static str>>,
    recipients: Vec<String>,
    times: Vec<i64>,
    causes: Vec<Option<String>>,
    send_tos: Vec<Option<String>>,
    instructs: Vec<Option<String>>,
    vias: Vec<Option<&'static str>>,
    routes: Vec<Option<&'static str>>,
    /// Bound last (`$30`–`$32`), after the counters.
    chains: Vec<Option<String>>,
    trace_ids: Vec<Option<String>>,
    traces: Vec<Option<String>>,
    entry_ids: Vec<String>,
    entry_agents: Vec<i64>,
    entry_seqs: Vec<i64>,
    entry_news: Vec<bool>,
}

impl MessageRows {
    /// The rows of `posts`, and each entry's place `k` (1, 2, …) among its recipient's
    /// entries of this flush, in staging order (commit order): its seq is the
    /// recipient's base plus `k`.
    fn of(posts: &[StagedPost]) -> Result<(MessageRows, Places), StoreError> {
        let mut next: HashMap<i64, i64> = HashMap::new();
        let mut rows = MessageRows::default();
        let mut results = Vec::with_capacity(posts.len());
        for p in posts {
            let m = &p.message;
            let publish = m.published.as_ref();
            rows.ids.push(m.message_id.to_string());
            rows.teams.push(m.team_pk.0);
            rows.kinds.push(m.kind.as_str());
            rows.senders.push(m.sender_pk.0);
            rows.roles.push(m.sender_role.clone());
            rows.types.push(m.message_type.as_str());
            rows.priorities.push(m.priority.as_str());
            rows.contents.push(to_json(&StoredContent::of(&m.content))?);
            rows.requires.push(m.requires_response);
            rows.deadlines
                .push(m.response_deadline.map(Timestamp::micros));
            rows.contexts.push(m.context_reference.clone());
            rows.threads.push(m.thread_id.clone());
            rows.replies
                .push(m.in_reply_to.as_ref().map(|id| id.to_string()));
            rows.statuses.push(m.response_status.map(|s| s.as_str()));
            rows.recipients.push(to_json(&p.recipient_ids)?);
            rows.times.push(p.created_at.micros());
            rows.causes.push(publish.map(|x| x.cause_by.clone()));
            rows.send_tos
                .push(publish.map(|x| to_json(&x.send_to)).transpose()?);
            rows.instructs.push(
                publish
                    .and_then(|x| x.instruct_content.as_ref())
                    .map(to_json)
                    .transpose()?,
            );
            rows.vias.push(m.via.map(|v| v.as_str()));
            rows.routes.push(m.route.map(|r| r.as_str()));
            rows.chains.push(m.chain.as_ref().map(to_json).transpose()?);
            rows.trace_ids
                .push(m.trace.as_ref().map(|t| t.trace_id.clone()));
            rows.traces.push(m.trace.as_ref().map(to_json).transpose()?);
            let quiet = publish.map(|x| x.quiet.as_slice());
            let mut entries = Vec::with_capacity(p.deliver_to.len());
            for a in &p.deliver_to {
                let k = next.entry(a.0).or_insert(0);
                *k += 1;
                entries.push((*a, *k));
                rows.entry_ids.push(m.message_id.to_string());
                rows.entry_agents.push(a.0);
                rows.entry_seqs.push(*k);
                rows.entry_news
                    .push(quiet.is_none_or(|q| q.binary_search(a).is_err()));
            }
            results.push(entries);
        }
        Ok((rows, results))
    }

    fn bind<'q>(
        self,
        q: sqlx::query::Query<'q, sqlx::Postgres, sqlx::postgres::PgArguments>,
    ) -> sqlx::query::Query<'q, sqlx::Postgres, sqlx::postgres::PgArguments> {
        q.bind(self.ids)
            .bind(self.teams)
            .bind(self.kinds)
            .bind(self.senders)
            .bind(self.roles)
            .bind(self.types)
            .bind(self.priorities)
            .bind(self.contents)
            .bind(self.requires)
            .bind(self.deadlines)
            .bind(self.contexts)
            .bind(self.threads)
            .bind(self.replies)
            .bind(self.statuses)
            .bind(self.recipients)
            .bind(self.times)
            .bind(self.causes)
            .bind(self.send_tos)
            .bind(self.instructs)
            .bind(self.vias)
            .bind(self.routes)
            .bind(self.entry_ids)
            .bind(self.entry_agents)
            .bind(self.entry_seqs)
            .bind(self.entry_news)
    }
}
