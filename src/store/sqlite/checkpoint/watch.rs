//! The writer's side of the WAL bound: the wal-index figures it reads between batches,
//! and the restarts before and after a batch that keep the log under the bound.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::time::{Duration, Instant};

use sqlx::{Row, SqliteConnection};

use super::{
    FORCED_WAIT_MS, JOB_SIZE_WINDOW, MIN_FRAMES_PER_JOB, QUICK_RESTART_FRAMES, RESTART_WAIT_MS,
    SLOW_RESTART, WAL_HEADER_BYTES, WalBound,
};

/// The figures of the wal-index header (<https://sqlite.org/walformat.html>, "The
/// wal-index header": native byte order; `iChange` at 8, `szPage` at 14, `mxFrame` at
/// 16, and `nBackfill` at 96 in the checkpoint information after the header's two
/// copies). The
/// format is part of SQLite's file format, stable across versions. Read without a lock,
/// a figure may be a moment old; it only decides when to restart, never what is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WalIndex {
    /// Bumped by every commit (`iChange`). The frame count cannot say whether anything
    /// was written: a commit that finds the log fully copied starts it again from frame
    /// 0, so under a light load the count stays the same from commit to commit.
    pub changes: u32,
    /// Frames in the log (`mxFrame`).
    pub frames: u32,
    /// Frames already copied into the database file (`nBackfill`).
    pub copied: u32,
    /// Bytes a frame takes in the log: its page and a 24-byte frame header.
    pub frame_bytes: u64,
}

impl WalIndex {
    /// Reads the header from the open `-shm` file; `None` before SQLite has written it.
    pub fn read(shm: &File) -> Option<WalIndex> {
        let mut header = [0u8; 100];
        shm.read_exact_at(&mut header, 0).ok()?;
        let u32_at = |at: usize| {
            u32::from_ne_bytes([header[at], header[at + 1], header[at + 2], header[at + 3]])
        };
        let page = match u16::from_ne_bytes([header[14], header[15]]) {
            0 => return None,
            // 65,536 does not fit in 16 bits; the format stores it as 1.
            1 => 65_536,
            n => u64::from(n),
        };
        Some(WalIndex {
            changes: u32_at(8),
            frames: u32_at(16),
            copied: u32_at(96),
            frame_bytes: page + 24,
        })
    }

    /// Bytes of the log in use.
    pub fn log_bytes(&self) -> u64 {
        u64::from(self.frames) * self.frame_bytes
    }

    /// Frames not yet copied into the database file.
    pub fn backlog(&self) -> u32 {
        self.frames.saturating_sub(self.copied)
    }
}

/// The writer's side of the bound, with its metric handles looked up once (the writer
/// thread is the one every write waits for).
pub struct WalWatch {
    bound: WalBound,
    /// The `-shm` file, opened once it exists.
    index: Option<File>,
    /// The log as it stood before the batch now running, and that batch's jobs.
    before: Option<(WalIndex, usize)>,
    /// The most log frames one job wrote, in this window and the one before.
    per_job: JobSize,
    bytes: metrics::Gauge,
    restarts: metrics::Counter,
    over_bound: metrics::Counter,
}

impl WalWatch {
    pub fn new(bound: WalBound) -> WalWatch {
        WalWatch {
            bound,
            index: None,
            before: None,
            per_job: JobSize::new(),
            bytes: metrics::gauge!("switchboard_store_wal_bytes"),
            restarts: metrics::counter!("switchboard_store_wal_restarts_total"),
            over_bound: metrics::counter!("switchboard_store_wal_over_bound_total"),
        }
    }

    fn wal_index(&mut self) -> Option<WalIndex> {
        if self.index.is_none() {
            self.index = File::open(&self.bound.index).ok();
        }
        WalIndex::read(self.index.as_ref()?)
    }

    /// The log bytes a batch of `jobs` may add, by what jobs were measured to write:
    /// at most half the bound (beyond that the restart at half the bound, after every
    /// batch, is what keeps the log down).
    pub fn reserve(&self, jobs: usize, frame_bytes: u64) -> u64 {
        let per_job = self.per_job.frames().max(MIN_FRAMES_PER_JOB) * frame_bytes;
        per_job
            .saturating_mul(jobs as u64)
            .min(self.bound.max_bytes / 2)
    }

