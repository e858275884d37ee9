//! Server-sent events: `SendStreamingMessage` (the task, then each change until it
//! finishes or asks for input) and `SubscribeToTask` (each change until it finishes).
//!
//! Every event's SSE `id` is the sequence number of the task-history entry it shows (the
//! task snapshot's is the newest entry it includes). The history is stored, so a client
//! whose stream dropped subscribes again with `Last-Event-ID` (or
//! `params.metadata.lastEventId`) and gets every entry after it, live ones following:
//! it misses nothing, even when the task finished in between.

use std::convert::Infallible;
use std::time::Duration;

use a2a::{A2AError, JsonRpcId, SendMessageRequest, SubscribeToTaskRequest};
use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use switchboard_types::task_state::TaskStatus;
use switchboard_types::tasks::TaskDetail;
use tokio::sync::mpsc;

use super::convert;
use super::rpc::{Interface, answer, decode, response, to_a2a};
use super::send::{self, newest};
use super::v03::Dialect;
use crate::core::sessions::{SessionHold, SessionKind};
use crate::core::{Caller, CoreError};
use crate::transport::common::ApiError;

/// How long one wait for a change lasts before it is renewed (the SSE keep-alive
/// comments keep the connection busy meanwhile).
const WAIT: Duration = Duration::from_secs(15);

/// A place for one more stream of the caller's (an agent's; `--ws-max-per-agent` at
/// once, counted by the core with its other sessions), or the refusal. The place is held
/// until the stream ends, so the agent's view counts its open streams.
fn admit(interface: &Interface) -> Result<SessionHold, ApiError> {
    if !matches!(interface.caller, Caller::Agent { .. }) {
        return Err(ApiError(CoreError::forbidden("A2A streams are an agent's")));
    }
    Ok(interface
        .state
        .core
        .live()
        .hold_session(&interface.caller, SessionKind::A2aStream)?)
}

/// Where a stream starts.
enum Start {
    /// With the task as it is, then what happens after.
    Snapshot,
    /// With what happened after this history entry.
    After(i64),
}

/// When a stream ends.
#[derive(Clone, Copy)]
enum Until {
    /// When the task finished or asks for input (a send's stream).
    Settled,
    /// When the task finished (a subscription).
    Finished,
}

impl Until {
    fn reached(self, status: TaskStatus) -> bool {
        match self {
            Until::Settled => status.is_final() || status == TaskStatus::InputRequired,
            Until::Finished => status.is_final(),
        }
    }
}

/// `SendStreamingMessage`.
pub async fn send(
    interface: Interface,
    (id, dialect): (JsonRpcId, Dialect),
    request: SendMessageRequest,
    headers: &HeaderMap,
) -> Response {
    // Before the send: a refused stream must not leave a task behind.
    let place = match admit(&interface) {
        Ok(place) => place,
        Err(err) => return err.into_response(),
    };
    let asked = request
        .configuration
        .as_ref()
        .and_then(|c| c.history_length);
    if let Err(err) = super::rpc::history_length(asked) {
        return answer(id, Err(err));
    }
    let sent = match send::submit(&interface, &request, headers).await {
        Ok(sent) => sent,
        Err(err) => return answer(id, Err(err)),
    };
    let detail = match interface.task(&sent.task_id).await {
        Ok(detail) => detail,
        Err(err) => return answer(id, Err(err)),
    };
    open(
        interface,
        (id, dialect),
        (detail, place),
        Start::Snapshot,
        Until::Settled,
    )
}

