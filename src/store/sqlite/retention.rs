//! Retention: removing what is older than a team keeps, a small batch per writer job, so
//! the writer never stalls on it. Every statement finds its rows through an index that
//! starts at the oldest, so a batch costs the same whatever the table's size.

use sqlx::{QueryBuilder, Row, Sqlite, SqliteConnection};
use switchboard_types::ids::TeamPk;

use crate::model::{MessageSweep, MessageSweepSpec};
use crate::store::StoreError;

/// One batch of a team's messages, oldest first after `spec.after`: removes those older
/// than `spec.any_before`, and those older than `spec.read_before` that nobody has
/// unread, with their inbox entries and response records (the triggers keep the
/// counters).
pub(crate) async fn expire_messages(
    conn: &mut SqliteConnection,
    spec: MessageSweepSpec,
) -> Result<MessageSweep, StoreError> {
    let rows = sqlx::query(
        "SELECT pk, created_at FROM messages INDEXED BY messages_by_team
         WHERE team_pk = ? AND pk > ? ORDER BY pk LIMIT ?",
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
            // Messages are numbered in commit order: the rest are younger still.
            reached_young = true;
            break;
        }
        old.push((pk, at));
    }
    let last = old.last().map(|(pk, _)| *pk);
    let unread = unread_among(conn, old.iter().map(|(pk, _)| *pk)).await?;
    let gone: Vec<i64> = old
        .iter()
        .filter(|(pk, at)| {
            spec.any_before.is_some_and(|cut| *at < cut)
                || (spec.read_before.is_some_and(|cut| *at < cut) && !unread.contains(pk))
        })
        .map(|(pk, _)| *pk)
        .collect();
    remove_messages(conn, &gone).await?;
    Ok(MessageSweep {
        removed: gone.len() as u64,
        next_after: if reached_young { None } else { last },
    })
}

/// Which of these messages someone still has unread.
async fn unread_among(
    conn: &mut SqliteConnection,
    pks: impl Iterator<Item = i64>,
) -> Result<std::collections::HashSet<i64>, StoreError> {
    let mut q = QueryBuilder::<Sqlite>::new(
        "SELECT DISTINCT message_pk FROM inbox WHERE read_at IS NULL AND message_pk IN (",
    );
    let mut any = false;
    let mut list = q.separated(", ");
    for pk in pks {
        list.push_bind(pk);
        any = true;
    }
    if !any {
        return Ok(Default::default());
    }
    q.push(")");
    let rows = q.build().fetch_all(conn).await?;
    rows.iter().map(|r| Ok(r.try_get(0)?)).collect()
}

async fn remove_messages(conn: &mut SqliteConnection, pks: &[i64]) -> Result<(), StoreError> {
    let tables = [
        ("inbox", "message_pk"),
        ("responses", "original_pk"),
        ("responses", "response_pk"),
        ("messages", "pk"),
    ];
    delete_keyed(conn, &tables, pks).await
}

/// `DELETE FROM table WHERE column IN (pks)` for each pair, in order (dependents first,
/// for the foreign keys). The keys are integers this module read, never client input.
async fn delete_keyed(
    conn: &mut SqliteConnection,
    tables: &[(&str, &str)],
    pks: &[i64],
) -> Result<(), StoreError> {
    if pks.is_empty() {
        return Ok(());
    }
    let list = pks
        .iter()
        .map(i64::to_string)
        .collect::<Vec<_>>()
        .join(", ");
    for (table, column) in tables {
        let sql = format!("DELETE FROM {table} WHERE {column} IN ({list})");
        sqlx::query(sqlx::AssertSqlSafe(sql))
            .execute(&mut *conn)
            .await?;
    }
    Ok(())
}

/// Removes up to `limit` of the team's finished tasks last changed before `before`
/// (with their history, assignees, callbacks and webhooks); a task with a callback still to send
/// stays until it is sent or given up.
pub(crate) async fn expire_tasks(
    conn: &mut SqliteConnection,
    team: TeamPk,
    before: i64,
    limit: i64,
) -> Result<u64, StoreError> {
    let pks: Vec<i64> = sqlx::query_scalar(
        "SELECT t.pk FROM tasks t INDEXED BY tasks_finished
         WHERE t.team_pk = ? AND t.status IN ('success', 'failed', 'canceled') AND t.updated_at < ?
           AND NOT EXISTS (SELECT 1 FROM callbacks c WHERE c.task_pk = t.pk AND c.state = 'pending')
         ORDER BY t.updated_at LIMIT ?",
    )
    .bind(team.0)
    .bind(before)
    .bind(limit)
    .fetch_all(&mut *conn)
    .await?;
    let tables = [
        ("task_events", "task_pk"),
        ("task_assignees", "task_pk"),
        ("callbacks", "task_pk"),
        ("task_webhooks", "task_pk"),
        ("tasks", "pk"),
    ];
    delete_keyed(conn, &tables, &pks).await?;
    Ok(pks.len() as u64)
}

/// Removes up to `limit` idempotency records written before `before`, oldest first
/// (rowids grow with time, so the oldest are found first and the walk stops early).
pub(crate) async fn expire_idempotency_keys(
    conn: &mut SqliteConnection,
    before: i64,
    limit: i64,
) -> Result<u64, StoreError> {
    let done = sqlx::query(
        "DELETE FROM idempotency_keys WHERE rowid IN
           (SELECT rowid FROM idempotency_keys ORDER BY rowid LIMIT ?)
         AND created_at < ?",
    )
    .bind(limit)
    .bind(before)
    .execute(conn)
    .await?;
    Ok(done.rows_affected())
}

/// Removes up to `limit` callback records delivered or given up before `before`.
pub(crate) async fn expire_callbacks(
    conn: &mut SqliteConnection,
    before: i64,
    limit: i64,
) -> Result<u64, StoreError> {
    let done = sqlx::query(
        "DELETE FROM callbacks WHERE pk IN
           (SELECT pk FROM callbacks WHERE state <> 'pending' ORDER BY pk LIMIT ?)
         AND finished_at < ?",
    )
    .bind(limit)
    .bind(before)
    .execute(conn)
    .await?;
    Ok(done.rows_affected())
}
