//! What the PostgreSQL backend offers the core: the same methods, with the same
//! meaning, as the SQLite backend's (`store::sqlite::api`). Reads run on the pool; writes
//! are jobs of this node's group commit ([`super::writer`]).

use crate::store::writer::Writes;
use std::collections::HashMap;
use std::time::Duration;

use futures_util::future::BoxFuture;
use switchboard_types::ids::{AgentPk, MessagePk, TaskPk, TeamPk};
use switchboard_types::time::Timestamp;

use super::message_staging::{PostSlot, StagedPost};
use super::messages::{self, Post};
use super::writer::PgTx;
use super::{PgStore, inbox, outbox, registry, tasks};
use crate::model::RemoteAgentRecord;
use crate::model::WebhookRecord;
use crate::model::{
    ActivityCounts, AdminTokenRecord, AgentRecord, Attempt, Counts, Decided, DueCallback,
    IdempotencyClaim, InboxCounts, InboxEntry, InboxFilter, InboxPageSpec, InboxSlice, MarkOutcome,
    MessageRecord, MessageSweep, MessageSweepSpec, NewMessage, NewPost, NodeConnections, OpenTasks,
    PostContext, PostOutcome, PostResult, PresenceRow, QueueCursorRow, ResponseLatency,
    ResponseRow, SecretHash, StoredAnswer, TaskListSpec, TaskRecord, TaskSnapshot, TaskWrite,
    TeamRecord, TeamSecret,
};
use crate::store::StoreError;
use crate::store::columns::hash_from;
use crate::store::paging;

/// A job of the group commit whose value is what the caller gets.
macro_rules! write {
    ($store:expr, |$conn:ident| $body:expr) => {
        $store
            .write_then(
                move |tx: &mut PgTx| -> BoxFuture<'_, Result<_, StoreError>> {
                    Box::pin(async move {
                        let $conn = tx.conn().await?;
                        $body
                    })
                },
                Ok,
            )
            .await
    };
}

/// Reads, on the pool.
impl PgStore {
    pub async fn ping(&self) -> Result<(), StoreError> {
        sqlx::query("SELECT 1").execute(&self.read).await?;
        Ok(())
    }

    pub async fn admin_token(&self) -> Result<Option<AdminTokenRecord>, StoreError> {
        let Some(bytes) = registry::setting(&self.read, registry::ADMIN_TOKEN_HASH).await? else {
            return Ok(None);
        };
        let set_at = registry::setting(&self.read, registry::ADMIN_TOKEN_SET_AT).await?;
        Ok(Some(AdminTokenRecord {
            hash: hash_from(bytes)?,
            set_at: crate::store::columns::set_at_from(set_at),
        }))
    }

    pub async fn load_teams(&self) -> Result<Vec<TeamRecord>, StoreError> {
        registry::load_teams(&self.read).await
    }

    pub async fn load_agents(&self) -> Result<Vec<AgentRecord>, StoreError> {
        registry::load_agents(&self.read).await
    }

    pub async fn load_presence(&self) -> Result<Vec<PresenceRow>, StoreError> {
        registry::load_presence(&self.read).await
    }

    pub async fn queue_cursor(&self, agent: AgentPk, queue: String) -> Result<i64, StoreError> {
        registry::queue_cursor(&self.read, agent, &queue).await
    }

    pub async fn open_task_counts(&self) -> Result<Vec<OpenTasks>, StoreError> {
        tasks::open_counts(&self.read).await
    }

    pub async fn find_answer(
        &self,
        agent: AgentPk,
        key: &str,
    ) -> Result<Option<StoredAnswer>, StoreError> {
        messages::find_answer(&self.read, agent, key).await
    }

    pub async fn find_message(
        &self,
        team: TeamPk,
        message_id: &str,
    ) -> Result<Option<MessageRecord>, StoreError> {
        messages::find(&self.read, team, message_id).await
    }

    pub async fn inbox_entry(
        &self,
        agent: AgentPk,
        message: MessagePk,
    ) -> Result<Option<InboxEntry>, StoreError> {
        messages::inbox_entry(&self.read, agent, message).await
    }

    pub async fn recipient_ids(&self, message: MessagePk) -> Result<Vec<String>, StoreError> {
        messages::recipient_ids(&self.read, message).await
    }

    pub async fn newest_seq(&self, agent: AgentPk) -> Result<i64, StoreError> {
        inbox::newest_seq(&self.read, agent).await
    }

    pub async fn read_by(&self, message: MessagePk) -> Result<Vec<AgentPk>, StoreError> {
        messages::read_by(&self.read, message).await
    }

    pub async fn responses_to(&self, message: MessagePk) -> Result<Vec<ResponseRow>, StoreError> {
        messages::responses_to(&self.read, message).await
    }

