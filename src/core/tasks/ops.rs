//! The task operations: submit, hand off, clarify, answer, report, cancel, read.
//!
//! Each action reads the task, lets [`TaskState::apply`] decide, and writes the change
//! as one job of the group commit guarded by the task's version: if another action got
//! there first, nothing is written and the action is decided again on the new state.

use std::collections::HashSet;
use std::sync::Arc;

use serde::Serialize;
use serde_json::{Map, Value, json};

use super::callback_url;
use super::registry_requests::RegistryRequest;
use super::state::{Action, Party, Refusal, TaskState};
use super::{
    Answer, CallbackNotification, CallbackSecret, CallbackStatus, Cancel, ClarificationRequest,
    ClarificationResponse, ClarificationRound, Clarify, ErrorMessage, Handoff, HandoffNotification,
    MAX_CAPABILITIES, MAX_REASON, MAX_TASK_TEXT, SERVER_AGENT_ID, Task, TaskDetail, TaskEvent,
    TaskEventRecord, TaskFrame, TaskList, TaskQuery, TaskRecord, TaskRequest, TaskResponse,
    TaskResponseStatus, TaskResult, TaskRuntime, TaskStatus, TaskSubmitted, TaskUpdated,
};
use crate::core::delivery::{NewMessage, reserve_pushes};
use crate::core::messages::{Content, MAX_TEXT, MessageKind, MessageType, check_message_text};
use crate::core::registry::{AgentRecord, AgentStatus, Caller, TeamRecord};
use crate::core::time::Timestamp;
use crate::core::{Core, CoreError, CoreResult, ErrorCode, Need, ids};
use crate::store::{
    self,
    messages::{RenderedMessage, StagedPost},
};

/// How many times an action is decided again when the task changed under it.
const ATTEMPTS: usize = 5;
/// Longest capability name.
const MAX_CAPABILITY: usize = 64;

/// A protocol notification, written as an inbox entry of each recipient.
struct Notice {
    frame: TaskFrame,
    body: Value,
    recipients: Vec<Arc<AgentRecord>>,
}

impl Notice {
    fn new(frame: TaskFrame, body: &impl Serialize, recipients: Vec<Arc<AgentRecord>>) -> Notice {
        Notice {
            frame,
            body: serde_json::to_value(body).unwrap_or(Value::Null),
            recipients,
        }
    }
}

