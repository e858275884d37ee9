//! Tasks, their history, the callback outbox and the teams' callback secrets.

use serde::Serialize;
use serde::de::DeserializeOwned;
use sqlx::sqlite::SqliteRow;
use sqlx::{QueryBuilder, Row, Sqlite, SqliteConnection, SqliteExecutor};

use super::StoreError;
use crate::core::messages::Priority;
use crate::core::tasks::{
    CallbackDelivery, DeliveryState, StoredTaskEvent, TaskEventRecord, TaskRecord, TaskRole,
    TaskStatus,
};
use crate::core::time::Timestamp;

const COLUMNS: &str = "pk, team_pk, task_id, description, data, originator_pk, assignee_pk, \
     callback_url, priority, required_capabilities, target_agent_id, status, clarification_id, \
     question, context, result_data, callback_delivery, version, created_at, updated_at";

fn json<T: Serialize>(value: &T) -> Result<String, StoreError> {
    serde_json::to_string(value).map_err(|e| StoreError::Corrupt(format!("encoding JSON: {e}")))
}

fn from_json<T: DeserializeOwned>(text: &str, what: &str) -> Result<T, StoreError> {
    serde_json::from_str(text).map_err(|e| StoreError::Corrupt(format!("task {what}: {e}")))
}

fn parsed<T: std::str::FromStr>(text: String, what: &str) -> Result<T, StoreError> {
    text.parse()
        .map_err(|_| StoreError::Corrupt(format!("task {what} '{text}'")))
}

fn from_row(row: &SqliteRow) -> Result<TaskRecord, StoreError> {
    let clarification_id: Option<String> = row.try_get("clarification_id")?;
    let question: Option<String> = row.try_get("question")?;
    let result_data: Option<String> = row.try_get("result_data")?;
    let delivery: Option<String> = row.try_get("callback_delivery")?;
    Ok(TaskRecord {
        pk: row.try_get("pk")?,
        team_pk: row.try_get("team_pk")?,
        task_id: row.try_get("task_id")?,
        description: row.try_get("description")?,
        data: from_json(&row.try_get::<String, _>("data")?, "data")?,
        originator_pk: row.try_get("originator_pk")?,
        assignee_pk: row.try_get("assignee_pk")?,
        callback_url: row.try_get("callback_url")?,
        priority: parsed::<Priority>(row.try_get("priority")?, "priority")?,
        required_capabilities: from_json(
            &row.try_get::<String, _>("required_capabilities")?,
            "capabilities",
        )?,
        target_agent_id: row.try_get("target_agent_id")?,
        status: parsed::<TaskStatus>(row.try_get("status")?, "status")?,
        clarification: clarification_id.zip(question),
        context: from_json(&row.try_get::<String, _>("context")?, "context")?,
        result_data: match result_data {
            Some(text) => from_json(&text, "result_data")?,
            None => serde_json::Value::Null,
        },
        callback_delivery: delivery
            .map(|text| from_json(&text, "callback_delivery"))
            .transpose()?,
        version: row.try_get("version")?,
        created_at: Timestamp::from_micros(row.try_get("created_at")?),
        updated_at: Timestamp::from_micros(row.try_get("updated_at")?),
    })
}

/// Inserts a new task with its first event (and its assignee, if it has one), in one
/// round trip; [`StoreError::Conflict`] when the team already has a task with this id.
///
/// With `callback` (`url`, `body`), the CallbackNotification of the event is queued in
/// the same statement. Atomic: on any error nothing is written.
pub async fn insert(
    conn: &mut SqliteConnection,
    t: &TaskRecord,
    event: &TaskEventRecord,
    callback: Option<(&str, &str)>,
) -> Result<(), StoreError> {
    let (url, body) = callback.unzip();
    let (clarification_id, question) = t.clarification.clone().unzip();
    sqlx::query(
        "INSERT INTO tasks (team_pk, task_id, description, data, originator_pk, assignee_pk,
                            callback_url, priority, required_capabilities, target_agent_id,
                            status, clarification_id, question, context, result_data,
                            callback_delivery, version, created_at, updated_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, NULL, ?, ?, ?);
         INSERT INTO task_assignees (task_pk, agent_pk)
         SELECT pk, assignee_pk FROM tasks
         WHERE team_pk = ? AND task_id = ? AND assignee_pk IS NOT NULL;
         INSERT INTO task_events (task_pk, seq, kind, actor_pk, status, data, created_at)
         SELECT pk, ?, ?, ?, ?, ?, ? FROM tasks WHERE team_pk = ? AND task_id = ?;
         INSERT INTO callbacks (task_pk, team_pk, url, event_seq, body, state, attempts,
                                next_attempt_at, created_at)
         SELECT pk, team_pk, ?, ?, ?, 'pending', 0, created_at, created_at FROM tasks
         WHERE team_pk = ? AND task_id = ? AND ? IS NOT NULL;",
    )
    .bind(t.team_pk)
    .bind(&t.task_id)
    .bind(&t.description)
    .bind(json(&t.data)?)
    .bind(t.originator_pk)
    .bind(t.assignee_pk)
    .bind(&t.callback_url)
    .bind(t.priority.as_str())
    .bind(json(&t.required_capabilities)?)
    .bind(&t.target_agent_id)
    .bind(t.status.as_str())
    .bind(clarification_id)
    .bind(question)
    .bind(json(&t.context)?)
    .bind(json(&t.result_data)?)
    .bind(t.version)
    .bind(t.created_at.micros())
    .bind(t.updated_at.micros())
    .bind(t.team_pk)
    .bind(&t.task_id)
    .bind(event.seq)
    .bind(event.kind)
    .bind(event.actor_pk)
    .bind(event.status.as_str())
    .bind(json(&event.data)?)
    .bind(event.created_at.micros())
    .bind(t.team_pk)
    .bind(&t.task_id)
    .bind(url)
    .bind(event.seq)
    .bind(body)
    .bind(t.team_pk)
    .bind(&t.task_id)
    .bind(url)
    .execute(conn)
    .await?;
    Ok(())
}

