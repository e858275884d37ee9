//! Switchboard's task protocol in A2A's words, both ways: an A2A message becomes a
//! `TaskRequest` (or the answer to the open question), a task becomes an A2A `Task`, each
//! entry of its history a stream event. Only spec fields go on the wire; what A2A has no
//! field for goes in `metadata.switchboard`.

use std::collections::HashMap;

use a2a::{
    Artifact, Message, Part, PartContent, Role, StreamResponse, Task as A2aTask, TaskState,
    TaskStatus as A2aStatus, TaskStatusUpdateEvent,
};
use base64::Engine;
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};
use switchboard_types::approvals::{Approval, ApprovalStatus};
use switchboard_types::task_state::TaskStatus;
use switchboard_types::tasks::{Task, TaskDetail, TaskEvent, TaskEventKind, TaskRequest};
use switchboard_types::time::Timestamp;

use super::member::Member;

/// The key of a task's data that holds its A2A `contextId` (set on every task made
/// through A2A; the worker sees it as the conversation the task belongs to).
pub const CONTEXT_KEY: &str = "a2a_context_id";

/// The longest description a `TaskRequest` takes; longer text is kept whole in data.
const MAX_DESCRIPTION: usize = 2000;

/// The task id an A2A send gets: derived from its `Idempotency-Key` or its first
/// `messageId`, so that the same send retried finds the task it made instead of making
/// a second one (task ids are unique per originator, so the store itself says so).
pub fn task_id_for(key: &str) -> String {
    if switchboard_types::ids::fits_id_alphabet(key, 60) {
        format!("a2a-{key}")
    } else {
        let digest = Sha256::digest(key.as_bytes());
        format!("a2a-{}", hex::encode(&digest[..16]))
    }
}

/// The text of a message's text parts, one paragraph each.
pub fn text_of(message: &Message) -> String {
    message
        .parts
        .iter()
        .filter_map(Part::as_text)
        .collect::<Vec<_>>()
        .join("\n\n")
}

/// A new task for `target` from an A2A message: text parts are the description, data
/// parts the data (one object part is the data itself; more are listed under `data`),
/// file parts are listed under `attachments`.
pub fn task_request(
    message: &Message,
    task_id: String,
    context_id: &str,
    originator: &str,
    to: &Member,
) -> TaskRequest {
    let text = text_of(message);
    let mut data = Map::new();
    let mut values = Vec::new();
    let mut attachments = Vec::new();
    for part in &message.parts {
        match &part.content {
            PartContent::Text(_) => {}
            PartContent::Data(value) => values.push(value.clone()),
            PartContent::Url(url) => attachments.push(file(part, "url", json!(url))),
            PartContent::Raw(bytes) => attachments.push(file(
                part,
                "raw",
                json!(base64::engine::general_purpose::STANDARD.encode(bytes)),
            )),
        }
    }
    match values.as_slice() {
        [Value::Object(fields)] => data = fields.clone(),
        [] => {}
        _ => {
            data.insert("data".into(), Value::Array(values));
        }
    }
    if !attachments.is_empty() {
        data.insert("attachments".into(), Value::Array(attachments));
    }
    let description = if text.trim().is_empty() {
        format!("A2A message {} (see data)", message.message_id)
    } else if text.chars().count() > MAX_DESCRIPTION {
        data.insert("text".into(), json!(text));
        text.chars().take(MAX_DESCRIPTION).collect()
    } else {
        text
    };
    data.insert(CONTEXT_KEY.into(), json!(context_id));
    TaskRequest {
        task_id: Some(task_id.into()),
        description,
        data,
        originating_agent_id: originator.into(),
        callback_url: None,
        priority: None,
        required_capabilities: Vec::new(),
        target_agent_id: match to {
            Member::Agent(id) => Some(id.clone()),
            Member::Role(_) => None,
        },
        // The task this one continues: the loop guard counts the chain through it.
        parent_task_id: message
            .reference_task_ids
            .as_ref()
            .and_then(|ids| ids.first())
            .map(|id| id.as_str().into()),
        assignee_role: match to {
            Member::Agent(_) => None,
            Member::Role(role) => Some(role.clone()),
        },
    }
}

fn file(part: &Part, kind: &str, content: Value) -> Value {
    json!({
        kind: content,
        "filename": part.filename,
        "mediaType": part.media_type,
    })
}

/// The A2A `contextId` of a task.
pub fn context_of(task: &Task) -> String {
    task.data
        .get(CONTEXT_KEY)
        .and_then(Value::as_str)
        .map_or_else(|| task.task_id.to_string(), str::to_owned)
}

