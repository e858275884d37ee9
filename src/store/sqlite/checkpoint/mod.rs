//! Keeping the WAL bounded.
//!
//! SQLite's automatic checkpoint runs on the connection that commits, with its fsyncs,
//! so every ~1000 pages the writer stalled behind the disk (measured: p99 of a send went
//! from 24 ms to 8 ms when that stopped). Instead the writer never checkpoints on its own
//! (`wal_autocheckpoint=0`) and:
//!
//! * a background task runs **passive** checkpoints every [`INTERVAL`], on a connection
//!   of its own: they copy what they can into the database file without blocking anyone;
//! * the **writer**, between two batches, restarts the log once it holds more than half
//!   of `--wal-max-bytes` ([`WalWatch::after_batch`]) and the passive checkpoints (back
//!   to back by then) have left less than [`QUICK_RESTART_FRAMES`] uncopied: a
//!   `RESTART` checkpoint copies that rest and makes the next commit write from the
//!   start of the file. How full the log is and how much is uncopied are read from the
//!   wal-index header in the `-shm` file ([`WalIndex`]), exact at that moment, one
//!   `pread`. (Restarting with a large backlog copied it on the writer's thread: p99 of
//!   a broadcast went from 65 ms to 280 ms in the benchmark.) Passive checkpoints alone
//!   never get there under sustained writes: the WAL restarts only when a commit finds
//!   it fully copied and unread, and a writer that never pauses never finds that
//!   (measured before: 2.4 GiB after 30 s of 64 senders). A `RESTART` from another
//!   connection could not do it either: it needs the writer's lock, which the writer
//!   holds batch after batch. Between batches the writer holds nothing, so the restart
//!   only waits for readers still reading old frames (queries of milliseconds);
//! * **the bound itself** is kept *before* each batch ([`WalWatch::before_batch`]): a
//!   commit appends every page it touched, so a check after the batch alone let the
//!   batch that crossed the bound pass it (by 24–58 KiB of a 4 MiB bound with the 1 KiB
//!   pages of a database this server creates). The writer knows how many jobs it is
//!   about to run and has measured how much log one job writes (the most per job in any
//!   batch of the last one to two minutes, never less than [`MIN_FRAMES_PER_JOB`]);
//!   when the file plus that much for every job would pass the bound, it restarts the
//!   log first, waiting for readers if it must. The margin is one batch's measured
//!   worth of log, whatever the page size, at most half the bound. A job that writes
//!   more than any job before it can still pass the bound by its own excess, once: that
//!   is logged and counted (`switchboard_store_wal_over_bound_total`), and
//!   docs/decisions/002-wal-bound.md says why no tighter promise is made;
//! * a restart does **not** cut the file (`journal_size_limit` is the bound): under load
//!   the log is rewritten in place. Cutting it back on every restart cost the commit
//!   after it an `ftruncate` of 20–40 ms (measured with `strace` under the STOMP
//!   benchmark), and the file grew back within a second. Instead the task cuts it when
//!   the load has **eased** (less than the small limit written in [`EASED`]) and to
//!   nothing when writes have stopped, so a quiet server keeps one tidy file. Both wait
//!   until the passive checkpoints have copied the whole log, so that a cut holds writes
//!   only for the `ftruncate`, never for copying; and the task's connection never waits
//!   for a lock (busy timeout 0): what it cannot do now it does on a later tick;
//! * the file is cut **in steps** of at most [`WalBound::cut_step`] (32 MiB by default),
//!   one per tick ([`cut_step`]): an `ftruncate` costs what it frees (on this project's
//!   disk 64 ms for 256 MiB at once, 9 ms per 32 MiB), and a write that arrives during
//!   a cut waits for it. `TRUNCATE` only ever cuts the last step.
//!
//! What it costs is measured by the benchmark (`send_message`, `stomp`, and `soak` for
//! the WAL over time); see docs/architecture.md.

use std::fs::File;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use sqlx::{Row, SqliteConnection};
use tokio_util::sync::CancellationToken;

mod watch;
pub use watch::{WalIndex, WalWatch};

/// How often a passive checkpoint runs.
pub const INTERVAL: Duration = Duration::from_millis(250);

/// How often disk use is read for `/metrics` (see `usage`).
const USAGE_INTERVAL: Duration = Duration::from_secs(5);

/// How long writes must have stopped before the WAL is truncated.
const IDLE: Duration = Duration::from_secs(1);

