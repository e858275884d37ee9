//! `SendMessage`: a message without `taskId` starts a task for the member; a message on a
//! task that asked a question answers it. A push config in the send's configuration is
//! set on the task with everything after the send queued to it. Blocking by default, as the spec says: the
//! answer comes when the task finished or asks for input (or after [`BLOCK_FOR`], as it
//! is then); `returnImmediately` answers with the task as submitted.

use crate::core::ask;
use std::time::Duration;

use a2a::{A2AError, Message, SendMessageRequest};
use axum::http::HeaderMap;
use switchboard_types::ErrorCode;
use switchboard_types::task_state::TaskStatus;
use switchboard_types::tasks::{Answer, Task, TaskDetail};
use switchboard_types::trace::TraceContext;

use super::rpc::{Interface, to_a2a};
use super::{convert, push};
use crate::core::trace::traced;

/// The longest a blocking send waits before answering with the task still working.
pub const BLOCK_FOR: Duration = Duration::from_secs(60);

/// The header a client makes a send idempotent with (its first `messageId` does too).
const IDEMPOTENCY_HEADER: &str = "idempotency-key";

/// What a send did: the task, and the newest entry of its history before the send (what
/// happens after it is the answer to this send).
pub struct Sent {
    pub task_id: String,
    pub after_seq: i64,
    /// The task as the send left it.
    pub task: Task,
}

/// The newest entry of a task's history.
pub fn newest(detail: &TaskDetail) -> i64 {
    detail.events.last().map_or(0, |e| e.seq)
}

/// Sends: a new task, or the answer to the task's open question.
pub async fn submit(
    interface: &Interface,
    request: &SendMessageRequest,
    headers: &HeaderMap,
) -> Result<Sent, A2AError> {
    let message = &request.message;
    if message.parts.is_empty() {
        return Err(A2AError::invalid_params(
            "message.parts: a message has at least one part",
        ));
    }
    let push = request
        .configuration
        .as_ref()
        .and_then(|c| c.task_push_notification_config.clone());
    if let Some(config) = &push {
        push::check(interface, config)?;
    }
    let sent = match message.task_id.as_deref().filter(|id| !id.is_empty()) {
        Some(task_id) => answer(interface, message, task_id).await?,
        None => create(interface, message, headers).await?,
    };
    if let Some(config) = push {
        push::on_send(interface, &sent.task_id, config, sent.after_seq).await?;
    }
    Ok(sent)
}

/// A new task. Its id comes from the `Idempotency-Key` or the `messageId`: the same send
/// again finds the task it made (the store refuses a second task with that id).
async fn create(
    interface: &Interface,
    message: &Message,
    headers: &HeaderMap,
) -> Result<Sent, A2AError> {
    let key = headers
        .get(IDEMPOTENCY_HEADER)
        .and_then(|v| v.to_str().ok())
        .filter(|k| !k.trim().is_empty())
        .map(str::to_owned)
        .or_else(|| Some(message.message_id.clone()).filter(|id| !id.is_empty()))
        .unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
    let task_id = convert::task_id_for(&key);
    let context = message
        .context_id
        .clone()
        .filter(|c| !c.is_empty())
        .unwrap_or_else(|| task_id.clone());
    let request = convert::task_request(
        message,
        task_id.clone(),
        &context,
        &interface.me,
        &interface.member,
    );
    let core = &interface.state.core;
    // The caller follows the task here, not in its inbox.
    let submit = core
        .tasks()
        .submit_followed_task(&interface.caller, request);
    let submitted = match metadata_trace(message) {
        Some(context) => traced(context, submit).await,
        None => submit.await,
    };
    let task = match submitted {
        // A targeted or offered TaskRequest always stores a task (assigned, offered, or
        // failed at once).
        Ok(submitted) => submitted
            .task
            .ok_or_else(|| A2AError::internal("a targeted task was not stored"))?,
        // Sent before: the task this key made (if it is this member's).
        Err(err) if err.code() == ErrorCode::Conflict => interface.task(&task_id).await?.task,
        Err(err) => return Err(to_a2a(err)),
    };
    Ok(Sent {
        task_id,
        after_seq: 0,
        task,
    })
}

