//! The task protocol of `003_…`: tasks as durable state.
//!
//! A task is submitted as a `TaskRequest`, assigned to one agent, and lives through
//! clarification rounds, handoffs, progress reports and a final result (the rules are
//! `switchboard_types::task_state::TaskState::apply`). Every change is one transaction
//! that updates the task, appends an event to its history, writes the notifications the
//! protocol prescribes as inbox entries (pushed live as frames named by their type), and
//! queues the signed callback.
//!
//! **Notifications are messages.** A `TaskRequest` for the assignee, a `TaskResponse`
//! for the originator, … are inbox entries of `kind: task` whose `content.data` is the
//! protocol object with its `type`; the WebSocket sends them as frames of that type.
//! So replay, acks, the inbox query and read marks work for them unchanged. An
//! originator that follows its task over the transport it created it by (A2A, see
//! [`Following`]) gets none: it reads the task there and would never read them.
//!
//! Each action reads the task, lets `TaskState::apply` decide, and writes the change
//! guarded by the task's version: if another action got there first, nothing is written
//! and the action is decided again on the new state.

mod actions;
mod approvals;
mod callbacks;
mod claiming;
pub mod claims;
mod commit;
pub mod follow;
mod read;
mod registry_requests;
mod submit;
mod webhooks;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};

use serde::Serialize;
use serde_json::{Map, Value};
use switchboard_types::ErrorCode;
use switchboard_types::ids::AgentPk;
use switchboard_types::task_state::{Party, Refusal, TaskState};
use switchboard_types::tasks::{CallbackStatus, TaskFrame};

pub use crate::model::DueCallback;
pub use callbacks::{AttemptResult, DueDelivery, RetryPolicy};
pub use webhooks::{MAX_WEBHOOKS_PER_TASK, Outgoing, TaskWebhook, WebhookFormat, WebhookSpec};

use super::{Core, CoreError};
use crate::model::{AgentRecord, OpenTasks, TaskEventRecord, TaskRecord, TeamRecord};

/// Settings of the task protocol.
#[derive(Debug, Clone, Copy)]
pub struct TaskSettings {
    /// Accept callback URLs on loopback and private networks (tests, closed networks).
    pub allow_private_callbacks: bool,
    /// How long a claimer may be without a live connection, and silent on its claims,
    /// before they go back to the role (`--claim-grace`).
    pub claim_grace: std::time::Duration,
}

impl Default for TaskSettings {
    fn default() -> Self {
        TaskSettings {
            allow_private_callbacks: false,
            claim_grace: std::time::Duration::from_secs(30),
        }
    }
}

/// The task protocol's state held in memory beside the store.
#[derive(Default)]
pub struct TaskRuntime {
    settings: TaskSettings,
    /// Open tasks per assignee, for balancing assignment; changed after commits only.
    /// A plain mutex: each use is one map operation, never held across an `.await`.
    open: Mutex<HashMap<AgentPk, i64>>,
    /// Woken when a callback was queued, so the sender does not wait for its next poll.
    callbacks_queued: tokio::sync::Notify,
    /// How each transport renders its webhooks' bodies, by the transport's name.
    formats: RwLock<HashMap<String, Arc<dyn WebhookFormat>>>,
    /// Woken when a task was offered (again) on this node, so waiting claims look at
    /// once; other nodes' offers are seen by the claims' one-second look.
    offered: tokio::sync::Notify,
    /// The open tasks claims of this node decide on right now and those taken lately,
    /// so that claims in flight together take different tasks (`claiming`).
    claiming: claiming::Claiming,
}

impl TaskRuntime {
    pub fn new(settings: TaskSettings, open: Vec<OpenTasks>) -> TaskRuntime {
        TaskRuntime {
            settings,
            open: Mutex::new(open.into_iter().map(|o| (o.agent, o.open)).collect()),
            callbacks_queued: tokio::sync::Notify::new(),
            formats: RwLock::default(),
            offered: tokio::sync::Notify::new(),
            claiming: claiming::Claiming::default(),
        }
    }

    /// Whether URLs the server calls may be private (callbacks, webhooks, outside agents).
    pub fn allow_private_callbacks(&self) -> bool {
        self.settings.allow_private_callbacks
    }

