//! PostgreSQL's side of the group-commit writer ([`crate::store::writer`]): the node's
//! write connection inside the batch's transaction. A job that runs statements does so
//! inside a `SAVEPOINT`, taken lazily with its first statement: on PostgreSQL a failed
//! statement aborts the whole transaction, so a job that fails (a duplicate id, a stale
//! version) is rolled back to its savepoint alone and the rest of the batch commits. A
//! post only stages its message ([`super::message_staging`]): the batch's are written together,
//! with a handful of statements, whatever their number. What the batch changed is told
//! to the other nodes with the commit (`NOTIFY`, same round trip).
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
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgConnection};
use sqlx::{ConnectOptions, Connection};

use super::listen::Notes;
use super::message_staging::{self, StagedPost};
use crate::model::PostResult;
use crate::store::StoreError;
use crate::store::writer::{Batch, Isolation};
use switchboard_types::ids::TaskPk;

/// Opens a batch that runs statements of its own: alone among the nodes' batches.
pub(super) const BEGIN_ALONE: &str = "BEGIN; SELECT pg_advisory_xact_lock(7535018744)";
/// Opens a batch of staged posts only: beside other such batches, never beside one
/// that runs statements of its own.
pub(super) const BEGIN_SHARED: &str = "BEGIN; SELECT pg_advisory_xact_lock_shared(7535018744)";
/// Makes an open batch one that runs alone (a post batch whose shared insert failed
/// writes its posts one by one, each locking rows of its own).
pub(super) const NOW_ALONE: &str = "SELECT pg_advisory_xact_lock(7535018744)";

/// What a job works with: the write connection inside the batch's transaction, and the
/// posts staged for the batch's shared insert.
pub struct PgTx {
    conn: Option<PgConnection>,
    /// How a lost connection is made again, and where its backend pid is kept (the
    /// other nodes' notifications are told from ours by it).
    options: PgConnectOptions,
    pid: Arc<AtomicU32>,
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
    pub(super) fn stage(&mut self, post: StagedPost) {
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
        message_staging::flush(conn, posts, begin, commit, &mut self.notes).await
    }
}

impl PgTx {
    /// The transaction the writer starts with, on `conn`; `options` reconnect it after
    /// the database went away, and `pid` is kept at its backend process id.
    pub(super) fn new(conn: PgConnection, options: PgConnectOptions, pid: Arc<AtomicU32>) -> PgTx {
        PgTx {
            conn: Some(conn),
            options,
            pid,
            open: false,
            staged: Vec::new(),
            in_job: false,
            notes: Notes::default(),
        }
    }
}

impl Batch for PgTx {
    type Mark = usize;

    async fn before_batch(&mut self, _jobs: usize) {
        if self.conn.is_none() {
            self.conn = reconnect(&self.options, &self.pid).await;
        }
    }

    async fn start_job(&mut self, _: Isolation) -> Result<usize, StoreError> {
        // The savepoint is taken with the job's first statement (`conn`): a job that only
        // stages needs none, and a job's own isolation cannot be weaker than that.
        self.in_job = false;
        Ok(self.staged.len())
    }

    async fn end_job(&mut self, _: Isolation, mark: usize, keep: bool) -> Result<(), StoreError> {
        if !keep {
            // What the failed job staged must not be written.
            self.staged.truncate(mark);
        }
        if self.in_job {
            let conn = self.conn.as_mut().ok_or(StoreError::BatchFailed)?;
            let end = if keep {
                "RELEASE job"
            } else {
                "ROLLBACK TO job; RELEASE job"
            };
            exec(conn, end).await?;
        }
        Ok(())
    }

    async fn commit(&mut self) -> Result<(), StoreError> {
        if !self.staged.is_empty() {
            self.flush(true).await?;
        }
        if self.open {
            self.open = false;
            let conn = self.conn.as_mut().ok_or(StoreError::BatchFailed)?;
            let commit = format!("{}COMMIT", self.notes.statements());
            sqlx::raw_sql(sqlx::AssertSqlSafe(commit))
                .execute(conn)
                .await?;
        }
        self.notes.clear();
        Ok(())
    }

    /// A connection that cannot even roll back is dropped, to be replaced before the
    /// next batch.
    async fn rollback(&mut self) {
        self.open = false;
        self.staged.clear();
        self.notes.clear();
        let Some(conn) = self.conn.as_mut() else {
            return;
        };
        if let Err(err) = sqlx::raw_sql("ROLLBACK").execute(&mut *conn).await {
            tracing::warn!(error = %err, "rollback failed; the write connection is replaced");
            self.conn = None;
            return;
        }
        if conn.ping().await.is_err() {
            self.conn = None;
        }
    }

    async fn after_batch(&mut self) {}

    async fn close(self) {
        if let Some(conn) = self.conn
            && let Err(err) = conn.close().await
        {
            tracing::warn!(error = %err, "closing the write connection failed");
        }
    }
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

async fn exec(conn: &mut PgConnection, sql: &'static str) -> Result<(), StoreError> {
    sqlx::raw_sql(sql).execute(conn).await?;
    Ok(())
}