/// Writes the task's changeable state and its new event (recording a new assignee as
/// one that may read the task) if its version is still `expected_version`, in one
/// round trip; `false` when someone changed it first (nothing is written then).
///
/// With `callback` (`url`, `body`), the event's CallbackNotification is queued in the
/// same statement.
pub async fn update(
    conn: &mut SqliteConnection,
    t: &TaskRecord,
    expected_version: i64,
    event: &TaskEventRecord,
    callback: Option<(&str, &str)>,
) -> Result<bool, StoreError> {
    let (clarification_id, question) = t.clarification.clone().unzip();
    let (url, body) = callback.unzip();
    // Each statement after the UPDATE writes only if the one before it did
    // (`changes()` counts the statement before; the assignee row is REPLACEd so it
    // always counts one), so nothing at all changed exactly when the version check
    // failed.
    let done = sqlx::query(
        "UPDATE tasks SET assignee_pk = ?, status = ?, clarification_id = ?, question = ?,
                          context = ?, result_data = ?, version = ?, updated_at = ?
         WHERE pk = ? AND version = ?;
         INSERT INTO task_events (task_pk, seq, kind, actor_pk, status, data, created_at)
         SELECT ?, ?, ?, ?, ?, ?, ? WHERE changes() = 1;
         INSERT OR REPLACE INTO task_assignees (task_pk, agent_pk)
         SELECT ?, ? WHERE changes() = 1 AND ? IS NOT NULL;
         INSERT INTO callbacks (task_pk, team_pk, url, event_seq, body, state, attempts,
                                next_attempt_at, created_at)
         SELECT ?, ?, ?, ?, ?, 'pending', 0, ?, ? WHERE changes() = 1 AND ? IS NOT NULL;",
    )
    .bind(t.assignee_pk)
    .bind(t.status.as_str())
    .bind(clarification_id)
    .bind(question)
    .bind(json(&t.context)?)
    .bind(json(&t.result_data)?)
    .bind(t.version)
    .bind(t.updated_at.micros())
    .bind(t.pk)
    .bind(expected_version)
    .bind(t.pk)
    .bind(event.seq)
    .bind(event.kind)
    .bind(event.actor_pk)
    .bind(event.status.as_str())
    .bind(json(&event.data)?)
    .bind(event.created_at.micros())
    .bind(t.pk)
    .bind(t.assignee_pk)
    .bind(t.assignee_pk)
    .bind(t.pk)
    .bind(t.team_pk)
    .bind(url)
    .bind(event.seq)
    .bind(body)
    .bind(t.updated_at.micros())
    .bind(t.updated_at.micros())
    .bind(url)
    .execute(conn)
    .await?;
    Ok(done.rows_affected() > 0)
}

pub async fn find<'e, E: SqliteExecutor<'e>>(
    ex: E,
    team_pk: i64,
    task_id: &str,
) -> Result<Option<TaskRecord>, StoreError> {
    // Built from constants only.
    let row = sqlx::query(sqlx::AssertSqlSafe(format!(
        "SELECT {COLUMNS} FROM tasks WHERE team_pk = ? AND task_id = ?"
    )))
    .bind(team_pk)
    .bind(task_id)
    .fetch_optional(ex)
    .await?;
    row.as_ref().map(from_row).transpose()
}

