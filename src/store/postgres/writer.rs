//! The group-commit writer of this engine: one task owns the node's write connection.
//!
//! As on SQLite (`store::sqlite::writer`), callers send a job (a closure over the
//! connection) and wait on a oneshot; the task takes one job, drains whatever else is
//! queued (up to [`MAX_BATCH`]), runs the batch in one transaction and answers each
//! caller only after `COMMIT`. One commit — one WAL flush on the server, one round trip
//! — covers the batch. A job that runs statements does so inside a `SAVEPOINT`: on
//! PostgreSQL a failed statement aborts the whole transaction, so a job that fails (a
//! duplicate id, a stale version) is rolled back to its savepoint alone and the rest of
//! the batch commits. A post only stages its message ([`super::staging`]): the batch's
//! are written together, with a handful of statements, whatever their number.
//!
//! After-commit hooks run on this task in commit order, so the registry cache and the
//! hub follow the database in exactly the order it changed.
//!
//! **Several nodes' batches never wait on each other in a cycle.** A batch takes row
//! locks (counter rows, tasks, presence) as its jobs run, in the jobs' order; two
//! nodes' batches taking the same rows in different orders would deadlock, and
//! PostgreSQL would break the cycle after a second by failing one of them. So each
//! transaction first takes one advisory lock ([`BEGIN_ALONE`], [`BEGIN_SHARED`]): a
//! batch that runs statements of its own takes it exclusively (such batches run one at
//! a time across the nodes), and a batch of posts only, whose one statement locks every
//! counter row it needs in key order (`staging`), takes it shared (such batches run
//! side by side, as they cannot form a cycle). Pure send load, the common heavy case,
//! stays concurrent across nodes.
//!
//! **The connection can go away** (the server restarts, a network cut): the batch in
//! flight fails (its callers get `UNAVAILABLE`; nothing of it committed), and the writer
//! connects again before the next batch, so the node recovers on its own once the
//! database is back.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use futures_util::future::BoxFuture;
use sqlx::postgres::{PgConnectOptions, PgConnection};
use sqlx::{ConnectOptions, Connection};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use super::listen::Notes;
use super::staging::{self, StagedPost};
use crate::store::StoreError;
use crate::store::records::PostResult;
use switchboard_types::ids::TaskPk;

/// Most jobs per transaction (as on SQLite).
pub const MAX_BATCH: usize = 512;

/// Jobs waiting for the writer: bounded, so a flood of writers waits (backpressure onto
/// the request) instead of growing memory.
const QUEUE: usize = 4096;

/// Opens a batch that runs statements of its own: alone among the nodes' batches.
pub(super) const BEGIN_ALONE: &str = "BEGIN; SELECT pg_advisory_xact_lock(7535018744)";
/// Opens a batch of staged posts only: beside other such batches, never beside one
/// that runs statements of its own.
pub(super) const BEGIN_SHARED: &str = "BEGIN; SELECT pg_advisory_xact_lock_shared(7535018744)";
/// Makes an open batch one that runs alone (a post batch whose shared insert failed
/// writes its posts one by one, each locking rows of its own).
pub(super) const NOW_ALONE: &str = "SELECT pg_advisory_xact_lock(7535018744)";

/// What a job reports back: whether its changes are kept, and how to tell its caller
/// once the fate of the transaction is known.
struct JobDone {
    keep: bool,
    finish: Box<dyn FnOnce(Result<(), StoreError>) + Send>,
}

type RunJob = Box<dyn for<'c> FnOnce(&'c mut PgTx) -> BoxFuture<'c, JobDone> + Send>;

/// What a job works with: the write connection inside the batch's transaction, and the
/// posts staged for the batch's shared insert.
pub struct PgTx {
    conn: Option<PgConnection>,
    /// Whether this batch's `BEGIN` has been sent (lazily, with the first statement).
    open: bool,
    staged: Vec<StagedPost>,
    /// Whether the running job has taken its savepoint (lazily, with its first
    /// statement: a job that only stages needs none).
    in_job: bool,
    /// What the batch changed, for the other nodes (sent with the commit).
    notes: Notes,
}

impl PgTx {
    /// The connection inside the batch's transaction and the running job's savepoint,
    /// after everything staged so far has been written, so that what the job reads or
    /// writes follows all earlier jobs of the batch, in order.
    pub async fn conn(&mut self) -> Result<&mut PgConnection, StoreError> {
        self.flush(false).await?;
        let conn = self.conn.as_mut().ok_or(StoreError::BatchFailed)?;
        if !self.in_job {
            exec(conn, "SAVEPOINT job").await?;
            self.in_job = true;
        }
        Ok(conn)
    }