    pub async fn read_inbox(
        &self,
        agent: AgentPk,
        filter: &InboxFilter,
        page: InboxPageSpec,
    ) -> Result<(InboxCounts, InboxSlice), StoreError> {
        let mut conn = self.read.acquire().await?;
        paging::read_inbox(&mut *conn, agent, filter, page).await
    }

    pub async fn list_inbox(
        &self,
        agent: AgentPk,
        filter: &InboxFilter,
        page: InboxPageSpec,
    ) -> Result<InboxSlice, StoreError> {
        let mut conn = self.read.acquire().await?;
        paging::list_inbox(&mut *conn, agent, filter, page).await
    }

    pub async fn team_counts(&self, team: TeamPk) -> Result<HashMap<AgentPk, Counts>, StoreError> {
        inbox::team_counts(&self.read, team).await
    }

    pub async fn team_activity(
        &self,
        team: TeamPk,
    ) -> Result<HashMap<AgentPk, ActivityCounts>, StoreError> {
        inbox::team_activity(&self.read, team).await
    }

    pub async fn response_latencies(
        &self,
        team: TeamPk,
    ) -> Result<Vec<ResponseLatency>, StoreError> {
        inbox::response_latencies(&self.read, team).await
    }

    pub async fn find_task(
        &self,
        team: TeamPk,
        task_id: &str,
        viewer: AgentPk,
    ) -> Result<Vec<TaskRecord>, StoreError> {
        tasks::find_visible(&self.read, team, task_id, viewer).await
    }

    /// One REPEATABLE READ transaction: the three reads see one snapshot.
    pub async fn task_snapshot(&self, task: TaskPk) -> Result<Option<TaskSnapshot>, StoreError> {
        let mut tx = self.read.begin().await?;
        sqlx::raw_sql("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            .execute(&mut *tx)
            .await?;
        let Some(record) = tasks::by_pk(&mut *tx, task).await? else {
            return Ok(None);
        };
        let events = tasks::events(&mut *tx, task).await?;
        let callbacks = tasks::callbacks_of(&mut *tx, task).await?;
        tx.commit().await?;
        Ok(Some(TaskSnapshot {
            task: record,
            events,
            callbacks,
        }))
    }

    pub async fn list_tasks(
        &self,
        agent: AgentPk,
        spec: &TaskListSpec,
    ) -> Result<Vec<TaskRecord>, StoreError> {
        tasks::list(&self.read, agent, spec).await
    }

    pub async fn callback_secret(&self, team: TeamPk) -> Result<Option<TeamSecret>, StoreError> {
        tasks::secret(&self.read, team).await
    }

    pub async fn due_callbacks(
        &self,
        now: Timestamp,
        limit: i64,
        claim: Duration,
    ) -> Result<Vec<DueCallback>, StoreError> {
        tasks::due_callbacks(&self.read, now, limit, claim).await
    }

    pub async fn next_callback_due(&self) -> Result<Option<Timestamp>, StoreError> {
        tasks::next_callback_due(&self.read).await
    }

    pub async fn task_webhooks(&self, task: TaskPk) -> Result<Vec<WebhookRecord>, StoreError> {
        outbox::webhooks_of(&self.read, task).await
    }

    pub async fn webhook(&self, pk: i64) -> Result<Option<WebhookRecord>, StoreError> {
        outbox::webhook_by_pk(&self.read, pk).await
    }

    pub async fn sync_connections(
        &self,
        node: String,
        mine: Vec<NodeConnections>,
        now: Timestamp,
        fresh_after: Timestamp,
    ) -> Result<Vec<NodeConnections>, StoreError> {
        let mut mine = mine;
        mine.sort_by_key(|c| c.agent);
        // The rows are rewritten only when they changed: with thousands of connections,
        // rewriting them every second was thousands of dead rows a second.
        let changed = self
            .connections_written
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            != Some(&mine);
        let write = changed.then_some(mine.as_slice());
        let theirs = registry::sync_connections(&self.read, &node, write, now, fresh_after).await?;
        if changed {
            *self
                .connections_written
                .lock()
                .unwrap_or_else(|p| p.into_inner()) = Some(mine);
        }
        Ok(theirs)
    }

    pub async fn remote_agents(&self) -> Result<Vec<RemoteAgentRecord>, StoreError> {
        outbox::remote_agents(&self.read).await
    }
}

/// Writes, as jobs of the group commit.
impl PgStore {
    pub async fn set_admin_hash(&self, hash: SecretHash, at: Timestamp) -> Result<(), StoreError> {
        write!(self, |conn| {
            registry::put_setting(conn, registry::ADMIN_TOKEN_HASH, &hash).await?;
            let at = at.micros().to_string();
            registry::put_setting(conn, registry::ADMIN_TOKEN_SET_AT, at.as_bytes()).await
        })
    }

