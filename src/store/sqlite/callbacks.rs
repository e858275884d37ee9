//! The callback outbox (a row per `CallbackNotification` to POST) and the teams'
//! callback secrets.

use sqlx::{Row, SqliteConnection, SqliteExecutor};
use switchboard_types::ids::{TaskPk, TeamPk};
use switchboard_types::tasks::CallbackDelivery;
use switchboard_types::time::Timestamp;

use crate::model::{Attempt, DueCallback, TeamSecret};
use crate::store::StoreError;
use crate::store::columns::{DELIVERY_COLUMNS, delivery, to_json};

/// Every callback of the task to its `callback_url`, oldest first (its webhooks'
/// deliveries are the business of whoever set them).
pub(super) async fn callbacks_of<'e, E: SqliteExecutor<'e>>(
    ex: E,
    task: TaskPk,
) -> Result<Vec<CallbackDelivery>, StoreError> {
    // Built from constants only.
    let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
        "SELECT {DELIVERY_COLUMNS} FROM callbacks WHERE task_pk = ? AND webhook_pk IS NULL ORDER BY pk"
    )))
    .bind(task.0)
    .fetch_all(ex)
    .await?;
    rows.iter().map(delivery).collect()
}

/// Callbacks to try now: the oldest pending callback of each task and receiver (a
/// receiver gets a task's changes in order, one at a time), if its next attempt is due.
pub(super) async fn due<'e, E: SqliteExecutor<'e>>(
    ex: E,
    now: Timestamp,
    limit: i64,
) -> Result<Vec<DueCallback>, StoreError> {
    let rows = sqlx::query(
        "SELECT c.pk, c.task_pk, c.team_pk, c.url, c.event_seq, c.body, c.attempts, c.webhook_pk,
                t.task_id, t.trace
         FROM callbacks c JOIN tasks t ON t.pk = c.task_pk
         WHERE c.state = 'pending' AND c.next_attempt_at <= ?
           AND NOT EXISTS (SELECT 1 FROM callbacks e
                           WHERE e.task_pk = c.task_pk AND e.webhook_pk IS c.webhook_pk
                             AND e.state = 'pending' AND e.pk < c.pk)
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
                task_pk: TaskPk(row.try_get(1)?),
                team_pk: TeamPk(row.try_get(2)?),
                url: row.try_get(3)?,
                event_seq: row.try_get(4)?,
                body: row.try_get(5)?,
                attempts: row.try_get(6)?,
                webhook_pk: row.try_get(7)?,
                task_id: row.try_get(8)?,
                trace: crate::store::columns::Columns::opt_json(row, 9)?,
                taken_at: now,
            })
        })
        .collect()
}

/// When the next pending callback is due, if any is.
pub(super) async fn next_due<'e, E: SqliteExecutor<'e>>(
    ex: E,
) -> Result<Option<Timestamp>, StoreError> {
    let at: Option<i64> =
        sqlx::query_scalar("SELECT MIN(next_attempt_at) FROM callbacks WHERE state = 'pending'")
            .fetch_one(ex)
            .await?;
    Ok(at.map(Timestamp::from_micros))
}

/// Records an attempt on the callback and, when it is the latest to the task's
/// `callback_url`, on the task.
pub(super) async fn record_attempt(
    conn: &mut SqliteConnection,
    a: &Attempt,
) -> Result<(), StoreError> {
    sqlx::query(
        "UPDATE callbacks SET state = ?, attempts = ?, next_attempt_at = ?, last_status = ?,
                              last_error = ?, finished_at = ?
         WHERE pk = ?",
    )
    .bind(a.state.as_str())
    .bind(a.attempts)
    .bind(a.next_attempt_at.micros())
    .bind(a.last_status)
    .bind(&a.last_error)
    .bind(a.finished_at.map(Timestamp::micros))
    .bind(a.callback_pk)
    .execute(&mut *conn)
    .await?;
    sqlx::query(
        "UPDATE tasks SET callback_delivery = ?
         WHERE pk = ?
           AND (SELECT webhook_pk FROM callbacks WHERE pk = ?) IS NULL
           AND NOT EXISTS (SELECT 1 FROM callbacks
                           WHERE task_pk = ? AND pk > ? AND webhook_pk IS NULL)",
    )
    .bind(to_json(&a.delivery)?)
    .bind(a.task_pk.0)
    .bind(a.callback_pk)
    .bind(a.task_pk.0)
    .bind(a.callback_pk)
    .execute(conn)
    .await?;
    Ok(())
}

/// The team's callback secret and when it was last rotated.
pub(super) async fn secret<'e, E: SqliteExecutor<'e>>(
    ex: E,
    team: TeamPk,
) -> Result<Option<TeamSecret>, StoreError> {
    let row = sqlx::query("SELECT secret, rotated_at FROM team_secrets WHERE team_pk = ?")
        .bind(team.0)
        .fetch_optional(ex)
        .await?;
    row.map(|row| {
        Ok(TeamSecret {
            secret: row.try_get(0)?,
            rotated_at: Timestamp::from_micros(row.try_get(1)?),
        })
    })
    .transpose()
}

pub(super) async fn set_secret(
    conn: &mut SqliteConnection,
    team: TeamPk,
    secret: &str,
    at: Timestamp,
) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO team_secrets (team_pk, secret, rotated_at) VALUES (?, ?, ?)
         ON CONFLICT (team_pk) DO UPDATE SET secret = excluded.secret,
                                              rotated_at = excluded.rotated_at",
    )
    .bind(team.0)
    .bind(secret)
    .bind(at.micros())
    .execute(conn)
    .await?;
    Ok(())
}