    /// Tells the other nodes, with the commit, that these entries were written.
    pub fn note_entries(&mut self, result: &PostResult) {
        self.notes.entries(result);
    }

    /// Tells the other nodes, with the commit, that a team or an agent changed.
    pub fn note_registry(&mut self) {
        self.notes.registry();
    }

    /// Tells the other nodes, with the commit, that this task changed.
    pub fn note_task(&mut self, task: TaskPk) {
        self.notes.task(task);
    }

    /// Queues a post for the batch's shared insert. A job stages last: what it staged
    /// is dropped if it fails, but a statement after staging would write it first.
    pub fn stage(&mut self, post: StagedPost) {
        self.staged.push(post);
    }

    /// Opens the transaction if needed and writes what is staged (and commits, with
    /// `commit`, in the flush's last round trip).
    async fn flush(&mut self, commit: bool) -> Result<(), StoreError> {
        let conn = self.conn.as_mut().ok_or(StoreError::BatchFailed)?;
        if self.staged.is_empty() {
            if !self.open && !commit {
                exec(conn, BEGIN_ALONE).await?;
                self.open = true;
            }
            return Ok(());
        }
        let begin = !self.open;
        self.open = !commit;
        let posts = std::mem::take(&mut self.staged);
        staging::flush(conn, posts, begin, commit, &mut self.notes).await
    }
}

/// A cheap handle to the writer.
#[derive(Clone)]
pub struct PgWriter {
    queue: mpsc::Sender<RunJob>,
    closing: CancellationToken,
    finished: Arc<tokio::sync::Mutex<Option<oneshot::Receiver<()>>>>,
}

impl PgWriter {
    /// Starts the writer on `conn`; `options` reconnect it after the database went away.
    /// `pid` is kept at the backend process id of the writer's connection (the other
    /// nodes' notifications are told from ours by it).
    pub fn spawn(conn: PgConnection, options: PgConnectOptions, pid: Arc<AtomicU32>) -> PgWriter {
        let (queue, rx) = mpsc::channel(QUEUE);
        let closing = CancellationToken::new();
        let (done_tx, done_rx) = oneshot::channel();
        let stop = closing.clone();
        tokio::spawn(async move {
            run(conn, options, pid, rx, stop).await;
            let _ = done_tx.send(());
        });
        PgWriter {
            queue,
            closing,
            finished: Arc::new(tokio::sync::Mutex::new(Some(done_rx))),
        }
    }

