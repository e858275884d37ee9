//! Storage: the only module that speaks SQL.
//!
//! SQLite in one file (WAL, foreign keys, an explicit busy timeout). All writes go
//! through the group-commit [`writer`]; reads use a small pool of connections, which WAL
//! lets run alongside the writer. Migrations in `migrations/` are embedded in the binary
//! and applied at start-up. One file per table family, named like the resources in
//! `core/` and `http/`. Functions take a connection (or the read pool) and leave
//! transactions to the caller: the writer owns them.

pub mod agents;
pub mod checkpoint;
pub mod idempotency;
pub mod messages;
pub mod settings;
pub mod tasks;
pub mod teams;
pub mod writer;

use std::path::{Path, PathBuf};
use std::time::Duration;

use futures_util::future::BoxFuture;
use sqlx::ConnectOptions;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};

pub use writer::{Isolation, WriteTx, Writer};

/// How hard a commit tries to survive a crash.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Durability {
    /// `synchronous=NORMAL`: a commit survives a crash of the process, not a power cut.
    Normal,
    /// `synchronous=FULL`: one fsync per group commit; survives a power cut.
    Full,
}

/// Why storage could not do what was asked.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A unique key already exists (a duplicate id). Operations translate this into the
    /// conflict that means something to the client.
    #[error("a row with the same key already exists")]
    Conflict,
    #[error("database error: {0}")]
    Database(#[source] sqlx::Error),
    #[error("applying migrations failed: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    #[error("cannot prepare the database location {path}: {source}")]
    Location {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("the transaction this write belonged to failed and was rolled back")]
    BatchFailed,
    #[error("storage is closed")]
    Closed,
    #[error("the message could not be written: {0}")]
    PostFailed(String),
    #[error("the writer dropped this write without running it (its batch failed first)")]
    Dropped,
    #[error("stored data is not what this version expects: {0}")]
    Corrupt(String),
}

impl From<sqlx::Error> for StoreError {
    fn from(err: sqlx::Error) -> Self {
        if let sqlx::Error::Database(db) = &err
            && db.kind() == sqlx::error::ErrorKind::UniqueViolation
        {
            return StoreError::Conflict;
        }
        StoreError::Database(err)
    }
}

/// How the database is opened.
#[derive(Debug, Clone, Copy)]
pub struct StoreOptions {
    pub durability: Durability,
    /// How long a write waits for a lock held by someone else (another process, a
    /// checkpoint) before it fails with `UNAVAILABLE`.
    pub busy_timeout: Duration,
}

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions {
            durability: Durability::Normal,
            busy_timeout: Duration::from_secs(5),
        }
    }
}

/// Handle to the database: a read pool, the writer and the checkpointer. Cheap to clone.
#[derive(Clone)]
pub struct Store {
    read: SqlitePool,
    writer: Writer,
    checkpoints: std::sync::Arc<Checkpointer>,
}