/// The load has eased when less than the small limit went through the log in this
/// long: at that pace the file's larger size is not needed, and the one `ftruncate` of
/// cutting it back holds up few writes.
const EASED: Duration = Duration::from_secs(5);

/// How long a restart below the bound waits for a lock before it gives up (and is tried
/// again after the next batch): not at all, since the writer's thread is every write's.
const RESTART_WAIT_MS: u32 = 0;

/// A restart that held writes up longer than this is logged as a warning.
const SLOW_RESTART: Duration = Duration::from_millis(50);

/// How long a restart waits once the WAL has reached its bound: writes pause for it.
const FORCED_WAIT_MS: u32 = 1000;

/// The most a cut of the file frees at once, whatever the bound (see [`cut_step`]).
const MAX_CUT_STEP: u64 = 32 * 1024 * 1024;

/// The least log a job is taken to write before any was measured: a message touches
/// its own row, its inbox entry and their index pages.
const MIN_FRAMES_PER_JOB: u64 = 8;

/// How long a measured job size is remembered: the estimate is the largest of this
/// window and the one before it, so a burst of large jobs is remembered for one to two
/// windows after it ended.
const JOB_SIZE_WINDOW: Duration = Duration::from_secs(60);

/// The bytes of the WAL file's own header, before its first frame.
const WAL_HEADER_BYTES: u64 = 32;

/// Frames the passive checkpoints may leave uncopied for the writer's restart to be
/// quick: what is left is copied on the writer's thread, while writes wait (1 MiB
/// at the 1 KiB pages of a database this server creates, 4 MiB at 4 KiB pages).
const QUICK_RESTART_FRAMES: i64 = 1024;

/// The size the WAL is kept under, and where to look at it.
#[derive(Debug, Clone)]
pub struct WalBound {
    /// The database file.
    pub database: PathBuf,
    /// The `-wal` file beside it.
    pub file: PathBuf,
    /// The `-shm` file (the wal-index) beside it.
    pub index: PathBuf,
    /// `--wal-max-bytes`.
    pub max_bytes: u64,
    /// The connections' usual busy timeout, restored after a restart.
    pub busy_timeout: Duration,
}

impl WalBound {
    /// What the file is cut back to once the load eases.
    pub fn small_limit(&self) -> u64 {
        (self.max_bytes / 8).max(64 * 1024)
    }

    /// How much one cut frees: an eighth of the bound, at most [`MAX_CUT_STEP`], so
    /// that a write arriving during the cut waits a few milliseconds, not for the whole
    /// file to be freed.
    pub fn cut_step(&self) -> u64 {
        (self.max_bytes / 8).clamp(64 * 1024, MAX_CUT_STEP)
    }

    fn size(&self) -> u64 {
        std::fs::metadata(&self.file).map_or(0, |m| m.len())
    }
}

/// The background task: passive checkpoints, and cutting the file back once the load
/// eases or writes stop. Runs until `stop` is cancelled.
pub async fn run(mut conn: SqliteConnection, bound: WalBound, stop: CancellationToken) {
    let mut shm: Option<File> = None;
    let mut last: Option<WalIndex> = None;
    let mut quiet_since = Instant::now();
    let mut usage_read: Option<Instant> = None;
    let mut easing = Easing::new();
    loop {
        if usage_read.is_none_or(|at| at.elapsed() >= crate::ticks::every(USAGE_INTERVAL)) {
            super::usage::publish(&mut conn, &bound.database).await;
            usage_read = Some(Instant::now());
        }
        // A log past a quarter of its bound is copied back to back, so the writer's
        // restart at half finds little left to copy.
        let busy = last.is_some_and(|l| l.log_bytes() >= bound.max_bytes / 4);
        let pause = if busy {
            Duration::from_millis(5)
        } else {
            crate::ticks::every(INTERVAL)
        };
        tokio::select! {
            () = stop.cancelled() => break,
            () = tokio::time::sleep(pause) => {}
        }
        if let Err(err) = checkpoint(&mut conn, "PASSIVE").await {
            tracing::warn!(error = %err, "WAL checkpoint failed");
            continue;
        }
        if shm.is_none() {
            shm = File::open(&bound.index).ok();
        }
        let Some(now) = shm.as_ref().and_then(WalIndex::read) else {
            continue;
        };
        let grown = match last {
            Some(l) if now.frames >= l.frames => now.frames - l.frames,
            _ => now.frames,
        };
        if last.is_none_or(|l| l.changes != now.changes) {
            quiet_since = Instant::now();
        }
        last = Some(now);
        let size = bound.size();
        metrics::gauge!("switchboard_store_wal_bytes").set(size as f64);
        let eased = easing.note(u64::from(grown) * now.frame_bytes, bound.small_limit());
        let target = if quiet_since.elapsed() >= IDLE {
            0
        } else if eased {
            bound.small_limit()
        } else {
            u64::MAX
        };
        // Only once the passive checkpoints have copied everything: a `TRUNCATE` copies
        // the rest itself while holding the write lock (traced: 17,575 page writes after
        // another process's 1 GiB transaction), while a passive one never holds it.
        if size > target && now.backlog() == 0 {
            let started = Instant::now();
            if let Err(err) = cut_step(&mut conn, &bound, size, target).await {
                tracing::debug!(error = %err, "WAL cut");
            }
            let took = started.elapsed();
            if took > SLOW_RESTART {
                tracing::warn!(?took, eased, "WAL cut held writes up");
            }
            metrics::gauge!("switchboard_store_wal_bytes").set(bound.size() as f64);
            // The cut's own commit is not a client's write: the idle second goes on.
            if let Some(after) = shm.as_ref().and_then(WalIndex::read) {
                last = Some(after);
            }
        }
    }
}

