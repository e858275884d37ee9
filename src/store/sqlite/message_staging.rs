//! Posts staged for the batch's shared insert: a message, its inbox entries, and the
//! rows written with it (a response link, an idempotency key's first answer).
//!
//! Jobs do not insert messages themselves: they stage them, and the writer inserts the
//! whole batch's with the few statements of [`flush_sql`] (see the writer's
//! documentation for why statements, not rows, are what cost).

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use sqlx::{Row, SqliteConnection};
use switchboard_types::ids::{AgentPk, MessagePk};
use switchboard_types::time::Timestamp;

use super::direct::Direct;
use super::message_row::{MESSAGE_BINDS, RenderedMessage};
use super::message_staging_one::message_staging_one;
use super::message_staging_sql::{INBOX_INSERT, KEYS_INSERT, RESPONSES_INSERT, messages_insert};
use super::rows::{Col, JsonRows, size_index, to_json};
use super::task_staging::{self, StagedTask, TaskSlot, flush_tasks};
use super::writer::Staging;
use crate::model::{IdempotencyClaim, PostResult, ResponseLink};
use crate::store::StoreError;
use crate::store::writer::MAX_BATCH;

/// The first answer to remember for an idempotency key.
pub(super) struct IdempotencyRow {
    pub(super) claim: IdempotencyClaim,
    pub(super) answer: String,
}

/// A message waiting for the batch's shared insert.
pub(super) struct StagedPost {
    pub(super) rendered: RenderedMessage,
    /// Who gets an inbox entry.
    pub(super) deliver_to: Vec<AgentPk>,
    pub(super) created_at: Timestamp,
    pub(super) response: Option<ResponseLink>,
    pub(super) idempotency: Option<IdempotencyRow>,
    slot: PostSlot,
    /// The staged task this post tells about: it is written only if the task is.
    task: Option<TaskSlot>,
}

impl StagedPost {
    pub(super) fn new(
        rendered: RenderedMessage,
        deliver_to: Vec<AgentPk>,
        created_at: Timestamp,
        response: Option<ResponseLink>,
        idempotency: Option<IdempotencyRow>,
    ) -> StagedPost {
        StagedPost {
            rendered,
            deliver_to,
            created_at,
            response,
            idempotency,
            slot: PostSlot::default(),
            task: None,
        }
    }

    /// Makes the post depend on a staged task: a notice of a task that could not be
    /// written must not be written either.
    pub(super) fn about(mut self, task: &TaskSlot) -> StagedPost {
        self.task = Some(task.clone());
        self
    }
}

/// Filled by the flush; read after the commit.
#[derive(Clone, Default)]
pub(super) struct PostSlot(Arc<OnceLock<Result<PostResult, Arc<StoreError>>>>);

impl PostSlot {
    /// The outcome, once flushed; an error if the post could not be written or was
    /// never flushed (its batch failed first).
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

/// Message pks and per-agent inbox sequence numbers, handed out by the writer.
///
/// The writer is the only writer, so it can number rows itself instead of asking SQL
/// (a counter read per entry, `RETURNING` per row): that made the shared insert several
/// times cheaper. Counters are loaded lazily from the database (a recipient's from
/// `inbox_counts.last_seq`, which never goes back: an inbox that retention emptied
/// goes on after its last number) and dropped after any rollback, so they can never run
/// ahead of what is committed.
#[derive(Default)]
struct IdCounters {
    last_message_pk: Option<i64>,
    last_seq: HashMap<AgentPk, i64>,
}

impl IdCounters {
    fn forget(&mut self) {
        self.last_message_pk = None;
        self.last_seq.clear();
    }