/// The trace context a message names in its `metadata` (`traceparent`, `tracestate`). It
/// is the message's own, so it wins over the HTTP request's headers; one that is not a
/// valid `traceparent` starts a new trace, as a malformed header does.
fn metadata_trace(message: &Message) -> Option<TraceContext> {
    let metadata = message.metadata.as_ref()?;
    let parent = metadata.get("traceparent")?;
    let state = metadata
        .get("tracestate")
        .and_then(serde_json::Value::as_str);
    Some(TraceContext::from_values(parent.as_str(), state))
}

/// A message on an existing task: the answer to its open question.
async fn answer(interface: &Interface, message: &Message, task_id: &str) -> Result<Sent, A2AError> {
    let detail = interface.task(task_id).await?;
    let task = &detail.task;
    let context = convert::context_of(task);
    if let Some(given) = message.context_id.as_deref().filter(|c| !c.is_empty())
        && given != context
    {
        return Err(A2AError::invalid_params(format!(
            "contextId '{given}' is not the context of task '{task_id}' ('{context}')"
        )));
    }
    let Some(open) = task.open_clarification.as_ref() else {
        let why = if task.status.is_final() {
            format!(
                "task '{task_id}' is {} and takes no more messages",
                task.status.as_str()
            )
        } else {
            format!(
                "task '{task_id}' is working; it takes a message when it asks for input \
                 (TASK_STATE_INPUT_REQUIRED)"
            )
        };
        return Err(A2AError::unsupported_operation(why));
    };
    let text = convert::text_of(message);
    if text.trim().is_empty() {
        return Err(A2AError::invalid_params(
            "the answer to a question is text: the message has no text part",
        ));
    }
    let answered = interface
        .call(ask::AnswerClarification {
            task_id: interface.reference(task_id),
            clarification_id: open.clarification_id.clone(),
            answer: Answer { answer: text },
        })
        .await?;
    Ok(Sent {
        task_id: task_id.to_owned(),
        after_seq: newest(&detail),
        task: answered.task,
    })
}

/// Whether a task is where a send's answer stops: finished, or asking for input after
/// the send.
pub fn settled(detail: &TaskDetail, after_seq: i64) -> bool {
    detail.task.status.is_final()
        || (detail.task.status == TaskStatus::InputRequired && newest(detail) > after_seq)
}

/// `SendMessage`: sends, then (unless `returnImmediately`) waits until the task settled.
pub async fn blocking(
    interface: &Interface,
    request: SendMessageRequest,
    headers: &HeaderMap,
) -> Result<a2a::Task, A2AError> {
    let config = request.configuration.as_ref();
    // Checked before anything is sent: a refused request leaves no task behind.
    let history = super::rpc::history_length(config.and_then(|c| c.history_length))?;
    let core = &interface.state.core;
    let waits = config.and_then(|c| c.return_immediately) != Some(true);
    // A blocking send holds its connection until the task settles: it takes a place among
    // the credential's waiting calls first, so a refused send leaves no task behind.
    let _place = if waits {
        Some(core.live().hold_wait(&interface.caller).map_err(to_a2a)?)
    } else {
        None
    };
    let sent = submit(interface, &request, headers).await?;
    if !waits {
        return Ok(convert::task(&sent.task, history));
    }
    let deadline = tokio::time::Instant::now() + BLOCK_FOR;
    let reference = interface.reference(&sent.task_id);
    let mut feed = core
        .tasks()
        .feed_task(&interface.caller, &reference, sent.after_seq)
        .await
        .map_err(to_a2a)?;
    // The first step answers at once: the send itself is an entry after `after_seq`.
    let mut detail = feed.next(BLOCK_FOR).await.map_err(to_a2a)?.detail;
    while !settled(&detail, sent.after_seq) {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        if left.is_zero() {
            break;
        }
        detail = feed.next(left).await.map_err(to_a2a)?.detail;
    }
    Ok(convert::task_detail(&detail, history))
}
