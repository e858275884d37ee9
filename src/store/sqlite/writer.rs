//! The group-commit writer: one task owns the only write connection.
//!
//! Callers send a job (a closure over the connection) and wait on a oneshot. The task
//! blocks for one job, then drains whatever else is already queued (up to
//! [`MAX_BATCH`]) without waiting, runs the whole batch in one `BEGIN IMMEDIATE …
//! COMMIT`, and only then answers each caller. One fsync (with `--durability full`) or
//! one WAL append (the default) covers the batch, which is what makes durable writes
//! fast under concurrency; with a single caller the batch is just that caller.
//!
//! A job that fails (a duplicate id, a rule checked inside the transaction) is rolled
//! back alone and the rest of the batch still commits. By default the writer wraps each
//! job in a `SAVEPOINT` for that; a job that is atomic by itself (a single statement) can
//! skip it ([`Isolation::SelfContained`]). If the `COMMIT` itself fails, every job of the
//! batch gets the error and nothing of it is visible: a caller is told "done" only for
//! work that is durable.
//!
//! **Statements, not rows, are what cost.** Every statement is a round trip to SQLite's
//! worker thread plus fixed per-statement work; inserting a row is cheap by comparison
//! (measured here: ~55 µs per message posted with its own statements, ~19 µs per message
//! when 32 are inserted by the same statements). So jobs do not insert messages
//! themselves: they *stage* them on the [`WriteTx`] ([`WriteTx::stage_post`]), and the
//! writer inserts everything staged with a few constant statements, right before the
//! `COMMIT` or before any job touches the connection ([`WriteTx::conn`] flushes first),
//! so every statement still sees all earlier jobs' writes, in order. A batch of nothing
//! but staged rows (the common case: sends or task submissions arriving together) is
//! written on the writer's own thread through a second, direct connection, without
//! sqlx's worker thread and its round trip per statement (see `direct`).
//!
//! A job may carry an *after-commit* hook. Hooks run on this task, after `COMMIT`, in
//! commit order; the registry cache and the live-push hub are updated there, so
//! in-memory state follows the database in exactly the order the database changed.

use std::sync::Arc;
use std::time::Instant;

use futures_util::future::BoxFuture;
use sqlx::{Connection, SqliteConnection};
use tokio::sync::{Mutex, mpsc, oneshot};

use super::checkpoint::{WalBound, WalWatch};
use crate::store::StoreError;

/// What jobs queue for the batch's shared insert, and how it is written: the writer
/// only knows when to flush, not what (the posts module implements it for messages).
pub(crate) trait Staging: Send + 'static {
    /// Where the staging stood before a job (to undo what a failed job staged).
    type Mark: Copy + Send;
    /// Whether anything waits to be written.
    fn is_empty(&self) -> bool;
    /// Where the staging stands now.
    fn mark(&self) -> Self::Mark;
    /// Drops what was staged after `mark`.
    fn truncate(&mut self, mark: Self::Mark);
    /// Writes everything staged inside the open transaction.
    fn flush(&mut self, conn: &mut SqliteConnection) -> impl Future<Output = ()> + Send;
    /// Writes everything staged and commits, opening the transaction first when
    /// `begin`; an error means nothing committed.
    fn flush_and_commit(
        &mut self,
        conn: &mut SqliteConnection,
        begin: bool,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;
    /// Drops everything staged and any numbering that may have run ahead of the
    /// database (after a rollback).
    fn reset(&mut self);
}

/// Most jobs per transaction. Large enough to amortise a commit over a burst, small
/// enough that one batch never holds the write lock for long.
pub const MAX_BATCH: usize = 512;

/// Jobs waiting for the writer. Bounded so that a flood of writers waits (backpressure
/// onto the request) instead of growing memory.
const QUEUE: usize = 4096;

/// What a job reports back: whether its changes should be kept, and how to tell its
/// caller once the fate of the whole transaction is known.
pub(crate) struct JobDone {
    keep: bool,
    finish: Box<dyn FnOnce(Result<(), StoreError>) + Send>,
}

/// How a job is kept from leaving half its changes behind when it fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Isolation {
    /// The writer wraps the job in a savepoint and rolls it back if the job fails.
    Savepoint,
    /// The job guarantees it changed nothing when it returns an error (a single
    /// statement, or statements inside its own savepoint that it rolls back). Saves two
    /// round trips per job.
    SelfContained,
}

type RunJob<S> = Box<dyn for<'c> FnOnce(&'c mut WriteTx<S>) -> BoxFuture<'c, JobDone> + Send>;

struct Job<S> {
    isolation: Isolation,
    run: RunJob<S>,
}

/// What a job works with: the write connection inside the batch's transaction, and what
/// is staged for the batch's shared insert.
pub struct WriteTx<S> {
    conn: SqliteConnection,
    staged: S,
    /// Whether this batch's `BEGIN` has been sent. It is sent lazily, with the first
    /// statement that needs it, so a batch of staged posts is one round trip in all.
    open: bool,
}

