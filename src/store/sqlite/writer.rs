//! SQLite's side of the group-commit writer ([`crate::store::writer`]): the write
//! connection inside the batch's `BEGIN IMMEDIATE … COMMIT`, a `SAVEPOINT` per job that
//! asks for one, and the batch's staged rows.
//!
//! **Statements, not rows, are what cost.** Every statement is a round trip to SQLite's
//! worker thread plus fixed per-statement work; inserting a row is cheap by comparison
//! (measured here: ~55 µs per message posted with its own statements, ~19 µs per message
//! when 32 are inserted by the same statements). So jobs do not insert messages
//! themselves: they *stage* them on the [`WriteTx`] ([`WriteTx::staging`]), and the
//! batch inserts everything staged with a few constant statements, right before the
//! `COMMIT` or before any job touches the connection ([`WriteTx::conn`] flushes first),
//! so every statement still sees all earlier jobs' writes, in order. A batch of nothing
//! but staged rows (the common case: sends or task submissions arriving together) is
//! written on the writer's own thread through a second, direct connection, without
//! sqlx's worker thread and its round trip per statement (see `direct`). One fsync (with
//! `--durability full`) or one WAL append (the default) covers the batch.

use sqlx::{Connection, SqliteConnection};

use super::checkpoint::{WalBound, WalWatch};
use crate::store::StoreError;
use crate::store::writer::{Batch, Isolation};

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

/// What a job works with: the write connection inside the batch's transaction, and what
/// is staged for the batch's shared insert.
pub struct WriteTx<S> {
    conn: SqliteConnection,
    staged: S,
    /// Whether this batch's `BEGIN` has been sent. It is sent lazily, with the first
    /// statement that needs it, so a batch of staged posts is one round trip in all.
    open: bool,
    /// Keeps the WAL file within its bound between batches.
    wal: WalWatch,
}

impl<S: Staging> WriteTx<S> {
    /// The transaction the writer starts with.
    pub(crate) fn new(conn: SqliteConnection, staged: S, wal: WalBound) -> WriteTx<S> {
        WriteTx {
            conn,
            staged,
            open: false,
            wal: WalWatch::new(wal),
        }
    }

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

    /// A team or an agent changed: on SQLite the process is the only node, so there is
    /// nobody to tell (PostgreSQL's batch notifies the other nodes with the commit).
    pub fn note_registry(&mut self) {}

    /// What waits for the batch's shared insert, to stage more.
    pub fn staging(&mut self) -> &mut S {
        &mut self.staged
    }
}

impl<S: Staging> Batch for WriteTx<S> {
    type Mark = S::Mark;

    async fn before_batch(&mut self, jobs: usize) {
        self.wal.before_batch(&mut self.conn, jobs).await;
    }

    async fn start_job(&mut self, isolation: Isolation) -> Result<S::Mark, StoreError> {
        if isolation == Isolation::Savepoint {
            exec(self.conn().await?, "SAVEPOINT job").await?;
        }
        Ok(self.staged.mark())
    }

    async fn end_job(
        &mut self,
        isolation: Isolation,
        mark: S::Mark,
        keep: bool,
    ) -> Result<(), StoreError> {
        if !keep {
            // What the failed job staged must not be written.
            self.staged.truncate(mark);
        }
        if isolation == Isolation::Savepoint {
            let conn = self.conn().await?;
            if !keep {
                exec(conn, "ROLLBACK TO job").await?;
                // Keys and sequence numbers handed out inside the savepoint are void.
                self.staged.reset();
            }
            exec(self.conn().await?, "RELEASE job").await?;
        }
        Ok(())
    }

    /// Writes what is still staged and commits, in one round trip when it can.
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

    /// The counters may be ahead of the database now, so they are re-read.
    async fn rollback(&mut self) {
        self.staged.reset();
        if let Err(err) = exec(&mut self.conn, "ROLLBACK").await {
            tracing::debug!(error = %err, "rollback after a failed batch");
        }
        self.open = false;
    }

    async fn after_batch(&mut self) {
        self.wal.after_batch(&mut self.conn).await;
    }

    async fn close(self) {
        let mut conn = self.conn;
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
    }
}

async fn exec(conn: &mut SqliteConnection, sql: &'static str) -> Result<(), StoreError> {
    sqlx::raw_sql(sql).execute(conn).await?;
    Ok(())
}
