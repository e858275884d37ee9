//! Keeping the WAL bounded.
//!
//! SQLite's automatic checkpoint runs on the connection that commits, with its fsyncs,
//! so every ~1000 pages the writer stalled behind the disk (measured: p99 of a send went
//! from 24 ms to 8 ms when that stopped). Instead the writer never checkpoints on its own
//! (`wal_autocheckpoint=0`) and:
//!
//! * a background task runs **passive** checkpoints every [`INTERVAL`], on a connection
//!   of its own: they copy what they can into the database file without blocking anyone;
//! * the **writer**, between two batches, restarts the WAL once the file has grown past
//!   half of `--wal-max-bytes` ([`WalWatch::after_batch`]) and the passive checkpoints
//!   (back to back by then) have left less than [`QUICK_RESTART_FRAMES`] uncopied: a
//!   `RESTART` checkpoint copies that rest and makes the next commit write from the
//!   start of the file, which SQLite then cuts back to `journal_size_limit`. (Restarting
//!   with a large backlog copied it on the writer's thread: p99 of a broadcast went from
//!   65 ms to 280 ms in the benchmark.) Passive
//!   checkpoints alone never get there under sustained writes: the WAL restarts only when
//!   a commit finds it fully copied and unread, and a writer that never pauses never
//!   finds that (measured before: 2.4 GiB after 30 s of 64 senders). A `RESTART` from
//!   another connection could not do it either: it needs the writer's lock, which the
//!   writer holds batch after batch. Between batches the writer holds nothing, so the
//!   restart only waits for readers still reading old frames (queries of milliseconds);
//! * when writes stop, the task truncates the WAL to nothing (`TRUNCATE`), so an idle
//!   server keeps one tidy file.
//!
//! What it costs is measured by the benchmark (`send_message`, and `soak` for the WAL
//! over time); see docs/architecture.md.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, Instant};

use sqlx::{Row, SqliteConnection};
use tokio_util::sync::CancellationToken;

/// How often a passive checkpoint runs.
pub const INTERVAL: Duration = Duration::from_millis(250);

/// How often disk use is read for `/metrics` (see `usage`).
const USAGE_INTERVAL: Duration = Duration::from_secs(5);

/// How long writes must have stopped before the WAL is truncated.
const IDLE: Duration = Duration::from_secs(1);

/// How long a restart below the bound waits for a lock before it gives up (and is tried
/// again after the next batch): not at all, since the writer's thread is every write's.
const RESTART_WAIT_MS: u32 = 0;

/// A restart that held writes up longer than this is logged as a warning.
const SLOW_RESTART: Duration = Duration::from_millis(50);

/// How long a restart waits once the WAL has reached its bound: writes pause for it.
const FORCED_WAIT_MS: u32 = 1000;

/// Frames the passive checkpoints may leave uncopied for the writer's restart to be
/// quick: what is left is copied on the writer's thread, while writes wait (4 MiB).
const QUICK_RESTART_FRAMES: i64 = 1024;

/// The size the WAL is kept under, and where to look at it.
#[derive(Debug, Clone)]
pub struct WalBound {
    /// The database file.
    pub database: PathBuf,
    /// The `-wal` file beside it.
    pub file: PathBuf,
    /// `--wal-max-bytes`.
    pub max_bytes: u64,
    /// The connections' usual busy timeout, restored after a restart.
    pub busy_timeout: Duration,
    /// Frames the last passive checkpoint left uncopied (set by the background task,
    /// read by the writer).
    pub backlog: Arc<AtomicI64>,
}

impl WalBound {
    /// What SQLite cuts the file back to after a restart (`journal_size_limit`).
    pub fn small_limit(&self) -> u64 {
        (self.max_bytes / 8).max(64 * 1024)
    }

    fn size(&self) -> u64 {
        std::fs::metadata(&self.file).map_or(0, |m| m.len())
    }
}

/// The writer's side of the bound, with its metric handles looked up once (the writer
/// thread is the one every write waits for).
pub struct WalWatch {
    bound: WalBound,
    bytes: metrics::Gauge,
    restarts: metrics::Counter,
}

impl WalWatch {
    pub fn new(bound: WalBound) -> WalWatch {
        WalWatch {
            bound,
            bytes: metrics::gauge!("switchboard_store_wal_bytes"),
            restarts: metrics::counter!("switchboard_store_wal_restarts_total"),
        }
    }

