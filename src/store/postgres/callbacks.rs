//! A task's callbacks (the outbox the callback sender drains, claimed with `FOR UPDATE
//! SKIP LOCKED` so one node sends each) and the team's callback secret on PostgreSQL.

use std::time::Duration;

use sqlx::postgres::{PgConnection, PgExecutor};
use sqlx::{AssertSqlSafe, Row};
use switchboard_types::ids::{TaskPk, TeamPk};
use switchboard_types::tasks::CallbackDelivery;
use switchboard_types::time::Timestamp;

use crate::model::{Attempt, DueCallback, TeamSecret};
use crate::store::StoreError;
use crate::store::columns::{DELIVERY_COLUMNS, delivery, to_json};

/// Every callback of the task to its `callback_url`, oldest first.
pub(super) async fn callbacks_of<'e>(
    ex: impl PgExecutor<'e>,
    pk: TaskPk,
) -> Result<Vec<CallbackDelivery>, StoreError> {
    let sql = format!(
        "SELECT {DELIVERY_COLUMNS} FROM callbacks WHERE task_pk = $1 AND webhook_pk IS NULL
         ORDER BY pk"
    );
    let rows = sqlx::query(AssertSqlSafe(sql))
        .bind(pk.0)
        .fetch_all(ex)
        .await?;
    rows.iter().map(delivery).collect()
}

/// Callbacks to try now, **claimed** for this node: the oldest pending callback of each
/// task and receiver, if its next attempt is due, moved `claim` into the future in the
/// same statement (the sender's attempt is recorded within it; if this node dies first,
/// another node takes the callback up when the claim runs out). Rows another node is claiming are skipped (`SKIP LOCKED`) and
/// rows it claimed are not due any more, so with several nodes each callback is tried
/// by exactly one; recording the attempt sets its real next attempt.
pub(super) async fn due<'e>(
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

pub(super) async fn next_due<'e>(ex: impl PgExecutor<'e>) -> Result<Option<Timestamp>, StoreError> {
    let at: Option<i64> =
        sqlx::query_scalar("SELECT MIN(next_attempt_at) FROM callbacks WHERE state = 'pending'")
            .fetch_one(ex)
            .await?;
    Ok(at.map(Timestamp::from_micros))
}

/// Records an attempt on the callback and, when it is the latest to the task's
/// `callback_url`, on the task.
pub(super) async fn record_attempt(conn: &mut PgConnection, a: &Attempt) -> Result<(), StoreError> {
    sqlx::query(
        "UPDATE callbacks SET state = $1, attempts = $2, next_attempt_at = $3,
                              last_status = $4, last_error = $5, finished_at = $6
         WHERE pk = $7",
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
        "UPDATE tasks SET callback_delivery = $1
         WHERE pk = $2
           AND (SELECT webhook_pk FROM callbacks WHERE pk = $3) IS NULL
           AND NOT EXISTS (SELECT 1 FROM callbacks
                           WHERE task_pk = $2 AND pk > $3 AND webhook_pk IS NULL)",
    )
    .bind(to_json(&a.delivery)?)
    .bind(a.task_pk.0)
    .bind(a.callback_pk)
    .execute(conn)
    .await?;
    Ok(())
}

pub(super) async fn secret<'e>(
    ex: impl PgExecutor<'e>,
    team: TeamPk,
) -> Result<Option<TeamSecret>, StoreError> {
    let row = sqlx::query("SELECT secret, rotated_at FROM team_secrets WHERE team_pk = $1")
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
    conn: &mut PgConnection,
    team: TeamPk,
    secret: &str,
    at: Timestamp,
) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO team_secrets (team_pk, secret, rotated_at) VALUES ($1, $2, $3)
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
