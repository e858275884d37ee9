//! The group-commit writer: one task owns the only write connection.
//!
//! Callers send a job (a closure over the connection) and wait on a oneshot. The task
//! blocks for one job, then drains whatever else is already queued (up to
//! [`MAX_BATCH`]) without waiting, runs the whole batch in one `BEGIN IMMEDIATE …
//! COMMIT`, and only then answers each caller. One fsync (with `--durability full`) or
//! one WAL append (the default) covers the batch, which is what makes durable writes
//! fast under concurrency; with a single caller the batch is just that caller.
//!
//! Each job runs inside its own `SAVEPOINT`, so a job that fails (a duplicate id, a rule
//! checked inside the transaction) is rolled back alone and the rest of the batch still
//! commits. If the `COMMIT` itself fails, every job of the batch gets the error and
//! nothing of it is visible: a caller is told "done" only for work that is durable.
//!
//! A job may carry an *after-commit* hook. Hooks run on this task, after `COMMIT`, in
//! commit order; the registry cache and the live-push hub are updated there, so
//! in-memory state follows the database in exactly the order the database changed.

use std::sync::Arc;
use std::time::Instant;

use futures_util::future::BoxFuture;
use sqlx::{Connection, SqliteConnection};
use tokio::sync::{Mutex, mpsc, oneshot};
use tokio::task::JoinHandle;

use super::StoreError;

/// Most jobs per transaction. Large enough to amortise a commit over a burst, small
/// enough that one batch never holds the write lock for long.
pub const MAX_BATCH: usize = 512;

/// Jobs waiting for the writer. Bounded so that a flood of writers waits (backpressure
/// onto the request) instead of growing memory.
const QUEUE: usize = 4096;

/// What a job reports back: whether its savepoint should be kept, and how to tell its
/// caller once the fate of the whole transaction is known.
pub(crate) struct JobDone {
    keep: bool,
    finish: Box<dyn FnOnce(Result<(), StoreError>) + Send>,
}

type Job = Box<dyn for<'c> FnOnce(&'c mut SqliteConnection) -> BoxFuture<'c, JobDone> + Send>;

/// A cheap handle to the writer task.
#[derive(Clone)]
pub struct Writer {
    queue: mpsc::Sender<Job>,
    task: Arc<Mutex<Option<JoinHandle<()>>>>,
    closing: tokio_util::sync::CancellationToken,
}

impl Writer {
    pub(crate) fn spawn(conn: SqliteConnection) -> Writer {
        let (queue, rx) = mpsc::channel(QUEUE);
        let closing = tokio_util::sync::CancellationToken::new();
        let task = tokio::spawn(run(conn, rx, closing.clone()));
        Writer {
            queue,
            task: Arc::new(Mutex::new(Some(task))),
            closing,
        }
    }

    /// Runs `job` in the next batch; `after` runs on the writer task once the batch has
    /// committed (never if the job or the commit failed) and its value is returned.
    pub async fn write_then<T, R, E, F, A>(&self, job: F, after: A) -> Result<R, E>
    where
        F: for<'c> FnOnce(&'c mut SqliteConnection) -> BoxFuture<'c, Result<T, E>> + Send + 'static,
        A: FnOnce(T) -> R + Send + 'static,
        T: Send + 'static,
        R: Send + 'static,
        E: From<StoreError> + Send + 'static,
    {
        let (tx, rx) = oneshot::channel::<Result<R, E>>();
        let boxed: Job = Box::new(move |conn| {
            Box::pin(async move {
                match job(conn).await {
                    Ok(value) => JobDone {
                        keep: true,
                        finish: Box::new(move |committed| {
                            let _ = tx.send(committed.map(|()| after(value)).map_err(E::from));
                        }),
                    },
                    Err(err) => JobDone {
                        keep: false,
                        finish: Box::new(move |_| {
                            let _ = tx.send(Err(err));
                        }),
                    },
                }
            })
        });
        if self.queue.send(boxed).await.is_err() {
            return Err(StoreError::Closed.into());
        }
        rx.await.unwrap_or_else(|_| Err(StoreError::Dropped.into()))
    }

    /// Stops taking jobs, finishes those already queued, and waits for the task to end.
    pub async fn close(&self) {
        self.closing.cancel();
        if let Some(task) = self.task.lock().await.take() {
            let _ = task.await;
        }
    }
}

async fn run(
    mut conn: SqliteConnection,
    mut rx: mpsc::Receiver<Job>,
    closing: tokio_util::sync::CancellationToken,
) {
    let mut batch: Vec<Job> = Vec::with_capacity(MAX_BATCH);
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
        run_batch(&mut conn, &mut batch).await;
    }
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

async fn run_batch(conn: &mut SqliteConnection, batch: &mut Vec<Job>) {
    let started = Instant::now();
    let size = batch.len();
    let mut jobs = batch.drain(..);
    let mut finishers = Vec::with_capacity(size);

    let outcome: Result<(), StoreError> = async {
        exec(conn, "BEGIN IMMEDIATE").await?;
        for job in jobs.by_ref() {
            exec(conn, "SAVEPOINT job").await?;
            let done = job(&mut *conn).await;
            if !done.keep {
                exec(conn, "ROLLBACK TO job").await?;
            }
            exec(conn, "RELEASE job").await?;
            finishers.push(done.finish);
        }
        exec(conn, "COMMIT").await
    }
    .await;

    if let Err(err) = &outcome {
        tracing::error!(error = %err, jobs = size, "write batch failed; rolled back");
        if let Err(rollback) = exec(conn, "ROLLBACK").await {
            tracing::debug!(error = %rollback, "rollback after failed batch");
        }
    }
    // Jobs the failed batch never reached are dropped here; dropping a job drops its
    // oneshot, and its caller gets `StoreError::Dropped`. None is carried over.
    drop(jobs);
    metrics::counter!("switchboard_store_write_batches_total").increment(1);
    metrics::histogram!("switchboard_store_write_batch_size").record(size as f64);
    metrics::histogram!("switchboard_store_write_batch_seconds")
        .record(started.elapsed().as_secs_f64());

    for finish in finishers {
        finish(match &outcome {
            Ok(()) => Ok(()),
            Err(_) => Err(StoreError::BatchFailed),
        });
    }
}

async fn exec(conn: &mut SqliteConnection, sql: &'static str) -> Result<(), StoreError> {
    sqlx::raw_sql(sql).execute(conn).await?;
    Ok(())
}
