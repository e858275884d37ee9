//! The team's timeline, marking read and the final-response check on SQLite (the reads
//! the engines share: `store/sql/messages.rs`).

use std::collections::HashMap;
use switchboard_types::ids::MessageId;

use sqlx::{Row, SqliteConnection, SqliteExecutor};
use switchboard_types::ids::{AgentPk, TeamPk};
use switchboard_types::time::Timestamp;

use super::rows::to_json;
use crate::model::{MarkOutcome, TrafficRow, TrafficSpec};
use crate::store::StoreError;
use crate::store::columns::{traffic_row, traffic_weight};
use crate::store::filters::traffic_query;

pub(crate) use crate::store::sql::messages::sqlite::*;

/// One page of the team's messages with their recipients.
pub(crate) async fn traffic<'e, E: SqliteExecutor<'e>>(
    ex: E,
    team: TeamPk,
    spec: TrafficSpec,
) -> Result<crate::model::Bounded<TrafficRow>, StoreError> {
    let mut query = traffic_query::<sqlx::Sqlite>(team, spec);
    let rows = query.build().fetch(ex);
    crate::store::paging::bounded(rows, traffic_weight, traffic_row).await
}

/// Marks the agent's entries of `message_ids` read.
// Message first, then this agent's entry of each. Left to itself, SQLite walked the
// agent's whole inbox (its primary key starts with agent_pk) and looked each entry's
// message up, so every mark cost as much as the inbox was large: the soak's writer spent
// most of its time here, and throughput fell as inboxes grew. CROSS JOIN fixes the order,
// INDEXED BY the lookup; `tests::marking_read_never_walks_an_inbox` checks the plans.
const MARK_FIND: &str = "SELECT m.message_id, i.message_pk, i.read_at
     FROM messages m CROSS JOIN inbox i INDEXED BY inbox_by_message
          ON i.message_pk = m.pk AND i.agent_pk = ?
     WHERE m.message_id IN (SELECT value FROM json_each(?))";

const MARK_UPDATE: &str = "UPDATE inbox INDEXED BY inbox_by_message SET read_at = ?
     WHERE agent_pk = ? AND read_at IS NULL AND message_pk IN (SELECT value FROM json_each(?))";

pub(crate) async fn mark_read(
    conn: &mut SqliteConnection,
    agent: AgentPk,
    message_ids: &[MessageId],
    now: Timestamp,
) -> Result<MarkOutcome, StoreError> {
    let rows = sqlx::query(MARK_FIND)
        .bind(agent.0)
        .bind(to_json(message_ids)?)
        .fetch_all(&mut *conn)
        .await?;
    let mut state: HashMap<MessageId, bool> = HashMap::with_capacity(rows.len());
    let mut to_mark = Vec::new();
    for row in &rows {
        let id = MessageId::from(row.try_get::<String, _>("message_id")?);
        let read: Option<i64> = row.try_get("read_at")?;
        if read.is_none() {
            to_mark.push(row.try_get::<i64, _>("message_pk")?);
        }
        state.insert(id, read.is_some());
    }
    if !to_mark.is_empty() {
        sqlx::query(MARK_UPDATE)
            .bind(now.micros())
            .bind(agent.0)
            .bind(to_json(&to_mark)?)
            .execute(&mut *conn)
            .await?;
    }
    Ok(MarkOutcome::of(message_ids, &state))
}

#[cfg(test)]
mod tests {
    use sqlx::SqliteConnection;

    /// The plan of `sql` (parameters bound as NULL), one line per step.
    async fn plan(conn: &mut SqliteConnection, sql: &str) -> String {
        let explain = format!("EXPLAIN QUERY PLAN {sql}");
        let rows = sqlx::query(sqlx::AssertSqlSafe(explain))
            .fetch_all(conn)
            .await
            .expect("explain");
        rows.iter()
            .map(|r| sqlx::Row::get::<String, _>(r, "detail"))
            .collect::<Vec<_>>()
            .join("\n")
    }

    #[tokio::test]
    async fn marking_read_never_walks_an_inbox() {
        let mut conn = super::super::memory_database().await;
        for sql in [super::MARK_FIND, super::MARK_UPDATE] {
            let plan = plan(&mut conn, sql).await;
            assert!(
                plan.contains("inbox_by_message (message_pk=? AND agent_pk=?)"),
                "{plan}"
            );
            assert!(!plan.contains("PRIMARY KEY (agent_pk=?)"), "{plan}");
        }
    }
}
