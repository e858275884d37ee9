//! First answers to requests sent with an `Idempotency-Key`. They are written with the
//! message they answer, by the batch insert in [`super::message_staging`].

use sqlx::{Row, SqliteExecutor};
use switchboard_types::ids::AgentPk;

use crate::model::StoredAnswer;
use crate::store::StoreError;

pub(super) async fn find<'e, E: SqliteExecutor<'e>>(
    ex: E,
    agent: AgentPk,
    key: &str,
) -> Result<Option<StoredAnswer>, StoreError> {
    let row = sqlx::query("SELECT operation, request_hash, answer FROM idempotency_keys WHERE agent_pk = ? AND key = ?")
        .bind(agent.0)
        .bind(key)
        .fetch_optional(ex)
        .await?;
    row.map(|r| {
        Ok(StoredAnswer {
            operation: r.try_get("operation")?,
            request_hash: r.try_get("request_hash")?,
            answer: r.try_get("answer")?,
        })
    })
    .transpose()
}
