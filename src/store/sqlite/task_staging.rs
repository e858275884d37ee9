//! New tasks staged for the batch's flush, as posts are.
//!
//! A task submission used to run its own statement inside the batch: one round trip to
//! SQLite's worker thread per task, one after the other, while a batch of messages waits
//! for a single flush. With the server half idle during submissions (docs/architecture.md,
//! "Tasks"), those hand-offs were what bounded them. Now a submission stages its task,
//! and the flush inserts the staged tasks, up to [`CHUNK`] at a time, with one statement
//! per table ([`chunk_sql`]) before the batch's posts. If a chunk's shared insert fails
//! (a task id the originator already used), it is rolled back and that chunk's tasks are
//! inserted one by one, each in its own savepoint, so only the duplicate fails; the
//! notices of a task that failed are never written. A batch of staged rows alone runs
//! the same inserts one by one on the writer's direct connection ([`direct_statements`]).

use std::sync::{Arc, OnceLock};

use sqlx::SqliteConnection;

use super::rows::{Col, nulls, size_index, values_list};
use super::tasks;
use crate::model::TaskWrite;
use crate::store::StoreError;

/// A new task waiting for the flush.
pub(super) struct StagedTask {
    pub(super) write: TaskWrite,
    slot: TaskSlot,
}

/// Filled by the flush: whether the task was written.
#[derive(Clone, Default)]
pub(super) struct TaskSlot(Arc<OnceLock<Result<(), Arc<StoreError>>>>);

impl TaskSlot {
    /// What became of the task; [`StoreError::Conflict`] when its id was taken.
    pub(super) fn outcome(&self) -> Result<(), StoreError> {
        match self.0.get() {
            Some(Ok(())) => Ok(()),
            Some(Err(cause)) if matches!(**cause, StoreError::Conflict) => {
                Err(StoreError::Conflict)
            }
            Some(Err(cause)) => Err(StoreError::PostFailed(cause.clone())),
            None => Err(StoreError::Dropped),
        }
    }

    /// Whether the flush found that the task could not be written.
    pub(super) fn failed(&self) -> bool {
        matches!(self.0.get(), Some(Err(_)))
    }

    fn fill(&self, outcome: Result<(), Arc<StoreError>>) {
        let _ = self.0.set(outcome);
    }
}

impl StagedTask {
    pub(super) fn new(write: TaskWrite) -> (StagedTask, TaskSlot) {
        let slot = TaskSlot::default();
        (
            StagedTask {
                write,
                slot: slot.clone(),
            },
            slot,
        )
    }
}

/// The most tasks one flush statement writes; a larger batch takes several.
const CHUNK: usize = 64;

/// Chunk sizes with a statement of their own: a chunk of `n` tasks runs the statement
/// of the next size up, the rows past `n` bound as NULL (and skipped). Seven statements
/// (fourteen with the callback variant) stay prepared in the connection's cache.
const SIZES: [usize; 7] = [1, 2, 4, 8, 16, 32, CHUNK];

/// The statements writing up to `size` new tasks in one round trip, with (`callbacks`)
/// or without their first events' CallbackNotifications, inside the savepoint `tasks`.
///
/// Rows are bound as parameters of `VALUES` lists, one list per table: no JSON to
/// build on the writer's thread and none to parse and walk on SQLite's (walking a JSON
/// row with `->>` for each of 27 columns was about a fifth of SQLite's thread under the
/// `a2a` benchmark). Each present row carries its ordinal (1…n; NULL for padding): the
/// task's pk is the table's largest before the insert plus the ordinal, so the later
/// statements find it as the largest after it minus n plus the ordinal, without a
/// lookup and whatever order SQLite inserts in.
fn chunk_sql(size: usize, callbacks: bool) -> String {
    format!(
        "SAVEPOINT tasks;\n{};\nRELEASE tasks;",
        chunk_statements(size, callbacks).join(";\n")
    )
}

