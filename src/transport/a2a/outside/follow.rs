//! One task given to an outside agent, followed to its end: sent to the agent
//! (`SendMessage`), its remote task polled (`GetTask`), and what happens there done here
//! as the outside agent — progress reports, a question to the originator (whose answer
//! is sent on), the result or the failure. A cancel here cancels there. An agent that
//! streams wakes the follower at each change (`watch.rs`); polling is the fallback.
//!
//! What the follower knows is in the task's own history: the remote task's id is the
//! first progress report (`result_data.a2a_remote_task_id`), so after a restart the
//! follower picks the task up where it was, without a table of its own.

use crate::core::ask;
use std::time::Duration;
use switchboard_types::TaskOp;
use switchboard_types::ids::TaskRef;

use a2a::{Message as A2aMessage, PartContent, Task as A2aTask, TaskState};
use serde_json::{Map, Value, json};
use switchboard_types::Operation;
use switchboard_types::task_state::TaskStatus;
use switchboard_types::tasks::{
    Clarify, Task, TaskDetail, TaskEventKind, TaskResponseStatus, TaskResult,
};

use super::Delegate;
use super::client::{CallError, Remote};
use super::watch::Watch;
use crate::core::{Caller, CoreError};

/// Attempts at the first send before the task fails.
const SEND_ATTEMPTS: u32 = 3;
/// Polls that may fail in a row before the task fails (about half a minute).
const POLL_FAILURES: u32 = 12;
/// Poll interval: the first after a change, and the longest while nothing changes.
const POLL_MIN: Duration = Duration::from_millis(200);
const POLL_MAX: Duration = Duration::from_secs(3);

/// Why following stopped early.
enum Stop {
    /// The task is no longer ours (handed off, finished, the agent removed).
    Done,
    /// The outside agent failed the task or cannot be reached: the task fails with this.
    Fail(String),
    /// Something here refused; logged, the task left as it is.
    Core(CoreError),
}

impl From<CoreError> for Stop {
    fn from(err: CoreError) -> Self {
        Stop::Core(err)
    }
}

/// Follows `task_id` until it ends here or there.
pub async fn follow(delegate: &Delegate, task_id: &str) {
    let outcome = run(delegate, task_id).await;
    let caller = match delegate.caller() {
        Ok(caller) => caller,
        Err(_) => return,
    };
    let label = match &outcome {
        Ok(()) => "finished",
        Err(Stop::Done) => "left",
        Err(Stop::Fail(_)) => "failed",
        Err(Stop::Core(_)) => "stopped",
    };
    metrics::counter!("switchboard_a2a_outside_tasks_total", "outcome" => label).increment(1);
    match outcome {
        Ok(()) | Err(Stop::Done) => {}
        Err(Stop::Fail(reason)) => {
            tracing::warn!(task_id, %reason, "a delegated task failed");
            let failed = report(
                &caller,
                delegate,
                task_id,
                TaskResponseStatus::Failed,
                json!({"reason": reason}),
            )
            .await;
            if let Err(err) = failed {
                tracing::warn!(task_id, error = %err, "could not record a delegated task's failure");
            }
        }
        Err(Stop::Core(err)) => {
            tracing::warn!(task_id, error = %err, "stopped following a delegated task");
        }
    }
}

