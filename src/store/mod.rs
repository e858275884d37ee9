//! Storage: the only place that speaks SQL.
//!
//! The core sees [`Store`]: one method per thing it reads or writes, in the row types of
//! [`crate::model`], never a connection or a statement. Behind it sits one backend module
//! per engine — [`sqlite`] today; a second engine is a second module and one more
//! [`Backend`] variant, with the same methods. Writes go through the backend's
//! group-commit writer; a decision that must be taken inside the transaction (a patch
//! applied to the current row, "has this responder already answered") comes in as a
//! closure over records, and after-commit hooks run in commit order.

pub(crate) mod columns;
pub mod error;
pub(crate) mod paging;
pub mod postgres;
pub mod sqlite;
pub(crate) mod usage;
pub(crate) mod writer;

use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

use switchboard_types::ids::{AgentPk, MessagePk, TaskPk, TeamPk};
use switchboard_types::time::Timestamp;

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
pub use error::StoreError;

/// How hard a commit tries to survive a crash.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// A commit survives a crash of the process, not a power cut (SQLite's
    /// `synchronous=NORMAL`).
    Normal,
    /// One fsync per group commit; survives a power cut.
    Full,
}

/// How the database is opened.
#[derive(Debug, Clone, Copy)]
pub struct StoreOptions {
    pub durability: Durability,
    /// How long a write waits for a lock held by someone else (another process, a
    /// checkpoint) before it fails with `UNAVAILABLE`.
    pub busy_timeout: Duration,
    /// The size the write-ahead log is kept under during any load (it is cut back to an
    /// eighth of it when the load eases, and to nothing when writes stop).
    pub wal_max_bytes: u64,
}

/// How long a node's heartbeat stays fresh: past it the node counts as dead (its
/// connections as gone), and a registry change no longer waits for it (a heartbeat is
/// written every second).
pub const NODE_EXPIRY: Duration = Duration::from_secs(10);

/// The default `--wal-max-bytes`: 256 MiB.
pub const DEFAULT_WAL_MAX_BYTES: u64 = 256 * 1024 * 1024;

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions {
            durability: Durability::Normal,
            busy_timeout: Duration::from_secs(5),
            wal_max_bytes: DEFAULT_WAL_MAX_BYTES,
        }
    }
}

/// The engines a store can run on.
#[derive(Clone)]
enum Backend {
    Sqlite(sqlite::SqliteStore),
    Postgres(postgres::PgStore),
}

/// Handle to storage; cheap to clone.
#[derive(Clone)]
pub struct Store {
    backend: Backend,
}

