//! The storage contract: what an engine must offer the core, once, as traits.
//!
//! [`super::Store`] holds one engine behind `dyn Engine`, so there is no per-method
//! forwarding between the core and an engine: a read the core makes is the engine's
//! method. Each engine implements the four traits in its `engine/` folder, laid out the
//! same way (`registry.rs`, `messages.rs`, `tasks.rs`, the lifecycle in `mod.rs`).
//!
//! The writes that carry a caller's decision (a patch applied inside the transaction, a
//! value handed over after the commit) take boxed steps here, since a trait object cannot
//! have generic methods; [`super::Store`] gives the core the typed versions and carries
//! the caller's values beside the engine (`store::typed`), never through it.
//!
//! What differs between engines is SQL and the mechanisms named in
//! `docs/architecture.md` ("What differs between the engines"); the defaults here are
//! those of an engine whose process is the only node (SQLite).

use std::collections::HashMap;
use std::time::Duration;
use switchboard_types::ids::{AgentId, MessageId};

use async_trait::async_trait;
use switchboard_types::ids::{AgentPk, MessagePk, TaskPk, TeamPk};
use switchboard_types::time::Timestamp;

use super::StoreError;
use crate::model::{
    ActivityCounts, AdminTokenRecord, AgentRecord, Attempt, Bounded, Change, Counts, Decided,
    DueCallback, IdempotencyClaim, InboxCounts, InboxEntry, InboxFilter, InboxPageSpec, InboxSlice,
    MarkOutcome, MessageRecord, MessageSweep, MessageSweepSpec, NewMessage, NewPost,
    NodeConnections, OpenTasks, PostContext, PostOutcome, PostResult, PresenceRow, QueueCursorRow,
    RemoteAgentRecord, ResponseLatency, ResponseRow, SecretHash, StoredAnswer, TaskListSpec,
    TaskRecord, TaskSnapshot, TaskWrite, TeamRecord, TeamSecret, TrafficRow, TrafficSpec,
    WebhookRecord,
};

/// A caller's change to a registry row, run inside the transaction on the row as the
/// transaction sees it (so concurrent patches compose). [`StoreError::Refused`] refuses
/// the write; the caller keeps its reason.
pub type Patch<Row> = Box<dyn FnOnce(&mut Row) -> Result<(), StoreError> + Send>;

/// Runs on the writer right after the commit, in commit order, with what was written.
pub type AfterCommit<Row> = Box<dyn FnOnce(Row) + Send>;

/// A post's decision, inside the transaction (see [`super::Store::post`]): the answer to
/// store with the idempotency key, or a refusal.
pub type DecidePost =
    Box<dyn FnOnce(&NewMessage, PostContext) -> Result<Decided<()>, StoreError> + Send>;

/// What a post became, after the commit; an error fails the call, not the batch.
pub type AfterPost =
    Box<dyn FnOnce(Result<PostResult, StoreError>) -> Result<(), StoreError> + Send>;

/// Work a task change does inside the transaction once the task is written, with its
/// notices (for work that must happen in commit order).
pub type DecideTask = Box<dyn FnOnce(&[&NewMessage]) + Send>;

/// What a task change's notices became, after the commit.
pub type AfterTask =
    Box<dyn FnOnce(Vec<Result<PostResult, StoreError>>) -> Result<(), StoreError> + Send>;

/// One database engine: its lifecycle and the mechanisms that exist only where several
/// nodes share the database.
#[async_trait]
pub trait Engine: Registry + Messages + Tasks + Send + Sync {
    /// Whether the database answers (readiness).
    async fn ping(&self) -> Result<(), StoreError>;

    /// Finishes queued writes and closes every connection.
    async fn close(&self);

    /// Whether other processes may write the same database: what this process holds in
    /// memory may then lag behind what is committed.
    fn shared(&self) -> bool {
        false
    }

    /// What other nodes commit, as it is heard (the first caller gets it).
    fn take_changes(&self) -> Option<tokio::sync::mpsc::Receiver<Vec<Change>>> {
        None
    }

    /// Names this node to the store: its own registry epochs are neither waited for nor
    /// read back.
    fn set_node(&self, _node: &str) {}