async fn run(d: &Delegate, task_id: &str) -> Result<(), Stop> {
    let caller = d.caller().map_err(|_| Stop::Done)?;
    let detail = local(&caller, d, task_id).await?;
    if !ours(d, &detail) {
        return Err(Stop::Done);
    }
    let (remote_id, context_id) = match remote_of(&detail) {
        Some(found) => found,
        None => start(&caller, d, &detail).await?,
    };
    let watch = Watch::start(&d.http, &d.binding(), &remote_id);
    let mut forwarded_answer = answered_seq(&detail);
    let mut last_report: Option<Value> = None;
    let mut asked_at: Option<String> = None;
    let mut failures = 0;
    let mut wait = POLL_MIN;
    loop {
        let detail = still_ours(&caller, d, task_id, &remote_id).await?;
        if forward_answer(d, &detail, (&remote_id, &context_id), &mut forwarded_answer).await? {
            wait = POLL_MIN;
        }
        let binding = d.binding();
        let task = match remote(d, &binding).get_task(&remote_id).await {
            Ok(task) => {
                failures = 0;
                task
            }
            Err(err) => {
                failures += 1;
                if failures >= POLL_FAILURES {
                    return Err(Stop::Fail(format!(
                        "the A2A agent at {} stopped answering about task '{remote_id}': {err}",
                        binding.interface_url
                    )));
                }
                tokio::time::sleep(wait).await;
                wait = (wait * 2).min(POLL_MAX);
                continue;
            }
        };
        let changed = apply(
            &caller,
            d,
            &detail,
            &task,
            (&mut last_report, &mut asked_at),
        )
        .await?;
        if changed == Applied::Finished {
            return Ok(());
        }
        if changed == Applied::Changed {
            wait = POLL_MIN;
        } else {
            wait = (wait * 2).min(POLL_MAX);
        }
        if detail.task.status == TaskStatus::InputRequired {
            // Waiting for the originator: sleep until the task changes here.
            let newest = detail.events.last().map_or(0, |e| e.seq);
            d.core
                .tasks()
                .wait_for_task(
                    &caller,
                    &TaskRef::from(task_id),
                    newest,
                    Duration::from_secs(15),
                )
                .await?;
        } else {
            // The next poll, or sooner when the agent's stream says something changed.
            tokio::select! {
                () = tokio::time::sleep(wait) => {}
                () = watch.changed() => wait = POLL_MIN,
            }
        }
    }
}

/// Sends an answer given here since the last look on to the remote task (`remote`: its
/// id and context); whether there was one.
async fn forward_answer(
    d: &Delegate,
    detail: &TaskDetail,
    (remote_id, context_id): (&str, &str),
    forwarded: &mut Option<i64>,
) -> Result<bool, Stop> {
    let Some((seq, answer)) = newest_answer(detail).filter(|(seq, _)| Some(*seq) > *forwarded)
    else {
        return Ok(false);
    };
    send_text(d, &detail.task, remote_id, context_id, seq, &answer).await?;
    *forwarded = Some(seq);
    Ok(true)
}

