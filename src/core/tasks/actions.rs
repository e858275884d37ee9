//! What the parties of a task do to it: hand off, ask, answer, report, cancel.

use std::collections::HashSet;
use std::sync::Arc;
use switchboard_types::ids::{AgentId, AgentPk, ClarificationId, TaskRef};

use serde_json::json;
use switchboard_types::ErrorCode;
use switchboard_types::operation::{CallbackReport, ErrorReport};
use switchboard_types::task_state::{Action, Party};
use switchboard_types::tasks::{
    Answer, CallbackStatus, Cancel, ClarificationRequest, ClarificationResponse,
    ClarificationRound, Clarify, Handoff, HandoffNotification, TaskEventKind, TaskFrame,
    TaskResponse, TaskResponseStatus, TaskResult, TaskUpdated,
};

use super::commit::NotWritten;
use super::{
    ATTEMPTS, Change, Loaded, Notice, accepts_tasks, map, no_suitable, refused, task_not_found,
};
use crate::core::loops::Links;
use crate::core::{Caller, Core, CoreError, CoreResult, ids};
use crate::model::{AgentRecord, TaskRecord, TeamRecord};

impl Core {
    /// The assignee hands the task on (or the originator reassigns it).
    pub(in crate::core) async fn handoff_task(
        &self,
        caller: &Caller,
        task_id: &TaskRef,
        input: Handoff,
    ) -> CoreResult<TaskUpdated> {
        input.validate()?;
        self.act(caller, task_id, |core, l| core.plan_handoff(l, &input))
            .await
    }

