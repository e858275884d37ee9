//! Disk use, published as gauges for `/metrics`: the database and WAL files, rows per
//! table family and the age of the oldest message, so an operator sees growth (and what
//! retention would remove) before the disk fills.

use std::path::Path;

use sqlx::{Row, SqliteConnection};

use crate::store::usage::{set_database_bytes, set_oldest_message, set_rows};

/// The tables counted, on the background task's own connection, which blocks no writer:
/// teams and agents, which stay small. Every other family is read from counters that
/// triggers keep (`inbox_counts` per agent: entries received, messages sent, responses
/// given; `row_counts` for tasks, their events, callbacks and idempotency records):
/// counting them would cost as much as they are large, every few seconds.
const COUNTED: &[&str] = &["teams", "agents"];

/// Reads the figures and sets the gauges; a failed read leaves the previous values.
pub async fn publish(conn: &mut SqliteConnection, database: &Path) {
    let size = |p: &Path| std::fs::metadata(p).map_or(0, |m| m.len());
    set_database_bytes(size(database));
    if let Err(err) = rows(conn).await {
        tracing::debug!(error = %err, "reading disk use");
    }
}

async fn rows(conn: &mut SqliteConnection) -> Result<(), sqlx::Error> {
    for table in COUNTED {
        // Table names from the constant above, never from a client.
        let sql = format!("SELECT COUNT(*) FROM {table}");
        let count: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
            .fetch_one(&mut *conn)
            .await?;
        set_rows(table, count);
    }
    let kept = sqlx::query(
        "SELECT COALESCE(SUM(total), 0), COALESCE(SUM(sent), 0), COALESCE(SUM(responded), 0)
         FROM inbox_counts",
    )
    .fetch_one(&mut *conn)
    .await?;
    for (i, table) in ["inbox", "messages", "responses"].into_iter().enumerate() {
        let count: i64 = kept.try_get(i)?;
        set_rows(table, count);
    }
    let kept = sqlx::query("SELECT family, n FROM row_counts")
        .fetch_all(&mut *conn)
        .await?;
    for row in kept {
        let family: String = row.try_get(0)?;
        let count: i64 = row.try_get(1)?;
        set_rows(&family, count);
    }
    // Messages are numbered in time order, so the first by key is the oldest.
    let oldest: Option<i64> =
        sqlx::query_scalar("SELECT created_at FROM messages ORDER BY pk LIMIT 1")
            .fetch_optional(&mut *conn)
            .await?;
    set_oldest_message(oldest);
    // Pages retention freed: new writes reuse them before the file grows.
    let free: i64 = sqlx::query_scalar(
        "SELECT f.freelist_count * s.page_size FROM pragma_freelist_count() f, pragma_page_size() s",
    )
    .fetch_one(&mut *conn)
    .await?;
    metrics::gauge!("switchboard_store_free_bytes").set(free as f64);
    Ok(())
}