/// The task as it is here, while it is still this agent's; a cancel here is sent on.
async fn still_ours(
    caller: &Caller,
    d: &Delegate,
    task_id: &str,
    remote_id: &str,
) -> Result<TaskDetail, Stop> {
    let detail = local(caller, d, task_id).await?;
    if detail.task.status == TaskStatus::Canceled {
        let binding = d.binding();
        let canceled = remote(d, &binding)
            .call::<Value>("CancelTask", json!({"id": remote_id}))
            .await;
        if let Err(err) = canceled {
            tracing::debug!(task_id, error = %err, "the outside agent did not take the cancel");
        }
        return Err(Stop::Done);
    }
    if !ours(d, &detail) {
        return Err(Stop::Done);
    }
    Ok(detail)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Applied {
    Same,
    Changed,
    Finished,
}

/// Does here what the remote task shows.
async fn apply(
    caller: &Caller,
    d: &Delegate,
    detail: &TaskDetail,
    task: &A2aTask,
    (last_report, asked_at): (&mut Option<Value>, &mut Option<String>),
) -> Result<Applied, Stop> {
    let task_id = &detail.task.task_id;
    let said = task.status.message.as_ref().map(said_by);
    match task.status.state {
        TaskState::Completed => {
            report(
                caller,
                d,
                task_id,
                TaskResponseStatus::Success,
                result_of(task),
            )
            .await?;
            Ok(Applied::Finished)
        }
        TaskState::Failed | TaskState::Rejected | TaskState::Canceled => {
            let reason = said
                .and_then(|s| s.as_str().map(str::to_owned))
                .unwrap_or_else(|| format!("the A2A agent's task ended {:?}", task.status.state));
            Err(Stop::Fail(reason))
        }
        TaskState::InputRequired | TaskState::AuthRequired => {
            // Asked once per question: the status the question came with marks it.
            let marker = serde_json::to_string(&task.status).unwrap_or_default();
            if detail.task.status == TaskStatus::InputRequired || asked_at.as_ref() == Some(&marker)
            {
                return Ok(Applied::Same);
            }
            let question = task
                .status
                .message
                .as_ref()
                .map(crate::transport::a2a::convert::text_of)
                .filter(|q| !q.trim().is_empty())
                .unwrap_or_else(|| "The agent needs more input.".to_owned());
            let asked = Operation::Tasks(TaskOp::Clarify {
                task_id: task_id.clone().into(),
                clarify: Clarify { question },
                requested_by: None,
            });
            d.core.dispatch(caller, asked).await?;
            *asked_at = Some(marker);
            Ok(Applied::Changed)
        }
        _ => {
            let Some(said) = said.filter(|s| !s.is_null()) else {
                return Ok(Applied::Same);
            };
            if last_report.as_ref() == Some(&said) || detail.task.status != TaskStatus::InProgress {
                return Ok(Applied::Same);
            }
            report(
                caller,
                d,
                task_id,
                TaskResponseStatus::InProgress,
                said.clone(),
            )
            .await?;
            *last_report = Some(said);
            Ok(Applied::Changed)
        }
    }
}

/// Sends the task to the outside agent; records the remote task's id here.
async fn start(
    caller: &Caller,
    d: &Delegate,
    detail: &TaskDetail,
) -> Result<(String, String), Stop> {
    let task = &detail.task;
    let mut parts = vec![json!({"text": task.description})];
    if !task.data.is_empty() {
        parts.push(json!({"data": Value::Object(task.data.clone())}));
    }
    let message = json!({"messageId": task.task_id, "role": "ROLE_USER", "parts": parts,
                         "metadata": trace_metadata(task)});
    let params = json!({"message": message, "configuration": {"returnImmediately": true}});
    let binding = d.binding();
    let mut last = String::new();
    for attempt in 0..SEND_ATTEMPTS {
        if attempt > 0 {
            tokio::time::sleep(Duration::from_secs(1 << (attempt - 1))).await;
        }
        match remote(d, &binding)
            .traced(task)
            .call::<Value>("SendMessage", params.clone())
            .await
        {
            Ok(answer) => match started(&answer)? {
                Started::Task(remote_id, context_id) => {
                    let record = json!({"a2a_remote_task_id": remote_id,
                                        "a2a_context_id": context_id,
                                        "a2a_agent": binding.interface_url});
                    report(
                        caller,
                        d,
                        &task.task_id,
                        TaskResponseStatus::InProgress,
                        record,
                    )
                    .await?;
                    return Ok((remote_id, context_id));
                }
                Started::Replied(said) => {
                    report(caller, d, &task.task_id, TaskResponseStatus::Success, said).await?;
                    return Err(Stop::Done);
                }
            },
            Err(CallError::Refused { code, message }) => {
                return Err(Stop::Fail(format!(
                    "the A2A agent at {} refused the task (error {code}): {message}",
                    binding.interface_url
                )));
            }
            Err(CallError::Unreachable(why)) => last = why,
        }
    }
    Err(Stop::Fail(format!(
        "the A2A agent at {} could not be reached: {last}",
        binding.interface_url
    )))
}

/// What the first send made there.
enum Started {
    /// A task: its id and context.
    Task(String, String),
    /// A direct reply: the whole task is done, with what it said.
    Replied(Value),
}

fn started(answer: &Value) -> Result<Started, Stop> {
    if let Some(remote_task) = answer.get("task") {
        let remote_task: A2aTask = serde_json::from_value(remote_task.clone())
            .map_err(|e| Stop::Fail(format!("the A2A agent answered an unreadable task: {e}")))?;
        return Ok(Started::Task(remote_task.id, remote_task.context_id));
    }
    if let Some(message) = answer.get("message") {
        let message: A2aMessage = serde_json::from_value(message.clone()).map_err(|e| {
            Stop::Fail(format!("the A2A agent answered an unreadable message: {e}"))
        })?;
        return Ok(Started::Replied(said_by(&message)));
    }
    Err(Stop::Fail(
        "the A2A agent answered neither a task nor a message".into(),
    ))
}

/// Sends the originator's answer on the remote task.
async fn send_text(
    d: &Delegate,
    task: &Task,
    remote_id: &str,
    context_id: &str,
    seq: i64,
    text: &str,
) -> Result<(), Stop> {
    let message = json!({"messageId": format!("{}-answer-{seq}", task.task_id),
                         "role": "ROLE_USER", "taskId": remote_id, "contextId": context_id,
                         "parts": [{"text": text}], "metadata": trace_metadata(task)});
    let params = json!({"message": message, "configuration": {"returnImmediately": true}});
    let binding = d.binding();
    remote(d, &binding)
        .traced(task)
        .call::<Value>("SendMessage", params)
        .await
        .map(|_| ())
        .map_err(|err| {
            Stop::Fail(format!(
                "the answer could not be given to the A2A agent at {}: {err}",
                binding.interface_url
            ))
        })
}

fn remote<'a>(d: &'a Delegate, binding: &'a super::Binding) -> Remote<'a> {
    Remote {
        http: &d.http,
        url: &binding.interface_url,
        authorization: binding.authorization.as_deref(),
        trace: Vec::new(),
    }
}

/// The task's trace as A2A message metadata (`traceparent`, `tracestate`): an agent that
/// reads its trace from the message rather than the HTTP headers continues it too.
fn trace_metadata(task: &Task) -> Value {
    let metadata: Map<String, Value> = task
        .trace_fields()
        .map(|(key, value)| (key.to_owned(), json!(value)))
        .collect();
    Value::Object(metadata)
}

async fn local(caller: &Caller, d: &Delegate, task_id: &str) -> Result<TaskDetail, Stop> {
    let get = ask::GetTask {
        task_id: task_id.into(),
    };
    Ok(d.core.dispatch(caller, get).await?)
}

async fn report(
    caller: &Caller,
    d: &Delegate,
    task_id: &str,
    status: TaskResponseStatus,
    result_data: Value,
) -> Result<(), CoreError> {
    let op = Operation::Tasks(TaskOp::ReportTask {
        task_id: task_id.into(),
        result: TaskResult {
            status,
            result_data,
        },
        agent_id: None,
    });
    d.core.dispatch(caller, op).await.map(|_| ())
}

/// Whether the task is still this outside agent's to work on.
fn ours(d: &Delegate, detail: &TaskDetail) -> bool {
    detail.task.assignee_agent_id.as_deref() == Some(d.agent_id.as_str())
        && !detail.task.status.is_final()
}

/// The remote task's id and context, from the first progress report that recorded them.
fn remote_of(detail: &TaskDetail) -> Option<(String, String)> {
    detail.events.iter().find_map(|e| {
        let recorded = e.data.get("result_data")?;
        let id = recorded.get("a2a_remote_task_id")?.as_str()?;
        let context = recorded.get("a2a_context_id")?.as_str().unwrap_or_default();
        Some((id.to_owned(), context.to_owned()))
    })
}

/// The newest answer to a question, as `(seq, answer)`.
fn newest_answer(detail: &TaskDetail) -> Option<(i64, String)> {
    detail
        .events
        .iter()
        .rev()
        .find(|e| e.kind == TaskEventKind::ClarificationAnswered)
        .and_then(|e| Some((e.seq, e.data.get("answer")?.as_str()?.to_owned())))
}

/// The answer already sent on when following starts: answers before the newest
/// question were (the question came after them).
fn answered_seq(detail: &TaskDetail) -> Option<i64> {
    let asked = detail
        .events
        .iter()
        .rev()
        .find(|e| e.kind == TaskEventKind::ClarificationRequested)
        .map(|e| e.seq)?;
    detail
        .events
        .iter()
        .filter(|e| e.kind == TaskEventKind::ClarificationAnswered && e.seq < asked)
        .map(|e| e.seq)
        .max()
}

/// What a message says, as a value: its one data part, its text, or both.
fn said_by(message: &A2aMessage) -> Value {
    value_of(message.parts.iter().map(|p| &p.content))
}

/// The task's result: its artifacts' parts as a value.
fn result_of(task: &A2aTask) -> Value {
    let parts = task
        .artifacts
        .iter()
        .flatten()
        .flat_map(|a| a.parts.iter().map(|p| &p.content));
    value_of(parts)
}

fn value_of<'a>(parts: impl Iterator<Item = &'a PartContent>) -> Value {
    let mut texts = Vec::new();
    let mut data = Vec::new();
    for part in parts {
        match part {
            PartContent::Text(text) => texts.push(text.clone()),
            PartContent::Data(value) => data.push(value.clone()),
            PartContent::Url(url) => data.push(json!({ "url": url })),
            PartContent::Raw(_) => {}
        }
    }
    match (texts.len(), data.len()) {
        (0, 0) => Value::Null,
        (0, 1) => data.pop().unwrap_or(Value::Null),
        (_, 0) => Value::String(texts.join("\n\n")),
        _ => {
            let mut out = Map::new();
            out.insert("text".into(), Value::String(texts.join("\n\n")));
            out.insert("data".into(), Value::Array(data));
            Value::Object(out)
        }
    }
}