/// Whether the agent is or was assigned the task.
pub async fn was_assigned<'e, E: SqliteExecutor<'e>>(
    ex: E,
    task_pk: i64,
    agent_pk: i64,
) -> Result<bool, StoreError> {
    let found: Option<i64> =
        sqlx::query_scalar("SELECT 1 FROM task_assignees WHERE agent_pk = ? AND task_pk = ?")
            .bind(agent_pk)
            .bind(task_pk)
            .fetch_optional(ex)
            .await?;
    Ok(found.is_some())
}

/// The task's history, oldest first.
pub async fn events<'e, E: SqliteExecutor<'e>>(
    ex: E,
    task_pk: i64,
) -> Result<Vec<StoredTaskEvent>, StoreError> {
    let rows = sqlx::query(
        "SELECT seq, kind, actor_pk, status, data, created_at FROM task_events
         WHERE task_pk = ? ORDER BY seq",
    )
    .bind(task_pk)
    .fetch_all(ex)
    .await?;
    rows.iter()
        .map(|row| {
            Ok(StoredTaskEvent {
                seq: row.try_get("seq")?,
                kind: row.try_get("kind")?,
                actor_pk: row.try_get("actor_pk")?,
                status: parsed(row.try_get("status")?, "event status")?,
                data: from_json(&row.try_get::<String, _>("data")?, "event data")?,
                created_at: Timestamp::from_micros(row.try_get("created_at")?),
            })
        })
        .collect()
}

fn delivery_from_row(row: &SqliteRow) -> Result<CallbackDelivery, StoreError> {
    Ok(CallbackDelivery {
        delivery_id: row.try_get("pk")?,
        event_seq: row.try_get("event_seq")?,
        state: match row.try_get::<String, _>("state")?.as_str() {
            "delivered" => DeliveryState::Delivered,
            "failed" => DeliveryState::Failed,
            _ => DeliveryState::Pending,
        },
        attempts: row.try_get("attempts")?,
        last_status: row.try_get("last_status")?,
        last_error: row.try_get("last_error")?,
        finished_at: row
            .try_get::<Option<i64>, _>("finished_at")?
            .map(Timestamp::from_micros),
    })
}

/// Every callback of the task, oldest first.
pub async fn callbacks_of<'e, E: SqliteExecutor<'e>>(
    ex: E,
    task_pk: i64,
) -> Result<Vec<CallbackDelivery>, StoreError> {
    let rows = sqlx::query(
        "SELECT pk, event_seq, state, attempts, last_status, last_error, finished_at
         FROM callbacks WHERE task_pk = ? ORDER BY pk",
    )
    .bind(task_pk)
    .fetch_all(ex)
    .await?;
    rows.iter().map(delivery_from_row).collect()
}

/// One page of the agent's tasks, newest first, before the task `before` (a pk).
pub async fn list<'e, E: SqliteExecutor<'e>>(
    ex: E,
    agent_pk: i64,
    role: Option<TaskRole>,
    statuses: &[TaskStatus],
    before: Option<i64>,
    limit: i64,
) -> Result<Vec<TaskRecord>, StoreError> {
    let mut q = QueryBuilder::<Sqlite>::new(format!("SELECT {COLUMNS} FROM tasks WHERE ("));
    let assigned = "pk IN (SELECT task_pk FROM task_assignees WHERE agent_pk = ";
    match role {
        Some(TaskRole::Originated) => {
            q.push("originator_pk = ").push_bind(agent_pk);
        }
        Some(TaskRole::Assigned) => {
            q.push(assigned).push_bind(agent_pk).push(")");
        }
        None => {
            q.push("originator_pk = ")
                .push_bind(agent_pk)
                .push(" OR ")
                .push(assigned)
                .push_bind(agent_pk)
                .push(")");
        }
    }
    q.push(")");
    if !statuses.is_empty() {
        q.push(" AND status IN (");
        let mut list = q.separated(", ");
        for s in statuses {
            list.push_bind(s.as_str());
        }
        q.push(")");
    }
    if let Some(before) = before {
        q.push(" AND pk < ").push_bind(before);
    }
    q.push(" ORDER BY pk DESC LIMIT ").push_bind(limit);
    let rows = q.build().fetch_all(ex).await?;
    rows.iter().map(from_row).collect()
}

/// Open (in-progress or input-required) tasks per assignee.
pub async fn open_counts<'e, E: SqliteExecutor<'e>>(ex: E) -> Result<Vec<(i64, i64)>, StoreError> {
    let rows = sqlx::query(
        "SELECT assignee_pk, COUNT(*) FROM tasks
         WHERE status IN ('in-progress', 'input-required') AND assignee_pk IS NOT NULL
         GROUP BY assignee_pk",
    )
    .fetch_all(ex)
    .await?;
    rows.iter()
        .map(|row| Ok((row.try_get(0)?, row.try_get(1)?)))
        .collect()
}

