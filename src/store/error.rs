//! Why storage could not do what was asked.

use std::path::PathBuf;

/// A storage failure, or one of the two outcomes of a write that the core turns into a
/// rule's answer ([`StoreError::Conflict`], [`StoreError::Stale`]).
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A unique key already exists (a duplicate id). Operations translate this into the
    /// conflict that means something to the client.
    #[error("a row with the same key already exists")]
    Conflict,
    /// A guarded update found the row changed since it was read (a task's version).
    #[error("the row changed since it was read")]
    Stale,
    /// A row the write needs is gone (e.g. an agent removed between read and write).
    #[error("the row is gone")]
    Missing,
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
    /// The database file belongs to someone else or is damaged; it was left untouched.
    #[error(
        "{path} is not a Switchboard database: {reason}. It was left untouched; give \
         --database a new file (or the right one)"
    )]
    NotOurs { path: PathBuf, reason: String },
    /// Another process serves this SQLite file (see `sqlite::lock`).
    #[error(
        "{path} is already served by {holder}. One SQLite file has one server: stop that \
         one first, or give this one another --database; several nodes share a PostgreSQL \
         database (--database postgres://…)"
    )]
    InUse { path: PathBuf, holder: String },
    /// The database was migrated by a newer binary; it was left untouched.
    #[error(
        "the database holds migration {database}, newer than this binary's newest \
         ({binary}); run the newer binary (it was left untouched)"
    )]
    Newer { database: i64, binary: i64 },
    /// The database named is of a kind this binary cannot serve from.
    #[error("{0}")]
    Unsupported(String),
    /// A copy between engines (`switchboard migrate-db`) could not be made; the target
    /// was left as it was.
    #[error("the copy was not made: {0}")]
    Copy(String),
    #[error("the transaction this write belonged to failed and was rolled back")]
    BatchFailed,
    #[error("storage is closed")]
    Closed,
    #[error("the message could not be written: {0}")]
    PostFailed(#[source] std::sync::Arc<StoreError>),
    #[error("the writer dropped this write without running it (its batch failed first)")]
    Dropped,
    #[error("stored data is not what this version expects: {0}")]
    Corrupt(String),
    /// The disk (or the database's size limit) is full. Nothing of the write was kept;
    /// the same write succeeds once space returns, with no restart.
    #[error("the database's disk is full")]
    Full,
    /// The write would spend past a budget: the index of the first charge over its limit.
    /// Nothing of the write was kept.
    #[error("the write would spend past a budget")]
    OverBudget(usize),
}

/// SQLite's result code for a full disk or database (`SQLITE_FULL`).
const SQLITE_FULL: &str = "13";

impl StoreError {
    /// Whether the failure is a client's doing (a reused id or key) rather than the
    /// store's: the client is told (409), the log says it quietly.
    pub fn is_conflict(&self) -> bool {
        match self {
            StoreError::Conflict => true,
            StoreError::PostFailed(inner) => inner.is_conflict(),
            _ => false,
        }
    }

    /// Says that a write falls back to a slower path that isolates what failed: at
    /// debug for a reused id or key (a client's doing; the client gets its 409), at warn
    /// for anything else.
    pub fn log_fallback(&self, fallback: &'static str, rows: usize) {
        if self.is_conflict() {
            tracing::debug!(rows, fallback, "a reused id or key in a shared write");
        } else {
            tracing::warn!(error = %self, rows, fallback, "a shared write failed");
        }
    }

    /// Whether the write failed for want of space (also inside a failed post).
    pub fn is_full(&self) -> bool {
        match self {
            StoreError::Full => true,
            StoreError::PostFailed(inner) => inner.is_full(),
            _ => false,
        }
    }
}

impl From<sqlx::Error> for StoreError {
    fn from(err: sqlx::Error) -> Self {
        match &err {
            sqlx::Error::Database(db) if db.kind() == sqlx::error::ErrorKind::UniqueViolation => {
                StoreError::Conflict
            }
            sqlx::Error::Database(db) if db.code().as_deref() == Some(SQLITE_FULL) => {
                StoreError::Full
            }
            sqlx::Error::RowNotFound => StoreError::Missing,
            _ => StoreError::Database(err),
        }
    }
}
