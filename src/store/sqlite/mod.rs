//! The SQLite backend: one file, WAL, foreign keys, an explicit busy timeout.
//!
//! All writes go through the group-commit [`writer`]; reads use a small pool of
//! connections, which WAL lets run alongside the writer. Migrations in `migrations/` are
//! embedded in the binary and applied at start-up. One file per table family; functions
//! take a connection (or the read pool) and leave transactions to the caller: the writer
//! owns them. [`api`] is the typed face the store offers the core.

pub(crate) mod agents;
pub(crate) use crate::store::sql::budgets::sqlite as budgets;
pub(crate) mod callbacks;
mod checkpoint;
mod direct;
mod engine;
pub(crate) use crate::store::sql::idempotency::sqlite as idempotency;
pub(crate) use crate::store::sql::inbox::sqlite as inbox;
pub(crate) use crate::store::sql::leases::sqlite as leases;
pub(crate) mod lock;
mod message_row;
mod message_staging;
mod message_staging_one;
mod message_staging_sql;
pub(crate) mod messages;
pub(crate) use crate::store::sql::remotes::sqlite as remotes;
pub(crate) mod retention;
mod rows;
pub(crate) use crate::store::sql::settings::sqlite as settings;
mod task_staging;
pub(crate) mod tasks;
pub(crate) mod teams;
mod usage;
pub(crate) use crate::store::sql::webhooks::sqlite as webhooks;
mod writer;

use std::path::Path;
use std::time::Duration;

use sqlx::ConnectOptions;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};

use checkpoint::WalBound;
use message_staging::PostStaging;
use writer::WriteTx;

use crate::store::writer::{Writer, Writes};

use super::{Durability, StoreError, StoreOptions};

/// The write transaction jobs of this backend work in.
pub(crate) type Tx = WriteTx<PostStaging>;

/// Handle to the database: a read pool, the writer and the checkpointer. Cheap to clone.
#[derive(Clone)]
pub struct SqliteStore {
    pub(crate) read: SqlitePool,
    writer: Writer<Tx>,
    checkpoints: std::sync::Arc<Checkpointer>,
    /// This process's claim on the file, released by [`SqliteStore::close`].
    serving: std::sync::Arc<std::sync::Mutex<Option<lock::ServingLock>>>,
}

impl Writes<Tx> for SqliteStore {
    fn writer(&self) -> &Writer<Tx> {
        &self.writer
    }
}

/// The background checkpoint task and the token that stops it.
struct Checkpointer {
    stop: tokio_util::sync::CancellationToken,
    task: tokio::sync::Mutex<Option<tokio::task::JoinHandle<()>>>,
}

/// The WAL bound of a database file.
fn wal_bound(path: &Path, opts: StoreOptions) -> WalBound {
    let beside = |suffix: &str| {
        let mut file = path.as_os_str().to_owned();
        file.push(suffix);
        std::path::PathBuf::from(file)
    };
    WalBound {
        database: path.to_path_buf(),
        file: beside("-wal"),
        index: beside("-shm"),
        max_bytes: opts.wal_max_bytes,
        busy_timeout: opts.busy_timeout,
    }
}

/// The page size of a database this server creates (an existing file keeps its own:
/// SQLite changes it only by `VACUUM`, outside WAL mode).
///
/// Why smaller than SQLite's 4096: a batch of messages to different agents lands on
/// each recipient's own leaf page in the inbox and in both of its per-agent indexes, and
/// every page a commit touches is written to the WAL whole (then copied again by the
/// checkpoint). With 4 KiB pages the STOMP benchmark's 32 pairs wrote about 12 KiB of
/// WAL per message and restarted the log every second or two, each restart holding
/// writes 8–26 ms. With 1 KiB pages, measured side by side on one machine: 7,251–7,968
/// → 8,849–9,618 SEND/s, CPU per SEND 157–180 → 134–147 µs, restarts a third as often,
/// receipt p99 11.4–13.7 → 8.3–8.7 ms; REST `send_message` and `broadcast`, whose
/// batches go to one agent or append, unchanged within the noise.
const PAGE_SIZE: u32 = 1024;

impl SqliteStore {
    /// A registry change answers once every node holds it: on SQLite the process is the
    /// only node, so there is nothing to wait for (PostgreSQL's waits for the others).
    pub(crate) async fn registry_barrier(
        &self,
        _expiry: std::time::Duration,
    ) -> Result<(), StoreError> {
        Ok(())
    }

    /// Opens (creating if needed) the database file, applies migrations and starts the
    /// writer.
    pub async fn open(path: &Path, opts: StoreOptions) -> Result<SqliteStore, StoreError> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|source| StoreError::Location {
                path: dir.to_path_buf(),
                source,
            })?;
        }
        refuse_foreign(path).await?;
        // Before anything is written: a second server on this file changes nothing.
        let serving = lock::take(path)?;
        let options = connect_options(path, opts);
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
        MIGRATOR.run(&mut write_conn).await?;

        let read = SqlitePoolOptions::new()
            .max_connections(4)
            .min_connections(1)
            .acquire_timeout(Duration::from_secs(5))
            // No ping on acquire: a SQLite connection is a handle in this process, not a
            // socket that can go away, and the ping is a round trip to the connection's
            // thread. Under load each round trip is two thread switches; a GET_MESSAGES
            // acquired twice, so half its hand-offs were pings.
            .test_before_acquire(false)
            .connect_with(
                options
                    .clone()
                    .read_only(true)
                    // No memory map: it looked cheaper (no syscall and copy per page, +25 %
                    // queries/s on an idle 1M-message store), but after any commit a
                    // reader's next transaction resets its pager and unmaps the whole
                    // region, so under a writer every page faults in again. Measured on
                    // a hot inbox with a sender writing to it (8 readers): p99 28 ms for a
                    // thread page mapped, 10 ms read with pread (docs/architecture.md).
                    .pragma("mmap_size", "0"),
            )
            .await?;

        let bound = wal_bound(path, opts);
        let writer = start_writer(path, opts, write_conn, bound.clone())?;
        let stop = tokio_util::sync::CancellationToken::new();
        // The checkpoint task never waits for a lock: whatever it cannot do now it does
        // on a later tick. With a wait, a `TRUNCATE` that queued behind another process's
        // long write transaction then copied all of it while holding writes (1.5-5.7 s
        // after the hot-inbox benchmark marked 980,000 entries read from outside).
        let task = tokio::spawn(checkpoint::run(
            options
                .clone()
                .busy_timeout(Duration::ZERO)
                .connect()
                .await?,
            bound,
            stop.clone(),
        ));
        Ok(SqliteStore {
            read,
            writer,
            checkpoints: std::sync::Arc::new(Checkpointer {
                stop,
                task: tokio::sync::Mutex::new(Some(task)),
            }),
            serving: std::sync::Arc::new(std::sync::Mutex::new(Some(serving))),
        })
    }
}