impl<S: Staging> WriteTx<S> {
    /// The connection inside the batch's transaction, after everything staged so far has
    /// been written, so that what the caller reads or writes follows all earlier jobs of
    /// the batch, in order.
    pub async fn conn(&mut self) -> Result<&mut SqliteConnection, StoreError> {
        if !self.open {
            exec(&mut self.conn, "BEGIN IMMEDIATE").await?;
            self.open = true;
        }
        if !self.staged.is_empty() {
            self.staged.flush(&mut self.conn).await;
        }
        Ok(&mut self.conn)
    }

    /// The connection inside the batch's transaction *without* writing what is staged
    /// first, for changes of committed tasks: a staged post never touches the task
    /// tables, and a staged new task cannot be the one changed (a change is decided on
    /// the task as committed), so their order cannot matter, and the batch's staged
    /// rows still go out in one flush. Saves a round trip per job.
    pub async fn conn_beside_posts(&mut self) -> Result<&mut SqliteConnection, StoreError> {
        if !self.open {
            exec(&mut self.conn, "BEGIN IMMEDIATE").await?;
            self.open = true;
        }
        Ok(&mut self.conn)
    }

    /// What waits for the batch's shared insert, to stage more.
    pub fn staging(&mut self) -> &mut S {
        &mut self.staged
    }

    /// Ends the batch: writes what is still staged and commits, in one round trip when
    /// it can.
    async fn commit(&mut self) -> Result<(), StoreError> {
        let begin = !self.open;
        self.open = false;
        if self.staged.is_empty() {
            return if begin {
                Ok(())
            } else {
                exec(&mut self.conn, "COMMIT").await
            };
        }
        self.staged.flush_and_commit(&mut self.conn, begin).await
    }

    /// Undoes a failed batch. The counters may be ahead of the database now, so they
    /// are re-read.
    async fn rollback(&mut self) {
        self.staged.reset();
        if let Err(err) = exec(&mut self.conn, "ROLLBACK").await {
            tracing::debug!(error = %err, "rollback after a failed batch");
        }
        self.open = false;
    }
}

/// A cheap handle to the writer.
pub struct Writer<S> {
    queue: mpsc::Sender<Job<S>>,
    /// Resolves when the writer thread has finished (after `close`).
    finished: Arc<Mutex<Option<oneshot::Receiver<()>>>>,
    closing: tokio_util::sync::CancellationToken,
}

impl<S> Clone for Writer<S> {
    fn clone(&self) -> Self {
        Writer {
            queue: self.queue.clone(),
            finished: self.finished.clone(),
            closing: self.closing.clone(),
        }
    }
}

impl<S: Staging> Writer<S> {
    /// Starts the writer on a thread of its own.
    ///
    /// The writer is a chain of round trips to SQLite; as a task on the shared runtime,
    /// each step would wait in the run queue behind request handlers, so commit latency
    /// would grow with request load. (Throughput in the benchmark was the same either
    /// way, the CPU being saturated; the thread keeps the writer's latency its own.)
    pub(crate) fn spawn(
        conn: SqliteConnection,
        staged: S,
        wal: WalBound,
    ) -> std::io::Result<Writer<S>> {
        let (queue, rx) = mpsc::channel(QUEUE);
        let closing = tokio_util::sync::CancellationToken::new();
        let (done_tx, done_rx) = oneshot::channel();
        let tx = WriteTx {
            conn,
            staged,
            open: false,
        };
        let stop = closing.clone();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        std::thread::Builder::new()
            .name("switchboard-writer".into())
            .spawn(move || {
                runtime.block_on(run(tx, rx, stop, wal));
                let _ = done_tx.send(());
            })?;
        Ok(Writer {
            queue,
            finished: Arc::new(Mutex::new(Some(done_rx))),
            closing,
        })
    }

    /// Runs `job` in the next batch; `after` runs on the writer task once the batch has
    /// committed (never if the job or the commit failed) and its value is returned.
    pub async fn write_then<T, R, E, F, A>(
        &self,
        isolation: Isolation,
        job: F,
        after: A,
    ) -> Result<R, E>
    where
        F: for<'c> FnOnce(&'c mut WriteTx<S>) -> BoxFuture<'c, Result<T, E>> + Send + 'static,
        A: FnOnce(T) -> Result<R, E> + Send + 'static,
        T: Send + 'static,
        R: Send + 'static,
        E: From<StoreError> + Send + 'static,
    {
        let (tx, rx) = oneshot::channel::<Result<R, E>>();
        let run: RunJob<S> = Box::new(move |wtx| {
            Box::pin(async move {
                let staged_before = wtx.staged.mark();
                match job(&mut *wtx).await {
                    Ok(value) => JobDone {
                        keep: true,
                        finish: Box::new(move |committed| {
                            let _ = tx.send(committed.map_err(E::from).and_then(|()| after(value)));
                        }),
                    },
                    Err(err) => {
                        // What the failed job staged must not be written.
                        wtx.staged.truncate(staged_before);
                        JobDone {
                            keep: false,
                            finish: Box::new(move |_| {
                                let _ = tx.send(Err(err));
                            }),
                        }
                    }
                }
            })
        });
        if self.queue.send(Job { isolation, run }).await.is_err() {
            return Err(StoreError::Closed.into());
        }
        rx.await.unwrap_or_else(|_| Err(StoreError::Dropped.into()))
    }

    /// Stops taking jobs, finishes those already queued, and waits for the writer to end.
    pub async fn close(&self) {
        self.closing.cancel();
        if let Some(finished) = self.finished.lock().await.take() {
            let _ = finished.await;
        }
    }
}

