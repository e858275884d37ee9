//! The storage contract: what an engine must offer the core, once, as traits.
//!
//! Each resource trait is declared through [`contract!`], which also gives
//! [`super::Store`] the same methods, each a `match` on the engine it holds: one list of
//! signatures, static dispatch, no `dyn` and no boxed future per call. Each engine
//! implements the traits once (most of it in `store/sql`, compiled for both; the batch
//! insert paths in its `engine/` folder).
//!
//! The writes that carry a caller's decision (a patch applied inside the transaction, a
//! value handed over after the commit) are generic over the caller's types, so they are
//! a trait of their own, written out by hand: [`super::typed::DecidedWrites`].
//!
//! What differs between engines beyond SQL — the mechanisms that exist only where
//! several nodes share the database — is the `match` in `store/lifecycle.rs`, where
//! SQLite's arm says what it does instead.

use std::collections::HashMap;
use std::time::Duration;
use switchboard_types::ids::{AgentId, ApprovalId, MessageId};

use switchboard_types::ids::{AgentPk, MessagePk, TaskPk, TeamPk};
use switchboard_types::messages::Priority;
use switchboard_types::time::Timestamp;

use super::StoreError;
use crate::model::SearchSpec;
use crate::model::{
    ActivityCounts, AdminTokenRecord, AgentRecord, ApprovalDecision, ApprovalListSpec,
    ApprovalRecord, Attempt, Bounded, Counts, DueCallback, InboxCounts, InboxEntry, InboxFilter,
    InboxPageSpec, InboxSlice, LeaseRecord, MarkOutcome, MessageRecord, MessageSweep,
    MessageSweepSpec, OpenTasks, PresenceRow, QueueCursorRow, RemoteAgentRecord, ResponseLatency,
    ResponseRow, SecretHash, StoredAnswer, TaskListSpec, TaskRecord, TaskSnapshot, TeamRecord,
    TeamSecret, TrafficRow, TrafficSpec, WebhookRecord,
};

