//! Disk use on PostgreSQL, published as the same `/metrics` gauges SQLite's checkpoint
//! task publishes (`store::sqlite::usage`): the database's size, rows per table family
//! from the kept counters, the age of the oldest message. Every node publishes them
//! (they describe the shared database); the WAL and free-page gauges stay SQLite's, as
//! PostgreSQL manages its own log and space.

use std::time::Duration;

use sqlx::{PgPool, Row};
use switchboard_types::time::Timestamp;
use tokio_util::sync::CancellationToken;

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
            () = tokio::time::sleep(INTERVAL) => {}
        }
    }
}

/// Everything in one round trip: teams and agents are counted (they stay small), every
/// other family is read from the counters the triggers keep.
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
    metrics::gauge!("switchboard_store_database_bytes").set(size as f64);
    for (i, table) in ["teams", "agents", "inbox", "messages", "responses"]
        .into_iter()
        .enumerate()
    {
        let count: i64 = row.try_get(i + 1)?;
        metrics::gauge!("switchboard_store_rows", "table" => table).set(count as f64);
    }
    let oldest: Option<i64> = row.try_get(6)?;
    let age = oldest.map_or(0.0, |at| {
        (Timestamp::now().micros() - at).max(0) as f64 / 1e6
    });
    metrics::gauge!("switchboard_store_oldest_message_age_seconds").set(age);
    for kept in sqlx::query("SELECT family, n FROM row_counts")
        .fetch_all(read)
        .await?
    {
        let family: String = kept.try_get(0)?;
        let count: i64 = kept.try_get(1)?;
        metrics::gauge!("switchboard_store_rows", "table" => family).set(count as f64);
    }
    Ok(())
}
