//! Writing a decided change: the task, its event, its callback and the protocol's
//! notifications, in one job of the group commit; and how a task is shown.

use std::sync::Arc;
use switchboard_types::ids::AgentId;

use serde_json::{Map, Value, json};
use switchboard_types::messages::{Content, MAX_TEXT, MessageKind, MessageType};
use switchboard_types::task_state::TaskState;
use switchboard_types::tasks::{
    CallbackNotification, ClarificationRequest, Task, TaskEventKind, TaskFrame, TaskRequest,
};
use switchboard_types::time::Timestamp;

use super::{Change, Loaded, Notice};
use crate::core::budgets::Spending;
use crate::core::delivery::{Pushes, reserve_pushes};
use crate::core::egress::urls;
use crate::core::spans::{self, PendingSpan};
use crate::core::{Core, CoreError, CoreResult, ids};
use crate::model::trace::{join, traceparent};
use crate::model::{
    AgentRecord, NewMessage, NewPost, PostResult, TaskEventRecord, TaskRecord, TaskWrite,
};
use crate::store::StoreError;

/// Why a change was not written.
pub(super) enum NotWritten {
    /// The task changed since the change was decided; decide again.
    Stale,
    Failed(CoreError),
}

impl From<CoreError> for NotWritten {
    fn from(err: CoreError) -> Self {
        NotWritten::Failed(err)
    }
}

impl From<StoreError> for NotWritten {
    fn from(err: StoreError) -> Self {
        match err {
            StoreError::Stale => NotWritten::Stale,
            other => NotWritten::Failed(other.into()),
        }
    }
}

/// The messages of a change's notifications, their recipients' live records, and their
/// spans.
type NoticePosts = (Vec<NewPost>, Vec<Vec<Arc<AgentRecord>>>, Vec<PendingSpan>);

impl Core {
    /// Writes a change in one transaction: the task, its event, the callback and the
    /// notifications; pushes the notifications once committed.
    /// What a change spends. A new task spends from the budgets of its originator. Work
    /// moving between agents on it (a handoff, a question, its answer) tells someone, as
    /// a message does, and spends from the actor's message budgets and the task
    /// thread's; a progress report or a result spends nothing.
    fn change_spending(
        &self,
        task: &TaskRecord,
        new: bool,
        kind: TaskEventKind,
        actor: &AgentRecord,
    ) -> Spending {
        match kind {
            _ if new => self.spending(actor, true, None),
            TaskEventKind::HandedOff
            | TaskEventKind::ClarificationRequested
            | TaskEventKind::ClarificationAnswered => {
                self.spending(actor, false, Some(&format!("task:{}", task.task_id)))
            }
            _ => Spending::default(),
        }
    }

    pub(super) async fn commit(&self, change: Change) -> Result<TaskRecord, NotWritten> {
        let Change {
            task,
            expected_version,
            event,
            actor,
            mut notices,
            callback,
            open_delta,
        } = change;
        let callback_post = self.callback_of(&task, &event, callback, &mut notices)?;
        let queued = callback_post.is_some();
        let (posts, live, mut spans) = self.notice_posts(&task, &actor, notices)?;
        let task_span = match expected_version {
            None => self.task_span(&task),
            Some(_) => None,
        };
        let spending = self.change_spending(&task, expected_version.is_none(), event.kind, &actor);
        let write = TaskWrite {
            task,
            expected_version,
            event,
            callback: callback_post,
            charges: spending.charges.clone(),
        };
        let hub = self.hub().clone();
        let actor_id = actor.agent_id.clone();
        let now = write.task.updated_at;
        let task = write.task.clone();
        let decide = move |messages: &[&NewMessage]| -> Vec<Pushes> {
            messages
                .iter()
                .zip(&live)
                .zip(spans.iter_mut())
                .map(|((message, live), span)| {
                    reserve_pushes(&hub, live, message, &actor_id, now).spanned(span.take())
                })
                .collect()
        };
        let core = self.clone();
        // A new task has no key yet, and nobody can be waiting for it.
        let changed = expected_version.map(|_| task.pk);
        let after = move |pushes: Vec<Pushes>, written: Vec<Result<PostResult, StoreError>>| {
            for (pushes, written) in pushes.into_iter().zip(written) {
                if let Err(err) = written.map(|written| pushes.send(&written)) {
                    tracing::warn!(error = %err, "a task notification was not written");
                }
            }
            for (agent, delta) in open_delta {
                core.inner.tasks.adjust_open(agent, delta);
            }
            if queued {
                core.inner.tasks.callbacks_queued.notify_one();
            }
            if let Some(task_pk) = changed {
                core.hub().task_changed(task_pk);
            }
            spans::finish(task_span, &[]);
            Ok::<_, NotWritten>(())
        };
        self.store()
            .write_task(write, posts, decide, after)
            .await
            .map_err(|err| match err {
                NotWritten::Failed(CoreError::Store(StoreError::Conflict))
                    if expected_version.is_none() =>
                {
                    NotWritten::Failed(task_exists(&task.task_id))
                }
                NotWritten::Failed(err) => NotWritten::Failed(self.over_budget(err, &spending)),
                other => other,
            })?;
        Ok(task)
    }