/// `SubscribeToTask`. Without a cursor a finished task has nothing more to say
/// (`UnsupportedOperation`, as the spec says); with one, what came after it is sent.
pub async fn subscribe(
    interface: Interface,
    (id, dialect): (JsonRpcId, Dialect),
    params: Value,
    headers: &HeaderMap,
) -> Response {
    let place = match admit(&interface) {
        Ok(place) => place,
        Err(err) => return err.into_response(),
    };
    let cursor = cursor(headers, &params);
    let request: SubscribeToTaskRequest = match decode(params) {
        Ok(request) => request,
        Err(err) => return answer(id, Err(err)),
    };
    let detail = match interface.task(&request.id).await {
        Ok(detail) => detail,
        Err(err) => return answer(id, Err(err)),
    };
    match cursor {
        Some(after) => open(
            interface,
            (id, dialect),
            (detail, place),
            Start::After(after),
            Until::Finished,
        ),
        None if detail.task.status.is_final() => answer(
            id,
            Err(A2AError::unsupported_operation(format!(
                "task '{}' is {}: nothing more will happen (subscribe with Last-Event-ID \
                 to read what came after it)",
                request.id,
                detail.task.status.as_str()
            ))),
        ),
        None => open(
            interface,
            (id, dialect),
            (detail, place),
            Start::Snapshot,
            Until::Finished,
        ),
    }
}

/// The resume cursor: `Last-Event-ID`, or `params.metadata.lastEventId`.
fn cursor(headers: &HeaderMap, params: &Value) -> Option<i64> {
    let from_header = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse().ok());
    let from_params = match &params["metadata"]["lastEventId"] {
        Value::Number(n) => n.as_i64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    };
    from_header.or(from_params).filter(|seq| *seq >= 0)
}

/// The SSE response; a task of its own follows the task and feeds it.
fn open(
    interface: Interface,
    id: (JsonRpcId, Dialect),
    (detail, place): (TaskDetail, SessionHold),
    start: Start,
    until: Until,
) -> Response {
    let (tx, rx) = mpsc::channel::<Event>(32);
    tokio::spawn(async move {
        follow(interface, id, detail, start, until, tx).await;
        drop(place);
    });
    let events = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv()
            .await
            .map(|event| (Ok::<_, Infallible>(event), rx))
    });
    Sse::new(events)
        .keep_alive(KeepAlive::default())
        .into_response()
}

fn event((id, dialect): &(JsonRpcId, Dialect), seq: i64, result: Result<Value, A2AError>) -> Event {
    let result = result.map(|value| dialect.result(value));
    Event::default()
        .id(seq.to_string())
        .data(response(id.clone(), result).to_string())
}

/// Sends the task's changes as they commit, until `until` or the client left.
async fn follow(
    interface: Interface,
    id: (JsonRpcId, Dialect),
    detail: TaskDetail,
    start: Start,
    until: Until,
    tx: mpsc::Sender<Event>,
) {
    let task_id = detail.task.task_id.clone();
    let cursor = match start {
        Start::Snapshot => {
            let seq = newest(&detail);
            let task = json!({ "task": convert::task_detail(&detail, None) });
            if tx.send(event(&id, seq, Ok(task))).await.is_err()
                || until.reached(detail.task.status)
            {
                return;
            }
            seq
        }
        Start::After(seq) => seq,
    };
    let core = &interface.state.core;
    let reference = interface.reference(&task_id);
    let mut feed = match core
        .tasks()
        .feed_task(&interface.caller, &reference, cursor)
        .await
    {
        Ok(feed) => feed,
        Err(err) => {
            let _gone = tx.send(event(&id, cursor, Err(to_a2a(err)))).await;
            return;
        }
    };
    loop {
        let step = tokio::select! {
            step = feed.next(WAIT) => step,
            () = tx.closed() => return,
        };
        let step = match step {
            Ok(step) => step,
            Err(err) => {
                let _gone = tx.send(event(&id, feed.cursor(), Err(to_a2a(err)))).await;
                return;
            }
        };
        for entry in step.fresh() {
            for update in convert::events(&step.detail.task, entry) {
                if tx
                    .send(event(&id, entry.seq, Ok(json!(update))))
                    .await
                    .is_err()
                {
                    return;
                }
            }
            if until.reached(entry.status) {
                return;
            }
        }
        if step.detail.task.status.is_final() {
            return;
        }
    }
}
