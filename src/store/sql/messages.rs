//! Messages, inboxes, read marks and idempotency keys: the `Messages` storage, one
//! implementation for both engines, and the message reads it runs. What differs stays
//! in each engine's `messages.rs`: the team's timeline (PostgreSQL shows only
//! settled transactions), marking read (SQLite fixes its plan) and the batch insert.

use std::collections::HashMap;

use switchboard_types::ids::{AgentId, AgentPk, MessageId, MessagePk, TeamPk};
use switchboard_types::messages::ResponseStatus;
use switchboard_types::time::Timestamp;

use crate::model::{
    ActivityCounts, Counts, InboxCounts, InboxEntry, InboxFilter, InboxPageSpec, InboxSlice,
    MarkOutcome, MessageRecord, MessageSweep, MessageSweepSpec, ResponseLatency, ResponseRow,
    StoredAnswer, TrafficRow, TrafficSpec,
};
use crate::store::columns::{Columns, MESSAGE_CHAIN_COLUMNS, message_with_chain};
use crate::store::engine::Messages;
use crate::store::writer::Writes;
use crate::store::{StoreError, paging};

for_each_engine! {
    /// A message of a team by id, with its chain.
    pub(crate) async fn find<'e>(
        ex: impl sqlx::Executor<'e, Database = Db>,
        team: TeamPk,
        message_id: &str,
    ) -> Result<Option<MessageRecord>, StoreError> {
        let sql = format!(
            "SELECT {MESSAGE_CHAIN_COLUMNS} FROM messages m
             WHERE m.message_id = $1 AND m.team_pk = $2"
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
        let row = sqlx::query::<Db>(
            "SELECT seq, read_at, news FROM inbox WHERE message_pk = $1 AND agent_pk = $2",
        )
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

    /// Whether the responder gave a final response to the message already. Where several
    /// nodes write (PostgreSQL), the original's row is locked first, so two racing
    /// responses are decided one after the other; SQLite's one writer decides them in
    /// turn anyway.
    pub(crate) async fn final_response_given(
        conn: &mut Conn,
        original: MessagePk,
        responder: AgentPk,
    ) -> Result<bool, StoreError> {
        if !FOR_UPDATE.is_empty() {
            let lock = format!("SELECT 1 FROM messages WHERE pk = $1{FOR_UPDATE}");
            sqlx::query::<Db>(sqlx::AssertSqlSafe(lock))
                .bind(original.0)
                .execute(&mut *conn)
                .await?;
        }
        let rows = sqlx::query::<Db>(
            "SELECT status FROM responses WHERE original_pk = $1 AND responder_pk = $2",
        )
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

    impl Messages for Store {
        async fn find_answer(
            &self,
            agent: AgentPk,
            key: &str,
        ) -> Result<Option<StoredAnswer>, StoreError> {
            engine::idempotency::find(&self.read, agent, key).await
        }

        async fn find_message(
            &self,
            team: TeamPk,
            message_id: &str,
        ) -> Result<Option<MessageRecord>, StoreError> {
            engine::messages::find(&self.read, team, message_id).await
        }

        async fn thread_tip(
            &self,
            agent: AgentPk,
            thread_id: &str,
        ) -> Result<Option<MessageRecord>, StoreError> {
            engine::messages::thread_tip(&self.read, agent, thread_id).await
        }

        async fn inbox_entry(
            &self,
            agent: AgentPk,
            message: MessagePk,
        ) -> Result<Option<InboxEntry>, StoreError> {
            engine::messages::inbox_entry(&self.read, agent, message).await
        }

        async fn recipient_ids(&self, message: MessagePk) -> Result<Vec<AgentId>, StoreError> {
            engine::messages::recipient_ids(&self.read, message).await
        }

        async fn newest_seq(&self, agent: AgentPk) -> Result<i64, StoreError> {
            engine::inbox::newest_seq(&self.read, agent).await
        }

        async fn read_by(&self, message: MessagePk) -> Result<Vec<AgentPk>, StoreError> {
            engine::messages::read_by(&self.read, message).await
        }

        async fn responses_to(&self, message: MessagePk) -> Result<Vec<ResponseRow>, StoreError> {
            engine::messages::responses_to(&self.read, message).await
        }

        async fn team_traffic(
            &self,
            team: TeamPk,
            spec: TrafficSpec,
        ) -> Result<crate::model::Bounded<TrafficRow>, StoreError> {
            engine::messages::traffic(&self.read, team, spec).await
        }

        async fn read_inbox(
            &self,
            agent: AgentPk,
            filter: &InboxFilter,
            page: InboxPageSpec,
        ) -> Result<(InboxCounts, InboxSlice), StoreError> {
            let mut conn = self.read.acquire().await?;
            paging::read_inbox(&mut *conn, agent, filter, page).await
        }

        async fn list_inbox(
            &self,
            agent: AgentPk,
            filter: &InboxFilter,
            page: InboxPageSpec,
        ) -> Result<InboxSlice, StoreError> {
            let mut conn = self.read.acquire().await?;
            paging::list_inbox(&mut *conn, agent, filter, page).await
        }

        /// Marks the agent's entries of `message_ids` read.
        async fn mark_read(
            &self,
            agent: AgentPk,
            message_ids: Vec<MessageId>,
            now: Timestamp,
        ) -> Result<MarkOutcome, StoreError> {
            on_conn!(self, write_self_contained, |conn| {
                engine::messages::mark_read(conn, agent, &message_ids, now).await
            })
        }

        async fn team_counts(&self, team: TeamPk) -> Result<HashMap<AgentPk, Counts>, StoreError> {
            engine::inbox::team_counts(&self.read, team).await
        }

        async fn team_activity(
            &self,
            team: TeamPk,
        ) -> Result<HashMap<AgentPk, ActivityCounts>, StoreError> {
            engine::inbox::team_activity(&self.read, team).await
        }

        async fn response_latencies(
            &self,
            team: TeamPk,
        ) -> Result<Vec<ResponseLatency>, StoreError> {
            engine::inbox::response_latencies(&self.read, team).await
        }

        /// One batch of a team's old messages removed (see [`engine::retention::expire_messages`]).
        async fn expire_messages(
            &self,
            spec: MessageSweepSpec,
        ) -> Result<MessageSweep, StoreError> {
            on_conn!(self, write_then, |conn| engine::retention::expire_messages(
                conn, spec
            )
            .await)
        }

        /// Up to `limit` idempotency records older than `before`, removed.
        async fn expire_idempotency_keys(
            &self,
            before: Timestamp,
            limit: i64,
        ) -> Result<u64, StoreError> {
            on_conn!(self, write_self_contained, |conn| {
                engine::retention::expire_idempotency_keys(conn, before.micros(), limit).await
            })
        }

        async fn trace_traffic(
            &self,
            team: TeamPk,
            trace_id: String,
            limit: i64,
        ) -> Result<Vec<TrafficRow>, StoreError> {
            let rows = crate::store::filters::trace_query::<Db>(team, trace_id, limit)
                .build()
                .fetch_all(&self.read)
                .await?;
            rows.iter()
                .map(crate::store::columns::traffic_row)
                .collect()
        }

        async fn trace_tasks(
            &self,
            team: TeamPk,
            trace_id: String,
            limit: i64,
        ) -> Result<Vec<crate::model::TaskRecord>, StoreError> {
            let rows = crate::store::filters::trace_tasks_query::<Db>(team, trace_id, limit)
                .build()
                .fetch_all(&self.read)
                .await?;
            rows.iter().map(crate::store::columns::task).collect()
        }

        async fn expire_budget_counts(&self, before: i64, limit: i64) -> Result<u64, StoreError> {
            on_conn!(self, write_self_contained, |conn| engine::budgets::expire(
                conn, before, limit
            )
            .await)
        }
    }
}