async fn run<S: Staging>(
    mut tx: WriteTx<S>,
    mut rx: mpsc::Receiver<Job<S>>,
    closing: tokio_util::sync::CancellationToken,
    wal: WalBound,
) {
    let mut batch: Vec<Job<S>> = Vec::with_capacity(MAX_BATCH);
    let metrics = BatchMetrics::new();
    let mut wal = WalWatch::new(wal);
    loop {
        let first = tokio::select! {
            // Jobs already queued win over closing, so nothing accepted is dropped.
            biased;
            job = rx.recv() => job,
            () = closing.cancelled() => {
                rx.close();
                rx.recv().await
            }
        };
        let Some(first) = first else { break };
        batch.push(first);
        while batch.len() < MAX_BATCH {
            match rx.try_recv() {
                Ok(job) => batch.push(job),
                Err(_) => break,
            }
        }
        wal.before_batch(&mut tx.conn, batch.len()).await;
        run_batch(&mut tx, &mut batch, &metrics).await;
        wal.after_batch(&mut tx.conn).await;
    }
    let mut conn = tx.conn;
    // Fold the WAL back into the database file so a clean stop leaves one tidy file.
    if let Err(err) = sqlx::query("PRAGMA wal_checkpoint(TRUNCATE)")
        .execute(&mut conn)
        .await
    {
        tracing::warn!(error = %err, "WAL checkpoint at shutdown failed");
    }
    if let Err(err) = conn.close().await {
        tracing::warn!(error = %err, "closing the write connection failed");
    }
    tracing::debug!("storage writer stopped");
}

/// The writer's metric handles, looked up once: a lookup by name per batch hashes the
/// name and takes the registry's lock, on the thread every write waits for.
struct BatchMetrics {
    batches: metrics::Counter,
    size: metrics::Histogram,
    seconds: metrics::Histogram,
}

impl BatchMetrics {
    fn new() -> BatchMetrics {
        BatchMetrics {
            batches: metrics::counter!("switchboard_store_write_batches_total"),
            size: metrics::histogram!("switchboard_store_write_batch_size"),
            seconds: metrics::histogram!("switchboard_store_write_batch_seconds"),
        }
    }
}

async fn run_batch<S: Staging>(
    tx: &mut WriteTx<S>,
    batch: &mut Vec<Job<S>>,
    metrics: &BatchMetrics,
) {
    let started = Instant::now();
    let size = batch.len();
    let mut jobs = batch.drain(..);
    let mut finishers = Vec::with_capacity(size);

    let outcome: Result<(), StoreError> = async {
        for job in jobs.by_ref() {
            let savepoint = job.isolation == Isolation::Savepoint;
            if savepoint {
                exec(tx.conn().await?, "SAVEPOINT job").await?;
            }
            let done = (job.run)(&mut *tx).await;
            if savepoint {
                let conn = tx.conn().await?;
                if !done.keep {
                    exec(conn, "ROLLBACK TO job").await?;
                    // Keys and sequence numbers handed out inside the savepoint are void.
                    tx.staged.reset();
                }
                exec(tx.conn().await?, "RELEASE job").await?;
            }
            finishers.push(done.finish);
        }
        tx.commit().await
    }
    .await;

    if let Err(err) = &outcome {
        tracing::error!(error = %err, jobs = size, "write batch failed; rolled back");
        tx.rollback().await;
    }
    // Jobs the failed batch never reached are dropped here; dropping a job drops its
    // oneshot, and its caller gets `StoreError::Dropped`. None is carried over.
    drop(jobs);
    metrics.batches.increment(1);
    metrics.size.record(size as f64);
    metrics.seconds.record(started.elapsed().as_secs_f64());

    for finish in finishers {
        finish(match &outcome {
            Ok(()) => Ok(()),
            // A full disk is said as such: the client can be told to come back later.
            Err(err) if err.is_full() => Err(StoreError::Full),
            Err(_) => Err(StoreError::BatchFailed),
        });
    }
}

async fn exec(conn: &mut SqliteConnection, sql: &'static str) -> Result<(), StoreError> {
    sqlx::raw_sql(sql).execute(conn).await?;
    Ok(())
}