/// Whether the load has eased: less than the small limit went through the log in the
/// last [`EASED`] window, and no more than that so far in this one. It stays eased
/// window after window while the load stays light, so the file is cut step by step
/// (one per tick) until it is small.
struct Easing {
    from: Instant,
    /// Bytes through the log since `from`, summed from the growth of the frame count
    /// between two looks (a restart starts the count again).
    written: u64,
    eased: bool,
}

impl Easing {
    fn new() -> Easing {
        Easing {
            from: Instant::now(),
            written: 0,
            eased: false,
        }
    }

    /// Counts `bytes` more through the log; whether the load has eased now.
    fn note(&mut self, bytes: u64, small_limit: u64) -> bool {
        self.written += bytes;
        if self.written >= small_limit {
            self.eased = false;
        }
        if self.from.elapsed() >= EASED {
            self.eased = self.written < small_limit;
            self.from = Instant::now();
            self.written = 0;
        }
        self.eased
    }
}

/// Cuts the fully copied log's file one step towards `target` bytes.
///
/// The last step (to nothing) is a `TRUNCATE` checkpoint. Any other is SQLite's own
/// `journal_size_limit`: the first commit that starts the log again from its first frame
/// cuts the file to its connection's limit. So this connection sets its limit one step
/// below the file and commits a write that changes nothing the server reads (the header's
/// `user_version`, rewritten with its own value); with the log fully copied and no reader
/// inside it, that commit starts the log again and cuts. If the writer or a reader is in
/// the way (the connection does not wait for locks), nothing is cut and a later tick tries
/// again.
async fn cut_step(
    conn: &mut SqliteConnection,
    bound: &WalBound,
    size: u64,
    target: u64,
) -> Result<(), sqlx::Error> {
    if size <= target {
        return Ok(());
    }
    let next = size.saturating_sub(bound.cut_step()).max(target);
    tracing::debug!(from = size, to = next, "WAL cut");
    if next == 0 {
        return checkpoint(conn, "TRUNCATE").await;
    }
    // Numbers of ours, formatted: nothing from a client reaches these statements.
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "PRAGMA journal_size_limit = {next}"
    )))
    .execute(&mut *conn)
    .await?;
    let version: i64 = sqlx::query_scalar("PRAGMA user_version")
        .fetch_one(&mut *conn)
        .await?;
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "PRAGMA user_version = {version}"
    )))
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// A checkpoint in `mode`; publishes the log's frames and how many are uncopied.
async fn checkpoint(conn: &mut SqliteConnection, mode: &'static str) -> Result<(), sqlx::Error> {
    let sql = match mode {
        "TRUNCATE" => "PRAGMA wal_checkpoint(TRUNCATE)",
        _ => "PRAGMA wal_checkpoint(PASSIVE)",
    };
    let row = sqlx::query(sql).fetch_one(conn).await?;
    let log: i64 = row.try_get(1)?;
    let done: i64 = row.try_get(2)?;
    metrics::gauge!("switchboard_store_wal_frames").set(log as f64);
    metrics::gauge!("switchboard_store_wal_backlog_frames").set((log - done).max(0) as f64);
    Ok(())
}

#[cfg(test)]
mod tests;