/// Forwards methods whose signatures are the same on every backend.
macro_rules! delegate {
    ($($(#[$doc:meta])* fn $name:ident(&self $(, $arg:ident: $ty:ty)*) -> $ret:ty;)*) => {$(
        $(#[$doc])*
        pub async fn $name(&self $(, $arg: $ty)*) -> Result<$ret, StoreError> {
            match &self.backend {
                Backend::Sqlite(s) => s.$name($($arg),*).await,
                Backend::Postgres(s) => s.$name($($arg),*).await,
            }
        }
    )*};
}

impl Store {
    /// Opens the database `--database` names: a PostgreSQL server (a `postgres://` or
    /// `postgresql://` URL), or a SQLite file, given as a path or as `sqlite://path`.
    pub async fn open(location: &Path, opts: StoreOptions) -> Result<Store, StoreError> {
        let text = location.to_string_lossy();
        if postgres::is_url(&text) {
            return Ok(Store {
                backend: Backend::Postgres(postgres::PgStore::open(&text).await?),
            });
        }
        match text.strip_prefix("sqlite://") {
            Some(path) => Store::open_sqlite(Path::new(path), opts).await,
            None => Store::open_sqlite(location, opts).await,
        }
    }

    /// Opens a SQLite database file (creating it and its folder if needed) and applies
    /// the migrations.
    pub async fn open_sqlite(path: &Path, opts: StoreOptions) -> Result<Store, StoreError> {
        Ok(Store {
            backend: Backend::Sqlite(sqlite::SqliteStore::open(path, opts).await?),
        })
    }

    /// What other nodes on the same database commit, as it is heard (PostgreSQL; the
    /// first caller gets it). `None` on SQLite, where this process is the only writer.
    pub fn take_changes(&self) -> Option<tokio::sync::mpsc::Receiver<Vec<crate::model::Change>>> {
        match &self.backend {
            Backend::Sqlite(_) => None,
            Backend::Postgres(s) => s.take_changes(),
        }
    }

    /// Whether other processes may write the same database (PostgreSQL with several
    /// nodes): what this process holds in memory may then lag behind what is committed.
    pub fn shared(&self) -> bool {
        matches!(self.backend, Backend::Postgres(_))
    }

    /// Finishes queued writes and closes every connection.
    pub async fn close(&self) {
        match &self.backend {
            Backend::Sqlite(s) => s.close().await,
            Backend::Postgres(s) => s.close().await,
        }
    }

    delegate! {
        /// Whether the database answers.
        fn ping(&self) -> ();
        /// The stored admin token (its digest and when it was set), if one was set.
        fn admin_token(&self) -> Option<AdminTokenRecord>;
        fn set_admin_hash(&self, hash: SecretHash, at: Timestamp) -> ();
        /// Every team, for the registry at start-up.
        fn load_teams(&self) -> Vec<TeamRecord>;
        /// Every agent (removed ones too: messages keep pointing at them).
        fn load_agents(&self) -> Vec<AgentRecord>;
        /// Every agent's acknowledged cursor and last activity.
        fn load_presence(&self) -> Vec<PresenceRow>;
        fn save_presence(&self, rows: Vec<PresenceRow>) -> ();
        /// Where one of an agent's STOMP queues stands (0 when it never consumed).
        fn queue_cursor(&self, agent: AgentPk, queue: String) -> i64;
        /// Moves STOMP queue cursors forward (never back).
        fn save_queue_cursors(&self, rows: Vec<QueueCursorRow>) -> ();
        /// Open tasks per assignee.
        fn open_task_counts(&self) -> Vec<OpenTasks>;
        /// The first answer given under an idempotency key.
        fn find_answer(&self, agent: AgentPk, key: &str) -> Option<StoredAnswer>;
        fn find_message(&self, team: TeamPk, message_id: &str) -> Option<MessageRecord>;
        fn inbox_entry(&self, agent: AgentPk, message: MessagePk) -> Option<InboxEntry>;
        fn recipient_ids(&self, message: MessagePk) -> Vec<String>;
        /// The agent's newest inbox sequence number (0 for an empty inbox).
        fn newest_seq(&self, agent: AgentPk) -> i64;
        /// Recipients that marked the message read, in the order they did.
        fn read_by(&self, message: MessagePk) -> Vec<AgentPk>;
        fn responses_to(&self, message: MessagePk) -> Vec<ResponseRow>;
        /// How many entries match (ignoring paging), how many of those are unread, and
        /// one page of them: a GET_MESSAGES.
        fn read_inbox(&self, agent: AgentPk, filter: &InboxFilter, page: InboxPageSpec) -> (InboxCounts, InboxSlice);
        /// One page of the agent's inbox; a filtered page may end early at its window.
        fn list_inbox(&self, agent: AgentPk, filter: &InboxFilter, page: InboxPageSpec) -> InboxSlice;
        fn mark_read(&self, agent: AgentPk, message_ids: Vec<String>, now: Timestamp) -> MarkOutcome;
        /// Sent, received and unread counts of every agent of a team.
        fn team_counts(&self, team: TeamPk) -> HashMap<AgentPk, Counts>;
        /// Unread news and open tasks of every member of a team.
        fn team_activity(&self, team: TeamPk) -> HashMap<AgentPk, ActivityCounts>;
        /// How long each response of the team took.
        fn response_latencies(&self, team: TeamPk) -> Vec<ResponseLatency>;
        /// Every task with this id that `viewer` originated or is or was assigned, oldest
        /// first (a few at most): task ids are unique per originator, so one id may name
        /// several tasks a viewer takes part in.
        fn find_task(&self, team: TeamPk, task_id: &str, viewer: AgentPk) -> Vec<TaskRecord>;
        /// The task with its history and callbacks, in one snapshot.
        fn task_snapshot(&self, task: TaskPk) -> Option<TaskSnapshot>;
        /// One page of the agent's tasks, newest first.
        fn list_tasks(&self, agent: AgentPk, spec: &TaskListSpec) -> Vec<TaskRecord>;
        fn callback_secret(&self, team: TeamPk) -> Option<TeamSecret>;
        fn set_callback_secret(&self, team: TeamPk, secret: String, at: Timestamp) -> ();
        /// The oldest pending callback of each task, if due, claimed for `claim` (with
        /// several nodes, no other node takes it up meanwhile).
        fn due_callbacks(&self, now: Timestamp, limit: i64, claim: Duration) -> Vec<DueCallback>;
        fn next_callback_due(&self) -> Option<Timestamp>;
        fn record_attempts(&self, attempts: Vec<Attempt>) -> ();
        /// One small batch of a team's messages past their retention, removed.
        fn expire_messages(&self, spec: MessageSweepSpec) -> MessageSweep;
        /// Up to `limit` finished tasks of the team last changed before `before`, removed.
        fn expire_tasks(&self, team: TeamPk, before: Timestamp, limit: i64) -> u64;
        /// Up to `limit` idempotency records older than `before`, removed.
        fn expire_idempotency_keys(&self, before: Timestamp, limit: i64) -> u64;
        /// Up to `limit` callback records finished before `before`, removed.
        fn expire_callbacks(&self, before: Timestamp, limit: i64) -> u64;
        /// The task's webhooks, oldest first.
        fn task_webhooks(&self, task: TaskPk) -> Vec<WebhookRecord>;
        fn webhook(&self, pk: i64) -> Option<WebhookRecord>;
        /// Adds a webhook to a task (or replaces the one of the same id), with the
        /// task's entries after `replay_after` queued to it.
        fn put_webhook(&self, webhook: WebhookRecord, replay_after: Option<i64>) -> ();
        /// Removes a task's webhook; `false` when it had none of that id.
        fn delete_webhook(&self, task: TaskPk, webhook_id: String) -> bool;
        /// Writes this node's live connections and heartbeat, and reads those of the
        /// other nodes whose heartbeat is newer than `fresh_after` (PostgreSQL; nothing
        /// on SQLite, where one process is the only node).
        fn sync_connections(&self, node: String, mine: Vec<NodeConnections>, now: Timestamp, fresh_after: Timestamp) -> Vec<NodeConnections>;
        /// Every outside A2A agent that is still a member.
        fn remote_agents(&self) -> Vec<RemoteAgentRecord>;
        /// Adds an outside A2A agent, or records its refreshed card.
        fn put_remote_agent(&self, remote: RemoteAgentRecord) -> ();
    }

    /// The newest registry epoch (PostgreSQL; 0 on SQLite, where one process is the only
    /// node): a node reads it before it reloads the registry, and records it after.
    pub async fn registry_epoch(&self) -> Result<i64, StoreError> {
        match &self.backend {
            Backend::Sqlite(_) => Ok(0),
            Backend::Postgres(s) => s.registry_epoch().await,
        }
    }

    /// Names this node to the store (PostgreSQL: its own registry epochs are neither
    /// waited for nor read back).
    pub fn set_node(&self, node: &str) {
        if let Backend::Postgres(s) = &self.backend {
            s.set_node(node);
        }
    }

    /// Writes `node`'s heartbeat alone (PostgreSQL).
    pub async fn heartbeat(&self, node: &str, now: Timestamp) -> Result<(), StoreError> {
        match &self.backend {
            Backend::Sqlite(_) => Ok(()),
            Backend::Postgres(s) => s.heartbeat(node, now).await,
        }
    }

    /// The outside A2A agents `node` acts for: on PostgreSQL, those it holds now (taken
    /// or renewed for `lease`; each is held by one node at a time), `None` on SQLite,
    /// where one process is the only node and acts for every one.
    pub async fn hold_remote_agents(
        &self,
        node: &str,
        lease: std::time::Duration,
    ) -> Result<Option<Vec<AgentPk>>, StoreError> {
        match &self.backend {
            Backend::Sqlite(_) => Ok(None),
            Backend::Postgres(s) => s.hold_remote_agents(node, lease).await.map(Some),
        }
    }

    /// Records that `node` holds the registry as of `epoch` (PostgreSQL).
    pub async fn registry_seen(&self, node: &str, epoch: i64) -> Result<(), StoreError> {
        match &self.backend {
            Backend::Sqlite(_) => Ok(()),
            Backend::Postgres(s) => s.registry_seen(node, epoch).await,
        }
    }

    /// Inserts a team; `after` runs right after the commit, in commit order.
    /// [`StoreError::Conflict`] when the id is taken.
    pub async fn insert_team<R: Send + 'static>(
        &self,
        team: TeamRecord,
        after: impl FnOnce(TeamRecord) -> R + Send + 'static,
    ) -> Result<R, StoreError> {
        match &self.backend {
            Backend::Sqlite(s) => s.insert_team(team, after).await,
            Backend::Postgres(s) => s.insert_team(team, after).await,
        }
    }

    /// Changes a team as `patch` decides, on the row as the transaction sees it. With
    /// several nodes, answers once every live node has taken the change up
    /// (`registry_barrier`): a switch turned off holds on every node from the answer on.
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
        match &self.backend {
            Backend::Sqlite(s) => s.update_team(pk, patch, after).await,
            Backend::Postgres(s) => {
                let changed = s.update_team(pk, patch, after).await?;
                s.registry_barrier(NODE_EXPIRY).await?;
                Ok(changed)
            }
        }
    }

    /// Inserts an agent; [`StoreError::Conflict`] when a member has its id.
    pub async fn insert_agent<R: Send + 'static>(
        &self,
        agent: AgentRecord,
        after: impl FnOnce(AgentRecord) -> R + Send + 'static,
    ) -> Result<R, StoreError> {
        match &self.backend {
            Backend::Sqlite(s) => s.insert_agent(agent, after).await,
            Backend::Postgres(s) => s.insert_agent(agent, after).await,
        }
    }

    /// Changes an agent (removal included) as `patch` decides, on the current row. With
    /// several nodes, answers once every live node has taken the change up: a removed
    /// agent's token is refused everywhere from the answer on.
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
        match &self.backend {
            Backend::Sqlite(s) => s.update_agent(pk, patch, after).await,
            Backend::Postgres(s) => {
                let changed = s.update_agent(pk, patch, after).await?;
                s.registry_barrier(NODE_EXPIRY).await?;
                Ok(changed)
            }
        }
    }

    /// Writes a message to its recipients (see the backend's `post`).
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
        match &self.backend {
            Backend::Sqlite(s) => s.post(post, claim, decide, after).await,
            Backend::Postgres(s) => s.post(post, claim, decide, after).await,
        }
    }

    /// Writes a task change and its notices (see the backend's `write_task`).
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
        match &self.backend {
            Backend::Sqlite(s) => s.write_task(write, notices, decide, after).await,
            Backend::Postgres(s) => s.write_task(write, notices, decide, after).await,
        }
    }
}