/// The background checkpoint task and the token that stops it.
struct Checkpointer {
    stop: tokio_util::sync::CancellationToken,
    task: tokio::sync::Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl Store {
    /// Opens (creating if needed) the database file, applies migrations and starts the
    /// writer.
    pub async fn open(path: &Path, opts: StoreOptions) -> Result<Store, StoreError> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|source| StoreError::Location {
                path: dir.to_path_buf(),
                source,
            })?;
        }
        let options = SqliteConnectOptions::new()
            .filename(path)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(match opts.durability {
                Durability::Normal => SqliteSynchronous::Normal,
                Durability::Full => SqliteSynchronous::Full,
            })
            .foreign_keys(true)
            // Only the writer writes, so waits are short: readers never block it in WAL
            // mode; another process holding the lock is the only long wait.
            .busy_timeout(opts.busy_timeout)
            .pragma("temp_store", "memory")
            // Checkpoints run in the background (see `checkpoint`), never on the writer.
            .pragma("wal_autocheckpoint", "0")
            // After a checkpoint, a WAL that grew in a burst is cut back to this size.
            .pragma("journal_size_limit", "67108864")
            // Statements are not logged one by one (that is a hot path); slow ones are.
            .log_statements(log::LevelFilter::Off)
            .log_slow_statements(log::LevelFilter::Warn, Duration::from_millis(250));

        let mut write_conn = options
            .clone()
            // A broadcast dirties one inbox page per member; with SQLite's default 2 MiB
            // cache a batch of them spilled pages to the WAL before the commit and read
            // pages back from the file (the profile showed both). Measured on a noisy
            // box: 2,085 and 2,118 broadcasts/s against 2,007 and 1,850 with the default.
            // The cache fills only as far as writing needs it.
            .pragma("cache_size", "-32768")
            .connect()
            .await?;
        sqlx::migrate!("./migrations").run(&mut write_conn).await?;

        let read = SqlitePoolOptions::new()
            .max_connections(4)
            .min_connections(1)
            .acquire_timeout(Duration::from_secs(5))
            .connect_with(
                options
                    .clone()
                    .read_only(true)
                    // An inbox page leads to message rows scattered through the file;
                    // mapping the file spares a reader a pread syscall and a copy per page
                    // (measured +25% queries/s on a 1M-message store). Mapped pages are the
                    // kernel's page cache, shared and reclaimable, not heap.
                    .pragma("mmap_size", "268435456"),
            )
            .await?;

        let writer = Writer::spawn(write_conn).map_err(|source| StoreError::Location {
            path: path.to_path_buf(),
            source,
        })?;
        let stop = tokio_util::sync::CancellationToken::new();
        let task = tokio::spawn(checkpoint::run(options.connect().await?, stop.clone()));
        Ok(Store {
            read,
            writer,
            checkpoints: std::sync::Arc::new(Checkpointer {
                stop,
                task: tokio::sync::Mutex::new(Some(task)),
            }),
        })
    }

    /// The read pool. Reads see everything committed before they start.
    pub fn reader(&self) -> &SqlitePool {
        &self.read
    }

    /// Runs `job` in the next group commit (inside a savepoint of its own) and returns
    /// its value once committed.
    pub async fn write<T, E, F>(&self, job: F) -> Result<T, E>
    where
        F: for<'c> FnOnce(&'c mut WriteTx) -> BoxFuture<'c, Result<T, E>> + Send + 'static,
        T: Send + 'static,
        E: From<StoreError> + Send + 'static,
    {
        self.writer.write_then(Isolation::Savepoint, job, Ok).await
    }

    /// Like [`Store::write`] for a job that is atomic by itself (see
    /// [`Isolation::SelfContained`]): it must leave no change behind when it fails.
    pub async fn write_self_contained<T, R, E, F, A>(&self, job: F, after: A) -> Result<R, E>
    where
        F: for<'c> FnOnce(&'c mut WriteTx) -> BoxFuture<'c, Result<T, E>> + Send + 'static,
        A: FnOnce(T) -> Result<R, E> + Send + 'static,
        T: Send + 'static,
        R: Send + 'static,
        E: From<StoreError> + Send + 'static,
    {
        self.writer
            .write_then(Isolation::SelfContained, job, after)
            .await
    }

    /// Like [`Store::write`], and runs `after` on the writer task right after the
    /// commit, in commit order (see [`writer`]); its error fails the call.
    pub async fn write_then<T, R, E, F, A>(&self, job: F, after: A) -> Result<R, E>
    where
        F: for<'c> FnOnce(&'c mut WriteTx) -> BoxFuture<'c, Result<T, E>> + Send + 'static,
        A: FnOnce(T) -> Result<R, E> + Send + 'static,
        T: Send + 'static,
        R: Send + 'static,
        E: From<StoreError> + Send + 'static,
    {
        self.writer
            .write_then(Isolation::Savepoint, job, after)
            .await
    }

    /// Checks that the database answers (readiness).
    pub async fn ping(&self) -> Result<(), StoreError> {
        sqlx::query("SELECT 1").execute(&self.read).await?;
        Ok(())
    }

    /// Finishes queued writes, checkpoints the WAL and closes every connection.
    pub async fn close(&self) {
        self.checkpoints.stop.cancel();
        if let Some(task) = self.checkpoints.task.lock().await.take() {
            let _ = task.await;
        }
        self.writer.close().await;
        self.read.close().await;
    }
}

/// Reads a `0/1` column as a bool (SQLite has no boolean type).
pub(crate) fn flag(value: i64) -> bool {
    value != 0
}
