//! Messages, inboxes, read marks and idempotency keys on PostgreSQL. A post is staged;
//! the batch writes every staged post at once (`message_staging`).

use std::collections::HashMap;
use switchboard_types::ids::{AgentId, MessageId};

use async_trait::async_trait;
use switchboard_types::ids::{AgentPk, MessagePk, TeamPk};
use switchboard_types::time::Timestamp;

use super::super::message_staging::{PostSlot, StagedPost};
use super::super::{PgStore, budgets, idempotency, inbox, messages, retention};
use super::write;
use crate::model::{
    ActivityCounts, Counts, IdempotencyClaim, InboxCounts, InboxEntry, InboxFilter, InboxPageSpec,
    InboxSlice, MarkOutcome, MessageRecord, MessageSweep, MessageSweepSpec, NewPost, PostContext,
    PostOutcome, ResponseLatency, ResponseRow, StoredAnswer, TrafficRow, TrafficSpec,
};
use crate::store::engine::{AfterPost, DecidePost, Messages};
use crate::store::writer::Writes;
use crate::store::{StoreError, paging};

#[async_trait]
impl Messages for PgStore {
    async fn find_answer(
        &self,
        agent: AgentPk,
        key: &str,
    ) -> Result<Option<StoredAnswer>, StoreError> {
        idempotency::find(&self.read, agent, key).await
    }

    async fn find_message(
        &self,
        team: TeamPk,
        message_id: &str,
    ) -> Result<Option<MessageRecord>, StoreError> {
        messages::find(&self.read, team, message_id).await
    }

    async fn thread_tip(
        &self,
        agent: AgentPk,
        thread_id: &str,
    ) -> Result<Option<MessageRecord>, StoreError> {
        messages::thread_tip(&self.read, agent, thread_id).await
    }

    async fn inbox_entry(
        &self,
        agent: AgentPk,
        message: MessagePk,
    ) -> Result<Option<InboxEntry>, StoreError> {
        messages::inbox_entry(&self.read, agent, message).await
    }

    async fn recipient_ids(&self, message: MessagePk) -> Result<Vec<AgentId>, StoreError> {
        messages::recipient_ids(&self.read, message).await
    }

    async fn newest_seq(&self, agent: AgentPk) -> Result<i64, StoreError> {
        inbox::newest_seq(&self.read, agent).await
    }

    async fn read_by(&self, message: MessagePk) -> Result<Vec<AgentPk>, StoreError> {
        messages::read_by(&self.read, message).await
    }

    async fn responses_to(&self, message: MessagePk) -> Result<Vec<ResponseRow>, StoreError> {
        messages::responses_to(&self.read, message).await
    }

    async fn team_traffic(
        &self,
        team: TeamPk,
        spec: TrafficSpec,
    ) -> Result<crate::model::Bounded<TrafficRow>, StoreError> {
        messages::traffic(&self.read, team, spec).await
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

    async fn mark_read(
        &self,
        agent: AgentPk,
        message_ids: Vec<MessageId>,
        now: Timestamp,
    ) -> Result<MarkOutcome, StoreError> {
        write!(self, |conn| {
            messages::mark_read(conn, agent, &message_ids, now).await
        })
    }

    async fn team_counts(&self, team: TeamPk) -> Result<HashMap<AgentPk, Counts>, StoreError> {
        inbox::team_counts(&self.read, team).await
    }

    async fn team_activity(
        &self,
        team: TeamPk,
    ) -> Result<HashMap<AgentPk, ActivityCounts>, StoreError> {
        inbox::team_activity(&self.read, team).await
    }

    async fn response_latencies(&self, team: TeamPk) -> Result<Vec<ResponseLatency>, StoreError> {
        inbox::response_latencies(&self.read, team).await
    }

    async fn expire_messages(&self, spec: MessageSweepSpec) -> Result<MessageSweep, StoreError> {
        write!(self, |conn| retention::expire_messages(conn, spec).await)
    }

    async fn expire_idempotency_keys(
        &self,
        before: Timestamp,
        limit: i64,
    ) -> Result<u64, StoreError> {
        write!(self, |conn| {
            retention::expire_idempotency_keys(conn, before.micros(), limit).await
        })
    }

    async fn trace_traffic(
        &self,
        team: TeamPk,
        trace_id: String,
        limit: i64,
    ) -> Result<Vec<TrafficRow>, StoreError> {
        let rows = crate::store::filters::trace_query::<sqlx::Postgres>(team, trace_id, limit)
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
        let rows =
            crate::store::filters::trace_tasks_query::<sqlx::Postgres>(team, trace_id, limit)
                .build()
                .fetch_all(&self.read)
                .await?;
        rows.iter().map(crate::store::columns::task).collect()
    }

    async fn expire_budget_counts(&self, before: i64, limit: i64) -> Result<u64, StoreError> {
        write!(self, |conn| budgets::expire(conn, before, limit).await)
    }

    /// Writes one message to its recipients (the contract of the SQLite backend's
    /// `post`: a replayed idempotency key writes nothing; `decide` runs inside the
    /// transaction; `after` gets what the message became, after the commit).
    async fn post_boxed(
        &self,
        post: NewPost,
        claim: Option<IdempotencyClaim>,
        decide: DecidePost,
        after: AfterPost,
    ) -> Result<PostOutcome<()>, StoreError> {
        self.write_then(
            move |tx| {
                Box::pin(async move {
                    // Only what must be read inside the transaction touches the
                    // connection; a plain post just stages.
                    if let Some(claim) = &claim
                        && let Some(stored) =
                            idempotency::find(tx.conn().await?, claim.agent, &claim.key).await?
                    {
                        return Ok(Staged::Replayed(stored));
                    }
                    if !post.charges.is_empty() {
                        budgets::spend(tx.conn().await?, &post.charges).await?;
                    }
                    let now = Timestamp::now();
                    let final_response_given = match post.response {
                        Some(link) => {
                            messages::final_response_given(
                                tx.conn().await?,
                                link.original,
                                link.responder,
                            )
                            .await?
                        }
                        None => false,
                    };
                    let context = PostContext {
                        now,
                        final_response_given,
                    };
                    let decided = decide(&post.message, context)?;
                    let slot = PostSlot::default();
                    tx.stage(StagedPost {
                        key: claim.zip(decided.answer),
                        message: post.message,
                        recipient_ids: post.recipient_ids,
                        deliver_to: post.deliver_to,
                        created_at: now,
                        response: post.response,
                        slot: slot.clone(),
                    });
                    Ok(Staged::Fresh(slot))
                })
            },
            move |staged| match staged {
                Staged::Replayed(stored) => Ok(PostOutcome::Replayed(stored)),
                Staged::Fresh(slot) => after(slot.outcome()).map(PostOutcome::Written),
            },
        )
        .await
    }
}

/// What a post job did.
enum Staged {
    Replayed(StoredAnswer),
    Fresh(PostSlot),
}
