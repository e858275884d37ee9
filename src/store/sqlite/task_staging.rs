//! New tasks staged for the batch's flush, as posts are.
//!
//! A task submission used to run its own statement inside the batch: one round trip to
//! SQLite's worker thread per task, one after the other, while a batch of messages waits
//! for a single flush. With the server half idle during submissions (docs/architecture.md,
//! "Tasks"), those hand-offs were what bounded them. Now a submission stages its task,
//! and the flush inserts every staged task with the constant statements of
//! [`FLUSH_TASKS`] before the batch's posts. If that shared insert fails (a task id the
//! originator already used), it is rolled back and the tasks are inserted one by one,
//! each in its own savepoint, so only the duplicate fails; the notices of a task that
//! failed are never written.

use std::sync::{Arc, OnceLock};

use serde_json::{Value, json};
use sqlx::SqliteConnection;

use super::tasks;
use crate::store::StoreError;
use crate::store::columns::to_json;
use crate::store::records::TaskWrite;

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

/// Every staged task's rows from one JSON array (bound once per statement): the task,
/// its assignee, its first event and, when it has one, that event's CallbackNotification.
/// The later statements find the task's row by its unique key (team, originator, id).
/// `INSERT … SELECT` through a temporary table is paid once per flush here, not once
/// per task as a statement per task would (see `tasks::insert_task_sql`).
const FLUSH_TASKS: &str = "
    SAVEPOINT tasks;
    INSERT INTO tasks (team_pk, task_id, description, data, originator_pk, assignee_pk,
                       callback_url, priority, required_capabilities, target_agent_id,
                       status, clarification_id, question, context, result_data,
                       callback_delivery, version, created_at, updated_at, originator_inbox)
    SELECT j.value->>0, j.value->>1, j.value->>2, j.value->>3, j.value->>4, j.value->>5,
           j.value->>6, j.value->>7, j.value->>8, j.value->>9, j.value->>10, j.value->>11,
           j.value->>12, j.value->>13, j.value->>14, NULL, j.value->>15, j.value->>16,
           j.value->>17, j.value->>26
    FROM jsonb_each(?) j;
    INSERT INTO task_assignees (task_pk, agent_pk)
    SELECT t.pk, t.assignee_pk
    FROM jsonb_each(?) j JOIN tasks t
      ON t.team_pk = j.value->>0 AND t.originator_pk = j.value->>4 AND t.task_id = j.value->>1
    WHERE t.assignee_pk IS NOT NULL;
    INSERT INTO task_events (task_pk, seq, kind, actor_pk, status, data, created_at)
    SELECT t.pk, j.value->>18, j.value->>19, j.value->>20, j.value->>21, j.value->>22,
           j.value->>23
    FROM jsonb_each(?) j JOIN tasks t
      ON t.team_pk = j.value->>0 AND t.originator_pk = j.value->>4 AND t.task_id = j.value->>1;
    INSERT INTO callbacks (task_pk, team_pk, url, event_seq, body, state, attempts,
                           next_attempt_at, created_at)
    SELECT t.pk, t.team_pk, j.value->>24, j.value->>18, j.value->>25, 'pending', 0,
           t.created_at, t.created_at
    FROM jsonb_each(?) j JOIN tasks t
      ON t.team_pk = j.value->>0 AND t.originator_pk = j.value->>4 AND t.task_id = j.value->>1
    WHERE j.value->>24 IS NOT NULL;
    RELEASE tasks;";

/// One task's row for [`FLUSH_TASKS`]: JSON columns as JSON text, as the table keeps
/// them.
fn row(w: &TaskWrite) -> Result<Value, StoreError> {
    let (t, e) = (&w.task, &w.event);
    let (clarification_id, question) = t.clarification.clone().unzip();
    let (url, body) = w.callback.clone().unzip();
    Ok(json!([
        t.team_pk.0,
        t.task_id,
        t.description,
        to_json(&t.data)?,
        t.originator_pk.0,
        t.assignee_pk.map(|a| a.0),
        t.callback_url,
        t.priority.as_str(),
        to_json(&t.required_capabilities)?,
        t.target_agent_id,
        t.status.as_str(),
        clarification_id,
        question,
        to_json(&t.context)?,
        to_json(&t.result_data)?,
        t.version,
        t.created_at.micros(),
        t.updated_at.micros(),
        e.seq,
        e.kind.as_str(),
        e.actor_pk.map(|a| a.0),
        e.status.as_str(),
        to_json(&e.data)?,
        e.created_at.micros(),
        url,
        body,
        t.originator_inbox,
    ]))
}

/// Writes every staged task inside the open transaction and fills each slot. One bad
/// task fails alone; if even a savepoint cannot be taken, every task fails.
pub(super) async fn flush_tasks(conn: &mut SqliteConnection, staged: Vec<StagedTask>) {
    let together = async {
        let rows = staged
            .iter()
            .map(|s| row(&s.write))
            .collect::<Result<Vec<Value>, StoreError>>()?;
        let rows = Value::Array(rows).to_string();
        sqlx::query(FLUSH_TASKS)
            .bind(rows.clone())
            .bind(rows.clone())
            .bind(rows.clone())
            .bind(rows)
            .execute(&mut *conn)
            .await?;
        Ok::<(), StoreError>(())
    };
    let err = match together.await {
        Ok(()) => {
            for s in &staged {
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
        tracing::error!(error = %err, undo = %undo, tasks = staged.len(), "staged tasks not written");
        let err = Arc::new(err);
        for s in &staged {
            s.slot.fill(Err(err.clone()));
        }
        return;
    }
    tracing::debug!(error = %err, tasks = staged.len(), "shared task insert failed; inserting one by one");
    for s in &staged {
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