    /// Run by the writer after each batch, with no transaction open: restarts the WAL
    /// when it has grown past half its bound. Past the bound itself, writes wait until
    /// the restart succeeds; below it, a restart that readers hold up is left for the
    /// next batch.
    pub async fn after_batch(&self, conn: &mut SqliteConnection) {
        let size = self.bound.size();
        self.bytes.set(size as f64);
        let max = self.bound.max_bytes;
        if size < max / 2 {
            return;
        }
        let forced = size >= max;
        // Below the bound, restart only once the passive checkpoints have copied nearly
        // everything: the copy would otherwise run here, with every write waiting.
        if !forced && self.bound.backlog.load(Ordering::Relaxed) > QUICK_RESTART_FRAMES {
            return;
        }
        let wait = if forced {
            FORCED_WAIT_MS
        } else {
            RESTART_WAIT_MS
        };
        let started = Instant::now();
        loop {
            match restart(conn, wait, self.bound.busy_timeout).await {
                Ok(true) => {
                    self.restarts.increment(1);
                    let took = started.elapsed();
                    if took > SLOW_RESTART {
                        tracing::warn!(bytes = size, ?took, "WAL restart held writes up");
                    } else {
                        tracing::debug!(bytes = size, ?took, "WAL restarted");
                    }
                    return;
                }
                Ok(false) if forced => {
                    tracing::warn!(bytes = size, "WAL at its bound; writes wait for readers");
                }
                Ok(false) => return,
                Err(err) => {
                    tracing::warn!(error = %err, "WAL restart failed");
                    return;
                }
            }
        }
    }
}

/// A `RESTART` checkpoint waiting at most `wait_ms` for readers; whether it completed.
async fn restart(
    conn: &mut SqliteConnection,
    wait_ms: u32,
    usual: Duration,
) -> Result<bool, sqlx::Error> {
    // The writer's own busy timeout is for other processes' locks; a restart waits
    // only as long as it is allowed to.
    // Numbers of ours, formatted: nothing from a client reaches these statements.
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "PRAGMA busy_timeout = {wait_ms}"
    )))
    .execute(&mut *conn)
    .await?;
    let outcome = sqlx::query("PRAGMA wal_checkpoint(RESTART)")
        .fetch_one(&mut *conn)
        .await;
    let usual = format!("PRAGMA busy_timeout = {}", usual.as_millis());
    let restore = sqlx::raw_sql(sqlx::AssertSqlSafe(usual))
        .execute(&mut *conn)
        .await;
    let busy: i64 = outcome?.try_get(0)?;
    restore?;
    Ok(busy == 0)
}

/// The background task: passive checkpoints, and a truncate once writes have stopped.
/// Runs until `stop` is cancelled.
pub async fn run(mut conn: SqliteConnection, bound: WalBound, stop: CancellationToken) {
    let mut last_frames = -1;
    let mut quiet_since = Instant::now();
    let mut usage_read: Option<Instant> = None;
    loop {
        if usage_read.is_none_or(|at| at.elapsed() >= USAGE_INTERVAL) {
            super::usage::publish(&mut conn, &bound.database).await;
            usage_read = Some(Instant::now());
        }
        // A WAL past half its bound is copied back to back, so the writer's restart
        // finds little left to copy.
        let pause = if bound.size() >= bound.max_bytes / 2 {
            Duration::from_millis(5)
        } else {
            INTERVAL
        };
        tokio::select! {
            () = stop.cancelled() => break,
            () = tokio::time::sleep(pause) => {}
        }
        let frames = match checkpoint(&mut conn, "PASSIVE").await {
            Ok((frames, done)) => {
                bound.backlog.store(frames - done, Ordering::Relaxed);
                frames
            }
            Err(err) => {
                tracing::warn!(error = %err, "WAL checkpoint failed");
                continue;
            }
        };
        if frames != last_frames {
            last_frames = frames;
            quiet_since = Instant::now();
            continue;
        }
        if quiet_since.elapsed() >= IDLE && bound.size() > 0 {
            let started = Instant::now();
            match checkpoint(&mut conn, "TRUNCATE").await {
                Ok(_) => last_frames = 0,
                Err(err) => tracing::debug!(error = %err, "WAL truncate when idle"),
            }
            let took = started.elapsed();
            if took > SLOW_RESTART {
                tracing::warn!(?took, "WAL truncate held writes up");
            }
        }
        metrics::gauge!("switchboard_store_wal_bytes").set(bound.size() as f64);
    }
}

/// Returns (frames in the WAL, frames checkpointed).
async fn checkpoint(
    conn: &mut SqliteConnection,
    mode: &'static str,
) -> Result<(i64, i64), sqlx::Error> {
    let sql = match mode {
        "TRUNCATE" => "PRAGMA wal_checkpoint(TRUNCATE)",
        _ => "PRAGMA wal_checkpoint(PASSIVE)",
    };
    let row = sqlx::query(sql).fetch_one(conn).await?;
    let log: i64 = row.try_get(1)?;
    let done: i64 = row.try_get(2)?;
    metrics::gauge!("switchboard_store_wal_frames").set(log as f64);
    metrics::gauge!("switchboard_store_wal_backlog_frames").set((log - done).max(0) as f64);
    Ok((log, done))
}
