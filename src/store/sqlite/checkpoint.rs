//! Background WAL checkpoints.
//!
//! SQLite's automatic checkpoint runs on the connection that commits, with its fsyncs,
//! so every ~1000 pages the writer stalled behind the disk (measured: p99 of a send went
//! from 24 ms to 8 ms when that stopped). Instead the writer never checkpoints
//! (`wal_autocheckpoint=0`) and this task, on a connection of its own, runs passive
//! checkpoints, which copy what they can without blocking anyone. After a complete
//! checkpoint SQLite starts the WAL from its beginning again, so commits overwrite
//! already-allocated file blocks instead of growing the file.
//!
//! If readers or a flood of writes keep the WAL from being checkpointed, a `RESTART`
//! checkpoint (which briefly makes the writer wait) bounds it at [`MAX_WAL_FRAMES`].

use std::time::Duration;

use sqlx::{Row, SqliteConnection};
use tokio_util::sync::CancellationToken;

/// How often a passive checkpoint runs.
pub const INTERVAL: Duration = Duration::from_millis(250);

/// WAL size (in 4 KiB frames) above which a blocking checkpoint is forced: 64 MiB.
pub const MAX_WAL_FRAMES: i64 = 16 * 1024;

/// Runs until `stop` is cancelled.
pub async fn run(mut conn: SqliteConnection, stop: CancellationToken) {
    let mut tick = tokio::time::interval(INTERVAL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = stop.cancelled() => break,
            _ = tick.tick() => {}
        }
        match checkpoint(&mut conn, "PASSIVE").await {
            Ok((log, done)) if log - done > MAX_WAL_FRAMES => {
                tracing::warn!(
                    frames = log,
                    checkpointed = done,
                    "WAL is large; forcing a checkpoint"
                );
                if let Err(err) = checkpoint(&mut conn, "RESTART").await {
                    tracing::warn!(error = %err, "forced WAL checkpoint failed");
                }
            }
            Ok(_) => {}
            Err(err) => tracing::warn!(error = %err, "WAL checkpoint failed"),
        }
    }
}

/// Returns (frames in the WAL, frames checkpointed).
async fn checkpoint(
    conn: &mut SqliteConnection,
    mode: &'static str,
) -> Result<(i64, i64), sqlx::Error> {
    let sql = match mode {
        "RESTART" => "PRAGMA wal_checkpoint(RESTART)",
        _ => "PRAGMA wal_checkpoint(PASSIVE)",
    };
    let row = sqlx::query(sql).fetch_one(conn).await?;
    let log: i64 = row.try_get(1)?;
    let done: i64 = row.try_get(2)?;
    metrics::gauge!("switchboard_store_wal_frames").set(log as f64);
    metrics::gauge!("switchboard_store_wal_backlog_frames").set((log - done).max(0) as f64);
    Ok((log, done))
}