    /// The notifications' messages, each with its recipients' live records and its span
    /// (a child of the task's; spans exported only).
    fn notice_posts(
        &self,
        task: &TaskRecord,
        actor: &AgentRecord,
        mut notices: Vec<Notice>,
    ) -> CoreResult<NoticePosts> {
        // A notice for nobody (an originator that follows the task elsewhere, or is gone)
        // would be a message in no inbox.
        notices.retain(|n| !n.recipients.is_empty());
        let (posts, live): (Vec<NewPost>, Vec<_>) = notices
            .into_iter()
            .map(|n| self.notice_post(task, actor, n))
            .collect::<CoreResult<Vec<_>>>()?
            .into_iter()
            .unzip();
        let spans = posts
            .iter()
            .map(|p| self.message_span(actor, &p.message, &p.recipient_ids))
            .collect();
        Ok((posts, live, spans))
    }

    /// The change's `CallbackNotification`: `(url, body)` to POST, or (for a callback
    /// agent) one more notice.
    fn callback_of(
        &self,
        task: &TaskRecord,
        event: &TaskEventRecord,
        (status, result_data): (switchboard_types::tasks::CallbackStatus, Value),
        notices: &mut Vec<Notice>,
    ) -> CoreResult<Option<(String, String)>> {
        let Some(target) = &task.callback_url else {
            return Ok(None);
        };
        let notification = CallbackNotification {
            task_id: task.task_id.clone(),
            result_data,
            status,
            sent_to: target.clone(),
            task_status: task.status,
            event: event.kind,
            event_seq: event.seq,
            assignee_agent_id: task.assignee_pk.map(|pk| self.agent_name(pk)),
            timestamp: task.updated_at,
        };
        if urls::looks_like_url(target) {
            let mut body = serde_json::to_value(&notification)
                .map_err(|e| CoreError::internal(format!("rendering a callback: {e}")))?;
            if let Value::Object(fields) = &mut body {
                fields.insert("type".into(), json!(TaskFrame::CallbackNotification.name()));
            }
            return Ok(Some((target.clone(), body.to_string())));
        }
        // A callback target is a URL or a member's id.
        if let Some(agent) = self
            .registry()
            .member(task.team_pk, &AgentId::from(target.as_str()))
        {
            notices.push(Notice::new(
                TaskFrame::CallbackNotification,
                &notification,
                vec![agent],
            )?);
        }
        Ok(None)
    }

    /// A notice as a post to its recipients whose communication is on (the second
    /// part: who may get it pushed).
    fn notice_post(
        &self,
        task: &TaskRecord,
        actor: &AgentRecord,
        notice: Notice,
    ) -> CoreResult<(NewPost, Vec<Arc<AgentRecord>>)> {
        let message = self.notice_message(task, actor, notice.frame, notice.body);
        let recipient_ids = notice
            .recipients
            .iter()
            .map(|a| a.agent_id.clone())
            .collect();
        let live: Vec<Arc<AgentRecord>> = notice
            .recipients
            .into_iter()
            .filter(|a| a.communication_enabled)
            .collect();
        let post = NewPost {
            message,
            recipient_ids,
            deliver_to: live.iter().map(|a| a.pk).collect(),
            response: None,
            charges: Vec::new(),
        };
        Ok((post, live))
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
        let text = truncate(
            &format!(
                "{} {}: {}",
                frame.name(),
                task.task_id,
                summary(frame, task, &data)
            ),
            MAX_TEXT - 1,
        );
        let message_type = match frame {
            TaskFrame::TaskRequest | TaskFrame::ClarificationRequest => MessageType::Request,
            TaskFrame::TaskOffer => MessageType::Coordination,
            TaskFrame::TaskResponse | TaskFrame::ClarificationResponse => MessageType::Response,
            TaskFrame::HandoffNotification => MessageType::Coordination,
            TaskFrame::CallbackNotification | TaskFrame::ErrorMessage => MessageType::Information,
        };
        let content = Content {
            text,
            data,
            attachments: Vec::new(),
        };
        let thread = format!("task:{}", task.task_id);
        NewMessage::new(
            ids::ordered_id("msg").into(),
            sender,
            MessageKind::Task,
            message_type,
            content,
        )
        .priority(task.priority)
        .context_reference(Some(thread.clone()))
        .thread(Some(thread), None)
        // Whoever's action it reports, a notification is a child of its task.
        .traced(join(None, Some((&task.task_id, task.trace.as_ref()))))
    }

