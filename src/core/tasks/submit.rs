//! Submitting a task: validation, the callback target, assignment, and the first change.

use std::sync::Arc;
use switchboard_types::ids::AgentId;

use serde_json::{Value, json};
use switchboard_types::agents::AgentStatus;
use switchboard_types::task_state::TaskStatus;
use switchboard_types::tasks::{
    CallbackStatus, ErrorMessage, SERVER_AGENT_ID, TaskEventKind, TaskFrame, TaskRequest,
    TaskResponse, TaskResponseStatus, TaskSubmitted,
};
use switchboard_types::time::Timestamp;

use super::commit::NotWritten;
use super::registry_requests::RegistryRequest;
use super::{Change, Following, Notice, accepts_tasks, map, no_suitable};
use crate::core::assistance::capability_match;
use crate::core::egress::urls;
use crate::core::loops::Links;
use crate::core::{Caller, Core, CoreError, CoreResult, ids};
use crate::model::{AgentRecord, TaskRecord, TeamRecord};

impl Core {
    /// Handles a TaskRequest: the registry by message, or a task to assign, which its
    /// originator follows as `following` says.
    pub(in crate::core) async fn submit_task(
        &self,
        caller: &Caller,
        req: TaskRequest,
        following: Following,
    ) -> CoreResult<TaskSubmitted> {
        if req.target_agent_id.is_none()
            && req.assignee_role.is_none()
            && req.required_capabilities.is_empty()
            && let Some(kind) = RegistryRequest::of(&req.description)
        {
            return self.registry_request(caller, req, kind).await;
        }
        let (team, me) = self.sender(caller, &req.originating_agent_id, "originating_agent_id")?;
        self.check_can_send(&team, &me)?;
        let capabilities = req.validate()?;
        let parent = self
            .parent_task(&team, &me, req.parent_task_id.as_ref())
            .await?;
        let chain = self.guard(
            &team,
            &me,
            parent.as_ref().map(TaskRecord::chain),
            Links::Tasks,
        )?;
        let callback = self.callback_target(&team, req.callback_url.clone())?;
        let target = match &req.target_agent_id {
            Some(id) => Some(
                self.member_of(&team, id)
                    .map_err(|e| e.with("field", "target_agent_id"))?,
            ),
            None => None,
        };
        let goes_to = match req.assignee_role.clone() {
            Some(role) => GoesTo::Role(role),
            None => match self.choose_assignee(&team, &me, target.as_ref(), &capabilities) {
                Ok(assignee) => GoesTo::Agent(assignee),
                Err(why) => GoesTo::Nobody(why),
            },
        };
        let trace = self.task_trace(req.task_id.is_none(), parent.as_ref());
        let stored = Stored {
            capabilities,
            callback,
            chain,
            trace,
            following,
        };
        let task = new_task(&team, &me, req, stored);
        let (change, task_response, error_message) = match goes_to {
            GoesTo::Agent(assignee) => self.assigned(task, &me, &assignee)?,
            GoesTo::Nobody(why) => self.unassigned(task, &me, why)?,
            GoesTo::Role(role) => self.offered(task, &me, role)?,
        };
        let task = self.commit(change).await.map_err(|err| match err {
            NotWritten::Failed(err) => err,
            NotWritten::Stale => CoreError::internal("a new task cannot be stale"),
        })?;
        tracing::debug!(task_id = %task.task_id, status = task.status.as_str(), "task submitted");
        self.note_offered(&task);
        Ok(TaskSubmitted {
            success: error_message.is_none(),
            task_response,
            error_message,
            task: Some(self.task_view(&task)),
        })
    }

    /// The task a new one continues (`parent_task_id`), one the caller can see.
    async fn parent_task(
        &self,
        team: &TeamRecord,
        me: &AgentRecord,
        parent: Option<&switchboard_types::ids::TaskRef>,
    ) -> CoreResult<Option<TaskRecord>> {
        let Some(parent) = parent else {
            return Ok(None);
        };
        self.find_one_task(team, Some(me.pk), parent)
            .await
            .map(Some)
            .map_err(|e| e.with("field", "parent_task_id"))
    }

    /// Where a task reports: an http(s) URL (checked) or a member's agent id.
    fn callback_target(
        &self,
        team: &TeamRecord,
        target: Option<String>,
    ) -> CoreResult<Option<String>> {
        match target {
            None => Ok(None),
            Some(url) if urls::looks_like_url(&url) => {
                urls::check(&url, self.inner.tasks.settings.allow_private_callbacks)?;
                Ok(Some(url))
            }
            Some(agent_id) => {
                self.member_of(team, &AgentId::from(agent_id.as_str()))
                    .map_err(|e| e.with("field", "callback_url"))?;
                Ok(Some(agent_id))
            }
        }
    }

