//! Task webhooks, outside A2A agents and retention on PostgreSQL.

use sqlx::postgres::{PgConnection, PgExecutor};
use sqlx::{AssertSqlSafe, Row};
use switchboard_types::ids::TaskPk;

use crate::model::RemoteAgentRecord;
use crate::model::WebhookRecord;
use crate::model::{MessageSweep, MessageSweepSpec};
use crate::store::StoreError;
use crate::store::columns::{REMOTE_COLUMNS, WEBHOOK_COLUMNS, remote, webhook};

pub(super) async fn webhooks_of<'e>(
    ex: impl PgExecutor<'e>,
    task: TaskPk,
) -> Result<Vec<WebhookRecord>, StoreError> {
    let sql = format!("SELECT {WEBHOOK_COLUMNS} FROM task_webhooks WHERE task_pk = $1 ORDER BY pk");
    let rows = sqlx::query(AssertSqlSafe(sql))
        .bind(task.0)
        .fetch_all(ex)
        .await?;
    rows.iter().map(webhook).collect()
}

pub(super) async fn webhook_by_pk<'e>(
    ex: impl PgExecutor<'e>,
    pk: i64,
) -> Result<Option<WebhookRecord>, StoreError> {
    let sql = format!("SELECT {WEBHOOK_COLUMNS} FROM task_webhooks WHERE pk = $1");
    let row = sqlx::query(AssertSqlSafe(sql))
        .bind(pk)
        .fetch_optional(ex)
        .await?;
    row.as_ref().map(webhook).transpose()
}

/// Adds the webhook or replaces the one of the same id (its pending deliveries go to the
/// new address); queues the entries after `replay_after` (written before the webhook
/// was), in the job's transaction.
pub(super) async fn put_webhook(
    conn: &mut PgConnection,
    w: &WebhookRecord,
    replay_after: Option<i64>,
) -> Result<(), StoreError> {
    let (scheme, credentials) = w.auth.clone().unzip();
    let pk: i64 = sqlx::query_scalar(
        "INSERT INTO task_webhooks (task_pk, team_pk, webhook_id, format, url, token,
                                    auth_scheme, auth_credentials, created_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
         ON CONFLICT (task_pk, webhook_id) DO UPDATE SET
             format = excluded.format, url = excluded.url, token = excluded.token,
             auth_scheme = excluded.auth_scheme, auth_credentials = excluded.auth_credentials
         RETURNING pk",
    )
    .bind(w.task_pk.0)
    .bind(w.team_pk.0)
    .bind(&w.webhook_id)
    .bind(&w.format)
    .bind(&w.url)
    .bind(&w.token)
    .bind(scheme)
    .bind(credentials.flatten())
    .bind(w.created_at.micros())
    .fetch_one(&mut *conn)
    .await?;
    sqlx::query("UPDATE callbacks SET url = $1 WHERE state = 'pending' AND webhook_pk = $2")
        .bind(&w.url)
        .bind(pk)
        .execute(&mut *conn)
        .await?;
    if let Some(after) = replay_after {
        sqlx::query(
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
pub(super) async fn delete_webhook(
    conn: &mut PgConnection,
    task: TaskPk,
    webhook_id: &str,
) -> Result<bool, StoreError> {
    let removed: i64 = sqlx::query_scalar(
        "WITH w AS (DELETE FROM task_webhooks WHERE task_pk = $1 AND webhook_id = $2
                    RETURNING pk),
              c AS (DELETE FROM callbacks WHERE webhook_pk IN (SELECT pk FROM w))
         SELECT COUNT(*) FROM w",
    )
    .bind(task.0)
    .bind(webhook_id)
    .fetch_one(conn)
    .await?;
    Ok(removed > 0)
}

pub(super) async fn remote_agents<'e>(
    ex: impl PgExecutor<'e>,
) -> Result<Vec<RemoteAgentRecord>, StoreError> {
    let sql = format!(
        "SELECT {REMOTE_COLUMNS} FROM a2a_remotes r JOIN agents a ON a.pk = r.agent_pk
         WHERE a.removed_at IS NULL ORDER BY r.agent_pk"
    );
    let rows = sqlx::query(AssertSqlSafe(sql)).fetch_all(ex).await?;
    rows.iter().map(remote).collect()
}

pub(super) async fn put_remote_agent(
    conn: &mut PgConnection,
    r: &RemoteAgentRecord,
) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO a2a_remotes (agent_pk, team_pk, card_url, interface_url, \"authorization\",
                                  card, refreshed_at, created_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
         ON CONFLICT (agent_pk) DO UPDATE SET
             card_url = excluded.card_url, interface_url = excluded.interface_url,
             \"authorization\" = excluded.\"authorization\", card = excluded.card,
             refreshed_at = excluded.refreshed_at",
    )
    .bind(r.agent_pk.0)
    .bind(r.team_pk.0)
    .bind(&r.card_url)
    .bind(&r.interface_url)
    .bind(&r.authorization)
    .bind(&r.card)
    .bind(r.refreshed_at.micros())
    .bind(r.created_at.micros())
    .execute(conn)
    .await?;
    Ok(())
}

