//! What retention removes on PostgreSQL: old messages, finished tasks, idempotency keys
//! and callbacks.

use sqlx::postgres::PgConnection;
use sqlx::{AssertSqlSafe, Row};

use crate::model::{MessageSweep, MessageSweepSpec};
use crate::store::StoreError;

/// One batch of a team's messages, oldest first after `spec.after` (the same rule as
/// SQLite's `retention::expire_messages`).
pub(crate) async fn expire_messages(
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
pub(crate) async fn expire_tasks(
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

pub(crate) async fn expire_idempotency_keys(
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

pub(crate) async fn expire_callbacks(
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