/// How every connection to the file is opened.
fn connect_options(path: &Path, opts: StoreOptions) -> SqliteConnectOptions {
    SqliteConnectOptions::new()
        .filename(path)
        .create_if_missing(true)
        .page_size(PAGE_SIZE)
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
        // Checkpoints are ours (see `checkpoint`), never SQLite's automatic ones.
        .pragma("wal_autocheckpoint", "0")
        // A restart never cuts the file (that `ftruncate` held up the next commit);
        // the checkpoint task cuts it once the load eases (see `checkpoint`).
        .pragma("journal_size_limit", opts.wal_max_bytes.to_string())
        // Statements are not logged one by one (that is a hot path); slow ones are.
        .log_statements(log::LevelFilter::Off)
        .log_slow_statements(log::LevelFilter::Warn, Duration::from_millis(250))
}

/// Refuses, before anything is written, a file that is not ours: one SQLite cannot read
/// (corrupt, or not a database at all), or another program's database (tables, but no
/// migration history). Opening it normally would switch it to WAL and add our tables to
/// it; a typo in `--database` must never damage someone else's data.
async fn refuse_foreign(path: &Path) -> Result<(), StoreError> {
    let has_content = std::fs::metadata(path).is_ok_and(|m| m.len() > 0);
    if !has_content {
        return Ok(());
    }
    let unreadable = |e: sqlx::Error| StoreError::NotOurs {
        path: path.to_path_buf(),
        reason: format!("SQLite cannot read it ({e})"),
    };
    // Default options change nothing in the file: no journal mode, no creation.
    let mut probe = SqliteConnectOptions::new()
        .filename(path)
        .connect()
        .await
        .map_err(unreadable)?;
    let tables: Vec<String> =
        sqlx::query_scalar("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
            .fetch_all(&mut probe)
            .await
            .map_err(unreadable)?;
    drop(probe);
    let ours = tables.is_empty() || tables.iter().any(|t| t == "_sqlx_migrations");
    if ours {
        return Ok(());
    }
    Err(StoreError::NotOurs {
        path: path.to_path_buf(),
        reason: format!(
            "it is another program's database (tables: {})",
            tables.join(", ")
        ),
    })
}

/// The migrations of this engine (`migrations/`), embedded in the binary.
pub static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations");

/// A fresh in-memory database at this binary's schema, for the store's own tests of
/// statements and plans.
/// The group-commit writer over the write connection and the direct one, on a thread of
/// its own. A lone write commits on its caller's thread instead, unless commits wait for
/// an fsync (decision 026).
fn start_writer(
    path: &Path,
    opts: StoreOptions,
    write_conn: sqlx::SqliteConnection,
    bound: WalBound,
) -> Result<Writer<WriteTx<message_staging::PostStaging>>, StoreError> {
    let direct = direct::Direct::open(path, opts)
        .map_err(|e| StoreError::Corrupt(format!("opening the direct connection: {e}")))?;
    let staging = message_staging::PostStaging::with_direct(direct);
    let tx = WriteTx::new(write_conn, staging, bound);
    let inline = opts.durability == Durability::Normal;
    Writer::spawn_on_thread(tx, inline).map_err(|source| StoreError::Location {
        path: path.to_path_buf(),
        source,
    })
}

#[cfg(test)]
async fn memory_database() -> sqlx::SqliteConnection {
    use sqlx::Connection;
    let mut conn = sqlx::SqliteConnection::connect("sqlite::memory:")
        .await
        .expect("memory database");
    MIGRATOR.run(&mut conn).await.expect("migrations");
    conn
}

#[cfg(test)]
mod tests {
    use sqlx::{Connection, SqliteConnection};

    use crate::store::StoreOptions;
    use crate::store::sqlite::SqliteStore;

    /// A database this server creates has [`super::PAGE_SIZE`] pages, not SQLite's 4096.
    #[tokio::test]
    async fn a_new_database_gets_the_small_page_size() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("pages.db");
        let store = SqliteStore::open(&path, StoreOptions::default())
            .await
            .expect("store");
        let mut conn = SqliteConnection::connect(&format!("sqlite://{}", path.display()))
            .await
            .expect("connection");
        let page: i64 = sqlx::query_scalar("PRAGMA page_size")
            .fetch_one(&mut conn)
            .await
            .expect("page size");
        assert_eq!(page, i64::from(super::PAGE_SIZE));
        assert_eq!(page, 1024);
        store.close().await;
    }
}
