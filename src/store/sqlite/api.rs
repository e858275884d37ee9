//! What the SQLite backend offers the core: one method per thing the core reads or
//! writes, in the types of [`crate::model`]. Writes become jobs of the group
//! commit; a caller's decisions that must be made inside the transaction come in as
//! closures that see only records, never a connection.

use crate::store::writer::Writes;
use std::collections::HashMap;
use std::time::Duration;

use switchboard_types::ids::{AgentPk, MessagePk, TaskPk, TeamPk};
use switchboard_types::time::Timestamp;

use super::message_row::RenderedMessage;
use super::message_staging::{IdempotencyRow, PostSlot, StagedPost};
use super::{
    SqliteStore, agents, callbacks, idempotency, inbox, messages, retention, settings, tasks, teams,
};
use crate::model::{
    ActivityCounts, AdminTokenRecord, AgentRecord, Attempt, Counts, Decided, DueCallback,
    IdempotencyClaim, InboxCounts, InboxEntry, InboxFilter, InboxPageSpec, InboxSlice, MarkOutcome,
    MessageRecord, MessageSweep, MessageSweepSpec, NewMessage, NewPost, OpenTasks, PostContext,
    PostOutcome, PostResult, PresenceRow, QueueCursorRow, ResponseLatency, ResponseRow, SecretHash,
    StoredAnswer, TaskListSpec, TaskRecord, TaskSnapshot, TaskWrite, TeamRecord, TeamSecret,
};
use crate::store::StoreError;
use crate::store::paging;

/// Reads, on the pool (they see everything committed before they start).
impl SqliteStore {
    pub async fn admin_token(&self) -> Result<Option<AdminTokenRecord>, StoreError> {
        let Some(bytes) = settings::get(&self.read, settings::ADMIN_TOKEN_HASH).await? else {
            return Ok(None);
        };
        let set_at = settings::get(&self.read, settings::ADMIN_TOKEN_SET_AT).await?;
        Ok(Some(AdminTokenRecord {
            hash: crate::store::columns::hash_from(bytes)?,
            set_at: crate::store::columns::set_at_from(set_at),
        }))
    }

    pub async fn load_teams(&self) -> Result<Vec<TeamRecord>, StoreError> {
        teams::load_all(&self.read).await
    }

    pub async fn load_agents(&self) -> Result<Vec<AgentRecord>, StoreError> {
        agents::load_all(&self.read).await
    }

    pub async fn load_presence(&self) -> Result<Vec<PresenceRow>, StoreError> {
        agents::load_presence(&self.read).await
    }

    pub async fn queue_cursor(&self, agent: AgentPk, queue: String) -> Result<i64, StoreError> {
        agents::queue_cursor(&self.read, agent, &queue).await
    }

    pub async fn open_task_counts(&self) -> Result<Vec<OpenTasks>, StoreError> {
        tasks::open_counts(&self.read).await
    }

