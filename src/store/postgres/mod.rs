//! PostgreSQL (issue #16): the schema of `migrations/postgres/`, and a SQLite deployment
//! copied into it ([`copy`], `switchboard migrate-db`).
//!
//! Serving from PostgreSQL — the [`crate::store::Store`] methods on this engine, and
//! several nodes on one database — is still to come. The schema is already the one that
//! needs: the per-recipient counter row `inbox_counts.last_seq` is how several writers
//! will number inbox entries gap-free and in commit order (see the migration).

pub mod copy;
mod tables;

use std::time::Duration;

use sqlx::migrate::Migrator;
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};

use super::StoreError;

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
    let options: PgConnectOptions = url.parse().map_err(StoreError::Database)?;
    let pool = PgPoolOptions::new()
        .max_connections(4)
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