    /// The newest registry epoch: a node reads it before it reloads the registry, and
    /// records it after (0 where one process is the only node).
    async fn registry_epoch(&self) -> Result<i64, StoreError> {
        Ok(0)
    }

    /// Writes `node`'s heartbeat alone.
    async fn heartbeat(&self, _node: &str, _now: Timestamp) -> Result<(), StoreError> {
        Ok(())
    }

    /// Records that `node` holds the registry as of `epoch`.
    async fn registry_seen(&self, _node: &str, _epoch: i64) -> Result<(), StoreError> {
        Ok(())
    }

    /// The outside A2A agents `node` acts for: those it holds now (taken or renewed for
    /// `lease`; each is held by one node at a time), or `None` where one process is the
    /// only node and acts for every one.
    async fn hold_remote_agents(
        &self,
        _node: &str,
        _lease: Duration,
    ) -> Result<Option<Vec<AgentPk>>, StoreError> {
        Ok(None)
    }

    /// Writes this node's live connections and heartbeat, and reads those of the other
    /// nodes whose heartbeat is newer than `fresh_after` (none where one process is the
    /// only node).
    async fn sync_connections(
        &self,
        _node: String,
        _mine: Vec<NodeConnections>,
        _now: Timestamp,
        _fresh_after: Timestamp,
    ) -> Result<Vec<NodeConnections>, StoreError> {
        Ok(Vec::new())
    }
}

/// Teams, agents, their presence and queue cursors, outside agents, the admin token.
#[async_trait]
pub trait Registry: Send + Sync {
    /// The stored admin token (its digest and when it was set), if one was set.
    async fn admin_token(&self) -> Result<Option<AdminTokenRecord>, StoreError>;
    async fn set_admin_hash(&self, hash: SecretHash, at: Timestamp) -> Result<(), StoreError>;
    /// Every team, for the registry at start-up.
    async fn load_teams(&self) -> Result<Vec<TeamRecord>, StoreError>;
    /// Every agent (removed ones too: messages keep pointing at them).
    async fn load_agents(&self) -> Result<Vec<AgentRecord>, StoreError>;
    /// Every agent's acknowledged cursor and last activity.
    async fn load_presence(&self) -> Result<Vec<PresenceRow>, StoreError>;
    /// Writes acknowledged cursors and last activity (a cursor never moves back).
    async fn save_presence(&self, rows: Vec<PresenceRow>) -> Result<(), StoreError>;
    /// Where one of an agent's STOMP queues stands (0 when it never consumed).
    async fn queue_cursor(&self, agent: AgentPk, queue: String) -> Result<i64, StoreError>;
    /// Moves STOMP queue cursors forward (never back) and records which queues went
    /// deaf or heard again.
    async fn save_queue_cursors(&self, rows: Vec<QueueCursorRow>) -> Result<(), StoreError>;
    /// The queues of current agents that are deaf, for presence at start-up.
    async fn deaf_queues(&self) -> Result<Vec<QueueCursorRow>, StoreError>;
    /// Inserts a team ([`StoreError::Conflict`] when the id is taken).
    async fn insert_team_boxed(
        &self,
        team: TeamRecord,
        after: AfterCommit<TeamRecord>,
    ) -> Result<(), StoreError>;
    /// Changes a team as `patch` decides. With several nodes, answers once every live
    /// node has taken the change up: a switch turned off holds on every node from the
    /// answer on.
    async fn update_team_boxed(
        &self,
        pk: TeamPk,
        patch: Patch<TeamRecord>,
        after: AfterCommit<TeamRecord>,
    ) -> Result<(), StoreError>;
    /// Inserts an agent, taking over the row of a removed one with the same id
    /// ([`StoreError::Conflict`] when a member has the id).
    async fn insert_agent_boxed(
        &self,
        agent: AgentRecord,
        after: AfterCommit<AgentRecord>,
    ) -> Result<(), StoreError>;
    /// Changes an agent (removal included) as `patch` decides. With several nodes,
    /// answers once every live node has taken the change up: a removed agent's token is
    /// refused everywhere from the answer on.
    async fn update_agent_boxed(
        &self,
        pk: AgentPk,
        patch: Patch<AgentRecord>,
        after: AfterCommit<AgentRecord>,
    ) -> Result<(), StoreError>;
    /// Every outside A2A agent that is still a member.
    async fn remote_agents(&self) -> Result<Vec<RemoteAgentRecord>, StoreError>;
    /// Adds an outside A2A agent, or records its refreshed card.
    async fn put_remote_agent(&self, remote: RemoteAgentRecord) -> Result<(), StoreError>;
}

