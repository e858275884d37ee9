//! Taking the due callbacks on SQLite: one process sends them (the rest:
//! `store/sql/callbacks.rs`).

use sqlx::{Row, SqliteExecutor};
use switchboard_types::ids::{TaskPk, TeamPk};
use switchboard_types::time::Timestamp;

use crate::model::DueCallback;
use crate::store::StoreError;

pub(super) use crate::store::sql::callbacks::sqlite::*;

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