    pub async fn insert_team<R: Send + 'static>(
        &self,
        team: TeamRecord,
        after: impl FnOnce(TeamRecord) -> R + Send + 'static,
    ) -> Result<R, StoreError> {
        self.write_then(
            move |tx| {
                Box::pin(async move {
                    let pk = registry::insert_team(tx.conn().await?, &team).await?;
                    tx.note_registry();
                    Ok(TeamRecord { pk, ..team })
                })
            },
            move |team| Ok(after(team)),
        )
        .await
    }

    pub async fn update_team<R, E>(
        &self,
        pk: TeamPk,
        patch: impl FnOnce(&mut TeamRecord) -> Result<(), E> + Send + 'static,
        after: impl FnOnce(TeamRecord) -> R + Send + 'static,
    ) -> Result<R, E>
    where
        R: Send + 'static,
        E: From<StoreError> + Send + 'static,
    {
        self.write_then(
            move |tx| {
                Box::pin(async move {
                    let conn = tx.conn().await?;
                    let mut team = registry::team_for_update(&mut *conn, pk).await?;
                    patch(&mut team)?;
                    registry::update_team(conn, &team).await?;
                    tx.note_registry();
                    Ok(team)
                })
            },
            move |team| Ok(after(team)),
        )
        .await
    }

    pub async fn insert_agent<R: Send + 'static>(
        &self,
        agent: AgentRecord,
        after: impl FnOnce(AgentRecord) -> R + Send + 'static,
    ) -> Result<R, StoreError> {
        self.write_then(
            move |tx| {
                Box::pin(async move {
                    let pk = registry::insert_agent(tx.conn().await?, &agent).await?;
                    tx.note_registry();
                    Ok(AgentRecord { pk, ..agent })
                })
            },
            move |agent| Ok(after(agent)),
        )
        .await
    }

    pub async fn update_agent<R, E>(
        &self,
        pk: AgentPk,
        patch: impl FnOnce(&mut AgentRecord) -> Result<(), E> + Send + 'static,
        after: impl FnOnce(AgentRecord) -> R + Send + 'static,
    ) -> Result<R, E>
    where
        R: Send + 'static,
        E: From<StoreError> + Send + 'static,
    {
        self.write_then(
            move |tx| {
                Box::pin(async move {
                    let conn = tx.conn().await?;
                    let mut agent = registry::agent_for_update(&mut *conn, pk).await?;
                    patch(&mut agent)?;
                    registry::update_agent(conn, &agent).await?;
                    tx.note_registry();
                    Ok(agent)
                })
            },
            move |agent| Ok(after(agent)),
        )
        .await
    }

    pub async fn save_presence(&self, rows: Vec<PresenceRow>) -> Result<(), StoreError> {
        write!(self, |conn| registry::save_presence(conn, &rows).await)
    }

    pub async fn save_queue_cursors(&self, rows: Vec<QueueCursorRow>) -> Result<(), StoreError> {
        write!(self, |conn| registry::save_queue_cursors(conn, &rows).await)
    }

    pub async fn mark_read(
        &self,
        agent: AgentPk,
        message_ids: Vec<String>,
        now: Timestamp,
    ) -> Result<MarkOutcome, StoreError> {
        write!(self, |conn| {
            messages::mark_read(conn, agent, &message_ids, now).await
        })
    }

    pub async fn set_callback_secret(
        &self,
        team: TeamPk,
        secret: String,
        at: Timestamp,
    ) -> Result<(), StoreError> {
        write!(self, |conn| tasks::set_secret(conn, team, &secret, at)
            .await)
    }

    pub async fn record_attempts(&self, attempts: Vec<Attempt>) -> Result<(), StoreError> {
        write!(self, |conn| {
            for attempt in &attempts {
                tasks::record_attempt(&mut *conn, attempt).await?;
            }
            Ok(())
        })
    }

    pub async fn expire_messages(
        &self,
        spec: MessageSweepSpec,
    ) -> Result<MessageSweep, StoreError> {
        write!(self, |conn| outbox::expire_messages(conn, spec).await)
    }

    pub async fn expire_tasks(
        &self,
        team: TeamPk,
        before: Timestamp,
        limit: i64,
    ) -> Result<u64, StoreError> {
        write!(self, |conn| {
            outbox::expire_tasks(conn, team, before.micros(), limit).await
        })
    }

    pub async fn expire_idempotency_keys(
        &self,
        before: Timestamp,
        limit: i64,
    ) -> Result<u64, StoreError> {
        write!(self, |conn| {
            outbox::expire_idempotency_keys(conn, before.micros(), limit).await
        })
    }

    pub async fn expire_callbacks(&self, before: Timestamp, limit: i64) -> Result<u64, StoreError> {
        write!(self, |conn| {
            outbox::expire_callbacks(conn, before.micros(), limit).await
        })
    }

    pub async fn put_webhook(
        &self,
        webhook: WebhookRecord,
        replay_after: Option<i64>,
    ) -> Result<(), StoreError> {
        write!(self, |conn| {
            outbox::put_webhook(conn, &webhook, replay_after).await
        })
    }

    pub async fn delete_webhook(
        &self,
        task: TaskPk,
        webhook_id: String,
    ) -> Result<bool, StoreError> {
        write!(self, |conn| {
            outbox::delete_webhook(conn, task, &webhook_id).await
        })
    }

    pub async fn put_remote_agent(&self, remote: RemoteAgentRecord) -> Result<(), StoreError> {
        write!(self, |conn| outbox::put_remote_agent(conn, &remote).await)
    }
}