    /// The TaskRequest the assignee receives: the request as submitted, plus the context
    /// gathered so far (after a handoff).
    pub(super) fn request_notice(
        &self,
        task: &TaskRecord,
        assignee: &Arc<AgentRecord>,
    ) -> CoreResult<Notice> {
        let request = TaskRequest {
            task_id: Some(task.task_id.clone()),
            description: task.description.clone(),
            data: task.data.clone(),
            originating_agent_id: self.agent_name(task.originator_pk),
            callback_url: task.callback_url.clone(),
            priority: Some(task.priority),
            required_capabilities: task.required_capabilities.clone(),
            target_agent_id: task.target_agent_id.clone(),
            parent_task_id: None,
            assignee_role: task.assignee_role.clone(),
        };
        let mut notice = Notice::new(TaskFrame::TaskRequest, &request, vec![assignee.clone()])?;
        if let Value::Object(fields) = &mut notice.body {
            fields.insert("assignee_agent_id".into(), json!(assignee.agent_id));
            let context = serde_json::to_value(&task.context)
                .map_err(|e| CoreError::internal(format!("rendering a task's context: {e}")))?;
            fields.insert("context".into(), context);
        }
        Ok(notice)
    }

    /// The history entry of a change `actor` made, carrying `data`.
    pub(super) fn event(
        &self,
        task: &TaskRecord,
        kind: TaskEventKind,
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
    pub(super) fn task_view(&self, t: &TaskRecord) -> Task {
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
            assignee_role: t.assignee_role.clone(),
            attempts: t.attempts,
            lease_expires_at: t.lease_expires_at,
            created_at: t.created_at,
            updated_at: t.updated_at,
            traceparent: Some(traceparent(&t.task_id, t.trace.as_ref())),
            tracestate: t.trace.as_ref().and_then(|trace| trace.state.clone()),
        }
    }
}

impl Loaded {
    /// The task in state `next`, one version on.
    pub(super) fn next(&self, next: TaskState) -> TaskRecord {
        let mut task = self.task.clone();
        task.status = next.status;
        if next.clarification_id.is_none() {
            task.clarification = None;
        }
        task.version += 1;
        task.updated_at = Timestamp::now().max(self.task.updated_at);
        task.set_lease(task.updated_at);
        task
    }

    /// A change of `task` by the caller, recorded as `kind` with `data`, with nothing
    /// else yet.
    pub(super) fn change(
        &self,
        task: TaskRecord,
        kind: TaskEventKind,
        data: Map<String, Value>,
    ) -> Change {
        let mut task = task;
        task.history_bytes = task.history_bytes.saturating_add(weight(&data));
        Change {
            event: TaskEventRecord {
                seq: task.version,
                kind,
                actor_pk: Some(self.me.pk),
                status: task.status,
                data,
                created_at: task.updated_at,
            },
            expected_version: Some(self.task.version),
            actor: self.me.clone(),
            notices: Vec::new(),
            callback: (task.status.into(), Value::Null),
            open_delta: Vec::new(),
            task,
        }
    }
}

/// What a history entry's data weighs toward the task's history bound: its JSON's bytes.
pub(super) fn weight(data: &Map<String, Value>) -> i64 {
    serde_json::to_vec(data).map_or(0, |bytes| i64::try_from(bytes.len()).unwrap_or(i64::MAX))
}

/// The line a notice's inbox entry shows as its text.
fn summary(frame: TaskFrame, task: &TaskRecord, data: &Map<String, Value>) -> String {
    let field = |name: &str| data.get(name).and_then(Value::as_str);
    let named = |name: &str| field(name).unwrap_or("?");
    let text = |name: &str| field(name).unwrap_or_default().to_owned();
    match frame {
        TaskFrame::TaskRequest => task.description.clone(),
        TaskFrame::TaskOffer => format!("offered: {}", task.description),
        TaskFrame::TaskResponse => format!("status {}", named("status")),
        TaskFrame::HandoffNotification => format!("handed off to {}", named("new_agent_id")),
        TaskFrame::ClarificationRequest => text("question"),
        TaskFrame::ClarificationResponse => text("answer"),
        TaskFrame::CallbackNotification => format!("task status {}", named("task_status")),
        TaskFrame::ErrorMessage => text("error_message"),
    }
}

fn truncate(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}

fn task_exists(task_id: &str) -> CoreError {
    CoreError::new(
        switchboard_types::ErrorCode::Conflict,
        format!("task '{task_id}' already exists"),
    )
    .with("task_id", task_id)
    .suggest("Choose another task_id, or leave it out to get a generated one.")
}
