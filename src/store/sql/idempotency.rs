//! First answers to requests sent with an `Idempotency-Key`. They are written with the
//! message they answer, by each engine's batch insert (`message_staging`).

use switchboard_types::ids::AgentPk;

use crate::model::StoredAnswer;
use crate::store::StoreError;
use crate::store::columns::Columns;

for_each_engine! {
    /// The first answer given to `agent` under `key`, if any.
    pub(crate) async fn find<'e>(
        ex: impl sqlx::Executor<'e, Database = Db>,
        agent: AgentPk,
        key: &str,
    ) -> Result<Option<StoredAnswer>, StoreError> {
        let row = sqlx::query::<Db>(
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
}