    /// Runs `job` in the next batch; `after` runs on the writer task once the batch has
    /// committed (never if the job or the commit failed) and its value is returned.
    pub async fn write_then<T, R, E, F, A>(&self, job: F, after: A) -> Result<R, E>
    where
        F: for<'c> FnOnce(&'c mut PgTx) -> BoxFuture<'c, Result<T, E>> + Send + 'static,
        A: FnOnce(T) -> Result<R, E> + Send + 'static,
        T: Send + 'static,
        R: Send + 'static,
        E: From<StoreError> + Send + 'static,
    {
        let (tx, rx) = oneshot::channel::<Result<R, E>>();
        let run: RunJob = Box::new(move |wtx| {
            Box::pin(async move {
                match job(&mut *wtx).await {
                    Ok(value) => JobDone {
                        keep: true,
                        finish: Box::new(move |committed| {
                            let _ = tx.send(committed.map_err(E::from).and_then(|()| after(value)));
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
        if self.queue.send(run).await.is_err() {
            return Err(StoreError::Closed.into());
        }
        rx.await.unwrap_or_else(|_| Err(StoreError::Dropped.into()))
    }

    /// Stops taking jobs, finishes those already queued, and waits for the writer.
    pub async fn close(&self) {
        self.closing.cancel();
        if let Some(finished) = self.finished.lock().await.take() {
            let _ = finished.await;
        }
    }
}

async fn run(
    conn: PgConnection,
    options: PgConnectOptions,
    pid: Arc<AtomicU32>,
    mut rx: mpsc::Receiver<RunJob>,
    closing: CancellationToken,
) {
    let mut tx = PgTx {
        conn: Some(conn),
        open: false,
        staged: Vec::new(),
        in_job: false,
        notes: Notes::default(),
    };
    let mut batch: Vec<RunJob> = Vec::with_capacity(MAX_BATCH);
    let metrics = (
        metrics::counter!("switchboard_store_write_batches_total"),
        metrics::histogram!("switchboard_store_write_batch_size"),
        metrics::histogram!("switchboard_store_write_batch_seconds"),
    );
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
        if tx.conn.is_none() {
            tx.conn = reconnect(&options, &pid).await;
        }
        batch.push(first);
        while batch.len() < MAX_BATCH {
            match rx.try_recv() {
                Ok(job) => batch.push(job),
                Err(_) => break,
            }
        }
        let started = Instant::now();
        let size = batch.len();
        run_batch(&mut tx, &mut batch).await;
        metrics.0.increment(1);
        metrics.1.record(size as f64);
        metrics.2.record(started.elapsed().as_secs_f64());
    }
    if let Some(conn) = tx.conn
        && let Err(err) = conn.close().await
    {
        tracing::warn!(error = %err, "closing the write connection failed");
    }
    tracing::debug!("storage writer stopped");
}

/// The backend process id of a connection (what its notifications carry).
pub(super) async fn backend_pid(conn: &mut PgConnection) -> Result<u32, StoreError> {
    let pid: i32 = sqlx::query_scalar("SELECT pg_backend_pid()")
        .fetch_one(conn)
        .await?;
    Ok(u32::try_from(pid).unwrap_or_default())
}

/// A new write connection, or `None` (the next batch fails fast and tries again).
async fn reconnect(options: &PgConnectOptions, pid: &AtomicU32) -> Option<PgConnection> {
    let connect = async {
        let mut conn = options.connect().await?;
        pid.store(backend_pid(&mut conn).await?, Ordering::Relaxed);
        Ok::<_, StoreError>(conn)
    };
    match tokio::time::timeout(Duration::from_secs(5), connect).await {
        Ok(Ok(conn)) => {
            tracing::info!("write connection to PostgreSQL re-established");
            Some(conn)
        }
        Ok(Err(err)) => {
            tracing::warn!(error = %err, "PostgreSQL does not answer; writes fail until it does");
            None
        }
        Err(_) => {
            tracing::warn!("connecting to PostgreSQL timed out; writes fail until it answers");
            None
        }
    }
}

async fn run_batch(tx: &mut PgTx, batch: &mut Vec<RunJob>) {
    let size = batch.len();
    let mut jobs = batch.drain(..);
    let mut finishers = Vec::with_capacity(size);
    let outcome: Result<(), StoreError> = async {
        for job in jobs.by_ref() {
            tx.in_job = false;
            let staged_before = tx.staged.len();
            let done = job(&mut *tx).await;
            if !done.keep {
                // What the failed job staged must not be written.
                tx.staged.truncate(staged_before);
            }
            if tx.in_job {
                let conn = tx.conn.as_mut().ok_or(StoreError::BatchFailed)?;
                let end = if done.keep {
                    "RELEASE job"
                } else {
                    "ROLLBACK TO job; RELEASE job"
                };
                exec(conn, end).await?;
            }
            finishers.push(done.finish);
        }
        if !tx.staged.is_empty() {
            tx.flush(true).await?;
        }
        if tx.open {
            tx.open = false;
            let conn = tx.conn.as_mut().ok_or(StoreError::BatchFailed)?;
            let commit = format!("{}COMMIT", tx.notes.statements());
            sqlx::raw_sql(sqlx::AssertSqlSafe(commit))
                .execute(conn)
                .await?;
        }
        tx.notes.clear();
        Ok(())
    }
    .await;
    if let Err(err) = &outcome {
        tracing::error!(error = %err, jobs = size, "write batch failed; rolled back");
        rollback(tx).await;
    }
    // Jobs the failed batch never reached are dropped here: their callers get
    // `StoreError::Dropped`.
    drop(jobs);
    for finish in finishers {
        finish(match &outcome {
            Ok(()) => Ok(()),
            Err(_) => Err(StoreError::BatchFailed),
        });
    }
}

/// Undoes a failed batch; a connection that cannot even roll back is dropped, to be
/// replaced before the next batch.
async fn rollback(tx: &mut PgTx) {
    tx.open = false;
    tx.staged.clear();
    tx.notes.clear();
    let Some(conn) = tx.conn.as_mut() else { return };
    if let Err(err) = sqlx::raw_sql("ROLLBACK").execute(&mut *conn).await {
        tracing::warn!(error = %err, "rollback failed; the write connection is replaced");
        tx.conn = None;
        return;
    }
    if conn.ping().await.is_err() {
        tx.conn = None;
    }
}

async fn exec(conn: &mut PgConnection, sql: &'static str) -> Result<(), StoreError> {
    sqlx::raw_sql(sql).execute(conn).await?;
    Ok(())
}