/// A callback that is due for an attempt.
#[derive(Debug, Clone)]
pub struct DueCallback {
    pub pk: i64,
    pub task_pk: i64,
    pub team_pk: i64,
    pub url: String,
    pub event_seq: i64,
    pub body: String,
    pub attempts: i64,
}

/// Callbacks to try now: the oldest pending callback of each task (a task's callbacks
/// go out in order, one at a time), if its next attempt is due.
pub async fn due_callbacks<'e, E: SqliteExecutor<'e>>(
    ex: E,
    now: Timestamp,
    limit: i64,
) -> Result<Vec<DueCallback>, StoreError> {
    let rows = sqlx::query(
        "SELECT c.pk, c.task_pk, c.team_pk, c.url, c.event_seq, c.body, c.attempts
         FROM callbacks c
         WHERE c.state = 'pending' AND c.next_attempt_at <= ?
           AND NOT EXISTS (SELECT 1 FROM callbacks e
                           WHERE e.task_pk = c.task_pk AND e.state = 'pending' AND e.pk < c.pk)
         ORDER BY c.next_attempt_at LIMIT ?",
    )
    .bind(now.micros())
    .bind(limit)
    .fetch_all(ex)
    .await?;
    rows.iter()
        .map(|row| {
            Ok(DueCallback {
                pk: row.try_get(0)?,
                task_pk: row.try_get(1)?,
                team_pk: row.try_get(2)?,
                url: row.try_get(3)?,
                event_seq: row.try_get(4)?,
                body: row.try_get(5)?,
                attempts: row.try_get(6)?,
            })
        })
        .collect()
}

/// When the next pending callback is due, if any is.
pub async fn next_callback_due<'e, E: SqliteExecutor<'e>>(
    ex: E,
) -> Result<Option<Timestamp>, StoreError> {
    let at: Option<i64> =
        sqlx::query_scalar("SELECT MIN(next_attempt_at) FROM callbacks WHERE state = 'pending'")
            .fetch_one(ex)
            .await?;
    Ok(at.map(Timestamp::from_micros))
}

/// The outcome of one attempt; with `next_attempt_at` the callback stays pending.
#[derive(Debug, Clone)]
pub struct Attempt {
    pub state: DeliveryState,
    pub attempts: i64,
    pub next_attempt_at: Timestamp,
    pub last_status: Option<i64>,
    pub last_error: Option<String>,
    pub finished_at: Option<Timestamp>,
}

/// Records an attempt on the callback and, as the task's latest delivery, on the task.
pub async fn record_attempt(
    conn: &mut SqliteConnection,
    callback_pk: i64,
    task_pk: i64,
    delivery: &CallbackDelivery,
    a: &Attempt,
) -> Result<(), StoreError> {
    let state = match a.state {
        DeliveryState::Pending => "pending",
        DeliveryState::Delivered => "delivered",
        DeliveryState::Failed => "failed",
    };
    sqlx::query(
        "UPDATE callbacks SET state = ?, attempts = ?, next_attempt_at = ?, last_status = ?,
                              last_error = ?, finished_at = ?
         WHERE pk = ?",
    )
    .bind(state)
    .bind(a.attempts)
    .bind(a.next_attempt_at.micros())
    .bind(a.last_status)
    .bind(&a.last_error)
    .bind(a.finished_at.map(Timestamp::micros))
    .bind(callback_pk)
    .execute(&mut *conn)
    .await?;
    sqlx::query(
        "UPDATE tasks SET callback_delivery = ?
         WHERE pk = ? AND NOT EXISTS (SELECT 1 FROM callbacks WHERE task_pk = ? AND pk > ?)",
    )
    .bind(json(delivery)?)
    .bind(task_pk)
    .bind(task_pk)
    .bind(callback_pk)
    .execute(conn)
    .await?;
    Ok(())
}

/// The team's callback secret and when it was last rotated.
pub async fn secret<'e, E: SqliteExecutor<'e>>(
    ex: E,
    team_pk: i64,
) -> Result<Option<(String, Timestamp)>, StoreError> {
    let row = sqlx::query("SELECT secret, rotated_at FROM team_secrets WHERE team_pk = ?")
        .bind(team_pk)
        .fetch_optional(ex)
        .await?;
    row.map(|row| Ok((row.try_get(0)?, Timestamp::from_micros(row.try_get(1)?))))
        .transpose()
}

pub async fn set_secret(
    conn: &mut SqliteConnection,
    team_pk: i64,
    secret: &str,
    at: Timestamp,
) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO team_secrets (team_pk, secret, rotated_at) VALUES (?, ?, ?)
         ON CONFLICT (team_pk) DO UPDATE SET secret = excluded.secret,
                                              rotated_at = excluded.rotated_at",
    )
    .bind(team_pk)
    .bind(secret)
    .bind(at.micros())
    .execute(conn)
    .await?;
    Ok(())
}