    /// Moves the counters past a flush's rows, once they are written.
    fn advance(&mut self, rows: BatchRows) -> Vec<PostResult> {
        self.last_message_pk = Some(rows.last_pk);
        self.last_seq.extend(rows.seqs);
        rows.results
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
        let mut missing: Vec<AgentPk> = posts
            .iter()
            .flat_map(|p| p.deliver_to.iter().copied())
            .filter(|a| !self.last_seq.contains_key(a))
            .collect();
        if !missing.is_empty() {
            missing.sort_unstable();
            missing.dedup();
            let rows = sqlx::query(
                "SELECT j.value,
                        COALESCE((SELECT c.last_seq FROM inbox_counts c WHERE c.agent_pk = j.value), 0)
                 FROM json_each(?) j",
            )
            .bind(to_json(&missing)?)
            .fetch_all(&mut *conn)
            .await?;
            for row in rows {
                self.last_seq
                    .insert(AgentPk(row.try_get(0)?), row.try_get(1)?);
            }
        }
        Ok(())
    }
}

/// Everything staged in the current batch (posts, and new tasks written before them),
/// and the numbering of its rows.
pub(crate) struct PostStaging {
    posts: Vec<StagedPost>,
    tasks: Vec<StagedTask>,
    ids: IdCounters,
    /// Writes batches of nothing but posts without sqlx's round trips (see `direct`).
    direct: Direct,
}

impl PostStaging {
    pub(super) fn with_direct(direct: Direct) -> PostStaging {
        PostStaging {
            posts: Vec::new(),
            tasks: Vec::new(),
            ids: IdCounters::default(),
            direct,
        }
    }

    /// Queues a post; the slot tells, after the flush, what became of it.
    pub(super) fn stage(&mut self, post: StagedPost) -> PostSlot {
        let slot = post.slot.clone();
        self.posts.push(post);
        slot
    }

    /// Queues a new task; the slot tells, after the flush, whether it was written.
    pub(super) fn stage_task(&mut self, write: crate::model::TaskWrite) -> TaskSlot {
        let (task, slot) = StagedTask::new(write);
        self.tasks.push(task);
        slot
    }

    /// Writes the staged tasks, then drops the posts about any that failed: before
    /// the posts are numbered, so their sequence numbers stay gap-free.
    async fn write_tasks(&mut self, conn: &mut SqliteConnection) {
        let tasks = std::mem::take(&mut self.tasks);
        if tasks.is_empty() {
            return;
        }
        flush_tasks(conn, tasks).await;
        self.posts
            .retain(|p| !p.task.as_ref().is_some_and(TaskSlot::failed));
    }
}

impl Staging for PostStaging {
    type Mark = (usize, usize);

    fn is_empty(&self) -> bool {
        self.posts.is_empty() && self.tasks.is_empty()
    }

    fn mark(&self) -> (usize, usize) {
        (self.posts.len(), self.tasks.len())
    }

    fn truncate(&mut self, (posts, tasks): (usize, usize)) {
        self.posts.truncate(posts);
        self.tasks.truncate(tasks);
    }

    async fn flush(&mut self, conn: &mut SqliteConnection) {
        self.write_tasks(conn).await;
        let posts = std::mem::take(&mut self.posts);
        if !posts.is_empty() {
            flush_posts(conn, &mut self.ids, posts).await;
        }
    }

    async fn flush_and_commit(
        &mut self,
        conn: &mut SqliteConnection,
        begin: bool,
    ) -> Result<(), StoreError> {
        if begin && self.posts.len() <= MAX_BATCH {
            let (tasks, posts) = (&self.tasks, &self.posts);
            match flush_direct(conn, &mut self.direct, &mut self.ids, tasks, posts).await {
                Ok(results) => {
                    self.tasks.clear();
                    fill(&std::mem::take(&mut self.posts), results);
                    return Ok(());
                }
                Err(err) => {
                    // Nothing committed: the sqlx path writes the batch, or isolates
                    // the bad task or post.
                    err.log_fallback(
                        "the direct write, again through sqlx",
                        self.posts.len() + self.tasks.len(),
                    );
                    self.ids.forget();
                }
            }
        }
        let mut begin = begin;
        if !self.tasks.is_empty() {
            if begin {
                sqlx::raw_sql("BEGIN IMMEDIATE").execute(&mut *conn).await?;
                begin = false;
            }
            self.write_tasks(conn).await;
        }
        let posts = std::mem::take(&mut self.posts);
        if posts.is_empty() {
            sqlx::raw_sql("COMMIT").execute(&mut *conn).await?;
            return Ok(());
        }
        flush_posts_and_commit(conn, &mut self.ids, posts, begin).await
    }