/// The inserts of [`chunk_sql`] one by one (tasks, assignees, events, and callbacks
/// when `callbacks`), for the direct connection, which runs them as separate statements.
fn chunk_statements(size: usize, callbacks: bool) -> Vec<String> {
    let rows = |arity: usize| values_list(arity, size);
    let this_pk = "(SELECT MAX(pk) FROM tasks) - ? + column1";
    let mut statements = vec![
        format!(
            "INSERT INTO tasks (pk, team_pk, task_id, description, data, originator_pk, assignee_pk,
                       callback_url, priority, required_capabilities, target_agent_id,
                       status, clarification_id, question, context, result_data, version,
                       created_at, updated_at, originator_inbox, chain, trace_id, trace,
                       assignee_role)
    SELECT (SELECT COALESCE(MAX(pk), 0) FROM tasks) + column1, column2, column3, column4,
           column5, column6, column7, column8, column9, column10, column11, column12,
           column13, column14, column15, column16, column17, column18, column19, column20,
           column21, column22, column23, column24
    FROM (VALUES {}) WHERE column1 IS NOT NULL",
            rows(tasks::NEW_TASK_COLUMNS + 1)
        ),
        format!(
            "INSERT INTO task_assignees (task_pk, agent_pk)
    SELECT {this_pk}, column2
    FROM (VALUES {}) WHERE column2 IS NOT NULL",
            rows(2)
        ),
        format!(
            "INSERT INTO task_events (task_pk, seq, kind, actor_pk, status, data, created_at)
    SELECT {this_pk}, column2, column3, column4, column5, column6, column7
    FROM (VALUES {}) WHERE column1 IS NOT NULL",
            rows(7)
        ),
    ];
    if callbacks {
        statements.push(format!(
            "INSERT INTO callbacks (task_pk, team_pk, url, event_seq, body, state, attempts,
                           next_attempt_at, created_at)
    SELECT {this_pk}, column2, column3, column4, column5, 'pending', 0, column6, column6
    FROM (VALUES {}) WHERE column3 IS NOT NULL",
            rows(6)
        ));
    }
    statements
}

/// The size a chunk of `n` tasks is written at (the next one up in [`SIZES`]), and its
/// statements: [`chunk_sql`] whole and [`chunk_statements`] one by one, built once.
fn statement(n: usize, callbacks: bool) -> (&'static str, &'static [String], usize) {
    type Built = OnceLock<(String, Vec<String>)>;
    static BUILT: [[Built; 2]; SIZES.len()] =
        [const { [const { OnceLock::new() }, const { OnceLock::new() }] }; SIZES.len()];
    let index = size_index(&SIZES, n).unwrap_or(SIZES.len() - 1);
    let size = SIZES[index];
    let (sql, parts) = BUILT[index][usize::from(callbacks)].get_or_init(|| {
        (
            chunk_sql(size, callbacks),
            chunk_statements(size, callbacks),
        )
    });
    (sql, parts, size)
}

/// The values of each of a chunk's statements ([`chunk_statements`]), padded to `size`
/// rows. Each present row carries its ordinal; the statements after the first start
/// with the chunk's count.
fn chunk_values(
    chunk: &[StagedTask],
    size: usize,
    callbacks: bool,
) -> Result<Vec<Vec<Col<'_>>>, StoreError> {
    let n = i64::try_from(chunk.len()).unwrap_or(i64::MAX);
    let (mut task_rows, mut assignees, mut events, mut hooks) = (
        Vec::with_capacity(20 * size),
        vec![Col::Int(n)],
        vec![Col::Int(n)],
        vec![Col::Int(n)],
    );
    for i in 0..size {
        let staged = chunk.get(i);
        let ordinal = Col::int(staged.and(i64::try_from(i + 1).ok()));
        task_rows.push(ordinal.clone());
        assignees.push(ordinal.clone());
        events.push(ordinal.clone());
        let Some(s) = staged else {
            task_rows.extend(nulls(tasks::NEW_TASK_COLUMNS));
            assignees.push(Col::Null);
            events.extend(nulls(6));
            hooks.extend(nulls(6));
            continue;
        };
        let (w, t) = (&s.write, &s.write.task);
        task_rows.extend(tasks::new_task_columns(t)?);
        assignees.push(Col::int(t.assignee_pk.map(|a| a.0)));
        events.extend(tasks::event_columns(&w.event)?);
        match &w.callback {
            Some((url, body)) => hooks.extend([
                ordinal,
                Col::Int(t.team_pk.0),
                Col::Text(url),
                Col::Int(w.event.seq),
                Col::Text(body),
                Col::Int(t.created_at.micros()),
            ]),
            None => hooks.extend(nulls(6)),
        }
    }
    let mut values = vec![task_rows, assignees, events];
    if callbacks {
        values.push(hooks);
    }
    Ok(values)
}