/// A task status as an A2A state. A task nobody has reported on yet is `SUBMITTED`.
pub fn state_of(status: TaskStatus, reported: bool) -> TaskState {
    match status {
        TaskStatus::InProgress if reported => TaskState::Working,
        TaskStatus::InProgress | TaskStatus::Open => TaskState::Submitted,
        TaskStatus::InputRequired => TaskState::InputRequired,
        TaskStatus::Success => TaskState::Completed,
        TaskStatus::Failed => TaskState::Failed,
        TaskStatus::Canceled => TaskState::Canceled,
    }
}

/// The task statuses an A2A state filter means (none: a state no task is in). A task
/// offered to a role and not claimed, `open`, is `SUBMITTED` too.
pub fn statuses_of(state: &TaskState) -> Vec<TaskStatus> {
    match state {
        TaskState::Submitted | TaskState::Working => vec![TaskStatus::InProgress, TaskStatus::Open],
        TaskState::InputRequired => vec![TaskStatus::InputRequired],
        TaskState::Completed => vec![TaskStatus::Success],
        TaskState::Failed => vec![TaskStatus::Failed],
        TaskState::Canceled => vec![TaskStatus::Canceled],
        _ => Vec::new(),
    }
}

fn time(at: Timestamp) -> Option<chrono::DateTime<chrono::Utc>> {
    chrono::DateTime::from_timestamp_micros(at.micros())
}

fn message(id: String, role: Role, task: &Task, parts: Vec<Part>) -> Message {
    Message {
        message_id: id,
        context_id: Some(context_of(task)),
        task_id: Some(task.task_id.to_string()),
        role,
        parts,
        metadata: None,
        extensions: None,
        reference_task_ids: None,
    }
}

/// A value as parts: text as a text part, anything else (not null) as a data part.
fn parts_of(value: &Value) -> Vec<Part> {
    match value {
        Value::Null => Vec::new(),
        Value::String(text) => vec![Part::text(text.clone())],
        other => vec![Part::data(other.clone())],
    }
}

/// The request as the client sent it: the description and the data it gave.
fn request_message(task: &Task) -> Message {
    let mut parts = vec![Part::text(task.description.clone())];
    let mut data = task.data.clone();
    data.remove(CONTEXT_KEY);
    if !data.is_empty() {
        parts.push(Part::data(Value::Object(data)));
    }
    message(format!("{}-request", task.task_id), Role::User, task, parts)
}

/// The conversation of a task: the request, then each question and its answer, then the
/// open question; the newest `limit` of them.
fn history(task: &Task, limit: Option<i32>) -> Vec<Message> {
    let mut all = vec![request_message(task)];
    for round in &task.context {
        let id = &round.clarification_id;
        all.push(message(
            format!("{}-{id}-question", task.task_id),
            Role::Agent,
            task,
            vec![Part::text(round.question.clone())],
        ));
        all.push(message(
            format!("{}-{id}-answer", task.task_id),
            Role::User,
            task,
            vec![Part::text(round.answer.clone())],
        ));
    }
    all.extend(question(task));
    let keep = limit.map_or(all.len(), |n| usize::try_from(n).unwrap_or(0));
    let skip = all.len().saturating_sub(keep);
    all.split_off(skip)
}

/// The open question, as the agent's message.
fn question(task: &Task) -> Option<Message> {
    task.open_clarification.as_ref().map(|open| {
        message(
            format!("{}-{}-question", task.task_id, open.clarification_id),
            Role::Agent,
            task,
            vec![Part::text(open.question.clone())],
        )
    })
}

/// The task's result as its one artifact.
fn result_artifact(task: &Task) -> Option<Artifact> {
    artifact_of(task, &task.result_data)
}

/// A result as the task's one artifact (`{task_id}-result`).
fn artifact_of(task: &Task, result: &Value) -> Option<Artifact> {
    let parts = parts_of(result);
    (!parts.is_empty()).then(|| Artifact {
        artifact_id: format!("{}-result", task.task_id),
        name: Some("result".into()),
        description: None,
        parts,
        metadata: None,
        extensions: None,
    })
}

/// Adds the task's span to A2A `metadata` (`traceparent`, `tracestate`), as the HTTP
/// headers would carry it: a client that works on the task continues its trace.
fn with_trace(metadata: &mut HashMap<String, Value>, task: &Task) {
    for (key, value) in task.trace_fields() {
        metadata.insert(key.to_owned(), json!(value));
    }
}