    fn reset(&mut self) {
        self.posts.clear();
        self.tasks.clear();
        self.ids.forget();
    }
}

/// How a flush statement begins and ends: the whole transaction, or inside one already
/// open (committing it, or not).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Ends {
    /// `BEGIN IMMEDIATE` … `COMMIT`: the batch is only staged posts, one round trip.
    Transaction,
    /// … `COMMIT`.
    Commit,
    /// Neither: the batch goes on after it.
    Open,
}

/// Row counts with a statement of their own: `n` posts run the statement of the next
/// size up, the rows past `n` bound as NULL (and skipped). Ten sizes, three ends each,
/// prepared as they are first used; a batch larger than the largest (a job may stage
/// several posts) is written in several flushes.
const SIZES: [usize; 10] = [1, 2, 4, 8, 16, 32, 64, 128, 256, MAX_BATCH];

/// The statements writing `size` staged posts: the message rows bound as a `VALUES`
/// list (pk first, then [`MESSAGE_ROW`]), the inbox entries, response links and
/// idempotency keys as JSON arrays walked with `jsonb_each` (their count per post
/// varies), inside the savepoint `flush`.
///
/// Messages used to arrive as JSON too: under the `stomp` benchmark the JSON functions
/// were about a tenth of SQLite's write thread, most of it walking each message row with
/// `->>` once per column, and the content, JSON inside a JSON string, was unescaped there.
fn flush_sql(size: usize, ends: Ends) -> String {
    let begin = if ends == Ends::Transaction {
        "BEGIN IMMEDIATE;"
    } else {
        ""
    };
    let commit = if ends == Ends::Open {
        ""
    } else {
        "\n    COMMIT;"
    };
    let messages = messages_insert(size);
    format!(
        "{begin}
    SAVEPOINT flush;
    {messages};
    {INBOX_INSERT};
    {RESPONSES_INSERT};
    {KEYS_INSERT};
    RELEASE flush;{commit}"
    )
}

/// The statement for `n` posts ([`flush_sql`] of the next size up, built once) and how
/// many rows it binds; `None` when `n` is over the largest size.
fn flush_statement(n: usize, ends: Ends) -> Option<(&'static str, usize)> {
    static BUILT: [[OnceLock<String>; 3]; SIZES.len()] = [const {
        [
            const { OnceLock::new() },
            const { OnceLock::new() },
            const { OnceLock::new() },
        ]
    }; SIZES.len()];
    let index = size_index(&SIZES, n)?;
    let size = SIZES[index];
    let sql = BUILT[index][ends as usize].get_or_init(|| flush_sql(size, ends));
    Some((sql, size))
}

/// Writes every staged post with the few statements of [`flush_sql`], at most the
/// largest of [`SIZES`] at a time, each time inside a savepoint, with pks and sequence
/// numbers from `ids` (per agent in staging order, so in commit order). If a shared
/// insert fails, it is rolled back and each of its posts is written on its own
/// ([`message_staging_one`]), so one bad post fails alone. Every post's slot is filled either way.
async fn flush_posts(conn: &mut SqliteConnection, ids: &mut IdCounters, posts: Vec<StagedPost>) {
    for chunk in posts.chunks(MAX_BATCH) {
        match flush_together(conn, ids, chunk, Ends::Open).await {
            Ok(results) => fill(chunk, results),
            Err(err) => {
                err.log_fallback("posts one by one", chunk.len());
                ids.forget();
                if let Err(undo) = sqlx::raw_sql("ROLLBACK TO flush; RELEASE flush")
                    .execute(&mut *conn)
                    .await
                {
                    tracing::debug!(error = %undo, "rolling back a failed shared insert");
                }
                one_by_one(conn, chunk).await;
            }
        }
    }
}

