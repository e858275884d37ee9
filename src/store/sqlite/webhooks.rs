//! A task's webhooks. Their outbox rows are written by the `task_events_to_webhooks`
//! trigger (migration 0016) with each history entry, in the entry's transaction.

use sqlx::{SqliteConnection, SqliteExecutor};
use switchboard_types::ids::TaskPk;

use crate::model::WebhookRecord;
use crate::store::StoreError;
use crate::store::columns::{WEBHOOK_COLUMNS as COLUMNS, webhook as from_row};

pub(super) async fn of_task<'e, E: SqliteExecutor<'e>>(
    ex: E,
    task: TaskPk,
) -> Result<Vec<WebhookRecord>, StoreError> {
    // Built from constants only.
    let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
        "SELECT {COLUMNS} FROM task_webhooks WHERE task_pk = ? ORDER BY pk"
    )))
    .bind(task.0)
    .fetch_all(ex)
    .await?;
    rows.iter().map(from_row).collect()
}

pub(super) async fn by_pk<'e, E: SqliteExecutor<'e>>(
    ex: E,
    pk: i64,
) -> Result<Option<WebhookRecord>, StoreError> {
    // Built from constants only.
    let row = sqlx::query(sqlx::AssertSqlSafe(format!(
        "SELECT {COLUMNS} FROM task_webhooks WHERE pk = ?"
    )))
    .bind(pk)
    .fetch_optional(ex)
    .await?;
    row.as_ref().map(from_row).transpose()
}

/// Adds the webhook, or replaces the one of the same id (its pending deliveries go to
/// the new address); queues the entries after `replay_after` in the same transaction
/// (written before the webhook was: a webhook set right after its task misses nothing).
pub(super) async fn put(
    conn: &mut SqliteConnection,
    w: &WebhookRecord,
    replay_after: Option<i64>,
) -> Result<(), StoreError> {
    let (scheme, credentials) = w.auth.clone().unzip();
    sqlx::query(
        "INSERT INTO task_webhooks (task_pk, team_pk, webhook_id, format, url, token,
                                    auth_scheme, auth_credentials, created_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
         ON CONFLICT (task_pk, webhook_id) DO UPDATE SET
             format = excluded.format, url = excluded.url, token = excluded.token,
             auth_scheme = excluded.auth_scheme, auth_credentials = excluded.auth_credentials;
         UPDATE callbacks SET url = ?
         WHERE state = 'pending'
           AND webhook_pk = (SELECT pk FROM task_webhooks WHERE task_pk = ? AND webhook_id = ?);
         INSERT INTO callbacks (task_pk, team_pk, url, event_seq, body, state, attempts,
                                next_attempt_at, created_at, webhook_pk)
         SELECT e.task_pk, w.team_pk, w.url, e.seq, '', 'pending', 0, ?, ?, w.pk
         FROM task_events e JOIN task_webhooks w ON w.task_pk = e.task_pk
         WHERE w.task_pk = ? AND w.webhook_id = ? AND ? IS NOT NULL AND e.seq > ?
           AND NOT EXISTS (SELECT 1 FROM callbacks c
                           WHERE c.webhook_pk = w.pk AND c.event_seq = e.seq);",
    )
    .bind(w.task_pk.0)
    .bind(w.team_pk.0)
    .bind(&*w.webhook_id)
    .bind(&w.format)
    .bind(&w.url)
    .bind(&w.token)
    .bind(scheme)
    .bind(credentials.flatten())
    .bind(w.created_at.micros())
    .bind(&w.url)
    .bind(w.task_pk.0)
    .bind(&*w.webhook_id)
    .bind(w.created_at.micros())
    .bind(w.created_at.micros())
    .bind(w.task_pk.0)
    .bind(&*w.webhook_id)
    .bind(replay_after)
    .bind(replay_after)
    .execute(conn)
    .await?;
    Ok(())
}

/// Removes the webhook with what it still had to send; `false` when there was none.
pub(super) async fn delete(
    conn: &mut SqliteConnection,
    task: TaskPk,
    webhook_id: &str,
) -> Result<bool, StoreError> {
    let removed = sqlx::query(
        "DELETE FROM callbacks
         WHERE webhook_pk = (SELECT pk FROM task_webhooks WHERE task_pk = ? AND webhook_id = ?);
         DELETE FROM task_webhooks WHERE task_pk = ? AND webhook_id = ?;",
    )
    .bind(task.0)
    .bind(webhook_id)
    .bind(task.0)
    .bind(webhook_id)
    .execute(conn)
    .await?;
    // Counted over both statements: nothing at all when there was no such webhook.
    Ok(removed.rows_affected() > 0)
}