    pub async fn find_answer(
        &self,
        agent: AgentPk,
        key: &str,
    ) -> Result<Option<StoredAnswer>, StoreError> {
        idempotency::find(&self.read, agent, key).await
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

    pub async fn newest_seq(&self, agent: AgentPk) -> Result<i64, StoreError> {
        inbox::newest_seq(&self.read, agent).await
    }

    pub async fn recipient_ids(&self, message: MessagePk) -> Result<Vec<String>, StoreError> {
        messages::recipient_ids(&self.read, message).await
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

    /// One read transaction: SQLite's snapshot is taken at its first read and held to
    /// its end, so no commit lands between the three reads.
    pub async fn task_snapshot(&self, task: TaskPk) -> Result<Option<TaskSnapshot>, StoreError> {
        let mut tx = self.read.begin().await?;
        let Some(record) = tasks::by_pk(&mut *tx, task).await? else {
            return Ok(None);
        };
        let events = tasks::events(&mut *tx, task).await?;
        let callbacks = callbacks::callbacks_of(&mut *tx, task).await?;
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
        callbacks::secret(&self.read, team).await
    }

    pub async fn due_callbacks(
        &self,
        now: Timestamp,
        limit: i64,
        _claim: Duration,
    ) -> Result<Vec<DueCallback>, StoreError> {
        // One process owns the file: there is no other sender to claim against.
        callbacks::due(&self.read, now, limit).await
    }

    pub async fn next_callback_due(&self) -> Result<Option<Timestamp>, StoreError> {
        callbacks::next_due(&self.read).await
    }
}

/// Several nodes share a PostgreSQL database, never a SQLite file: this process is the
/// only node, and no other node has connections.
impl SqliteStore {
    pub async fn sync_connections(
        &self,
        _node: String,
        _mine: Vec<crate::model::NodeConnections>,
        _now: Timestamp,
        _fresh_after: Timestamp,
    ) -> Result<Vec<crate::model::NodeConnections>, StoreError> {
        Ok(Vec::new())
    }
}

/// Writes, as jobs of the group commit.
impl SqliteStore {
    pub async fn set_admin_hash(&self, hash: SecretHash, at: Timestamp) -> Result<(), StoreError> {
        self.write_then(
            move |tx| {
                Box::pin(async move {
                    let conn = tx.conn().await?;
                    settings::put(conn, settings::ADMIN_TOKEN_HASH, &hash).await?;
                    let at = at.micros().to_string();
                    settings::put(conn, settings::ADMIN_TOKEN_SET_AT, at.as_bytes()).await
                })
            },
            Ok,
        )
        .await
    }

    /// Inserts a team; `after` runs right after the commit (in commit order).
    /// [`StoreError::Conflict`] when the id is taken.
    pub async fn insert_team<R: Send + 'static>(
        &self,
        team: TeamRecord,
        after: impl FnOnce(TeamRecord) -> R + Send + 'static,
    ) -> Result<R, StoreError> {
        self.write_then(
            move |tx| {
                Box::pin(async move {
                    let pk = teams::insert(tx.conn().await?, &team).await?;
                    Ok(TeamRecord { pk, ..team })
                })
            },
            move |team| Ok(after(team)),
        )
        .await
    }

    /// Changes a team as `patch` decides, on the row as the transaction sees it (so
    /// concurrent patches compose).
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
                    let mut team = teams::get(&mut *conn, pk).await?;
                    patch(&mut team)?;
                    teams::update(conn, &team).await?;
                    Ok(team)
                })
            },
            move |team| Ok(after(team)),
        )
        .await
    }

    /// Inserts an agent (taking over the row of a removed one with the same id).
    /// [`StoreError::Conflict`] when a member has the id.
    pub async fn insert_agent<R: Send + 'static>(
        &self,
        agent: AgentRecord,
        after: impl FnOnce(AgentRecord) -> R + Send + 'static,
    ) -> Result<R, StoreError> {
        self.write_then(
            move |tx| {
                Box::pin(async move {
                    let pk = agents::insert(tx.conn().await?, &agent).await?;
                    Ok(AgentRecord { pk, ..agent })
                })
            },
            move |agent| Ok(after(agent)),
        )
        .await
    }

    /// Changes an agent (removal included) as `patch` decides, on the row as the
    /// transaction sees it.
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
                    let mut agent = agents::get(&mut *conn, pk).await?;
                    patch(&mut agent)?;
                    agents::update(conn, &agent).await?;
                    Ok(agent)
                })
            },
            move |agent| Ok(after(agent)),
        )
        .await
    }

    /// Writes acknowledged cursors and last activity (a cursor never moves back).
    pub async fn save_presence(&self, rows: Vec<PresenceRow>) -> Result<(), StoreError> {
        self.write_self_contained(
            move |tx| Box::pin(async move { agents::save_presence(tx.conn().await?, &rows).await }),
            Ok,
        )
        .await
    }

    pub async fn save_queue_cursors(&self, rows: Vec<QueueCursorRow>) -> Result<(), StoreError> {
        self.write_self_contained(
            move |tx| {
                Box::pin(async move { agents::save_queue_cursors(tx.conn().await?, &rows).await })
            },
            Ok,
        )
        .await
    }

    /// Marks the agent's entries of `message_ids` read.
    pub async fn mark_read(
        &self,
        agent: AgentPk,
        message_ids: Vec<String>,
        now: Timestamp,
    ) -> Result<MarkOutcome, StoreError> {
        self.write_self_contained(
            move |tx| {
                Box::pin(async move {
                    messages::mark_read(tx.conn().await?, agent, &message_ids, now).await
                })
            },
            Ok,
        )
        .await
    }

    pub async fn set_callback_secret(
        &self,
        team: TeamPk,
        secret: String,
        at: Timestamp,
    ) -> Result<(), StoreError> {
        self.write_then(
            move |tx| {
                Box::pin(
                    async move { callbacks::set_secret(tx.conn().await?, team, &secret, at).await },
                )
            },
            Ok,
        )
        .await
    }

    /// Records the outcome of callback attempts (on each callback and its task).
    pub async fn record_attempts(&self, attempts: Vec<Attempt>) -> Result<(), StoreError> {
        self.write_then(
            move |tx| {
                Box::pin(async move {
                    let conn = tx.conn().await?;
                    for attempt in &attempts {
                        callbacks::record_attempt(&mut *conn, attempt).await?;
                    }
                    Ok(())
                })
            },
            Ok,
        )
        .await
    }

    /// One batch of a team's old messages removed (see [`retention::expire_messages`]).
    pub async fn expire_messages(
        &self,
        spec: MessageSweepSpec,
    ) -> Result<MessageSweep, StoreError> {
        self.write_then(
            move |tx| {
                Box::pin(async move { retention::expire_messages(tx.conn().await?, spec).await })
            },
            Ok,
        )
        .await
    }

    /// Up to `limit` of the team's finished tasks last changed before `before`, removed.
    pub async fn expire_tasks(
        &self,
        team: TeamPk,
        before: Timestamp,
        limit: i64,
    ) -> Result<u64, StoreError> {
        self.write_then(
            move |tx| {
                Box::pin(async move {
                    retention::expire_tasks(tx.conn().await?, team, before.micros(), limit).await
                })
            },
            Ok,
        )
        .await
    }

    /// Up to `limit` idempotency records older than `before`, removed.
    pub async fn expire_idempotency_keys(
        &self,
        before: Timestamp,
        limit: i64,
    ) -> Result<u64, StoreError> {
        self.write_self_contained(
            move |tx| {
                Box::pin(async move {
                    retention::expire_idempotency_keys(tx.conn().await?, before.micros(), limit)
                        .await
                })
            },
            Ok,
        )
        .await
    }

    /// Up to `limit` callback records finished before `before`, removed.
    pub async fn expire_callbacks(&self, before: Timestamp, limit: i64) -> Result<u64, StoreError> {
        self.write_self_contained(
            move |tx| {
                Box::pin(async move {
                    retention::expire_callbacks(tx.conn().await?, before.micros(), limit).await
                })
            },
            Ok,
        )
        .await
    }
}

