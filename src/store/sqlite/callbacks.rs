//! Taking the due callbacks on SQLite: one process sends them (the rest:
//! `store/sql/callbacks.rs`).

use sqlx::SqliteExecutor;
use switchboard_types::time::Timestamp;

use crate::model::DueCallback;
use crate::store::StoreError;
use crate::store::columns::due_callback;

pub(crate) use crate::store::sql::callbacks::sqlite::*;

/// Callbacks to try now: the oldest pending callback of each task and receiver (a
/// receiver gets a task's changes in order, one at a time), if its next attempt is due.
pub(crate) async fn due<'e, E: SqliteExecutor<'e>>(
    ex: E,
    now: Timestamp,
    limit: i64,
    _claim: std::time::Duration,
) -> Result<Vec<DueCallback>, StoreError> {
    // One process owns the file: there is no other sender to claim against.
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
    rows.iter().map(|row| due_callback(row, now)).collect()
}