/// Messages, inboxes, read marks, idempotency keys and the counts read from them.
#[async_trait]
pub trait Messages: Send + Sync {
    /// The first answer given under an idempotency key.
    async fn find_answer(
        &self,
        agent: AgentPk,
        key: &str,
    ) -> Result<Option<StoredAnswer>, StoreError>;
    /// A message with the chain it extends.
    async fn find_message(
        &self,
        team: TeamPk,
        message_id: &str,
    ) -> Result<Option<MessageRecord>, StoreError>;
    /// The newest message of a thread in an agent's inbox (what its send naming only
    /// the thread continues), with its chain.
    async fn thread_tip(
        &self,
        agent: AgentPk,
        thread_id: &str,
    ) -> Result<Option<MessageRecord>, StoreError>;
    async fn inbox_entry(
        &self,
        agent: AgentPk,
        message: MessagePk,
    ) -> Result<Option<InboxEntry>, StoreError>;
    async fn recipient_ids(&self, message: MessagePk) -> Result<Vec<AgentId>, StoreError>;
    /// The agent's newest inbox sequence number (0 for an empty inbox).
    async fn newest_seq(&self, agent: AgentPk) -> Result<i64, StoreError>;
    /// Recipients that marked the message read, in the order they did.
    async fn read_by(&self, message: MessagePk) -> Result<Vec<AgentPk>, StoreError>;
    async fn responses_to(&self, message: MessagePk) -> Result<Vec<ResponseRow>, StoreError>;
    /// One page of the team's messages with their recipients (the operator's timeline).
    async fn team_traffic(
        &self,
        team: TeamPk,
        spec: TrafficSpec,
    ) -> Result<Bounded<TrafficRow>, StoreError>;
    /// How many entries match (ignoring paging), how many of those are unread, and one
    /// page of them: a GET_MESSAGES.
    async fn read_inbox(
        &self,
        agent: AgentPk,
        filter: &InboxFilter,
        page: InboxPageSpec,
    ) -> Result<(InboxCounts, InboxSlice), StoreError>;
    /// One page of the agent's inbox; a filtered page may end early at its window.
    async fn list_inbox(
        &self,
        agent: AgentPk,
        filter: &InboxFilter,
        page: InboxPageSpec,
    ) -> Result<InboxSlice, StoreError>;
    /// Marks the agent's entries of `message_ids` read.
    async fn mark_read(
        &self,
        agent: AgentPk,
        message_ids: Vec<MessageId>,
        now: Timestamp,
    ) -> Result<MarkOutcome, StoreError>;
    /// Sent, received and unread counts of every agent of a team.
    async fn team_counts(&self, team: TeamPk) -> Result<HashMap<AgentPk, Counts>, StoreError>;
    /// Unread news and open tasks of every member of a team.
    async fn team_activity(
        &self,
        team: TeamPk,
    ) -> Result<HashMap<AgentPk, ActivityCounts>, StoreError>;
    /// How long each response of the team took.
    async fn response_latencies(&self, team: TeamPk) -> Result<Vec<ResponseLatency>, StoreError>;
    /// One small batch of a team's messages past their retention, removed.
    async fn expire_messages(&self, spec: MessageSweepSpec) -> Result<MessageSweep, StoreError>;
    /// Up to `limit` idempotency records older than `before`, removed.
    async fn expire_idempotency_keys(
        &self,
        before: Timestamp,
        limit: i64,
    ) -> Result<u64, StoreError>;
    /// The messages of a trace with their recipients, oldest first, at most `limit`.
    async fn trace_traffic(
        &self,
        team: TeamPk,
        trace_id: String,
        limit: i64,
    ) -> Result<Vec<TrafficRow>, StoreError>;
    /// The tasks of a trace, in the order they were submitted, at most `limit`.
    async fn trace_tasks(
        &self,
        team: TeamPk,
        trace_id: String,
        limit: i64,
    ) -> Result<Vec<TaskRecord>, StoreError>;
    /// Removes budget counts of windows that started before `before` (epoch seconds).
    async fn expire_budget_counts(&self, before: i64, limit: i64) -> Result<u64, StoreError>;
    /// Writes one message to its recipients as one job (see [`super::Store::post`]).
    async fn post_boxed(
        &self,
        post: NewPost,
        claim: Option<IdempotencyClaim>,
        decide: DecidePost,
        after: AfterPost,
    ) -> Result<PostOutcome<()>, StoreError>;
}

