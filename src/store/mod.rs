//! Storage: the only place that speaks SQL.
//!
//! The core sees [`Store`]: one method per thing it reads or writes, in the row types of
//! [`crate::model`], never a connection or a statement. The methods are the storage
//! contract ([`engine`]: one trait per resource, and the lifecycle in [`lifecycle`]),
//! which each engine implements once — [`sqlite`] and [`postgres`], most of it in the
//! SQL both compile (`store/sql`). Writes go through the
//! engine's group-commit writer ([`writer`]); a decision that must be taken inside the
//! transaction (a patch applied to the current row, "has this responder already
//! answered") comes in as a closure over records, and after-commit hooks run in commit
//! order.

pub(crate) mod columns;
pub mod engine;
pub mod error;
pub(crate) mod filters;
pub mod lifecycle;
pub(crate) mod paging;
pub mod postgres;
pub(crate) mod search;
pub(crate) mod sql;
pub mod sqlite;
pub(crate) mod typed;
pub(crate) mod usage;
pub(crate) mod writer;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

pub use error::StoreError;

/// How hard a commit tries to survive a crash.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// A commit survives a crash of the process, not a power cut (SQLite's
    /// `synchronous=NORMAL`).
    Normal,
    /// One fsync per group commit; survives a power cut.
    Full,
}

/// How the database is opened.
#[derive(Debug, Clone, Copy)]
pub struct StoreOptions {
    pub durability: Durability,
    /// How long a write waits for a lock held by someone else (another process, a
    /// checkpoint) before it fails with `UNAVAILABLE`.
    pub busy_timeout: Duration,
    /// The size the write-ahead log is kept under during any load (it is cut back to an
    /// eighth of it when the load eases, and to nothing when writes stop).
    pub wal_max_bytes: u64,
}

/// How long a node's heartbeat stays fresh: past it the node counts as dead (its
/// connections as gone), and a registry change no longer waits for it (a heartbeat is
/// written every second).
pub const NODE_EXPIRY: Duration = Duration::from_secs(10);

/// The default `--wal-max-bytes`: 256 MiB.
pub const DEFAULT_WAL_MAX_BYTES: u64 = 256 * 1024 * 1024;

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions {
            durability: Durability::Normal,
            busy_timeout: Duration::from_secs(5),
            wal_max_bytes: DEFAULT_WAL_MAX_BYTES,
        }
    }
}

/// Handle to storage; cheap to clone. It is one of the two engines, held as itself: a
/// call is a `match` and the engine's own method (the resource traits' methods are
/// given to `Store` by `engine::contract!`), so nothing is boxed on the way; the writes
/// that carry the core's own types are in [`typed`].
#[derive(Clone)]
pub enum Store {
    /// The embedded default: this process is the only node.
    Sqlite(Arc<sqlite::SqliteStore>),
    /// A PostgreSQL server that several nodes may share.
    Postgres(Arc<postgres::PgStore>),
}

impl Store {
    /// Opens the database `--database` names: a PostgreSQL server (a `postgres://` or
    /// `postgresql://` URL), or a SQLite file, given as a path or as `sqlite://path`.
    pub async fn open(location: &Path, opts: StoreOptions) -> Result<Store, StoreError> {
        let text = location.to_string_lossy();
        if postgres::is_url(&text) {
            let engine = postgres::PgStore::open(&text).await?;
            return Ok(Store::Postgres(Arc::new(engine)));
        }
        match text.strip_prefix("sqlite://") {
            Some(path) => Store::open_sqlite(Path::new(path), opts).await,
            None => Store::open_sqlite(location, opts).await,
        }
    }

    /// Opens a SQLite database file (creating it and its folder if needed) and applies
    /// the migrations.
    pub async fn open_sqlite(path: &Path, opts: StoreOptions) -> Result<Store, StoreError> {
        let engine = sqlite::SqliteStore::open(path, opts).await?;
        Ok(Store::Sqlite(Arc::new(engine)))
    }
}
