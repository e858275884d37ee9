//! The server's own settings (key/value): the admin token's digest and when it was set.

use crate::store::StoreError;

pub(crate) const ADMIN_TOKEN_HASH: &str = "admin_token_sha256";
/// When the admin token was set: microseconds since the epoch, as decimal text.
pub(crate) const ADMIN_TOKEN_SET_AT: &str = "admin_token_set_at";

for_each_engine! {
    pub(crate) async fn get(pool: &Pool, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        Ok(
            sqlx::query_scalar::<Db, Vec<u8>>("SELECT value FROM settings WHERE key = $1")
                .bind(key)
                .fetch_optional(pool)
                .await?,
        )
    }

    pub(crate) async fn put(conn: &mut Conn, key: &str, value: &[u8]) -> Result<(), StoreError> {
        sqlx::query::<Db>(
            "INSERT INTO settings (key, value) VALUES ($1, $2)
             ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        )
        .bind(key)
        .bind(value)
        .execute(conn)
        .await?;
        Ok(())
    }
}
