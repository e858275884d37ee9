//! The group-commit writer, one for both engines: one task owns the only write
//! connection.
//!
//! Callers send a job (a closure over the engine's write transaction) and wait on a
//! oneshot. The task blocks for one job, then drains whatever else is already queued (up
//! to [`MAX_BATCH`]) without waiting, runs the whole batch in one transaction, and only
//! then answers each caller. One commit covers the batch — one fsync or WAL append on
//! SQLite, one WAL flush and one round trip on PostgreSQL — which is what makes durable
//! writes fast under concurrency; with a single caller the batch is just that caller.
//!
//! A job that fails (a duplicate id, a rule checked inside the transaction) is rolled
//! back alone and the rest of the batch still commits: the engine wraps each job in a
//! savepoint ([`Isolation`]), and drops what the job staged for the batch's shared
//! insert. If the commit itself fails, every job of the batch gets the error and nothing
//! of it is visible: a caller is told "done" only for work that is durable.
//!
//! **A caller that finds the writer idle runs its own batch** (where the engine allows it,
//! see [`Writer::spawn_on_thread`]): with nothing queued and the transaction free, the
//! job is committed by a task spawned on the caller's own runtime thread instead of being
//! handed to the writer's thread and back. A lone write (one agent sending one message
//! at a time) otherwise paid two cross-thread wake-ups and two context switches per
//! commit, most of its latency on a busy machine. The transaction sits behind one lock,
//! so a batch still runs alone and in order whoever runs it; the spawned task (not the
//! caller) runs it, so a caller that goes away mid-commit cannot cut a batch short.
//! Under load the queue is never empty and batches form on the writer's thread as before.
//!
//! A job may carry an *after-commit* hook. Hooks run on this task, after the commit, in
//! commit order; the registry cache and the live-push hub are updated there, so
//! in-memory state follows the database in exactly the order the database changed.
//!
//! What differs between the engines — how a transaction and a savepoint are opened,
//! how staged rows are written, what happens around a batch (SQLite bounds its WAL,
//! PostgreSQL reconnects after the server went away) — is the engine's [`Batch`]; the
//! queue, the draining, the job bookkeeping and the answers are written here once.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use futures_util::future::BoxFuture;
use tokio::sync::{Mutex, mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use super::StoreError;

/// Most jobs per transaction. Large enough to amortise a commit over a burst, small
/// enough that one batch never holds the write lock for long.
pub const MAX_BATCH: usize = 512;

/// Jobs waiting for the writer. Bounded so that a flood of writers waits (backpressure
/// onto the request) instead of growing memory.
const QUEUE: usize = 4096;

/// How a job is kept from leaving half its changes behind when it fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Isolation {
    /// The job runs inside a savepoint of its own, rolled back if the job fails.
    Savepoint,
    /// The job guarantees it changed nothing when it returns an error (a single
    /// statement, or statements inside its own savepoint that it rolls back). Saves two
    /// round trips per job where the engine takes savepoints eagerly.
    SelfContained,
}

impl Isolation {
    /// A write that spends from budgets (`charges`) runs statements of its own for it: a
    /// savepoint undoes them when the write is refused. One that spends nothing is
    /// self-contained (it only stages).
    pub fn for_charges(charges: &[crate::model::Charge]) -> Isolation {
        if charges.is_empty() {
            Isolation::SelfContained
        } else {
            Isolation::Savepoint
        }
    }
}

/// One engine's write transaction, as the writer drives it. Every method runs on the
/// writer's task, so none of them races another.
pub(crate) trait Batch: Send + 'static {
    /// Where the batch's staging stood before a job (to drop what a failed job staged).
    type Mark: Copy + Send;
    /// Before a batch of `jobs` jobs runs.
    fn before_batch(&mut self, jobs: usize) -> impl Future<Output = ()> + Send;
    /// Opens a job: its savepoint if the engine takes it now, and where staging stands.
    fn start_job(
        &mut self,
        isolation: Isolation,
    ) -> impl Future<Output = Result<Self::Mark, StoreError>> + Send;
    /// Closes a job: kept, or everything it changed and staged since `mark` undone.
    fn end_job(
        &mut self,
        isolation: Isolation,
        mark: Self::Mark,
        keep: bool,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;
    /// Writes what is still staged and commits; an error means nothing committed.
    fn commit(&mut self) -> impl Future<Output = Result<(), StoreError>> + Send;
    /// Undoes a failed batch.
    fn rollback(&mut self) -> impl Future<Output = ()> + Send;
    /// After a batch, committed or not.
    fn after_batch(&mut self) -> impl Future<Output = ()> + Send;
    /// The writer stops: leave the database tidy and close the connection.
    fn close(self) -> impl Future<Output = ()> + Send;
}

