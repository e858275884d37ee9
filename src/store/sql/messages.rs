//! Reading messages, their recipients, read marks and responses: the same on both
//! engines. What differs stays in each engine's `messages.rs`: the team's timeline
//! (PostgreSQL shows only settled transactions), marking read (SQLite fixes its plan),
//! the final-response check (PostgreSQL locks the original) and the batch insert.

use switchboard_types::ids::{AgentId, AgentPk, MessagePk, TeamPk};

use crate::model::{InboxEntry, MessageRecord, ResponseRow};
use crate::store::StoreError;
use crate::store::columns::{Columns, MESSAGE_CHAIN_COLUMNS, message_with_chain};

for_each_engine! {
    /// A message of a team by id, with its chain.
    pub(crate) async fn find<'e>(
        ex: impl sqlx::Executor<'e, Database = Db>,
        team: TeamPk,
        message_id: &str,
    ) -> Result<Option<MessageRecord>, StoreError> {
        let sql = format!(
            "SELECT {MESSAGE_CHAIN_COLUMNS} FROM messages m WHERE m.message_id = $1 AND m.team_pk = $2"
        );
        let row = sqlx::query::<Db>(sqlx::AssertSqlSafe(sql))
            .bind(message_id)
            .bind(team.0)
            .fetch_optional(ex)
            .await?;
        row.as_ref().map(message_with_chain).transpose()
    }

    /// The newest message of a thread in an agent's inbox, with its chain.
    pub(crate) async fn thread_tip<'e>(
        ex: impl sqlx::Executor<'e, Database = Db>,
        agent: AgentPk,
        thread_id: &str,
    ) -> Result<Option<MessageRecord>, StoreError> {
        let sql = format!(
            "SELECT {MESSAGE_CHAIN_COLUMNS} FROM inbox i{INBOX_BY_THREAD}
             JOIN messages m ON m.pk = i.message_pk
             WHERE i.agent_pk = $1 AND i.thread_id = $2 ORDER BY i.seq DESC LIMIT 1"
        );
        let row = sqlx::query::<Db>(sqlx::AssertSqlSafe(sql))
            .bind(agent.0)
            .bind(thread_id)
            .fetch_optional(ex)
            .await?;
        row.as_ref().map(message_with_chain).transpose()
    }

    /// The agent's inbox entry for a message.
    pub(crate) async fn inbox_entry<'e>(
        ex: impl sqlx::Executor<'e, Database = Db>,
        agent: AgentPk,
        msg: MessagePk,
    ) -> Result<Option<InboxEntry>, StoreError> {
        let row =
            sqlx::query::<Db>("SELECT seq, read_at, news FROM inbox WHERE message_pk = $1 AND agent_pk = $2")
                .bind(msg.0)
                .bind(agent.0)
                .fetch_optional(ex)
                .await?;
        row.map(|r| {
            Ok(InboxEntry {
                seq: r.int("seq")?,
                read_at: r.opt_time("read_at")?,
                news: r.flag("news")?,
            })
        })
        .transpose()
    }

    /// The agent ids a message was addressed to.
    pub(crate) async fn recipient_ids<'e>(
        ex: impl sqlx::Executor<'e, Database = Db>,
        msg: MessagePk,
    ) -> Result<Vec<AgentId>, StoreError> {
        let row = sqlx::query::<Db>("SELECT recipient_ids FROM messages WHERE pk = $1")
            .bind(msg.0)
            .fetch_one(ex)
            .await?;
        row.json(0)
    }

    /// Agents that marked a message read, in the order they did.
    pub(crate) async fn read_by<'e>(
        ex: impl sqlx::Executor<'e, Database = Db>,
        msg: MessagePk,
    ) -> Result<Vec<AgentPk>, StoreError> {
        let pks: Vec<i64> = sqlx::query_scalar::<Db, _>(
            "SELECT agent_pk FROM inbox WHERE message_pk = $1 AND read_at IS NOT NULL
             ORDER BY read_at, agent_pk",
        )
        .bind(msg.0)
        .fetch_all(ex)
        .await?;
        Ok(pks.into_iter().map(AgentPk).collect())
    }

    /// Responses recorded on a message, oldest first.
    pub(crate) async fn responses_to<'e>(
        ex: impl sqlx::Executor<'e, Database = Db>,
        original: MessagePk,
    ) -> Result<Vec<ResponseRow>, StoreError> {
        let rows = sqlx::query::<Db>(
            "SELECT m.message_id, r.responder_pk, r.status, r.created_at
             FROM responses r JOIN messages m ON m.pk = r.response_pk
             WHERE r.original_pk = $1 ORDER BY r.created_at, r.response_pk",
        )
        .bind(original.0)
        .fetch_all(ex)
        .await?;
        rows.iter()
            .map(|r| {
                Ok(ResponseRow {
                    response_message_id: r.text("message_id")?.into(),
                    responder: AgentPk(r.int("responder_pk")?),
                    status: r.parse("status")?,
                    created_at: r.time("created_at")?,
                })
            })
            .collect()
    }
}
