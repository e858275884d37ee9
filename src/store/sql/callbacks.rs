//! A task's callbacks (the outbox the callback sender drains) and the team's callback
//! secret, the same on both engines except taking the due callbacks: PostgreSQL claims
//! them for one node (`FOR UPDATE SKIP LOCKED`), SQLite has one (each engine's
//! `callbacks.rs`).

use sqlx::Row;
use switchboard_types::ids::{TaskPk, TeamPk};
use switchboard_types::tasks::CallbackDelivery;
use switchboard_types::time::Timestamp;

use crate::model::{Attempt, TeamSecret};
use crate::store::StoreError;
use crate::store::columns::{DELIVERY_COLUMNS, delivery, to_json};

for_each_engine! {
    /// Every callback of the task to its `callback_url`, oldest first.
    pub(crate) async fn callbacks_of<'e>(
        ex: impl sqlx::Executor<'e, Database = Db>,
        pk: TaskPk,
    ) -> Result<Vec<CallbackDelivery>, StoreError> {
        let sql = format!(
            "SELECT {DELIVERY_COLUMNS} FROM callbacks WHERE task_pk = $1 AND webhook_pk IS NULL
             ORDER BY pk"
        );
        let rows = sqlx::query::<Db>(sqlx::AssertSqlSafe(sql))
            .bind(pk.0)
            .fetch_all(ex)
            .await?;
        rows.iter().map(delivery).collect()
    }

    /// When the next pending callback is due, if any is.
    pub(crate) async fn next_due<'e>(
        ex: impl sqlx::Executor<'e, Database = Db>,
    ) -> Result<Option<Timestamp>, StoreError> {
        let at: Option<i64> = sqlx::query_scalar::<Db, _>(
            "SELECT MIN(next_attempt_at) FROM callbacks WHERE state = 'pending'",
        )
        .fetch_one(ex)
        .await?;
        Ok(at.map(Timestamp::from_micros))
    }

    /// Records an attempt on the callback and, when it is the latest to the task's
    /// `callback_url`, on the task.
    pub(crate) async fn record_attempt(conn: &mut Conn, a: &Attempt) -> Result<(), StoreError> {
        sqlx::query::<Db>(
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
        sqlx::query::<Db>(
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

    /// The team's callback secret and when it was last rotated.
    pub(crate) async fn secret<'e>(
        ex: impl sqlx::Executor<'e, Database = Db>,
        team: TeamPk,
    ) -> Result<Option<TeamSecret>, StoreError> {
        let row =
            sqlx::query::<Db>("SELECT secret, rotated_at FROM team_secrets WHERE team_pk = $1")
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

    pub(crate) async fn set_secret(
        conn: &mut Conn,
        team: TeamPk,
        secret: &str,
        at: Timestamp,
    ) -> Result<(), StoreError> {
        sqlx::query::<Db>(
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
}