    fn plan_handoff(&self, l: &Loaded, input: &Handoff) -> CoreResult<Change> {
        let task_id = l.task.task_id.as_str();
        let new = self
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
        let old = l.task.assignee_pk.and_then(|pk| self.registry().agent(pk));
        let old_id = old
            .as_ref()
            .map_or_else(String::new, |a| a.agent_id.to_string());
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
        self.moved(l, &mut task)?;
        task.assignee_pk = Some(new.pk);
        let notification = HandoffNotification {
            task_id: task_id.into(),
            current_agent_id: old_id.clone().into(),
            new_agent_id: new.agent_id.clone(),
            reason: input.reason.clone(),
            handed_off_by: l.me.agent_id.clone(),
        };
        let mut told = vec![new.clone()];
        told.extend(self.originator_told(&task));
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
            notices: vec![
                self.request_notice(&task, &new)?,
                Notice::new(TaskFrame::HandoffNotification, &notification, dedup(told))?,
            ],
            callback: (CallbackStatus::InProgress, details.clone()),
            open_delta,
            ..l.change(task, TaskEventKind::HandedOff, map(details))
        })
    }

    /// Work moved between agents on the task — a handoff, a question, its answer, the
    /// result — is a hop of the task's chain under the team's loop guard, as a reply
    /// is a hop of a message's: 80 handoffs back and forth, or 80 rounds of questions,
    /// were accepted and counted against nothing. (Progress reports are not: a long task
    /// may report as often as it likes.)
    fn moved(&self, l: &Loaded, task: &mut TaskRecord) -> CoreResult<()> {
        task.chain = self.guard(&l.team, &l.me, Some(l.task.chain()), Links::Tasks)?;
        Ok(())
    }

    /// The assignee asks the originator a question; the task waits for the answer.
    pub(in crate::core) async fn request_clarification(
        &self,
        caller: &Caller,
        task_id: &TaskRef,
        input: Clarify,
        requested_by: Option<&AgentId>,
    ) -> CoreResult<TaskUpdated> {
        self.check_claimed(caller, requested_by, "requested_by")?;
        input.validate()?;
        self.act(caller, task_id, |core, l| {
            let clarification_id = ClarificationId::from(ids::ordered_id("clar"));
            let next = l
                .task_state()
                .apply(l.party, &Action::Clarify, Some(&clarification_id))
                .map_err(|r| refused(r, &l.task))?;
            let mut task = l.next(next);
            core.moved(l, &mut task)?;
            task.clarification = Some((clarification_id.clone(), input.question.clone()));
            let request = ClarificationRequest {
                task_id: task.task_id.clone(),
                clarification_id: clarification_id.clone(),
                question: input.question.clone(),
                requested_by: l.me.agent_id.clone(),
            };
            let details = json!({"clarification_id": clarification_id, "question": input.question});
            Ok(Change {
                notices: vec![Notice::new(
                    TaskFrame::ClarificationRequest,
                    &request,
                    core.originator_told(&task),
                )?],
                callback: (CallbackStatus::InProgress, details.clone()),
                ..l.change(task, TaskEventKind::ClarificationRequested, map(details))
            })
        })
        .await
    }

    /// The originator answers the open question; the answer joins the task's context.
    pub(in crate::core) async fn answer_clarification(
        &self,
        caller: &Caller,
        task_id: &TaskRef,
        clarification_id: &ClarificationId,
        input: Answer,
        response_provided_by: Option<&AgentId>,
    ) -> CoreResult<TaskUpdated> {
        self.check_claimed(caller, response_provided_by, "response_provided_by")?;
        input.validate()?;
        self.act(caller, task_id, |core, l| {
            core.plan_answer(l, clarification_id, &input)
        })
        .await
    }

    fn plan_answer(
        &self,
        l: &Loaded,
        clarification_id: &ClarificationId,
        input: &Answer,
    ) -> CoreResult<Change> {
        let action = Action::Answer {
            clarification_id: clarification_id.clone(),
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
        let assignee = l.task.assignee_pk.and_then(|pk| self.registry().agent(pk));
        let mut task = l.next(next);
        self.moved(l, &mut task)?;
        task.context.push(ClarificationRound {
            clarification_id: clarification_id.clone(),
            question,
            requested_by: assignee
                .as_ref()
                .map(|a| a.agent_id.clone())
                .unwrap_or_default(),
            answer: input.answer.clone(),
            response_provided_by: l.me.agent_id.clone(),
            answered_at: task.updated_at,
        });
        let response = ClarificationResponse {
            task_id: task.task_id.clone(),
            clarification_id: clarification_id.clone(),
            answer: input.answer.clone(),
            response_provided_by: l.me.agent_id.clone(),
        };
        let details = json!({"clarification_id": clarification_id, "answer": input.answer});
        Ok(Change {
            notices: vec![Notice::new(
                TaskFrame::ClarificationResponse,
                &response,
                assignee.into_iter().collect(),
            )?],
            callback: (CallbackStatus::InProgress, details.clone()),
            ..l.change(task, TaskEventKind::ClarificationAnswered, map(details))
        })
    }

    /// The assignee reports progress (`in-progress`) or the end (`success`, `failed`).
    pub(in crate::core) async fn report_task(
        &self,
        caller: &Caller,
        task_id: &TaskRef,
        input: TaskResult,
        agent_id: Option<&AgentId>,
    ) -> CoreResult<TaskUpdated> {
        self.check_claimed(caller, agent_id, "agent_id")?;
        self.act(caller, task_id, |core, l| {
            let (action, kind) = match input.status {
                TaskResponseStatus::InProgress => (Action::Progress, TaskEventKind::Progress),
                TaskResponseStatus::Success => {
                    (Action::Finish { success: true }, TaskEventKind::Succeeded)
                }
                TaskResponseStatus::Failed => {
                    (Action::Finish { success: false }, TaskEventKind::Failed)
                }
            };
            let next = l
                .task_state()
                .apply(l.party, &action, None)
                .map_err(|r| refused(r, &l.task))?;
            let mut task = l.next(next);
            if task.status.is_final() {
                core.moved(l, &mut task)?;
            }
            task.result_data = input.result_data.clone();
            let response = TaskResponse {
                task_id: task.task_id.clone(),
                result_data: input.result_data.clone(),
                status: input.status,
                agent_id: l.me.agent_id.clone(),
            };
            let open_delta = if task.status.is_final() {
                vec![(l.me.pk, -1)]
            } else {
                Vec::new()
            };
            let data = map(json!({"result_data": input.result_data}));
            let change = l.change(task, kind, data);
            if input.status == TaskResponseStatus::InProgress {
                history_room(&change.task)?;
            }
            Ok(Change {
                notices: vec![Notice::new(
                    TaskFrame::TaskResponse,
                    &response,
                    core.originator_told(&change.task),
                )?],
                callback: (change.task.status.into(), input.result_data.clone()),
                open_delta,
                ..change
            })
        })
        .await
    }

    /// An assignee's `CallbackNotification` frame: its status is a report on the task.
    pub(in crate::core) async fn report_callback(
        &self,
        caller: &Caller,
        report: CallbackReport,
    ) -> CoreResult<TaskUpdated> {
        let result = TaskResult {
            status: report.status.into(),
            result_data: report.result_data,
        };
        self.report_task(caller, &report.task_id, result, None)
            .await
    }

    /// An assignee's `ErrorMessage` frame: the task failed, for the reason it gives.
    pub(in crate::core) async fn report_error(
        &self,
        caller: &Caller,
        report: ErrorReport,
    ) -> CoreResult<TaskUpdated> {
        let result = TaskResult {
            status: TaskResponseStatus::Failed,
            result_data: json!({
                "error_code": report.error_code,
                "error_message": report.error_message,
            }),
        };
        let claimed = report.originating_agent_id.as_ref();
        self.report_task(caller, &report.task_id, result, claimed)
            .await
    }

    /// The originator calls the task off; the assignee is told.
    pub(in crate::core) async fn cancel_task(
        &self,
        caller: &Caller,
        task_id: &TaskRef,
        input: Cancel,
    ) -> CoreResult<TaskUpdated> {
        input.validate()?;
        self.act(caller, task_id, |core, l| {
            let next = l
                .task_state()
                .apply(l.party, &Action::Cancel, None)
                .map_err(|r| refused(r, &l.task))?;
            let task = l.next(next);
            let details = json!({"canceled": true, "reason": input.reason});
            let assignee = l.task.assignee_pk.and_then(|pk| core.registry().agent(pk));
            let response = TaskResponse {
                task_id: task.task_id.clone(),
                result_data: details.clone(),
                status: TaskResponseStatus::Failed,
                agent_id: l.me.agent_id.clone(),
            };
            Ok(Change {
                notices: vec![Notice::new(
                    TaskFrame::TaskResponse,
                    &response,
                    assignee.iter().cloned().collect(),
                )?],
                callback: (CallbackStatus::Failed, details.clone()),
                open_delta: assignee.map(|a| (a.pk, -1)).into_iter().collect(),
                ..l.change(task, TaskEventKind::Canceled, map(details))
            })
        })
        .await
    }

    /// Reads the task a reference names for an action by the calling agent. Only its
    /// originator and its assignees, past and present, see it; anyone else gets
    /// `TASK_NOT_FOUND` (and, ids being unique per originator, cannot even learn that the
    /// id is in use).
    ///
    /// A reference is the task's id, or `id@originator` (`TaskRef::parts`). Where the id
    /// alone names more than one task the caller takes part in (two originators chose the
    /// same id; or one task it gave and one it was given), nothing is guessed: the answer
    /// is `CONFLICT`, naming those tasks' originators, so that no agent ever acts on or
    /// reads a task other than the one it means (before, the newest was taken: a result
    /// meant for alice's task landed on carol's).
    pub(super) async fn load_task(
        &self,
        team: Arc<TeamRecord>,
        me: Arc<AgentRecord>,
        reference: &TaskRef,
    ) -> CoreResult<Loaded> {
        let task = self.find_one_task(&team, Some(me.pk), reference).await?;
        let party = Party {
            originator: task.originator_pk == me.pk,
            assignee: task.assignee_pk == Some(me.pk),
            claimant: false,
        };
        Ok(Loaded {
            team,
            me,
            task,
            party,
        })
    }

    /// The one task `reference` names among those `viewer` takes part in (every task of
    /// the team without a viewer): `NOT_FOUND`, or `CONFLICT` when the id alone names
    /// several.
    pub(in crate::core) async fn find_one_task(
        &self,
        team: &TeamRecord,
        viewer: Option<AgentPk>,
        reference: &TaskRef,
    ) -> CoreResult<TaskRecord> {
        let (task_id, originator) = reference.parts("task_id")?;
        // The team key naming the originator looks among that agent's tasks: among every
        // namesake of the team, the one it names could be past the lookup's bound.
        let viewer = viewer.or_else(|| {
            originator
                .as_ref()
                .and_then(|o| self.registry().member(team.pk, o))
                .map(|a| a.pk)
        });
        let mut found = self.store().find_task(team.pk, &task_id, viewer).await?;
        if let Some(originator) = originator {
            let registry = self.registry();
            found.retain(|t| {
                registry
                    .agent(t.originator_pk)
                    .is_some_and(|a| a.agent_id == originator)
            });
        }
        match found.len() {
            0 => Err(task_not_found(&task_id)),
            1 => Ok(found.remove(0)),
            _ => Err(self.ambiguous_task(&task_id, &found)),
        }
    }

    /// Decides an action with `plan` on the current task and writes it; decided again
    /// if the task changed in between. After the last attempt the answer is a plain
    /// `CONFLICT`.
    pub(super) async fn act<F>(
        &self,
        caller: &Caller,
        task_id: &TaskRef,
        plan: F,
    ) -> CoreResult<TaskUpdated>
    where
        F: Fn(&Core, &Loaded) -> CoreResult<Change>,
    {
        let (team, me) = self.identity().acting_agent(caller)?;
        self.check_can_send(&team, &me)?;
        for _ in 0..ATTEMPTS {
            let loaded = self.load_task(team.clone(), me.clone(), task_id).await?;
            let change = plan(self, &loaded)?;
            match self.commit(change).await {
                Ok(task) => {
                    return Ok(TaskUpdated {
                        success: true,
                        task: self.task_view(&task),
                    });
                }
                Err(NotWritten::Stale) => continue,
                Err(NotWritten::Failed(err)) => return Err(err),
            }
        }
        Err(CoreError::new(
            ErrorCode::Conflict,
            format!("task '{task_id}' kept changing while this action was applied"),
        )
        .with("task_id", task_id)
        .suggest("Read the task and try the action again."))
    }
}