/// What a job reports back: whether its changes are kept, and how to tell its caller
/// once the fate of the whole transaction is known.
struct JobDone {
    keep: bool,
    finish: Finish,
}

/// Tells one job's caller how its batch ended.
type Finish = Box<dyn FnOnce(Result<(), StoreError>) + Send>;

type RunJob<B> = Box<dyn for<'c> FnOnce(&'c mut B) -> BoxFuture<'c, JobDone> + Send>;

struct Job<B> {
    isolation: Isolation,
    run: RunJob<B>,
}

/// A cheap handle to the writer.
pub struct Writer<B> {
    queue: mpsc::Sender<Job<B>>,
    /// The engine's transaction, held by whoever runs a batch: the writer's task, or a
    /// caller that found the writer idle (`inline`). `None` once the writer closed it.
    tx: Arc<Mutex<Option<Held<B>>>>,
    /// Whether a caller may run a batch of its own when the writer is idle.
    inline: bool,
    metrics: Arc<BatchMetrics>,
    /// Resolves when the writer's task has finished (after `close`).
    finished: Arc<Mutex<Option<oneshot::Receiver<()>>>>,
    closing: CancellationToken,
}

impl<B> Clone for Writer<B> {
    fn clone(&self) -> Self {
        Writer {
            queue: self.queue.clone(),
            tx: self.tx.clone(),
            inline: self.inline,
            metrics: self.metrics.clone(),
            finished: self.finished.clone(),
            closing: self.closing.clone(),
        }
    }
}

impl<B: Batch> Writer<B> {
    /// Starts the writer over `batch` on the shared runtime (PostgreSQL: its round
    /// trips are network waits).
    pub(crate) fn spawn(batch: B) -> Writer<B> {
        let (writer, work) = Writer::parts(batch, false);
        tokio::spawn(work);
        writer
    }

    /// Starts the writer over `batch` on a thread of its own. SQLite's writer is a chain
    /// of round trips to its worker thread; as a task on the shared runtime each step
    /// would wait in the run queue behind request handlers, so commit latency would grow
    /// with request load. With `inline`, a caller that finds it idle commits on its own
    /// thread (see the module's notes): only where a commit is quick, never with an
    /// fsync per commit, which would hold a request thread for milliseconds.
    pub(crate) fn spawn_on_thread(batch: B, inline: bool) -> std::io::Result<Writer<B>> {
        let (writer, work) = Writer::parts(batch, inline);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        std::thread::Builder::new()
            .name("switchboard-writer".into())
            .spawn(move || runtime.block_on(work))?;
        Ok(writer)
    }