/// A task as A2A shows it, with the newest `history_length` messages of its history.
pub fn task(task: &Task, history_length: Option<i32>) -> A2aTask {
    // Anything since the submission changes the task's `updated_at`.
    let state = state_of(task.status, task.updated_at > task.created_at);
    let status_message = match state {
        TaskState::InputRequired => question(task),
        TaskState::Failed | TaskState::Completed => Some(message(
            format!("{}-final", task.task_id),
            Role::Agent,
            task,
            parts_of(&task.result_data),
        ))
        .filter(|m| !m.parts.is_empty()),
        _ => None,
    };
    let mut metadata = HashMap::from([(
        "switchboard".to_owned(),
        json!({
            "status": task.status.as_str(),
            "assigneeAgentId": task.assignee_agent_id,
            "originatingAgentId": task.originating_agent_id,
            "priority": task.priority,
        }),
    )]);
    with_trace(&mut metadata, task);
    A2aTask {
        id: task.task_id.to_string(),
        context_id: context_of(task),
        status: A2aStatus {
            state,
            message: status_message,
            timestamp: time(task.updated_at),
        },
        artifacts: result_artifact(task).map(|a| vec![a]),
        history: Some(history(task, history_length)),
        metadata: Some(metadata),
    }
}

/// A task read with its detail: as [`task`], and `input-required` while an approval of
/// it is pending (`docs/approvals.md`): the task waits on a person, as on a question,
/// and the status message is the approval's summary.
pub fn task_detail(detail: &TaskDetail, history_length: Option<i32>) -> A2aTask {
    let mut shown = task(&detail.task, history_length);
    let waiting = detail
        .approvals
        .iter()
        .find(|a| a.status == ApprovalStatus::Pending);
    if let Some(approval) = waiting
        && matches!(
            shown.status.state,
            TaskState::Working | TaskState::Submitted
        )
    {
        shown.status.state = TaskState::InputRequired;
        shown.status.message = Some(approval_message(&detail.task, approval));
    }
    shown
}

/// What a person is asked, as the status message of a task waiting on an approval.
fn approval_message(task: &Task, approval: &Approval) -> Message {
    message(
        format!("{}-{}", task.task_id, approval.approval_id),
        Role::Agent,
        task,
        vec![Part::text(approval.summary.clone())],
    )
}

/// One entry of a task's history as the stream events a client sees: the result as an
/// artifact when the task finished with one, then the status change. Each carries the
/// entry's sequence number in `metadata.switchboard.seq` (and as the SSE event id).
pub fn events(task: &Task, event: &TaskEvent) -> Vec<StreamResponse> {
    let context_id = context_of(task);
    let mut out = Vec::new();
    let seq_meta = || {
        let mut metadata = HashMap::from([(
            "switchboard".to_owned(),
            json!({ "seq": event.seq, "kind": event.kind }),
        )]);
        with_trace(&mut metadata, task);
        Some(metadata)
    };
    let finished = matches!(event.kind, TaskEventKind::Succeeded | TaskEventKind::Failed);
    // The result the entry itself recorded: the task row may have been read before the
    // entry committed (a task and its history are two reads).
    let result = event.data.get("result_data").unwrap_or(&Value::Null);
    if finished && let Some(artifact) = artifact_of(task, result) {
        out.push(StreamResponse::ArtifactUpdate(
            a2a::TaskArtifactUpdateEvent {
                task_id: task.task_id.to_string(),
                context_id: context_id.clone(),
                artifact,
                append: Some(false),
                last_chunk: Some(true),
                metadata: seq_meta(),
            },
        ));
    }
    let mut state = state_of(event.status, event.kind != TaskEventKind::Submitted);
    // A pending approval is input a person must give: the task waits as on a question.
    if event.kind == TaskEventKind::ApprovalRequested && state == TaskState::Working {
        state = TaskState::InputRequired;
    }
    let message = event_message(task, event, &state);
    out.push(StreamResponse::StatusUpdate(TaskStatusUpdateEvent {
        task_id: task.task_id.to_string(),
        context_id,
        status: A2aStatus {
            state,
            message,
            timestamp: time(event.timestamp),
        },
        metadata: seq_meta(),
    }));
    out
}

/// What a status event says in words: the question when input is required, the
/// progress report's data while working.
fn event_message(task: &Task, event: &TaskEvent, state: &TaskState) -> Option<Message> {
    let id = format!("{}-event-{}", task.task_id, event.seq);
    match state {
        TaskState::InputRequired => {
            let question = event
                .data
                .get("question")
                .or_else(|| event.data.get("summary"))
                .cloned()
                .unwrap_or(Value::Null);
            Some(message(id, Role::Agent, task, parts_of(&question)))
        }
        // A progress report's result data; a handoff's or an answer's details.
        TaskState::Working if !event.data.is_empty() => {
            let said = event
                .data
                .get("result_data")
                .cloned()
                .unwrap_or_else(|| Value::Object(event.data.clone()));
            Some(message(id, Role::Agent, task, parts_of(&said)))
        }
        _ => None,
    }
    .filter(|m| !m.parts.is_empty())
}