/// One change of a task, decided and ready to be written.
struct Change {
    /// The task after the change (`pk` 0 for a new task).
    task: TaskRecord,
    /// The version the task had when the change was decided; `None` for a new task.
    expected_version: Option<i64>,
    event: TaskEventRecord,
    actor: Arc<AgentRecord>,
    notices: Vec<Notice>,
    /// What the callback reports: its status and result data.
    callback: (CallbackStatus, Value),
    open_delta: Vec<(i64, i64)>,
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

/// The marker error of a version conflict (retried, never shown unless retries run out).
fn task_changed(task_id: &str) -> CoreError {
    CoreError::new(
        ErrorCode::Conflict,
        format!("task '{task_id}' kept changing while this action was applied"),
    )
    .with("task_id", task_id)
    .with("task_changed", true)
}

fn is_task_changed(err: &CoreError) -> bool {
    err.error_code == ErrorCode::Conflict && err.details.contains_key("task_changed")
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

fn truncate(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}

fn callback_status(status: TaskStatus) -> CallbackStatus {
    match status {
        TaskStatus::InProgress | TaskStatus::InputRequired => CallbackStatus::InProgress,
        TaskStatus::Success => CallbackStatus::Complete,
        TaskStatus::Failed | TaskStatus::Canceled => CallbackStatus::Failed,
    }
}

/// Whether an agent takes work when named as a target or a new assignee.
fn accepts_tasks(agent: &AgentRecord) -> Result<(), String> {
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

fn no_suitable(why: String) -> CoreError {
    CoreError::new(ErrorCode::NoSuitableAgent, why)
}

impl Core {
    pub(crate) fn tasks(&self) -> &TaskRuntime {
        &self.inner.tasks
    }

    /// Handles a TaskRequest: the registry by message, or a task to assign.
    pub async fn submit_task(
        &self,
        caller: &Caller,
        req: TaskRequest,
    ) -> CoreResult<TaskSubmitted> {
        if req.target_agent_id.is_none()
            && req.required_capabilities.is_empty()
            && let Some(kind) = RegistryRequest::of(&req.description)
        {
            return self.registry_request(caller, req, kind).await;
        }
        let (team, me) = self.sender(caller, &req.originating_agent_id, "originating_agent_id")?;
        self.check_can_send(&team, &me)?;
        let task_id = task_id_or_new(req.task_id.as_deref())?;
        check_message_text("description", &req.description, MAX_TASK_TEXT)?;
        let capabilities = clean_capabilities(req.required_capabilities)?;
        let callback = match req.callback_url {
            None => None,
            Some(target) if callback_url::looks_like_url(&target) => {
                callback_url::check(&target, self.tasks().settings.allow_private_callbacks)?;
                Some(target)
            }
            Some(agent_id) => {
                self.member_of(&team, &agent_id)
                    .map_err(|e| e.with("field", "callback_url"))?;
                Some(agent_id)
            }
        };
        let target = match &req.target_agent_id {
            Some(id) => Some(
                self.member_of(&team, id)
                    .map_err(|e| e.with("field", "target_agent_id"))?,
            ),
            None => None,
        };
        let chosen = self.choose_assignee(&team, &me, target.as_ref(), &capabilities);

        let now = Timestamp::now();
        let mut task = TaskRecord {
            pk: 0,
            team_pk: team.pk,
            task_id: task_id.clone(),
            description: req.description,
            data: req.data,
            originator_pk: me.pk,
            assignee_pk: None,
            callback_url: callback,
            priority: req.priority.unwrap_or_default(),
            required_capabilities: capabilities,
            target_agent_id: req.target_agent_id,
            status: TaskStatus::InProgress,
            clarification: None,
            context: Vec::new(),
            result_data: Value::Null,
            callback_delivery: None,
            version: 1,
            created_at: now,
            updated_at: now,
        };
        let (change, answer) = match chosen {
            Ok(assignee) => {
                task.assignee_pk = Some(assignee.pk);
                let response = TaskResponse {
                    task_id: task_id.clone(),
                    result_data: json!({
                        "assignee_agent_id": assignee.agent_id,
                        "message": format!("task {task_id} was assigned to {}", assignee.agent_id),
                    }),
                    status: TaskResponseStatus::InProgress,
                    agent_id: assignee.agent_id.clone(),
                };
                let request = self.request_notice(&task, &assignee);
                let event = self.event(
                    &task,
                    "submitted",
                    &me,
                    map(json!({"assignee_agent_id": assignee.agent_id})),
                );
                (
                    Change {
                        callback: (
                            CallbackStatus::InProgress,
                            json!({"assignee_agent_id": assignee.agent_id}),
                        ),
                        notices: vec![
                            request,
                            Notice::new(TaskFrame::TaskResponse, &response, vec![me.clone()]),
                        ],
                        open_delta: vec![(assignee.pk, 1)],
                        expected_version: None,
                        actor: me.clone(),
                        event,
                        task,
                    },
                    (response, None),
                )
            }
            Err(why) => {
                task.status = TaskStatus::Failed;
                let code = why.error_code.as_text();
                let details = json!({"error_code": code, "error_message": why.error_message});
                let response = TaskResponse {
                    task_id: task_id.clone(),
                    result_data: details.clone(),
                    status: TaskResponseStatus::Failed,
                    agent_id: SERVER_AGENT_ID.to_owned(),
                };
                let error = ErrorMessage {
                    task_id: Some(task_id.clone()),
                    error_code: code,
                    error_message: why.error_message.clone(),
                    originating_agent_id: me.agent_id.clone(),
                };
                let event = self.event(&task, "assignment_failed", &me, map(details.clone()));
                (
                    Change {
                        callback: (CallbackStatus::Failed, details),
                        notices: vec![
                            Notice::new(TaskFrame::TaskResponse, &response, vec![me.clone()]),
                            Notice::new(TaskFrame::ErrorMessage, &error, vec![me.clone()]),
                        ],
                        open_delta: Vec::new(),
                        expected_version: None,
                        actor: me.clone(),
                        event,
                        task,
                    },
                    (response, Some(error)),
                )
            }
        };
        let task = self.commit(change).await?;
        tracing::debug!(task_id = %task.task_id, status = task.status.as_str(), "task submitted");
        let (task_response, error_message) = answer;
        Ok(TaskSubmitted {
            success: error_message.is_none(),
            task_response,
            error_message,
            task: Some(self.task_view(&task)),
        })
    }

    /// The assignee for a new task: the named target if it accepts tasks; otherwise the
    /// available member (not the originator) with the best capability match, connected
    /// ones first, then the one with the fewest open tasks.
    fn choose_assignee(
        &self,
        team: &TeamRecord,
        originator: &AgentRecord,
        target: Option<&Arc<AgentRecord>>,
        capabilities: &[String],
    ) -> Result<Arc<AgentRecord>, CoreError> {
        if let Some(target) = target {
            accepts_tasks(target).map_err(no_suitable)?;
            return Ok(target.clone());
        }
        let hub = self.hub();
        let mut best: Option<(f64, bool, i64, Arc<AgentRecord>)> = None;
        for agent in self.registry().members(team.pk) {
            if agent.pk == originator.pk
                || agent.status != AgentStatus::Available
                || !agent.communication_enabled
            {
                continue;
            }
            let share = if capabilities.is_empty() {
                1.0
            } else {
                let had = capabilities
                    .iter()
                    .filter(|c| agent.has_capability(c))
                    .count();
                had as f64 / capabilities.len() as f64
            };
            if share <= 0.0 {
                continue;
            }
            let connected = hub.is_connected(agent.pk);
            let open = self.tasks().open_tasks(agent.pk);
            let better = match &best {
                None => true,
                Some((s, c, o, a)) => (share, connected, -open, std::cmp::Reverse(&agent.agent_id))
                    .partial_cmp(&(*s, *c, -*o, std::cmp::Reverse(&a.agent_id)))
                    .is_some_and(|o| o == std::cmp::Ordering::Greater),
            };
            if better {
                best = Some((share, connected, open, agent));
            }
        }
        best.map(|(.., agent)| agent).ok_or_else(|| {
            if capabilities.is_empty() {
                no_suitable("no other member of the team is available".into())
            } else {
                no_suitable(format!(
                    "no available agent has any of the required capabilities: {}",
                    capabilities.join(", ")
                ))
                .with("required_capabilities", capabilities.to_vec())
            }
        })
    }

    /// The assignee hands the task on (or the originator reassigns it).
    pub async fn handoff_task(
        &self,
        caller: &Caller,
        task_id: &str,
        input: Handoff,
    ) -> CoreResult<TaskUpdated> {
        crate::core::check_text("reason", &input.reason, MAX_REASON)?;
        self.act(caller, task_id, |core, l| {
            let new = core
                .member_of(&l.team, &input.new_agent_id)
                .map_err(|e| e.with("field", "new_agent_id"))?;
            let next = l
                .task_state()
                .apply(l.party, &Action::Handoff, None)
                .map_err(|r| refused(r, &l.task))?;
            if l.task.assignee_pk == Some(new.pk) {
                return Err(CoreError::new(
                    ErrorCode::InvalidTaskTransition,
                    format!("task '{task_id}' is already assigned to '{}'", new.agent_id),
                )
                .with("task_id", task_id));
            }
            accepts_tasks(&new).map_err(no_suitable)?;
            let old = l.task.assignee_pk.and_then(|pk| core.registry().agent(pk));
            let old_id = old
                .as_ref()
                .map_or_else(String::new, |a| a.agent_id.clone());
            if let Some(believed) = &input.current_agent_id
                && *believed != old_id
            {
                return Err(CoreError::new(
                    ErrorCode::InvalidTaskTransition,
                    format!("task '{task_id}' is assigned to '{old_id}', not '{believed}'"),
                )
                .with("task_id", task_id)
                .with("assignee_agent_id", old_id.as_str()));
            }
            let mut task = l.next(next);
            task.assignee_pk = Some(new.pk);
            let notification = HandoffNotification {
                task_id: task_id.to_owned(),
                current_agent_id: old_id.clone(),
                new_agent_id: new.agent_id.clone(),
                reason: input.reason.clone(),
                handed_off_by: l.me.agent_id.clone(),
            };
            let mut told = vec![new.clone()];
            told.extend(core.registry().agent(task.originator_pk));
            told.extend(old.clone());
            let details = json!({
                "from_agent_id": old_id,
                "new_agent_id": new.agent_id,
                "reason": input.reason,
            });
            let mut open_delta = vec![(new.pk, 1)];
            if let Some(old) = &old {
                open_delta.push((old.pk, -1));
            }
            Ok(Change {
                event: core.event(&task, "handed_off", &l.me, map(details.clone())),
                notices: vec![
                    core.request_notice(&task, &new),
                    Notice::new(TaskFrame::HandoffNotification, &notification, dedup(told)),
                ],
                callback: (CallbackStatus::InProgress, details),
                open_delta,
                ..l.change(task)
            })
        })
        .await
    }

    /// The assignee asks the originator a question; the task waits for the answer.
    pub async fn request_clarification(
        &self,
        caller: &Caller,
        task_id: &str,
        input: Clarify,
    ) -> CoreResult<TaskUpdated> {
        check_message_text("question", &input.question, MAX_TASK_TEXT)?;
        self.act(caller, task_id, |core, l| {
            let clarification_id = ids::ordered_id("clar");
            let next = l
                .task_state()
                .apply(l.party, &Action::Clarify, Some(&clarification_id))
                .map_err(|r| refused(r, &l.task))?;
            let mut task = l.next(next);
            task.clarification = Some((clarification_id.clone(), input.question.clone()));
            let request = ClarificationRequest {
                task_id: task_id.to_owned(),
                clarification_id: clarification_id.clone(),
                question: input.question.clone(),
                requested_by: l.me.agent_id.clone(),
            };
            let details = json!({"clarification_id": clarification_id, "question": input.question});
            let originator = core.registry().agent(task.originator_pk);
            Ok(Change {
                event: core.event(
                    &task,
                    "clarification_requested",
                    &l.me,
                    map(details.clone()),
                ),
                notices: vec![Notice::new(
                    TaskFrame::ClarificationRequest,
                    &request,
                    originator.into_iter().collect(),
                )],
                callback: (CallbackStatus::InProgress, details),
                ..l.change(task)
            })
        })
        .await
    }

    /// The originator answers the open question; the answer joins the task's context.
    pub async fn answer_clarification(
        &self,
        caller: &Caller,
        task_id: &str,
        clarification_id: &str,
        input: Answer,
    ) -> CoreResult<TaskUpdated> {
        check_message_text("answer", &input.answer, MAX_TASK_TEXT)?;
        self.act(caller, task_id, |core, l| {
            let action = Action::Answer {
                clarification_id: clarification_id.to_owned(),
            };
            let next = l
                .task_state()
                .apply(l.party, &action, None)
                .map_err(|r| refused(r, &l.task))?;
            let question = l
                .task
                .clarification
                .as_ref()
                .map(|(_, q)| q.clone())
                .unwrap_or_default();
            let assignee = l.task.assignee_pk.and_then(|pk| core.registry().agent(pk));
            let mut task = l.next(next);
            task.context.push(ClarificationRound {
                clarification_id: clarification_id.to_owned(),
                question,
                requested_by: l
                    .task
                    .assignee_pk
                    .map(|pk| core.agent_name(pk))
                    .unwrap_or_default(),
                answer: input.answer.clone(),
                response_provided_by: l.me.agent_id.clone(),
                answered_at: task.updated_at,
            });
            let response = ClarificationResponse {
                task_id: task_id.to_owned(),
                clarification_id: clarification_id.to_owned(),
                answer: input.answer.clone(),
                response_provided_by: l.me.agent_id.clone(),
            };
            let details = json!({"clarification_id": clarification_id, "answer": input.answer});
            Ok(Change {
                event: core.event(&task, "clarification_answered", &l.me, map(details.clone())),
                notices: vec![Notice::new(
                    TaskFrame::ClarificationResponse,
                    &response,
                    assignee.into_iter().collect(),
                )],
                callback: (CallbackStatus::InProgress, details),
                ..l.change(task)
            })
        })
        .await
    }

    /// The assignee reports progress (`in-progress`) or the end (`success`, `failed`).
    pub async fn report_task(
        &self,
        caller: &Caller,
        task_id: &str,
        input: TaskResult,
    ) -> CoreResult<TaskUpdated> {
        self.act(caller, task_id, |core, l| {
            let (action, kind) = match input.status {
                TaskResponseStatus::InProgress => (Action::Progress, "progress"),
                TaskResponseStatus::Success => (Action::Finish { success: true }, "succeeded"),
                TaskResponseStatus::Failed => (Action::Finish { success: false }, "failed"),
            };
            let next = l
                .task_state()
                .apply(l.party, &action, None)
                .map_err(|r| refused(r, &l.task))?;
            let mut task = l.next(next);
            task.result_data = input.result_data.clone();
            let response = TaskResponse {
                task_id: task_id.to_owned(),
                result_data: input.result_data.clone(),
                status: input.status,
                agent_id: l.me.agent_id.clone(),
            };
            let originator = core.registry().agent(task.originator_pk);
            let open_delta = if task.status.is_final() {
                vec![(l.me.pk, -1)]
            } else {
                Vec::new()
            };
            Ok(Change {
                event: core.event(
                    &task,
                    kind,
                    &l.me,
                    map(json!({"result_data": input.result_data})),
                ),
                notices: vec![Notice::new(
                    TaskFrame::TaskResponse,
                    &response,
                    originator.into_iter().collect(),
                )],
                callback: (callback_status(task.status), input.result_data.clone()),
                open_delta,
                ..l.change(task)
            })
        })
        .await
    }

    /// The originator calls the task off; the assignee is told.
    pub async fn cancel_task(
        &self,
        caller: &Caller,
        task_id: &str,
        input: Cancel,
    ) -> CoreResult<TaskUpdated> {
        crate::core::messages::check_optional("reason", &input.reason, MAX_REASON)?;
        self.act(caller, task_id, |core, l| {
            let next = l
                .task_state()
                .apply(l.party, &Action::Cancel, None)
                .map_err(|r| refused(r, &l.task))?;
            let task = l.next(next);
            let details = json!({"canceled": true, "reason": input.reason});
            let assignee = l.task.assignee_pk.and_then(|pk| core.registry().agent(pk));
            let response = TaskResponse {
                task_id: task_id.to_owned(),
                result_data: details.clone(),
                status: TaskResponseStatus::Failed,
                agent_id: l.me.agent_id.clone(),
            };
            Ok(Change {
                event: core.event(&task, "canceled", &l.me, map(details.clone())),
                notices: vec![Notice::new(
                    TaskFrame::TaskResponse,
                    &response,
                    assignee.iter().cloned().collect(),
                )],
                callback: (CallbackStatus::Failed, details),
                open_delta: assignee.map(|a| (a.pk, -1)).into_iter().collect(),
                ..l.change(task)
            })
        })
        .await
    }

    /// A task with its history, for its originator and anyone ever assigned it.
    pub async fn get_task(&self, caller: &Caller, task_id: &str) -> CoreResult<TaskDetail> {
        let (team, me) = self.acting_agent(caller)?;
        let l = self.load_task(team, me, task_id).await?;
        let reader = self.store().reader();
        let events = store::tasks::events(reader, l.task.pk).await?;
        let callbacks = store::tasks::callbacks_of(reader, l.task.pk).await?;
        Ok(TaskDetail {
            success: true,
            task: self.task_view(&l.task),
            events: events
                .into_iter()
                .map(|e| TaskEvent {
                    seq: e.seq,
                    kind: e.kind,
                    agent_id: e.actor_pk.map(|pk| self.agent_name(pk)),
                    status: e.status,
                    data: e.data,
                    timestamp: e.created_at,
                })
                .collect(),
            callbacks,
        })
    }

    /// The caller's tasks, newest first.
    pub async fn list_tasks(&self, caller: &Caller, query: TaskQuery) -> CoreResult<TaskList> {
        let (_, me) = self.acting_agent(caller)?;
        let limit = query.limit.unwrap_or(50);
        if !(1..=100).contains(&limit) {
            return Err(
                CoreError::validation("limit", "limit must be between 1 and 100")
                    .with("limit", limit),
            );
        }
        let before = match &query.cursor {
            None => None,
            Some(cursor) => Some(
                cursor
                    .strip_prefix("t")
                    .and_then(|n| n.parse::<i64>().ok())
                    .filter(|n| *n > 0)
                    .ok_or_else(|| {
                        CoreError::validation("cursor", "cursor is not a next_cursor of this list")
                    })?,
            ),
        };
        let statuses = query.status.map(|s| s.0).unwrap_or_default();
        let mut tasks = store::tasks::list(
            self.store().reader(),
            me.pk,
            query.role,
            &statuses,
            before,
            limit + 1,
        )
        .await?;
        let more = tasks.len() as i64 > limit;
        tasks.truncate(limit as usize);
        let next_cursor = more
            .then(|| tasks.last().map(|t| format!("t{}", t.pk)))
            .flatten();
        Ok(TaskList {
            success: true,
            tasks: tasks.iter().map(|t| self.task_view(t)).collect(),
            next_cursor,
        })
    }

    /// The team's callback signing key (team key or admin).
    pub async fn callback_secret(
        &self,
        caller: &Caller,
        team_id: &str,
    ) -> CoreResult<CallbackSecret> {
        let team = self.team_for(caller, team_id, Need::Manage)?;
        let (secret, rotated_at) = store::tasks::secret(self.store().reader(), team.pk)
            .await?
            .ok_or_else(|| CoreError::internal("the team has no callback secret"))?;
        Ok(CallbackSecret {
            success: true,
            team_id: team.team_id.clone(),
            secret,
            rotated_at,
        })
    }

    /// Replaces the team's callback signing key; callbacks sent from now on use the new
    /// one.
    pub async fn rotate_callback_secret(
        &self,
        caller: &Caller,
        team_id: &str,
    ) -> CoreResult<CallbackSecret> {
        let team = self.team_for(caller, team_id, Need::Manage)?;
        let bytes: [u8; 32] = rand::random();
        let secret = format!("whsec_{}", hex::encode(bytes));
        let now = Timestamp::now();
        let (team_pk, stored) = (team.pk, secret.clone());
        self.store()
            .write(move |tx| {
                Box::pin(async move {
                    store::tasks::set_secret(tx.conn().await?, team_pk, &stored, now).await
                })
            })
            .await?;
        tracing::info!(team_id = %team.team_id, "callback secret rotated");
        Ok(CallbackSecret {
            success: true,
            team_id: team.team_id.clone(),
            secret,
            rotated_at: now,
        })
    }

    /// Checks an agent id a frame names as its author (`agent_id`, `requested_by`, …):
    /// when given, it must be the caller (`FORBIDDEN` otherwise), as in REST bodies.
    pub fn check_claimed(
        &self,
        caller: &Caller,
        claimed: Option<&str>,
        field: &str,
    ) -> CoreResult<()> {
        match claimed {
            Some(claimed) => self.sender(caller, claimed, field).map(|_| ()),
            None => Ok(()),
        }
    }

    /// Reads the task for an action by the calling agent. Only its originator and its
    /// assignees, past and present, see it; anyone else gets `TASK_NOT_FOUND`.
    async fn load_task(
        &self,
        team: Arc<TeamRecord>,
        me: Arc<AgentRecord>,
        task_id: &str,
    ) -> CoreResult<Loaded> {
        let reader = self.store().reader();
        let task = store::tasks::find(reader, team.pk, task_id)
            .await?
            .ok_or_else(|| task_not_found(task_id))?;
        let party = Party {
            originator: task.originator_pk == me.pk,
            assignee: task.assignee_pk == Some(me.pk),
        };
        if !party.originator
            && !party.assignee
            && !store::tasks::was_assigned(reader, task.pk, me.pk).await?
        {
            return Err(task_not_found(task_id));
        }
        Ok(Loaded {
            team,
            me,
            task,
            party,
        })
    }

    /// Decides an action with `plan` on the current task and writes it; decided again
    /// if the task changed in between.
    async fn act<F>(&self, caller: &Caller, task_id: &str, plan: F) -> CoreResult<TaskUpdated>
    where
        F: Fn(&Core, &Loaded) -> CoreResult<Change>,
    {
        let (team, me) = self.acting_agent(caller)?;
        self.check_can_send(&team, &me)?;
        let mut attempt = 0;
        loop {
            attempt += 1;
            let loaded = self.load_task(team.clone(), me.clone(), task_id).await?;
            let change = plan(self, &loaded)?;
            match self.commit(change).await {
                Err(err) if is_task_changed(&err) && attempt < ATTEMPTS => continue,
                Err(err) => return Err(err),
                Ok(task) => {
                    return Ok(TaskUpdated {
                        success: true,
                        task: self.task_view(&task),
                    });
                }
            }
        }
    }

    /// Writes a change in one transaction: the task, its event, the callback and the
    /// notifications; pushes the notifications once committed.
    async fn commit(&self, change: Change) -> CoreResult<TaskRecord> {
        let Change {
            task,
            expected_version,
            event,
            actor,
            notices,
            callback,
            open_delta,
        } = change;
        let now = task.updated_at;
        let mut callback_post = None;
        let mut notices = notices;
        if let Some(target) = &task.callback_url {
            let notification = CallbackNotification {
                task_id: task.task_id.clone(),
                result_data: callback.1,
                status: callback.0,
                sent_to: target.clone(),
                task_status: task.status,
                event: event.kind.to_owned(),
                event_seq: event.seq,
                assignee_agent_id: task.assignee_pk.map(|pk| self.agent_name(pk)),
                timestamp: now,
            };
            if callback_url::looks_like_url(target) {
                let mut body = serde_json::to_value(&notification).unwrap_or(Value::Null);
                if let Value::Object(fields) = &mut body {
                    fields.insert("type".into(), json!("CallbackNotification"));
                }
                callback_post = Some((target.clone(), body.to_string()));
            } else if let Some(agent) = self.registry().member(task.team_pk, target) {
                notices.push(Notice::new(
                    TaskFrame::CallbackNotification,
                    &notification,
                    vec![agent],
                ));
            }
        }
        // Rendered here, not on the writer's thread (see `RenderedMessage`).
        let messages = notices
            .into_iter()
            .map(|n| {
                let message = self.notice_message(&task, &actor, n.frame, n.body);
                let ids = n.recipients.iter().map(|a| a.agent_id.clone()).collect();
                Ok((RenderedMessage::new(message, ids)?, n.recipients))
            })
            .collect::<CoreResult<Vec<(RenderedMessage, Vec<Arc<AgentRecord>>)>>>()?;
        let hub = self.hub().clone();
        let core = self.clone();
        let actor_id = actor.agent_id.clone();
        // Self-contained: each task statement writes all of its rows or none.
        self.store()
            .write_self_contained(
                move |tx| {
                    Box::pin(async move {
                        let callback = callback_post
                            .as_ref()
                            .map(|(url, body)| (url.as_str(), body.as_str()));
                        match expected_version {
                            None => {
                                store::tasks::insert(tx.conn_beside_posts().await?, &task, &event, callback)
                                    .await
                                    .map_err(|e| match e {
                                        store::StoreError::Conflict => CoreError::new(
                                            ErrorCode::Conflict,
                                            format!("task '{}' already exists", task.task_id),
                                        )
                                        .with("task_id", task.task_id.as_str())
                                        .suggest("Choose another task_id, or leave it out to get a generated one."),
                                        other => other.into(),
                                    })?;
                            }
                            Some(version) => {
                                if !store::tasks::update(
                                    tx.conn_beside_posts().await?,
                                    &task,
                                    version,
                                    &event,
                                    callback,
                                )
                                    .await?
                                {
                                    return Err(task_changed(&task.task_id));
                                }
                            }
                        }
                        let queued = callback.is_some();
                        let mut staged = Vec::with_capacity(messages.len());
                        for (rendered, recipients) in messages {
                            let live: Vec<Arc<AgentRecord>> = recipients
                                .into_iter()
                                .filter(|a| a.communication_enabled)
                                .collect();
                            let (_, _, pushes) =
                                reserve_pushes(&hub, &live, rendered.message(), &actor_id, now);
                            let pks = live.iter().map(|a| a.pk).collect();
                            let slot =
                                tx.stage_post(StagedPost::new(rendered, pks, now, None, None));
                            staged.push((slot, pushes));
                        }
                        Ok::<_, CoreError>((task, staged, queued))
                    })
                },
                move |(task, staged, queued)| {
                    for (slot, pushes) in staged {
                        match slot.outcome() {
                            Ok(written) => pushes.send(&written),
                            Err(err) => tracing::warn!(error = %err, "a task notification was not written"),
                        }
                    }
                    for (agent_pk, delta) in open_delta {
                        core.tasks().adjust_open(agent_pk, delta);
                    }
                    if queued {
                        core.tasks().callbacks_queued.notify_one();
                    }
                    Ok(task)
                },
            )
            .await
    }

    /// The inbox entry carrying a protocol notification about `task`.
    fn notice_message(
        &self,
        task: &TaskRecord,
        sender: &AgentRecord,
        frame: TaskFrame,
        body: Value,
    ) -> NewMessage {
        let mut data = Map::new();
        data.insert("type".into(), json!(frame.name()));
        if let Value::Object(fields) = body {
            data.extend(fields);
        }
        let summary = match frame {
            TaskFrame::TaskRequest => task.description.clone(),
            TaskFrame::TaskResponse => format!(
                "status {}",
                data.get("status").and_then(Value::as_str).unwrap_or("?")
            ),
            TaskFrame::HandoffNotification => format!(
                "handed off to {}",
                data.get("new_agent_id")
                    .and_then(Value::as_str)
                    .unwrap_or("?")
            ),
            TaskFrame::ClarificationRequest => data
                .get("question")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
            TaskFrame::ClarificationResponse => data
                .get("answer")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
            TaskFrame::CallbackNotification => format!(
                "task status {}",
                data.get("task_status")
                    .and_then(Value::as_str)
                    .unwrap_or("?")
            ),
            TaskFrame::ErrorMessage => data
                .get("error_message")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
        };
        let text = truncate(
            &format!("{} {}: {summary}", frame.name(), task.task_id),
            MAX_TEXT - 1,
        );
        NewMessage {
            message_id: ids::ordered_id("msg"),
            team_pk: task.team_pk,
            kind: MessageKind::Task,
            sender_pk: sender.pk,
            sender_role: sender.role.clone(),
            message_type: match frame {
                TaskFrame::TaskRequest | TaskFrame::ClarificationRequest => MessageType::Request,
                TaskFrame::TaskResponse | TaskFrame::ClarificationResponse => MessageType::Response,
                TaskFrame::HandoffNotification => MessageType::Coordination,
                TaskFrame::CallbackNotification | TaskFrame::ErrorMessage => {
                    MessageType::Information
                }
            },
            priority: task.priority,
            content: Content {
                text,
                data,
                attachments: Vec::new(),
            },
            requires_response: false,
            response_deadline: None,
            context_reference: Some(format!("task:{}", task.task_id)),
            thread_id: Some(format!("task:{}", task.task_id)),
            in_reply_to: None,
            response_status: None,
        }
    }

    /// The TaskRequest the assignee receives: the request as submitted, plus the context
    /// gathered so far (after a handoff).
    fn request_notice(&self, task: &TaskRecord, assignee: &Arc<AgentRecord>) -> Notice {
        let request = TaskRequest {
            task_id: Some(task.task_id.clone()),
            description: task.description.clone(),
            data: task.data.clone(),
            originating_agent_id: self.agent_name(task.originator_pk),
            callback_url: task.callback_url.clone(),
            priority: Some(task.priority),
            required_capabilities: task.required_capabilities.clone(),
            target_agent_id: task.target_agent_id.clone(),
        };
        let mut notice = Notice::new(TaskFrame::TaskRequest, &request, vec![assignee.clone()]);
        if let Value::Object(fields) = &mut notice.body {
            fields.insert("assignee_agent_id".into(), json!(assignee.agent_id));
            fields.insert(
                "context".into(),
                serde_json::to_value(&task.context).unwrap_or(Value::Null),
            );
        }
        notice
    }

    fn event(
        &self,
        task: &TaskRecord,
        kind: &'static str,
        actor: &AgentRecord,
        data: Map<String, Value>,
    ) -> TaskEventRecord {
        TaskEventRecord {
            seq: task.version,
            kind,
            actor_pk: Some(actor.pk),
            status: task.status,
            data,
            created_at: task.updated_at,
        }
    }

    /// A task as its parties see it.
    pub(crate) fn task_view(&self, t: &TaskRecord) -> Task {
        let assignee = t.assignee_pk.map(|pk| self.agent_name(pk));
        Task {
            task_id: t.task_id.clone(),
            description: t.description.clone(),
            data: t.data.clone(),
            originating_agent_id: self.agent_name(t.originator_pk),
            open_clarification: t.clarification.as_ref().map(|(id, question)| {
                ClarificationRequest {
                    task_id: t.task_id.clone(),
                    clarification_id: id.clone(),
                    question: question.clone(),
                    requested_by: assignee.clone().unwrap_or_default(),
                }
            }),
            assignee_agent_id: assignee,
            status: t.status,
            priority: t.priority,
            required_capabilities: t.required_capabilities.clone(),
            target_agent_id: t.target_agent_id.clone(),
            callback_url: t.callback_url.clone(),
            context: t.context.clone(),
            result_data: t.result_data.clone(),
            callback_delivery: t.callback_delivery.clone(),
            created_at: t.created_at,
            updated_at: t.updated_at,
        }
    }
}

impl Loaded {
    fn task_state(&self) -> TaskState {
        TaskState {
            status: self.task.status,
            clarification_id: self.task.clarification.as_ref().map(|(id, _)| id.clone()),
        }
    }

    /// The task in state `next`, one version on.
    fn next(&self, next: TaskState) -> TaskRecord {
        let mut task = self.task.clone();
        task.status = next.status;
        if next.clarification_id.is_none() {
            task.clarification = None;
        }
        task.version += 1;
        task.updated_at = Timestamp::now().max(self.task.updated_at);
        task
    }

    /// A change of `task` by the caller with nothing else yet.
    fn change(&self, task: TaskRecord) -> Change {
        Change {
            event: TaskEventRecord {
                seq: task.version,
                kind: "",
                actor_pk: Some(self.me.pk),
                status: task.status,
                data: Map::new(),
                created_at: task.updated_at,
            },
            expected_version: Some(self.task.version),
            actor: self.me.clone(),
            notices: Vec::new(),
            callback: (callback_status(task.status), Value::Null),
            open_delta: Vec::new(),
            task,
        }
    }
}

/// A client-supplied task id, checked, or a new one.
pub(super) fn task_id_or_new(given: Option<&str>) -> CoreResult<String> {
    match given {
        Some(id) => {
            ids::check_id("task_id", id)?;
            Ok(id.to_owned())
        }
        None => Ok(ids::ordered_id("task")),
    }
}

fn map(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

fn dedup(agents: Vec<Arc<AgentRecord>>) -> Vec<Arc<AgentRecord>> {
    let mut seen = HashSet::new();
    agents.into_iter().filter(|a| seen.insert(a.pk)).collect()
}

/// Required capabilities: trimmed, 1–64 characters each, at most 32, duplicates
/// (case-insensitive) dropped.
fn clean_capabilities(capabilities: Vec<String>) -> CoreResult<Vec<String>> {
    if capabilities.len() > MAX_CAPABILITIES {
        return Err(CoreError::validation(
            "required_capabilities",
            format!("at most {MAX_CAPABILITIES} required capabilities"),
        ));
    }
    let mut seen = HashSet::new();
    let mut clean = Vec::with_capacity(capabilities.len());
    for c in capabilities {
        let c = c.trim().to_owned();
        if c.is_empty() || c.chars().count() > MAX_CAPABILITY {
            return Err(CoreError::validation(
                "required_capabilities",
                format!("each capability is 1 to {MAX_CAPABILITY} characters"),
            ));
        }
        if seen.insert(c.to_lowercase()) {
            clean.push(c);
        }
    }
    Ok(clean)
}