/// One batch of a team's messages, oldest first after `spec.after` (the same rule as
/// SQLite's `retention::expire_messages`).
pub(super) async fn expire_messages(
    conn: &mut PgConnection,
    spec: MessageSweepSpec,
) -> Result<MessageSweep, StoreError> {
    let rows = sqlx::query(
        "SELECT pk, created_at FROM messages WHERE team_pk = $1 AND pk > $2
         ORDER BY pk LIMIT $3",
    )
    .bind(spec.team.0)
    .bind(spec.after)
    .bind(spec.limit)
    .fetch_all(&mut *conn)
    .await?;
    let young = spec.any_before.max(spec.read_before).unwrap_or(i64::MIN);
    let mut old: Vec<(i64, i64)> = Vec::with_capacity(rows.len());
    let mut reached_young = rows.len() < usize::try_from(spec.limit).unwrap_or(usize::MAX);
    for row in &rows {
        let (pk, at): (i64, i64) = (row.try_get(0)?, row.try_get(1)?);
        if at >= young {
            reached_young = true;
            break;
        }
        old.push((pk, at));
    }
    let last = old.last().map(|(pk, _)| *pk);
    let pks: Vec<i64> = old.iter().map(|(pk, _)| *pk).collect();
    let unread: Vec<i64> = sqlx::query_scalar(
        "SELECT DISTINCT message_pk FROM inbox WHERE read_at IS NULL AND message_pk = ANY($1)",
    )
    .bind(&pks)
    .fetch_all(&mut *conn)
    .await?;
    let gone: Vec<i64> = old
        .iter()
        .filter(|(pk, at)| {
            spec.any_before.is_some_and(|cut| *at < cut)
                || (spec.read_before.is_some_and(|cut| *at < cut) && !unread.contains(pk))
        })
        .map(|(pk, _)| *pk)
        .collect();
    delete_keyed(
        conn,
        &[
            ("inbox", "message_pk"),
            ("responses", "original_pk"),
            ("responses", "response_pk"),
            ("messages", "pk"),
        ],
        &gone,
    )
    .await?;
    Ok(MessageSweep {
        removed: gone.len() as u64,
        next_after: if reached_young { None } else { last },
    })
}

/// `DELETE FROM table WHERE column = ANY(pks)` for each pair, dependents first.
async fn delete_keyed(
    conn: &mut PgConnection,
    tables: &[(&str, &str)],
    pks: &[i64],
) -> Result<(), StoreError> {
    if pks.is_empty() {
        return Ok(());
    }
    for (table, column) in tables {
        // Table and column names are this module's constants.
        let sql = format!("DELETE FROM {table} WHERE {column} = ANY($1)");
        sqlx::query(AssertSqlSafe(sql))
            .bind(pks)
            .execute(&mut *conn)
            .await?;
    }
    Ok(())
}

/// Up to `limit` of the team's finished tasks last changed before `before`, with their
/// history, assignees, callbacks and webhooks; one with a callback still to send stays.
pub(super) async fn expire_tasks(
    conn: &mut PgConnection,
    team: switchboard_types::ids::TeamPk,
    before: i64,
    limit: i64,
) -> Result<u64, StoreError> {
    let pks: Vec<i64> = sqlx::query_scalar(
        "SELECT t.pk FROM tasks t
         WHERE t.team_pk = $1 AND t.status IN ('success', 'failed', 'canceled')
           AND t.updated_at < $2
           AND NOT EXISTS (SELECT 1 FROM callbacks c
                           WHERE c.task_pk = t.pk AND c.state = 'pending')
         ORDER BY t.updated_at LIMIT $3",
    )
    .bind(team.0)
    .bind(before)
    .bind(limit)
    .fetch_all(&mut *conn)
    .await?;
    delete_keyed(
        conn,
        &[
            ("task_events", "task_pk"),
            ("task_assignees", "task_pk"),
            ("callbacks", "task_pk"),
            ("task_webhooks", "task_pk"),
            ("tasks", "pk"),
        ],
        &pks,
    )
    .await?;
    Ok(pks.len() as u64)
}

pub(super) async fn expire_idempotency_keys(
    conn: &mut PgConnection,
    before: i64,
    limit: i64,
) -> Result<u64, StoreError> {
    let done = sqlx::query(
        "DELETE FROM idempotency_keys WHERE (agent_pk, key) IN
           (SELECT agent_pk, key FROM idempotency_keys WHERE created_at < $1
            ORDER BY created_at LIMIT $2)",
    )
    .bind(before)
    .bind(limit)
    .execute(conn)
    .await?;
    Ok(done.rows_affected())
}

pub(super) async fn expire_callbacks(
    conn: &mut PgConnection,
    before: i64,
    limit: i64,
) -> Result<u64, StoreError> {
    let done = sqlx::query(
        "DELETE FROM callbacks WHERE pk IN
           (SELECT pk FROM callbacks WHERE state <> 'pending' AND finished_at < $1
            ORDER BY pk LIMIT $2)",
    )
    .bind(before)
    .bind(limit)
    .execute(conn)
    .await?;
    Ok(done.rows_affected())
}