/// Like [`flush_posts`], and commits the transaction in the same round trip (opening it
/// first when `begin`). An error means the transaction did not commit; the caller rolls
/// back.
async fn flush_posts_and_commit(
    conn: &mut SqliteConnection,
    ids: &mut IdCounters,
    posts: Vec<StagedPost>,
    begin: bool,
) -> Result<(), StoreError> {
    if posts.len() > MAX_BATCH {
        // Several flushes: the transaction opens and commits on its own.
        if begin {
            sqlx::raw_sql("BEGIN IMMEDIATE").execute(&mut *conn).await?;
        }
        flush_posts(conn, ids, posts).await;
        sqlx::raw_sql("COMMIT").execute(&mut *conn).await?;
        return Ok(());
    }
    let ends = if begin {
        Ends::Transaction
    } else {
        Ends::Commit
    };
    match flush_together(conn, ids, &posts, ends).await {
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
                err.log_fallback("posts one by one", posts.len());
                one_by_one(conn, &posts).await;
                sqlx::raw_sql("COMMIT").execute(&mut *conn).await?;
                Ok(())
            } else {
                tracing::error!(error = %err, posts = posts.len(), "BEGIN or COMMIT of a batch failed");
                let full = err.is_full();
                let err = Arc::new(err);
                for p in &posts {
                    p.slot.fill(Err(err.clone()));
                }
                Err(if full {
                    StoreError::Full
                } else {
                    StoreError::BatchFailed
                })
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
        let outcome = message_staging_one(conn, p).await.map_err(Arc::new);
        p.slot.fill(outcome);
    }
}

/// The three JSON arrays [`flush_sql`] binds after the message rows, and what each post
/// will become.
struct BatchRows {
    entries: JsonRows,
    responses: JsonRows,
    keys: JsonRows,
    results: Vec<PostResult>,
    /// This flush's numbers, merged into the counters only once the rows are written.
    seqs: HashMap<AgentPk, i64>,
    last_pk: i64,
}

/// Numbers the rows of `posts` (message pks from the last one written, in order) and
/// serialises the other tables' rows. They go straight into one JSON array per table
/// (tuples, no intermediate `Value` trees): this runs for every message on the writer's
/// thread.
fn batch_rows(ids: &IdCounters, posts: &[StagedPost]) -> Result<BatchRows, StoreError> {
    let mut rows = BatchRows {
        entries: JsonRows::default(),
        responses: JsonRows::default(),
        keys: JsonRows::default(),
        results: Vec::with_capacity(posts.len()),
        seqs: HashMap::new(),
        last_pk: ids.last_message_pk.unwrap_or(0),
    };
    for p in posts {
        rows.last_pk += 1;
        let pk = rows.last_pk;
        let mut mine = Vec::with_capacity(p.deliver_to.len());
        for agent in &p.deliver_to {
            let seq = rows
                .seqs
                .entry(*agent)
                .or_insert_with(|| ids.last_seq.get(agent).copied().unwrap_or(0));
            *seq += 1;
            mine.push((*agent, *seq));
        }
        // `[pk, [[agent, seq], …]]`: the message's row is looked up once for all its
        // entries (a broadcast has a hundred), not once per entry. An entry that is not
        // news (a publish its recipient does not watch) is `[agent, seq, 0]`.
        match &p.rendered.message.published {
            Some(publish) if !publish.quiet.is_empty() => {
                let entries: Vec<EntryRow> = mine
                    .iter()
                    .map(|&(agent, seq)| {
                        EntryRow(agent, seq, publish.quiet.binary_search(&agent).is_err())
                    })
                    .collect();
                rows.entries.push(&(pk, &entries))?;
            }
            _ => rows.entries.push(&(pk, &mine))?,
        }
        if let Some(link) = p.response {
            let status = link.status.as_str();
            let at = p.created_at.micros();
            rows.responses
                .push(&(link.original, pk, link.responder, status, at))?;
        }
        if let Some(i) = &p.idempotency {
            let c = &i.claim;
            let hash = hex::encode(c.request_hash);
            let at = p.created_at.micros();
            rows.keys
                .push(&(c.agent, &c.key, c.operation, hash, &i.answer, at))?;
        }
        rows.results.push(PostResult {
            pk: MessagePk(pk),
            entries: mine,
        });
    }
    Ok(rows)
}

