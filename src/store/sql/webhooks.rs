//! A task's webhooks (A2A push notification configs). Their outbox rows are written with
//! each history entry, in the entry's transaction (SQLite's trigger of migration 0016;
//! PostgreSQL's task write).

use switchboard_types::ids::TaskPk;

use crate::model::WebhookRecord;
use crate::store::StoreError;
use crate::store::columns::{WEBHOOK_COLUMNS, webhook};

for_each_engine! {
    /// A task's webhooks, oldest first.
    pub(crate) async fn of_task<'e>(
        ex: impl sqlx::Executor<'e, Database = Db>,
        task: TaskPk,
    ) -> Result<Vec<WebhookRecord>, StoreError> {
        // Built from constants only.
        let sql =
            format!("SELECT {WEBHOOK_COLUMNS} FROM task_webhooks WHERE task_pk = $1 ORDER BY pk");
        let rows = sqlx::query::<Db>(sqlx::AssertSqlSafe(sql))
            .bind(task.0)
            .fetch_all(ex)
            .await?;
        rows.iter().map(webhook).collect()
    }

    /// One webhook by its row.
    pub(crate) async fn by_pk<'e>(
        ex: impl sqlx::Executor<'e, Database = Db>,
        pk: i64,
    ) -> Result<Option<WebhookRecord>, StoreError> {
        // Built from constants only.
        let sql = format!("SELECT {WEBHOOK_COLUMNS} FROM task_webhooks WHERE pk = $1");
        let row = sqlx::query::<Db>(sqlx::AssertSqlSafe(sql))
            .bind(pk)
            .fetch_optional(ex)
            .await?;
        row.as_ref().map(webhook).transpose()
    }

    /// Adds the webhook, or replaces the one of the same id (its pending deliveries go to
    /// the new address); queues the entries after `replay_after` in the same transaction
    /// (written before the webhook was: a webhook set right after its task misses
    /// nothing).
    pub(crate) async fn put(
        conn: &mut Conn,
        w: &WebhookRecord,
        replay_after: Option<i64>,
    ) -> Result<(), StoreError> {
        let (scheme, credentials) = w.auth.clone().unzip();
        let pk: i64 = sqlx::query_scalar::<Db, i64>(
            "INSERT INTO task_webhooks (task_pk, team_pk, webhook_id, format, url, token,
                                        auth_scheme, auth_credentials, created_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
             ON CONFLICT (task_pk, webhook_id) DO UPDATE SET
                 format = excluded.format, url = excluded.url, token = excluded.token,
                 auth_scheme = excluded.auth_scheme,
                 auth_credentials = excluded.auth_credentials
             RETURNING pk",
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
        .fetch_one(&mut *conn)
        .await?;
        sqlx::query::<Db>(
            "UPDATE callbacks SET url = $1 WHERE state = 'pending' AND webhook_pk = $2",
        )
        .bind(&w.url)
        .bind(pk)
        .execute(&mut *conn)
        .await?;
        if let Some(after) = replay_after {
            sqlx::query::<Db>(
                "INSERT INTO callbacks (task_pk, team_pk, url, event_seq, body, state, attempts,
                                        next_attempt_at, created_at, webhook_pk)
                 SELECT e.task_pk, w.team_pk, w.url, e.seq, '', 'pending', 0, $1, $1, w.pk
                 FROM task_events e JOIN task_webhooks w ON w.task_pk = e.task_pk
                 WHERE w.pk = $2 AND e.seq > $3
                   AND NOT EXISTS (SELECT 1 FROM callbacks c
                                   WHERE c.webhook_pk = w.pk AND c.event_seq = e.seq)
                 ORDER BY e.seq",
            )
            .bind(w.created_at.micros())
            .bind(pk)
            .bind(after)
            .execute(conn)
            .await?;
        }
        Ok(())
    }

    /// Removes the webhook with what it still had to send; `false` when there was none.
    pub(crate) async fn delete(
        conn: &mut Conn,
        task: TaskPk,
        webhook_id: &str,
    ) -> Result<bool, StoreError> {
        sqlx::query::<Db>(
            "DELETE FROM callbacks
             WHERE webhook_pk = (SELECT pk FROM task_webhooks
                                 WHERE task_pk = $1 AND webhook_id = $2)",
        )
        .bind(task.0)
        .bind(webhook_id)
        .execute(&mut *conn)
        .await?;
        let removed =
            sqlx::query::<Db>("DELETE FROM task_webhooks WHERE task_pk = $1 AND webhook_id = $2")
                .bind(task.0)
                .bind(webhook_id)
                .execute(conn)
                .await?;
        Ok(removed.rows_affected() > 0)
    }
}