    fn open_tasks(&self, agent: AgentPk) -> i64 {
        self.open
            .lock()
            .map(|open| open.get(&agent).copied().unwrap_or(0))
            .unwrap_or(0)
    }

    fn adjust_open(&self, agent: AgentPk, delta: i64) {
        if let Ok(mut open) = self.open.lock() {
            let count = open.entry(agent).or_insert(0);
            *count = (*count + delta).max(0);
        }
    }
}

/// How many times an action is decided again when the task changed under it.
const ATTEMPTS: usize = 5;

/// A protocol notification, written as an inbox entry of each recipient.
struct Notice {
    frame: TaskFrame,
    body: Value,
    recipients: Vec<Arc<AgentRecord>>,
}

impl Notice {
    fn new(
        frame: TaskFrame,
        body: &impl Serialize,
        recipients: Vec<Arc<AgentRecord>>,
    ) -> Result<Notice, CoreError> {
        // A notice for nobody is dropped unwritten (see `commit`): not worth rendering.
        let body = if recipients.is_empty() {
            Value::Null
        } else {
            serde_json::to_value(body)
                .map_err(|e| CoreError::internal(format!("rendering a {}: {e}", frame.name())))?
        };
        Ok(Notice {
            frame,
            body,
            recipients,
        })
    }
}

impl Core {
    /// The originator as a recipient of its task's notifications: nobody when it follows
    /// the task over the transport it created it by (see `TaskRecord::originator_inbox`)
    /// or is no longer registered.
    fn originator_told(&self, task: &TaskRecord) -> Vec<Arc<AgentRecord>> {
        if !task.originator_inbox {
            return Vec::new();
        }
        self.registry()
            .agent(task.originator_pk)
            .into_iter()
            .collect()
    }
}

/// How the originator of a new task follows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Following {
    /// By its inbox (and the pushes of its live connections): every transport but A2A.
    Inbox,
    /// By the transport it submitted the task over (A2A: the send's answer, `GetTask`,
    /// `SubscribeToTask`, push configs), so no notification for it is written.
    Transport,
}

/// One change of a task, decided and ready to be written.
struct Change {
    /// The task after the change.
    task: TaskRecord,
    /// The version the task had when the change was decided; `None` for a new task.
    expected_version: Option<i64>,
    event: TaskEventRecord,
    actor: Arc<AgentRecord>,
    notices: Vec<Notice>,
    /// What the callback reports: its status and result data.
    callback: (CallbackStatus, Value),
    /// Changes of open-task counts, applied after the commit.
    open_delta: Vec<(AgentPk, i64)>,
}

/// A task loaded for an action, with who is acting.
struct Loaded {
    team: Arc<TeamRecord>,
    me: Arc<AgentRecord>,
    task: TaskRecord,
    party: Party,
}

fn task_not_found(task_id: &str) -> CoreError {
    CoreError::new(
        ErrorCode::TaskNotFound,
        format!("task '{task_id}' does not exist"),
    )
    .with("task_id", task_id)
}

fn refused(refusal: Refusal, task: &TaskRecord) -> CoreError {
    match refusal {
        Refusal::NotYourRole(why) => {
            CoreError::forbidden(why).with("task_id", task.task_id.as_str())
        }
        Refusal::WrongState(why) => CoreError::new(ErrorCode::InvalidTaskTransition, why)
            .with("task_id", task.task_id.as_str())
            .with("status", task.status.as_str()),
    }
}

fn no_suitable(why: String) -> CoreError {
    CoreError::new(ErrorCode::NoSuitableAgent, why)
}

/// Whether an agent takes work when named as a target or a new assignee.
fn accepts_tasks(agent: &AgentRecord) -> Result<(), String> {
    use switchboard_types::agents::AgentStatus;
    if !agent.communication_enabled {
        return Err(format!(
            "agent '{}' has its communication disabled",
            agent.agent_id
        ));
    }
    if agent.status == AgentStatus::Unavailable {
        return Err(format!("agent '{}' is unavailable", agent.agent_id));
    }
    Ok(())
}

fn map(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

impl Loaded {
    fn task_state(&self) -> TaskState {
        TaskState {
            status: self.task.status,
            clarification_id: self.task.clarification.as_ref().map(|(id, _)| id.clone()),
            offered: self.task.assignee_role.is_some(),
        }
    }
}