/// Most entries a task's history holds before progress reports are refused.
pub const MAX_HISTORY_ENTRIES: i64 = 1_000;

/// Most bytes of data a task's history holds before progress reports are refused (the
/// page byte bound: a task's read answers within it, whatever its assignee reported).
pub const MAX_HISTORY_BYTES: i64 = 4 * 1024 * 1024;

/// Whether the task's history, a progress report added (counted by `Loaded::change`),
/// is still within its bound. A
/// task's history is read whole (`GET /v1/tasks/{id}`, MCP `get_task`, the console every
/// second): 300 progress reports of 0.9 MB made one read 272 MB and the server 1.2 GB.
/// Past the bound a progress report is refused; a final result is always taken (a task
/// can always finish), and handoffs and questions are bounded by the loop guard.
fn history_room(task: &TaskRecord) -> CoreResult<()> {
    if task.version <= MAX_HISTORY_ENTRIES && task.history_bytes <= MAX_HISTORY_BYTES {
        return Ok(());
    }
    Err(CoreError::new(
        ErrorCode::PayloadTooLarge,
        format!(
            "task '{}' has a full history ({} entries, {} bytes of data; at most \
             {MAX_HISTORY_ENTRIES} entries and {MAX_HISTORY_BYTES} bytes): no more progress \
             reports fit",
            task.task_id, task.version, task.history_bytes
        ),
    )
    .with("task_id", task.task_id.as_str())
    .with("max_entries", MAX_HISTORY_ENTRIES)
    .with("max_bytes", MAX_HISTORY_BYTES)
    .suggest(
        "Finish the task (success or failed is always taken), or report progress less often \
         and with less result_data.",
    ))
}

impl Core {
    /// The refusal of a task id that names several tasks the caller takes part in: their
    /// originators (parties the caller already knows), and how to name one.
    fn ambiguous_task(&self, task_id: &str, found: &[crate::model::TaskRecord]) -> CoreError {
        let originators: Vec<AgentId> = found
            .iter()
            .filter_map(|t| self.registry().agent(t.originator_pk))
            .map(|a| a.agent_id.clone())
            .collect();
        let example = originators.first().map_or("originator", AgentId::as_str);
        CoreError::new(
            ErrorCode::Conflict,
            format!(
                "task id '{task_id}' names {} tasks you take part in; name one by its \
                 originator",
                found.len()
            ),
        )
        .with("task_id", task_id)
        .with("originators", originators.clone())
        .suggest(format!(
            "Use the reference {task_id}@{example} (the task id, '@', its \
             originating_agent_id) wherever the task id goes."
        ))
    }
}

fn dedup(agents: Vec<Arc<AgentRecord>>) -> Vec<Arc<AgentRecord>> {
    let mut seen = HashSet::new();
    agents.into_iter().filter(|a| seen.insert(a.pk)).collect()
}
