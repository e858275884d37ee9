//! First answers to requests sent with an `Idempotency-Key`. They are written with the
//! message they answer, by the batch insert in [`super::messages`].

use sqlx::{Row, SqliteExecutor};

use super::StoreError;

/// A stored first answer.
pub struct Stored {
    pub operation: String,
    pub request_hash: Vec<u8>,
    /// The answer, as JSON text.
    pub answer: String,
}

pub async fn find<'e, E: SqliteExecutor<'e>>(
    ex: E,
    agent_pk: i64,
    key: &str,
) -> Result<Option<Stored>, StoreError> {
    let row = sqlx::query("SELECT operation, request_hash, answer FROM idempotency_keys WHERE agent_pk = ? AND key = ?")
        .bind(agent_pk)
        .bind(key)
        .fetch_optional(ex)
        .await?;
    row.map(|r| {
        Ok(Stored {
            operation: r.try_get("operation")?,
            request_hash: r.try_get("request_hash")?,
            answer: r.try_get("answer")?,
        })
    })
    .transpose()
}