/// Writes one chunk (at most [`CHUNK`] tasks) in one round trip.
async fn write_chunk(conn: &mut SqliteConnection, chunk: &[StagedTask]) -> Result<(), StoreError> {
    let callbacks = chunk.iter().any(|s| s.write.callback.is_some());
    let (sql, _, size) = statement(chunk.len(), callbacks);
    chunk_values(chunk, size, callbacks)?
        .into_iter()
        .flatten()
        .fold(sqlx::query(sql), |q, col| col.bind(q))
        .execute(&mut *conn)
        .await?;
    Ok(())
}

/// Every staged task as statements and their values for the direct connection (see
/// `direct`), chunk by chunk.
pub(super) fn direct_statements(
    staged: &[StagedTask],
) -> Result<Vec<(&'static str, Vec<Col<'_>>)>, StoreError> {
    let mut out = Vec::new();
    for chunk in staged.chunks(CHUNK) {
        let callbacks = chunk.iter().any(|s| s.write.callback.is_some());
        let (_, parts, size) = statement(chunk.len(), callbacks);
        let values = chunk_values(chunk, size, callbacks)?;
        out.extend(parts.iter().map(String::as_str).zip(values));
    }
    Ok(out)
}

/// Marks every staged task written (after the direct connection committed them).
pub(super) fn written(staged: &[StagedTask]) {
    for s in staged {
        s.slot.fill(Ok(()));
    }
}

/// Writes every staged task inside the open transaction and fills each slot. One bad
/// task fails alone; if even a savepoint cannot be taken, every task fails.
pub(super) async fn flush_tasks(conn: &mut SqliteConnection, staged: Vec<StagedTask>) {
    for chunk in staged.chunks(CHUNK) {
        flush_chunk(conn, chunk).await;
    }
}

/// One chunk together, or (when that fails) each of its tasks alone.
async fn flush_chunk(conn: &mut SqliteConnection, chunk: &[StagedTask]) {
    let err = match write_chunk(conn, chunk).await {
        Ok(()) => {
            for s in chunk {
                s.slot.fill(Ok(()));
            }
            return;
        }
        Err(err) => err,
    };
    if let Err(undo) = sqlx::raw_sql("ROLLBACK TO tasks; RELEASE tasks")
        .execute(&mut *conn)
        .await
    {
        // No savepoint: the shared insert never started (the connection refused even
        // that), so nothing of these tasks is written.
        tracing::error!(error = %err, undo = %undo, tasks = chunk.len(), "staged tasks not written");
        let err = Arc::new(err);
        for s in chunk {
            s.slot.fill(Err(err.clone()));
        }
        return;
    }
    tracing::debug!(error = %err, tasks = chunk.len(), "shared task insert failed; inserting one by one");
    for s in chunk {
        s.slot.fill(one(conn, &s.write).await.map_err(Arc::new));
    }
}

/// One task in its own savepoint: written whole or not at all.
async fn one(conn: &mut SqliteConnection, write: &TaskWrite) -> Result<(), StoreError> {
    sqlx::raw_sql("SAVEPOINT task").execute(&mut *conn).await?;
    match tasks::insert(conn, write).await {
        Ok(()) => {
            sqlx::raw_sql("RELEASE task").execute(&mut *conn).await?;
            Ok(())
        }
        Err(err) => {
            sqlx::raw_sql("ROLLBACK TO task; RELEASE task")
                .execute(&mut *conn)
                .await?;
            Err(err)
        }
    }
}