/// Tasks, their callbacks and webhooks.
#[async_trait]
pub trait Tasks: Send + Sync {
    /// Open tasks per assignee.
    async fn open_task_counts(&self) -> Result<Vec<OpenTasks>, StoreError>;
    /// Every task with this id that `viewer` originated or is or was assigned (without a
    /// viewer: every task of the team with this id, for its team key), oldest first (a
    /// few at most): task ids are unique per originator, so one id may name several
    /// tasks a viewer takes part in.
    async fn find_task(
        &self,
        team: TeamPk,
        task_id: &str,
        viewer: Option<AgentPk>,
    ) -> Result<Vec<TaskRecord>, StoreError>;
    /// The task with its history and callbacks, in one snapshot.
    async fn task_snapshot(&self, task: TaskPk) -> Result<Option<TaskSnapshot>, StoreError>;
    /// One page of the agent's tasks, newest first.
    async fn list_tasks(
        &self,
        agent: AgentPk,
        spec: &TaskListSpec,
    ) -> Result<Bounded<TaskRecord>, StoreError>;
    /// One page of the team's tasks, newest first (`spec.role` and `spec.target` aside).
    async fn team_tasks(
        &self,
        team: TeamPk,
        spec: &TaskListSpec,
    ) -> Result<Bounded<TaskRecord>, StoreError>;
    async fn callback_secret(&self, team: TeamPk) -> Result<Option<TeamSecret>, StoreError>;
    async fn set_callback_secret(
        &self,
        team: TeamPk,
        secret: String,
        at: Timestamp,
    ) -> Result<(), StoreError>;
    /// The oldest pending callback of each task, if due, claimed for `claim` (with
    /// several nodes, no other node takes it up meanwhile).
    async fn due_callbacks(
        &self,
        now: Timestamp,
        limit: i64,
        claim: Duration,
    ) -> Result<Vec<DueCallback>, StoreError>;
    async fn next_callback_due(&self) -> Result<Option<Timestamp>, StoreError>;
    /// Records the outcome of callback attempts (on each callback and its task).
    async fn record_attempts(&self, attempts: Vec<Attempt>) -> Result<(), StoreError>;
    /// Up to `limit` finished tasks of the team last changed before `before`, removed.
    async fn expire_tasks(
        &self,
        team: TeamPk,
        before: Timestamp,
        limit: i64,
    ) -> Result<u64, StoreError>;
    /// Up to `limit` callback records finished before `before`, removed.
    async fn expire_callbacks(&self, before: Timestamp, limit: i64) -> Result<u64, StoreError>;
    /// The task's webhooks, oldest first.
    async fn task_webhooks(&self, task: TaskPk) -> Result<Vec<WebhookRecord>, StoreError>;
    async fn webhook(&self, pk: i64) -> Result<Option<WebhookRecord>, StoreError>;
    /// Adds a webhook to a task (or replaces the one of the same id), with the task's
    /// entries after `replay_after` queued to it.
    async fn put_webhook(
        &self,
        webhook: WebhookRecord,
        replay_after: Option<i64>,
    ) -> Result<(), StoreError>;
    /// Removes a task's webhook; `false` when it had none of that id.
    async fn delete_webhook(&self, task: TaskPk, webhook_id: String) -> Result<bool, StoreError>;
    /// Writes a task change (the task, its event, its callback) and its notices in one
    /// job (see [`super::Store::write_task`]).
    async fn write_task_boxed(
        &self,
        write: TaskWrite,
        notices: Vec<NewPost>,
        decide: DecideTask,
        after: AfterTask,
    ) -> Result<(), StoreError>;
}