    fn parts(batch: B, inline: bool) -> (Writer<B>, impl Future<Output = ()> + Send + 'static) {
        let (queue, rx) = mpsc::channel(QUEUE);
        let closing = CancellationToken::new();
        let (done_tx, done_rx) = oneshot::channel();
        let stop = closing.clone();
        let tx = Arc::new(Mutex::new(Some(Held {
            tx: batch,
            jobs: Vec::with_capacity(MAX_BATCH),
            finishers: Vec::with_capacity(MAX_BATCH),
        })));
        let metrics = Arc::new(BatchMetrics::new());
        let work = {
            let (tx, metrics) = (tx.clone(), metrics.clone());
            async move {
                run(tx, rx, stop, metrics).await;
                let _ = done_tx.send(());
            }
        };
        let writer = Writer {
            queue,
            tx,
            inline,
            metrics,
            finished: Arc::new(Mutex::new(Some(done_rx))),
            closing,
        };
        (writer, work)
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
        F: for<'c> FnOnce(&'c mut B) -> BoxFuture<'c, Result<T, E>> + Send + 'static,
        A: FnOnce(T) -> Result<R, E> + Send + 'static,
        T: Send + 'static,
        R: Send + 'static,
        E: From<StoreError> + Send + 'static,
    {
        let (tx, rx) = oneshot::channel::<Result<R, E>>();
        let run: RunJob<B> = Box::new(move |batch| {
            Box::pin(async move {
                match job(&mut *batch).await {
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
        let _counted = InFlight::enter(&self.metrics);
        let job = Job { isolation, run };
        if self.lone() {
            // Lets every request already waiting for this thread run first: one that
            // writes too makes this write no longer lone, and both go to the queue and
            // share a commit. When the runtime is saturated, writes that look lone one at
            // a time would otherwise each commit alone (measured at 32 STOMP producers:
            // a third more CPU per SEND without this).
            tokio::task::yield_now().await;
        }
        let job = match self.run_inline(job) {
            Ok(()) => return rx.await.unwrap_or_else(|_| Err(StoreError::Dropped.into())),
            Err(job) => job,
        };
        if self.queue.send(job).await.is_err() {
            return Err(StoreError::Closed.into());
        }
        rx.await.unwrap_or_else(|_| Err(StoreError::Dropped.into()))
    }

    /// Whether this write may commit on its own: the writer allows it, is not closing,
    /// has nothing queued and no other write in flight.
    fn lone(&self) -> bool {
        self.inline
            && !self.closing.is_cancelled()
            && self.queue.capacity() == self.queue.max_capacity()
            && self.metrics.in_flight.load(Ordering::Acquire) == 1
    }

    /// Commits `job` as a batch of its own on this thread when the writer is idle
    /// (no other write in flight, nothing queued, the transaction free, not closing);
    /// gives it back otherwise.
    fn run_inline(&self, job: Job<B>) -> Result<(), Job<B>> {
        let Some(guard) = self
            .lone()
            .then(|| self.tx.clone().try_lock_owned().ok())
            .flatten()
        else {
            return Err(job);
        };
        if guard.is_none() {
            return Err(job);
        }
        let metrics = self.metrics.clone();
        // A task of its own, not the caller's future: dropping the caller (a client gone
        // mid-request) must not stop a batch half-way.
        tokio::spawn(async move {
            let mut guard = guard;
            if let Some(Held {
                tx,
                jobs,
                finishers,
            }) = guard.as_mut()
            {
                jobs.push(job);
                tx.before_batch(1).await;
                run_batch(tx, jobs, finishers, &metrics).await;
                tx.after_batch().await;
            }
        });
        Ok(())
    }

    /// Stops taking jobs, finishes those already queued, and waits for the writer to end.
    pub async fn close(&self) {
        self.closing.cancel();
        if let Some(finished) = self.finished.lock().await.take() {
            let _ = finished.await;
        }
    }
}

/// A store whose writes go through a [`Writer`]: the two ways a job isolates itself,
/// written once for every engine (each engine says only where its writer is).
pub(crate) trait Writes<B: Batch> {
    fn writer(&self) -> &Writer<B>;

    /// Runs `job` in the next group commit inside a savepoint of its own, then `after` on
    /// the writer task right after the commit, in commit order; its error fails the call.
    fn write_then<T, R, E, F, A>(
        &self,
        job: F,
        after: A,
    ) -> impl Future<Output = Result<R, E>> + Send
    where
        F: for<'c> FnOnce(&'c mut B) -> BoxFuture<'c, Result<T, E>> + Send + 'static,
        A: FnOnce(T) -> Result<R, E> + Send + 'static,
        T: Send + 'static,
        R: Send + 'static,
        E: From<StoreError> + Send + 'static,
    {
        self.writer().write_then(Isolation::Savepoint, job, after)
    }

    /// Like [`Writes::write_then`] for a job that is atomic by itself (see
    /// [`Isolation::SelfContained`]): it must leave no change behind when it fails.
    fn write_self_contained<T, R, E, F, A>(
        &self,
        job: F,
        after: A,
    ) -> impl Future<Output = Result<R, E>> + Send
    where
        F: for<'c> FnOnce(&'c mut B) -> BoxFuture<'c, Result<T, E>> + Send + 'static,
        A: FnOnce(T) -> Result<R, E> + Send + 'static,
        T: Send + 'static,
        R: Send + 'static,
        E: From<StoreError> + Send + 'static,
    {
        self.writer()
            .write_then(Isolation::SelfContained, job, after)
    }
}

async fn run<B: Batch>(
    tx: Arc<Mutex<Option<Held<B>>>>,
    mut rx: mpsc::Receiver<Job<B>>,
    closing: CancellationToken,
    metrics: Arc<BatchMetrics>,
) {
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
        // Taken after the first job arrives: in between, a caller may hold it for a batch
        // of its own.
        let mut guard = tx.lock().await;
        let Some(Held {
            tx,
            jobs: batch,
            finishers,
        }) = guard.as_mut()
        else {
            break;
        };
        batch.push(first);
        while batch.len() < MAX_BATCH {
            match rx.try_recv() {
                Ok(job) => batch.push(job),
                Err(_) => break,
            }
        }
        tx.before_batch(batch.len()).await;
        run_batch(tx, batch, finishers, &metrics).await;
        tx.after_batch().await;
    }
    // Waits for a caller's batch still running, then closes.
    if let Some(held) = tx.lock().await.take() {
        held.tx.close().await;
    }
    tracing::debug!("storage writer stopped");
}

/// What whoever runs a batch holds: the engine's transaction, and the batch's jobs (kept
/// between batches, so a batch allocates no list of its own).
struct Held<B> {
    tx: B,
    jobs: Vec<Job<B>>,
    finishers: Vec<Finish>,
}

/// A write in flight, counted until its caller has its answer or is gone.
struct InFlight<'m>(&'m BatchMetrics);

impl<'m> InFlight<'m> {
    fn enter(metrics: &'m BatchMetrics) -> InFlight<'m> {
        metrics.in_flight.fetch_add(1, Ordering::AcqRel);
        InFlight(metrics)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}

/// The writer's metric handles, looked up once: a lookup by name per batch hashes the
/// name and takes the registry's lock, on the task every write waits for.
struct BatchMetrics {
    batches: metrics::Counter,
    size: metrics::Histogram,
    seconds: metrics::Histogram,
    /// Writes asked for and not yet answered. A caller commits on its own thread only
    /// when it is the only one: with others in flight, their jobs would queue behind a
    /// batch of one holding a request thread, and the commit that could have covered
    /// them all would be several (measured with 32 STOMP producers, closed loop and
    /// paced: a tenth of the rate and a third more p99 when any lone-looking write
    /// committed inline).
    in_flight: std::sync::atomic::AtomicUsize,
}

impl BatchMetrics {
    fn new() -> BatchMetrics {
        BatchMetrics {
            batches: metrics::counter!("switchboard_store_write_batches_total"),
            size: metrics::histogram!("switchboard_store_write_batch_size"),
            seconds: metrics::histogram!("switchboard_store_write_batch_seconds"),
            in_flight: std::sync::atomic::AtomicUsize::new(0),
        }
    }
}

async fn run_batch<B: Batch>(
    tx: &mut B,
    batch: &mut Vec<Job<B>>,
    finishers: &mut Vec<Finish>,
    metrics: &BatchMetrics,
) {
    let started = Instant::now();
    let size = batch.len();
    // Empty unless a batch before was cut short (its runtime stopping): those callers
    // are told nothing committed (their senders are dropped), never this batch's fate.
    finishers.clear();
    let mut jobs = batch.drain(..);

    let outcome: Result<(), StoreError> = async {
        for job in jobs.by_ref() {
            let mark = tx.start_job(job.isolation).await?;
            let done = (job.run)(&mut *tx).await;
            tx.end_job(job.isolation, mark, done.keep).await?;
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

    for finish in finishers.drain(..) {
        finish(match &outcome {
            Ok(()) => Ok(()),
            // A full disk is said as such: the client can be told to come back later.
            Err(err) if err.is_full() => Err(StoreError::Full),
            Err(_) => Err(StoreError::BatchFailed),
        });
    }
}
