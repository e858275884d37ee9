//! PostgreSQL (issue #16): the schema of `migrations/postgres/`, the store's methods on
//! it ([`PgStore`]), and a SQLite deployment copied into it ([`copy`],
//! `switchboard migrate-db`).
//!
//! Reads run on a small pool; writes are jobs of this node's group-commit writer, one
//! transaction per batch. Inbox entries are numbered by the database (the
//! `inbox_number` trigger, migration 0002), which locks each recipient's counter row
//! until the commit: that is what keeps seqs gap-free and in commit order when several
//! nodes write to one database.

pub(crate) mod agents;
pub(crate) use crate::store::sql::budgets::postgres as budgets;
pub(crate) mod callbacks;
pub mod copy;
mod engine;
pub(crate) use crate::store::sql::idempotency::postgres as idempotency;
pub(crate) use crate::store::sql::inbox::postgres as inbox;
pub(crate) use crate::store::sql::leases::postgres as leases;
mod listen;
mod message_staging;
pub(crate) mod messages;
mod nodes;
pub(crate) use crate::store::sql::remotes::postgres as remotes;
pub(crate) mod retention;
pub(crate) use crate::store::sql::settings::postgres as settings;
mod tables;
pub(crate) mod tasks;
pub(crate) mod teams;
mod usage;
pub(crate) use crate::store::sql::webhooks::postgres as webhooks;
pub(crate) mod writer;

use std::sync::Arc;
use std::sync::atomic::AtomicU32;
use std::time::Duration;

use sqlx::ConnectOptions;
use sqlx::migrate::Migrator;
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};

use super::StoreError;
use crate::model::{Change, NodeConnections};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use writer::PgTx;

use crate::store::writer::{Writer, Writes};

/// Handle to a PostgreSQL database: a read pool, this node's writer, and what the other
/// nodes commit ([`listen`]). Cheap to clone.
#[derive(Clone)]
pub struct PgStore {
    pub(crate) read: PgPool,
    writer: Writer<PgTx>,
    changes: Arc<std::sync::Mutex<Option<mpsc::Receiver<Vec<Change>>>>>,
    /// Stops the background tasks (listening, disk-use gauges) at close.
    listening: CancellationToken,
    /// This node's live connections as last written to `node_connections` (sorted by
    /// agent), so an unchanged set is not written again.
    connections_written: Arc<std::sync::Mutex<Option<Vec<NodeConnections>>>>,
    /// This node's id, once the core named it (`set_node`): its own registry epochs are
    /// neither waited for nor read back.
    node: Arc<std::sync::OnceLock<String>>,
}

impl Writes<PgTx> for PgStore {
    fn writer(&self) -> &Writer<PgTx> {
        &self.writer
    }
}

impl PgStore {
    /// Connects, applies the migrations (refusing a database a newer binary migrated)
    /// and starts the writer.
    pub async fn open(url: &str) -> Result<PgStore, StoreError> {
        let options = connect_options(url)?;
        let read = pool(options.clone(), 8).await?;
        let mut write = options.connect().await?;
        let pid = Arc::new(AtomicU32::new(writer::backend_pid(&mut write).await?));
        let (tx, rx) = mpsc::channel(1024);
        let listening = CancellationToken::new();
        let node: Arc<std::sync::OnceLock<String>> = Arc::default();
        tokio::spawn(listen::run(
            options.clone(),
            pid.clone(),
            node.clone(),
            tx,
            listening.clone(),
        ));
        tokio::spawn(usage::run(read.clone(), listening.clone()));
        Ok(PgStore {
            read,
            writer: Writer::spawn(PgTx::new(write, options, pid)),
            changes: Arc::new(std::sync::Mutex::new(Some(rx))),
            listening,
            connections_written: Arc::default(),
            node,
        })
    }
}

/// How every connection is opened: statements are not logged one by one (a hot path);
/// slow ones are.
fn connect_options(url: &str) -> Result<PgConnectOptions, StoreError> {
    let options: PgConnectOptions = url.parse().map_err(StoreError::Database)?;
    Ok(options
        .log_statements(log::LevelFilter::Off)
        .log_slow_statements(log::LevelFilter::Warn, Duration::from_millis(250)))
}

/// The migrations of this engine, embedded in the binary.
static MIGRATOR: Migrator = sqlx::migrate!("./migrations/postgres");

/// Whether a `--database` value names a PostgreSQL server rather than a SQLite file.
pub fn is_url(value: &str) -> bool {
    value.starts_with("postgres://") || value.starts_with("postgresql://")
}

/// Connects to the database at `url` and applies the migrations. A database that a
/// newer binary migrated is refused before anything is written: this binary does not
/// know what the newer schema means.
pub async fn open(url: &str) -> Result<PgPool, StoreError> {
    pool(connect_options(url)?, 4).await
}

/// A pool of `size` connections to a migrated database.
async fn pool(options: PgConnectOptions, size: u32) -> Result<PgPool, StoreError> {
    let pool = PgPoolOptions::new()
        .max_connections(size)
        .acquire_timeout(Duration::from_secs(5))
        .connect_with(options)
        .await?;
    refuse_newer(&pool).await?;
    MIGRATOR.run(&pool).await?;
    Ok(pool)
}

/// Fails when the database holds a migration this binary does not have.
async fn refuse_newer(pool: &PgPool) -> Result<(), StoreError> {
    let migrated: bool = sqlx::query_scalar("SELECT to_regclass('_sqlx_migrations') IS NOT NULL")
        .fetch_one(pool)
        .await?;
    if !migrated {
        return Ok(());
    }
    let newest: Option<i64> = sqlx::query_scalar("SELECT MAX(version) FROM _sqlx_migrations")
        .fetch_one(pool)
        .await?;
    let ours = MIGRATOR.iter().map(|m| m.version).max().unwrap_or(0);
    match newest {
        Some(version) if version > ours => Err(StoreError::Newer {
            database: version,
            binary: ours,
        }),
        _ => Ok(()),
    }
}
