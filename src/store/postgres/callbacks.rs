//! Taking the due callbacks on PostgreSQL: claimed with `FOR UPDATE SKIP LOCKED`, so one
//! node sends each (the rest: `store/sql/callbacks.rs`).

use std::time::Duration;

use sqlx::postgres::PgExecutor;
use switchboard_types::time::Timestamp;

use crate::model::DueCallback;
use crate::store::StoreError;
use crate::store::columns::due_callback;

pub(crate) use crate::store::sql::callbacks::postgres::*;

/// Callbacks to try now, **claimed** for this node: the oldest pending callback of each
/// task and receiver, if its next attempt is due, moved `claim` into the future in the
/// same statement (the sender's attempt is recorded within it; if this node dies first,
/// another node takes the callback up when the claim runs out). Rows another node is claiming are skipped (`SKIP LOCKED`) and
/// rows it claimed are not due any more, so with several nodes each callback is tried
/// by exactly one; recording the attempt sets its real next attempt.
pub(crate) async fn due<'e>(
    ex: impl PgExecutor<'e>,
    now: Timestamp,
    limit: i64,
    claim: Duration,
) -> Result<Vec<DueCallback>, StoreError> {
    let claim = i64::try_from(claim.as_micros()).unwrap_or(i64::MAX / 2);
    let rows = sqlx::query(
        "WITH due AS (
             SELECT c.pk FROM callbacks c
             WHERE c.state = 'pending' AND c.next_attempt_at <= $1
               AND NOT EXISTS (SELECT 1 FROM callbacks e
                               WHERE e.task_pk = c.task_pk
                                 AND e.webhook_pk IS NOT DISTINCT FROM c.webhook_pk
                                 AND e.state = 'pending' AND e.pk < c.pk)
             ORDER BY c.next_attempt_at LIMIT $2
             FOR UPDATE OF c SKIP LOCKED)
         UPDATE callbacks c SET next_attempt_at = $1 + $3
         FROM due, tasks t WHERE c.pk = due.pk AND t.pk = c.task_pk
         RETURNING c.pk, c.task_pk, c.team_pk, c.url, c.event_seq, c.body, c.attempts,
                   c.webhook_pk, t.task_id, t.trace",
    )
    .bind(now.micros())
    .bind(limit)
    .bind(claim)
    .fetch_all(ex)
    .await?;
    rows.iter().map(|row| due_callback(row, now)).collect()
}
