//! Messages, their recipients and responses, and read marks.

use std::collections::HashMap;
use switchboard_types::ids::{AgentId, MessageId};

use sqlx::{Row, SqliteConnection, SqliteExecutor};
use switchboard_types::ids::{AgentPk, MessagePk, TeamPk};
use switchboard_types::messages::ResponseStatus;
use switchboard_types::time::Timestamp;

use super::rows::to_json;
use crate::model::{InboxEntry, MarkOutcome, MessageRecord, ResponseRow, TrafficRow, TrafficSpec};
use crate::store::StoreError;
use crate::store::columns::{Columns, MESSAGE_CHAIN_COLUMNS, message_with_chain};
use crate::store::columns::{traffic_row, traffic_weight};
use crate::store::filters::traffic_query;

/// A message of a team by id, with its chain.
pub(super) async fn find<'e, E: SqliteExecutor<'e>>(
    ex: E,
    team: TeamPk,
    message_id: &str,
) -> Result<Option<MessageRecord>, StoreError> {
    let sql = format!(
        "SELECT {MESSAGE_CHAIN_COLUMNS} FROM messages m WHERE m.message_id = ? AND m.team_pk = ?"
    );
    sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(message_id)
        .bind(team.0)
        .fetch_optional(ex)
        .await?
        .as_ref()
        .map(message_with_chain)
        .transpose()
}

/// The newest message of a thread in an agent's inbox, with its chain.
pub(super) async fn thread_tip<'e, E: SqliteExecutor<'e>>(
    ex: E,
    agent: AgentPk,
    thread_id: &str,
) -> Result<Option<MessageRecord>, StoreError> {
    let sql = format!(
        "SELECT {MESSAGE_CHAIN_COLUMNS} FROM inbox i INDEXED BY inbox_by_thread
         JOIN messages m ON m.pk = i.message_pk
         WHERE i.agent_pk = ? AND i.thread_id = ? ORDER BY i.seq DESC LIMIT 1"
    );
    sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(agent.0)
        .bind(thread_id)
        .fetch_optional(ex)
        .await?
        .as_ref()
        .map(message_with_chain)
        .transpose()
}

/// One page of the team's messages with their recipients.
pub(super) async fn traffic<'e, E: SqliteExecutor<'e>>(
    ex: E,
    team: TeamPk,
    spec: TrafficSpec,
) -> Result<crate::model::Bounded<TrafficRow>, StoreError> {
    let mut query = traffic_query::<sqlx::Sqlite>(team, spec);
    let rows = query.build().fetch(ex);
    crate::store::paging::bounded(rows, traffic_weight, traffic_row).await
}

/// The agent's inbox entry for a message.
pub(super) async fn inbox_entry<'e, E: SqliteExecutor<'e>>(
    ex: E,
    agent: AgentPk,
    message: MessagePk,
) -> Result<Option<InboxEntry>, StoreError> {
    let row =
        sqlx::query("SELECT seq, read_at, news FROM inbox WHERE message_pk = ? AND agent_pk = ?")
            .bind(message.0)
            .bind(agent.0)
            .fetch_optional(ex)
            .await?;
    row.map(|r| {
        Ok(InboxEntry {
            seq: r.try_get("seq")?,
            read_at: r
                .try_get::<Option<i64>, _>("read_at")?
                .map(Timestamp::from_micros),
            news: r.flag("news")?,
        })
    })
    .transpose()
}

/// The agent ids a message was addressed to.
pub(super) async fn recipient_ids<'e, E: SqliteExecutor<'e>>(
    ex: E,
    message: MessagePk,
) -> Result<Vec<AgentId>, StoreError> {
    let text: String = sqlx::query_scalar("SELECT recipient_ids FROM messages WHERE pk = ?")
        .bind(message.0)
        .fetch_one(ex)
        .await?;
    serde_json::from_str(&text).map_err(|e| StoreError::Corrupt(format!("recipient_ids: {e}")))
}

/// Agents that marked a message read, in the order they did.
pub(super) async fn read_by<'e, E: SqliteExecutor<'e>>(
    ex: E,
    message: MessagePk,
) -> Result<Vec<AgentPk>, StoreError> {
    let pks: Vec<i64> = sqlx::query_scalar(
        "SELECT agent_pk FROM inbox WHERE message_pk = ? AND read_at IS NOT NULL ORDER BY read_at",
    )
    .bind(message.0)
    .fetch_all(ex)
    .await?;
    Ok(pks.into_iter().map(AgentPk).collect())
}

/// Responses recorded on a message, oldest first.
pub(super) async fn responses_to<'e, E: SqliteExecutor<'e>>(
    ex: E,
    original: MessagePk,
) -> Result<Vec<ResponseRow>, StoreError> {
    let rows = sqlx::query(
        "SELECT m.message_id, r.responder_pk, r.status, r.created_at
         FROM responses r JOIN messages m ON m.pk = r.response_pk
         WHERE r.original_pk = ? ORDER BY r.created_at, r.response_pk",
    )
    .bind(original.0)
    .fetch_all(ex)
    .await?;
    rows.iter()
        .map(|r| {
            Ok(ResponseRow {
                response_message_id: r.try_get::<String, _>("message_id")?.into(),
                responder: AgentPk(r.try_get("responder_pk")?),
                status: r.parse("status")?,
                created_at: Timestamp::from_micros(r.try_get("created_at")?),
            })
        })
        .collect()
}

/// Whether the responder gave a final response to the message already.
pub(super) async fn final_response_given(
    conn: &mut SqliteConnection,
    original: MessagePk,
    responder: AgentPk,
) -> Result<bool, StoreError> {
    let rows =
        sqlx::query("SELECT status FROM responses WHERE original_pk = ? AND responder_pk = ?")
            .bind(original.0)
            .bind(responder.0)
            .fetch_all(conn)
            .await?;
    for row in &rows {
        if row.parse::<ResponseStatus>("status")?.is_final() {
            return Ok(true);
        }
    }
    Ok(false)
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

pub(super) async fn mark_read(
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
    let mut outcome = MarkOutcome::default();
    for id in message_ids {
        match state.get(id) {
            Some(false) => outcome.marked.push(id.clone()),
            Some(true) => outcome.already_read.push(id.clone()),
            None => outcome.not_found.push(id.clone()),
        }
    }
    Ok(outcome)
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