/// An inbox entry `[agent, seq]`, with `, 0` when it is not news.
struct EntryRow(AgentPk, i64, bool);

impl serde::Serialize for EntryRow {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeSeq;
        let mut seq = s.serialize_seq(Some(if self.2 { 2 } else { 3 }))?;
        seq.serialize_element(&self.0)?;
        seq.serialize_element(&self.1)?;
        if !self.2 {
            seq.serialize_element(&0)?;
        }
        seq.end()
    }
}

/// One round trip writing `posts` (at most the largest of [`SIZES`]).
async fn flush_together(
    conn: &mut SqliteConnection,
    ids: &mut IdCounters,
    posts: &[StagedPost],
    ends: Ends,
) -> Result<Vec<PostResult>, StoreError> {
    let (sql, size) = flush_statement(posts.len(), ends)
        .ok_or_else(|| StoreError::Corrupt(format!("{} posts in one flush", posts.len())))?;
    ids.load(conn, posts).await?;
    let mut rows = batch_rows(ids, posts)?;
    let query = message_values(posts, &rows, size)
        .into_iter()
        .fold(sqlx::query(sql), |q, col| col.bind(q));
    query
        .bind(std::mem::take(&mut rows.entries).finish()?)
        .bind(std::mem::take(&mut rows.responses).finish()?)
        .bind(std::mem::take(&mut rows.keys).finish()?)
        .execute(&mut *conn)
        .await?;
    Ok(ids.advance(rows))
}

/// The whole batch, staged tasks then posts, in one transaction on the writer's direct
/// connection (see `direct`); no slot is filled unless it committed.
async fn flush_direct(
    conn: &mut SqliteConnection,
    direct: &mut Direct,
    ids: &mut IdCounters,
    tasks: &[StagedTask],
    posts: &[StagedPost],
) -> Result<Vec<PostResult>, StoreError> {
    let mut statements = task_staging::direct_statements(tasks)?;
    let mut rows = None;
    if let Some(index) = size_index(&SIZES, posts.len()).filter(|_| !posts.is_empty()) {
        static MESSAGES: [OnceLock<String>; SIZES.len()] = [const { OnceLock::new() }; SIZES.len()];
        let messages = MESSAGES[index].get_or_init(|| messages_insert(SIZES[index]));
        ids.load(conn, posts).await?;
        let mut batch = batch_rows(ids, posts)?;
        statements.push((messages, message_values(posts, &batch, SIZES[index])));
        let entries = std::mem::take(&mut batch.entries).finish()?;
        statements.push((INBOX_INSERT, vec![Col::Owned(entries)]));
        for (sql, json) in [
            (RESPONSES_INSERT, std::mem::take(&mut batch.responses)),
            (KEYS_INSERT, std::mem::take(&mut batch.keys)),
        ] {
            if let Some(json) = json.finish_some()? {
                statements.push((sql, vec![Col::Owned(json)]));
            }
        }
        rows = Some(batch);
    }
    direct
        .commit(&statements)
        .map_err(super::direct::store_error)?;
    task_staging::written(tasks);
    Ok(rows.map(|r| ids.advance(r)).unwrap_or_default())
}

/// The message rows of `posts` as bound values, pk first (numbered from `rows`), padded
/// with NULL rows up to `size`.
fn message_values<'p>(posts: &'p [StagedPost], rows: &BatchRows, size: usize) -> Vec<Col<'p>> {
    let width = MESSAGE_BINDS + 1;
    let mut values = Vec::with_capacity(size * width);
    let first_pk = rows.last_pk - i64::try_from(posts.len()).unwrap_or(0);
    for (pk, p) in (first_pk + 1..).zip(posts) {
        values.push(Col::Int(pk));
        values.extend(p.rendered.columns(p.created_at));
    }
    values.resize(size * width, Col::Null);
    values
}