/// The two writes that carry messages: a post, and a task change with its notices.
impl SqliteStore {
    /// Writes one message to its recipients as one self-contained job.
    ///
    /// With an idempotency claim whose key was used before, nothing is written and the
    /// stored answer comes back. Otherwise `decide` runs inside the transaction with the
    /// message's time (and, for a response, whether the responder already gave a final
    /// one): it may refuse, or return a value and the answer to store with the key.
    /// `after` gets the value and what the message became, after the commit.
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
        // Rendered here, on the caller's thread (see `RenderedMessage`).
        let rendered = RenderedMessage::new(post.message, post.recipient_ids)?;
        let (deliver_to, response) = (post.deliver_to, post.response);
        self.write_self_contained(
            move |tx| {
                Box::pin(async move {
                    if let Some(claim) = &claim
                        && let Some(stored) =
                            idempotency::find(tx.conn().await?, claim.agent, &claim.key).await?
                    {
                        return Ok(Staged::Replayed(stored));
                    }
                    let now = Timestamp::now();
                    let final_response_given = match response {
                        Some(link) => {
                            let conn = tx.conn().await?;
                            messages::final_response_given(conn, link.original, link.responder)
                                .await?
                        }
                        None => false,
                    };
                    let context = PostContext {
                        now,
                        final_response_given,
                    };
                    let decided = decide(&rendered.message, context)?;
                    let key = claim
                        .zip(decided.answer)
                        .map(|(claim, answer)| IdempotencyRow { claim, answer });
                    let post = StagedPost::new(rendered, deliver_to, now, response, key);
                    let slot = tx.staging().stage(post);
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
    /// self-contained job. [`StoreError::Conflict`] when a new task's id is taken;
    /// [`StoreError::Stale`] when the task changed since `write.expected_version`.
    /// `decide` runs inside the transaction once the task is written (for work that must
    /// happen in commit order); `after` gets its value and what each notice became.
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
        let rendered = notices
            .into_iter()
            .map(|p| {
                Ok((
                    RenderedMessage::new(p.message, p.recipient_ids)?,
                    p.deliver_to,
                ))
            })
            .collect::<Result<Vec<_>, StoreError>>()?;
        self.write_self_contained(
            move |tx| {
                Box::pin(async move {
                    let now = write.task.updated_at;
                    // A new task is staged and written by the flush with the batch's
                    // other new tasks (`task_staging`); a change runs its statement now,
                    // beside the staged posts: the task tables are disjoint from what
                    // posts touch, and a change cannot concern a task staged in this
                    // batch (the change was decided on the task as committed).
                    let task = match write.expected_version {
                        None => Some(tx.staging().stage_task(write)),
                        Some(version) => {
                            let conn = tx.conn_beside_posts().await?;
                            if !tasks::update(conn, &write, version).await? {
                                return Err(StoreError::Stale.into());
                            }
                            None
                        }
                    };
                    let messages: Vec<&NewMessage> =
                        rendered.iter().map(|(r, _)| &r.message).collect();
                    let value = decide(&messages);
                    let slots: Vec<PostSlot> = rendered
                        .into_iter()
                        .map(|(r, to)| {
                            let post = StagedPost::new(r, to, now, None, None);
                            let post = match &task {
                                Some(task) => post.about(task),
                                None => post,
                            };
                            tx.staging().stage(post)
                        })
                        .collect();
                    Ok((value, slots, task))
                })
            },
            move |(value, slots, task)| {
                // A new task whose insert failed (its id was taken) wrote nothing, not
                // even its notices.
                if let Some(task) = task {
                    task.outcome()?;
                }
                after(value, slots.iter().map(PostSlot::outcome).collect())
            },
        )
        .await
    }
}

/// What a post job staged.
enum Staged<T> {
    Replayed(StoredAnswer),
    Fresh(T, PostSlot),
}