/// The two writes that carry messages.
impl PgStore {
    /// Writes one message to its recipients (the contract of the SQLite backend's
    /// `post`: a replayed idempotency key writes nothing; `decide` runs inside the
    /// transaction; `after` gets what the message became, after the commit).
    pub async fn post<T, R, E, D, A>(
        &self,
        post: NewPost,
        claim: Option<IdempotencyClaim>,
        decide: D,
        after: A,
    ) -> Result<PostOutcome<R>, E>
    where
        T: Send + 'static,
        R: Send + 'static,
        E: From<StoreError> + Send + 'static,
        D: FnOnce(&NewMessage, PostContext) -> Result<Decided<T>, E> + Send + 'static,
        A: FnOnce(T, Result<PostResult, StoreError>) -> Result<R, E> + Send + 'static,
    {
        self.write_then(
            move |tx| {
                Box::pin(async move {
                    // Only what must be read inside the transaction touches the
                    // connection; a plain post just stages.
                    if let Some(claim) = &claim
                        && let Some(stored) =
                            messages::find_answer(tx.conn().await?, claim.agent, &claim.key).await?
                    {
                        return Ok(Staged::Replayed(stored));
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
                    Ok(Staged::Fresh(decided.value, slot))
                })
            },
            move |staged| match staged {
                Staged::Replayed(stored) => Ok(PostOutcome::Replayed(stored)),
                Staged::Fresh(value, slot) => {
                    after(value, slot.outcome()).map(PostOutcome::Written)
                }
            },
        )
        .await
    }

    /// Writes a task change (the task, its event, its callback) and its notices in one
    /// job: [`StoreError::Conflict`] when a new task's id is taken, [`StoreError::Stale`]
    /// when the task changed since `write.expected_version`. A notice that cannot be
    /// written fails the whole job (nothing of the change is kept).
    pub async fn write_task<T, R, E, D, A>(
        &self,
        write: TaskWrite,
        notices: Vec<NewPost>,
        decide: D,
        after: A,
    ) -> Result<R, E>
    where
        T: Send + 'static,
        R: Send + 'static,
        E: From<StoreError> + Send + 'static,
        D: FnOnce(&[&NewMessage]) -> T + Send + 'static,
        A: FnOnce(T, Vec<Result<PostResult, StoreError>>) -> Result<R, E> + Send + 'static,
    {
        self.write_then(
            move |tx| {
                Box::pin(async move {
                    let conn = tx.conn().await?;
                    let now = write.task.updated_at;
                    let task = match write.expected_version {
                        None => tasks::insert(&mut *conn, &write).await?,
                        Some(version) => {
                            if !tasks::update(&mut *conn, &write, version).await? {
                                return Err(StoreError::Stale.into());
                            }
                            write.task.pk
                        }
                    };
                    let messages: Vec<&NewMessage> = notices.iter().map(|p| &p.message).collect();
                    let value = decide(&messages);
                    let mut written = Vec::with_capacity(notices.len());
                    for p in &notices {
                        let post = Post {
                            message: &p.message,
                            recipient_ids: &p.recipient_ids,
                            deliver_to: &p.deliver_to,
                            created_at: now,
                            response: None,
                            key: None,
                        };
                        written.push(messages::insert_post(&mut *conn, &post).await?);
                    }
                    tx.note_task(task);
                    for result in &written {
                        tx.note_entries(result);
                    }
                    Ok((value, written.into_iter().map(Ok).collect::<Vec<_>>()))
                })
            },
            move |(value, written)| after(value, written),
        )
        .await
    }
}

/// What a post job did.
enum Staged<T> {
    Replayed(StoredAnswer),
    Fresh(T, PostSlot),
}
