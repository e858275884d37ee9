//! The server's own settings (the admin token's digest) on PostgreSQL.

use sqlx::postgres::{PgConnection, PgPool};

use crate::store::StoreError;

pub(super) const ADMIN_TOKEN_HASH: &str = "admin_token_sha256";

/// When the admin token was set: microseconds since the epoch, as decimal text.
pub(super) const ADMIN_TOKEN_SET_AT: &str = "admin_token_set_at";

pub(super) async fn get(pool: &PgPool, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
    Ok(
        sqlx::query_scalar("SELECT value FROM settings WHERE key = $1")
            .bind(key)
            .fetch_optional(pool)
            .await?,
    )
}

pub(super) async fn put(
    conn: &mut PgConnection,
    key: &str,
    value: &[u8],
) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO settings (key, value) VALUES ($1, $2)
         ON CONFLICT (key) DO UPDATE SET value = excluded.value",
    )
    .bind(key)
    .bind(value)
    .execute(conn)
    .await?;
    Ok(())
}
