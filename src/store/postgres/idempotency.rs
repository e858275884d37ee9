//! Idempotency records on PostgreSQL: the first answer given under a key.

use sqlx::postgres::PgExecutor;
use switchboard_types::ids::AgentPk;

use crate::model::StoredAnswer;
use crate::store::StoreError;
use crate::store::columns::Columns;

pub(super) async fn find<'e>(
    ex: impl PgExecutor<'e>,
    agent: AgentPk,
    key: &str,
) -> Result<Option<StoredAnswer>, StoreError> {
    let row = sqlx::query(
        "SELECT operation, request_hash, answer FROM idempotency_keys
         WHERE agent_pk = $1 AND key = $2",
    )
    .bind(agent.0)
    .bind(key)
    .fetch_optional(ex)
    .await?;
    row.map(|r| {
        Ok(StoredAnswer {
            operation: r.text("operation")?,
            request_hash: r.opt_bytes("request_hash")?.unwrap_or_default(),
            answer: r.text("answer")?,
        })
    })
    .transpose()
}