    /// Run by the writer before each batch, with no transaction open: restarts the log
    /// first when the batch could take the file past the bound, so the bound holds
    /// after the commit, not only before the next one. Writes wait for that restart;
    /// under a steady load the restart at half the bound ([`Self::after_batch`]) has
    /// usually made this one unnecessary.
    pub async fn before_batch(&mut self, conn: &mut SqliteConnection, jobs: usize) {
        let Some(index) = self.wal_index() else {
            self.before = None;
            return;
        };
        let room = self.bound.max_bytes;
        let after = WAL_HEADER_BYTES + index.log_bytes() + self.reserve(jobs, index.frame_bytes);
        if after > room && index.frames > 0 {
            self.restart_until_done(conn, index, true).await;
        }
        // Read again: a restart (ours, or one at the last commit) starts the count over.
        self.before = self.wal_index().map(|now| (now, jobs));
    }

    /// Learns from the batch just committed how much log a job writes, and says so when
    /// a batch passed the bound anyway (a job larger than any before it).
    fn measure(&mut self, now: WalIndex) {
        let Some((before, jobs)) = self.before.take() else {
            return;
        };
        if jobs == 0 || now.changes == before.changes {
            return;
        }
        // A commit that found the log fully copied started it again from frame 0.
        let grown = if now.frames >= before.frames {
            now.frames - before.frames
        } else {
            now.frames
        };
        self.per_job.note(u64::from(grown).div_ceil(jobs as u64));
        let file = WAL_HEADER_BYTES + now.log_bytes();
        if file > self.bound.max_bytes {
            self.over_bound.increment(1);
            tracing::warn!(
                bytes = file,
                bound = self.bound.max_bytes,
                jobs,
                "a batch larger than any before it took the WAL past --wal-max-bytes"
            );
        }
    }

    /// Run by the writer after each batch, with no transaction open: restarts the log
    /// when it holds more than half its bound. Once the log itself holds the bound,
    /// writes wait until the restart succeeds; below it, a restart that readers hold up
    /// is left for the next batch. (The log, not the file: a file that once reached the
    /// bound keeps that size until the load eases, and judged by it every later restart
    /// would copy its whole backlog with writes waiting.)
    pub async fn after_batch(&mut self, conn: &mut SqliteConnection) {
        let Some(index) = self.wal_index() else {
            return;
        };
        self.measure(index);
        let max = self.bound.max_bytes;
        if index.log_bytes() < max / 2 {
            return;
        }
        let size = self.bound.size();
        self.bytes.set(size as f64);
        let forced = WAL_HEADER_BYTES + index.log_bytes() >= max;
        // Below the bound, restart only once the passive checkpoints have copied nearly
        // everything: the copy would otherwise run here, with every write waiting.
        if !forced && i64::from(index.backlog()) > QUICK_RESTART_FRAMES {
            return;
        }
        self.restart_until_done(conn, index, forced).await;
    }

    /// A `RESTART` checkpoint: when `forced`, retried (each try waiting up to a second
    /// for readers) until it succeeds, with writes waiting; otherwise tried once without
    /// waiting.
    async fn restart_until_done(
        &mut self,
        conn: &mut SqliteConnection,
        index: WalIndex,
        forced: bool,
    ) {
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
                    let log = index.log_bytes();
                    if took > SLOW_RESTART {
                        tracing::warn!(bytes = log, ?took, "WAL restart held writes up");
                    } else {
                        tracing::debug!(bytes = log, ?took, "WAL restarted");
                    }
                    return;
                }
                Ok(false) if forced => {
                    tracing::warn!(
                        bytes = index.log_bytes(),
                        "WAL at its bound; writes wait for readers"
                    );
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

/// The most log frames one job of a batch wrote, remembered for one to two
/// [`JOB_SIZE_WINDOW`]s: the current window's largest and the previous one's.
struct JobSize {
    from: Instant,
    current: u64,
    previous: u64,
}

impl JobSize {
    fn new() -> JobSize {
        JobSize {
            from: Instant::now(),
            current: 0,
            previous: 0,
        }
    }

    fn note(&mut self, frames: u64) {
        if self.from.elapsed() >= JOB_SIZE_WINDOW {
            self.previous = self.current;
            self.current = 0;
            self.from = Instant::now();
        }
        self.current = self.current.max(frames);
    }

    fn frames(&self) -> u64 {
        self.current.max(self.previous)
    }
}