/// Declares one resource trait of the storage contract and gives [`super::Store`] the
/// same methods, forwarded to the engine it holds. Why a macro: the trait and the
/// store's methods are one list, so they cannot drift; and a `match` on two concrete
/// engines awaits their own futures (no `Box` per call, as `dyn` needed).
macro_rules! contract {
    (
        $(#[$trait_meta:meta])*
        pub trait $trait:ident {
            $(
                $(#[$meta:meta])*
                async fn $name:ident(&self $(, $arg:ident: $ty:ty)* $(,)?) -> $ret:ty;
            )*
        }
    ) => {
        $(#[$trait_meta])*
        #[allow(
            async_fn_in_trait,
            reason = "implemented by this crate's two engines and called on them directly, \
                      where the futures' Send is known"
        )]
        pub trait $trait: Send + Sync {
            $(
                $(#[$meta])*
                async fn $name(&self $(, $arg: $ty)*) -> $ret;
            )*
        }

        impl super::Store {
            $(
                $(#[$meta])*
                pub async fn $name(&self $(, $arg: $ty)*) -> $ret {
                    match self {
                        super::Store::Sqlite(engine) => $trait::$name(&**engine $(, $arg)*).await,
                        super::Store::Postgres(engine) => {
                            $trait::$name(&**engine $(, $arg)*).await
                        }
                    }
                }
            )*
        }
    };
}

contract! {
/// Teams, agents, their presence and queue cursors, outside agents, the admin token.
pub trait Registry {
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
    /// Every outside A2A agent that is still a member.
    async fn remote_agents(&self) -> Result<Vec<RemoteAgentRecord>, StoreError>;
    /// Adds an outside A2A agent, or records its refreshed card.
    async fn put_remote_agent(&self, remote: RemoteAgentRecord) -> Result<(), StoreError>;
}
}

contract! {
/// Messages, inboxes, read marks, idempotency keys and the counts read from them.
pub trait Messages {
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
}
}

contract! {
/// Tasks, their callbacks and webhooks.
pub trait Tasks {
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
}
}

contract! {
/// Full-text search over a team's messages (`store/search.rs`).
pub trait Search {
    /// One page of the messages `spec` finds, with their recipients, within the page
    /// byte bound.
    async fn search_messages(&self, spec: SearchSpec) -> Result<Bounded<TrafficRow>, StoreError>;
}
}

contract! {
/// Approval checkpoints (`docs/approvals.md`): a decision and an expiry each change a
/// pending approval once, whichever commits first.
pub trait Approvals {
    async fn insert_approval(&self, record: ApprovalRecord) -> Result<(), StoreError>;
    /// Writes the decision if the approval is still pending and unexpired at its time:
    /// the approval as decided, or `None` when it was not (decided or expired already).
    async fn decide_approval(&self, decision: ApprovalDecision) -> Result<Option<ApprovalRecord>, StoreError>;
    /// Up to `limit` pending approvals whose time ran out by `now`, now expired.
    async fn expire_approvals(&self, now: Timestamp, limit: i64) -> Result<Vec<ApprovalRecord>, StoreError>;
    async fn approval(&self, team: TeamPk, approval_id: ApprovalId) -> Result<Option<ApprovalRecord>, StoreError>;
    /// A page of the team's approvals, newest first; a status filter reads a pending
    /// approval past its time (as of `spec.now`) as expired.
    async fn list_approvals(&self, team: TeamPk, spec: ApprovalListSpec) -> Result<Vec<ApprovalRecord>, StoreError>;
    /// How many approvals `asker` has pending and unexpired at `now` (its bound).
    async fn pending_approvals_of(&self, asker: AgentPk, now: Timestamp) -> Result<i64, StoreError>;
    /// A task's approvals, oldest first.
    async fn task_approvals(&self, task: TaskPk) -> Result<Vec<ApprovalRecord>, StoreError>;
    /// How many approvals of every team are pending (the operator's gauge).
    async fn count_pending_approvals(&self) -> Result<i64, StoreError>;
}
}

contract! {
/// Leases on named resources: the reads, and the writes that decide nothing (a grant,
/// an extension and a release are decided: `DecidedWrites::change_leases`).
pub trait Leases {
    /// The team's live leases: unexpired, held by members, oldest first.
    async fn team_leases(&self, team: TeamPk, now: Timestamp) -> Result<Vec<LeaseRecord>, StoreError>;
    /// Up to `limit` leases that ended by `now`, removed (what the sweep tells the team).
    async fn expire_leases(&self, now: Timestamp, limit: i64) -> Result<Vec<LeaseRecord>, StoreError>;
    /// Every lease of an agent that left the team, removed.
    async fn release_leases_of(&self, holder: AgentPk) -> Result<Vec<LeaseRecord>, StoreError>;
    /// How many leases of every team are live at `now` (the operator's gauge).
    async fn count_live_leases(&self, now: Timestamp) -> Result<i64, StoreError>;
}
}

contract! {
/// Claimable work: the reads a claim and the claims' sweep need. A claim itself, a give
/// back and an expiry are task changes (`DecidedWrites::write_task`), guarded by the
/// task's version, so exactly one claim of a task wins on any node.
pub trait Claims {
    /// Up to `limit` open tasks of the team offered to `role`, most urgent first, then
    /// oldest; with `after` (a priority and a task's key), those that come after it in
    /// that order (the next page).
    async fn offered_tasks(&self, team: TeamPk, role: String, after: Option<(Priority, TaskPk)>, limit: i64) -> Result<Vec<TaskRecord>, StoreError>;
    /// Up to `limit` claimed tasks whose lease ended by `now`, the longest ended first.
    async fn lapsed_claims(&self, now: Timestamp, limit: i64) -> Result<Vec<TaskRecord>, StoreError>;
    /// The claimed tasks `agent` holds (in progress or waiting for an answer).
    async fn claims_of(&self, team: TeamPk, agent: AgentPk) -> Result<Vec<TaskRecord>, StoreError>;
}
}
