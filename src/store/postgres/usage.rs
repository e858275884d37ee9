//! Disk use on PostgreSQL, published as the same `/metrics` gauges SQLite's checkpoint
//! task publishes (`store::sqlite::usage`): the database's size, rows per table family
//! from the kept counters, the age of the oldest message. Every node publishes them
//! (they describe the shared database); the WAL and free-page gauges stay SQLite's, as
//! PostgreSQL manages its own log and space.

use std::time::Duration;

use sqlx::{PgPool, Row};
use tokio_util::sync::CancellationToken;

use crate::store::usage::{set_database_bytes, set_oldest_message, set_rows};

/// How often the figures are read (as on SQLite).
const INTERVAL: Duration = Duration::from_secs(5);

/// Publishes the gauges every [`INTERVAL`] until `stop`; a failed read keeps the last.
pub(super) async fn run(read: PgPool, stop: CancellationToken) {
    loop {
        if let Err(err) = publish(&read).await {
            tracing::debug!(error = %err, "reading disk use");
        }
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(crate::ticks::every(INTERVAL)) => {}
        }
    }
}

/// Two round trips: one for the size, the counted families (teams and agents stay
/// small), the inbox counters and the oldest message; one for the families `row_counts`
/// keeps (their number varies).
async fn publish(read: &PgPool) -> Result<(), sqlx::Error> {
    let row = sqlx::query(
        "SELECT pg_database_size(current_database()),
                (SELECT COUNT(*) FROM teams), (SELECT COUNT(*) FROM agents),
                c.total, c.sent, c.responded,
                (SELECT created_at FROM messages ORDER BY pk LIMIT 1)
         FROM (SELECT COALESCE(SUM(total), 0)::BIGINT AS total,
                      COALESCE(SUM(sent), 0)::BIGINT AS sent,
                      COALESCE(SUM(responded), 0)::BIGINT AS responded
               FROM inbox_counts) c",
    )
    .fetch_one(read)
    .await?;
    let size: i64 = row.try_get(0)?;
    set_database_bytes(u64::try_from(size).unwrap_or(0));
    for (i, table) in ["teams", "agents", "inbox", "messages", "responses"]
        .into_iter()
        .enumerate()
    {
        set_rows(table, row.try_get(i + 1)?);
    }
    set_oldest_message(row.try_get(6)?);
    for kept in sqlx::query("SELECT family, n FROM row_counts")
        .fetch_all(read)
        .await?
    {
        let family: String = kept.try_get(0)?;
        set_rows(&family, kept.try_get(1)?);
    }
    Ok(())
}