    /// The first change of a task that found its assignee.
    fn assigned(
        &self,
        mut task: TaskRecord,
        me: &Arc<AgentRecord>,
        assignee: &Arc<AgentRecord>,
    ) -> CoreResult<(Change, TaskResponse, Option<ErrorMessage>)> {
        task.assignee_pk = Some(assignee.pk);
        let response = TaskResponse {
            task_id: task.task_id.clone(),
            result_data: json!({
                "assignee_agent_id": assignee.agent_id,
                "message": format!("task {} was assigned to {}", task.task_id, assignee.agent_id),
            }),
            status: TaskResponseStatus::InProgress,
            agent_id: assignee.agent_id.clone(),
        };
        let details = json!({"assignee_agent_id": assignee.agent_id});
        let change = Change {
            event: self.event(&task, TaskEventKind::Submitted, me, map(details.clone())),
            callback: (CallbackStatus::InProgress, details),
            notices: vec![
                self.request_notice(&task, assignee)?,
                Notice::new(
                    TaskFrame::TaskResponse,
                    &response,
                    self.originator_told(&task),
                )?,
            ],
            open_delta: vec![(assignee.pk, 1)],
            expected_version: None,
            actor: me.clone(),
            task,
        };
        Ok((change, response, None))
    }

    /// The first (and last) change of a task nobody could take: stored as failed.
    fn unassigned(
        &self,
        mut task: TaskRecord,
        me: &Arc<AgentRecord>,
        why: CoreError,
    ) -> CoreResult<(Change, TaskResponse, Option<ErrorMessage>)> {
        task.status = TaskStatus::Failed;
        let why = why.into_body();
        let code = why.error_code.as_str();
        let details = json!({"error_code": code, "error_message": why.error_message});
        let response = TaskResponse {
            task_id: task.task_id.clone(),
            result_data: details.clone(),
            status: TaskResponseStatus::Failed,
            agent_id: SERVER_AGENT_ID.to_owned().into(),
        };
        let error = ErrorMessage {
            task_id: Some(task.task_id.clone()),
            error_code: code.to_owned(),
            error_message: why.error_message.clone(),
            originating_agent_id: me.agent_id.clone(),
        };
        let told = self.originator_told(&task);
        let change = Change {
            event: self.event(
                &task,
                TaskEventKind::AssignmentFailed,
                me,
                map(details.clone()),
            ),
            callback: (CallbackStatus::Failed, details),
            notices: vec![
                Notice::new(TaskFrame::TaskResponse, &response, told.clone())?,
                Notice::new(TaskFrame::ErrorMessage, &error, told)?,
            ],
            open_delta: Vec::new(),
            expected_version: None,
            actor: me.clone(),
            task,
        };
        Ok((change, response, Some(error)))
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
            let share = capability_match(&agent, capabilities);
            if share <= 0.0 {
                continue;
            }
            let connected = hub.is_connected(agent.pk);
            let open = self.inner.tasks.open_tasks(agent.pk);
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
}

/// Where a new task goes: to the named or chosen agent, to nobody (it fails at once, for
/// the reason given), or to any agent of a role that claims it.
enum GoesTo {
    Agent(Arc<AgentRecord>),
    Nobody(CoreError),
    Role(String),
}

/// What the checks of a submission settled, beside the request itself.
struct Stored {
    capabilities: Vec<String>,
    callback: Option<String>,
    chain: Option<crate::model::Chain>,
    trace: Option<crate::model::MessageTrace>,
    following: Following,
}

/// The task a submission stores before its first change decides where it goes.
fn new_task(team: &TeamRecord, me: &AgentRecord, req: TaskRequest, stored: Stored) -> TaskRecord {
    let now = Timestamp::now();
    TaskRecord {
        pk: Default::default(),
        team_pk: team.pk,
        task_id: req
            .task_id
            .unwrap_or_else(|| ids::ordered_id("task").into()),
        description: req.description,
        data: req.data,
        originator_pk: me.pk,
        assignee_pk: None,
        callback_url: stored.callback,
        priority: req.priority.unwrap_or_default(),
        required_capabilities: stored.capabilities,
        target_agent_id: req.target_agent_id,
        status: TaskStatus::InProgress,
        originator_inbox: stored.following == Following::Inbox,
        clarification: None,
        context: Vec::new(),
        result_data: Value::Null,
        callback_delivery: None,
        version: 1,
        created_at: now,
        updated_at: now,
        chain: stored.chain,
        trace: stored.trace,
        history_bytes: 0,
        assignee_role: None,
        attempts: 0,
        lease_seconds: None,
        lease_expires_at: None,
    }
}
