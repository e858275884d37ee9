//! A question asked the instant a task starts reaches the caller waiting on the task.
//!
//! The worker below asks its `ClarificationRequest` the moment its `TaskRequest` frame
//! arrives. Before, the task's row and its history were read apart: a question committed
//! between the two reads gave a `working` status beside a history that already held the
//! question, the waiter took that history's newest entry as its cursor and waited for a
//! change that had already happened — `SendMessage` hung the full 60 s (6–10 % of calls)
//! and a streaming send stayed open with only its first event.

use std::time::{Duration, Instant};

use futures_util::StreamExt;
use serde_json::{Value, json};

use super::{call, rpc_body, team, text};
use crate::support::{Agent, TestApp};

/// Rounds of each kind (blocking, streaming), and how many run at once.
const ROUNDS: usize = 1000;
const AT_ONCE: usize = 16;
/// Far below the 60 s a missed question cost, far above a loaded machine's answer.
const PATIENCE: Duration = Duration::from_secs(10);

#[tokio::test]
async fn a_question_asked_at_once_never_leaves_the_caller_waiting() {
    let app = TestApp::start().await;
    let (_, client, worker) = team(&app).await;
    let asker = tokio::spawn(ask_at_once(app.ws(&worker, "").await));

    let blocking = futures_util::stream::iter(0..ROUNDS)
        .map(|i| blocking_round(&app, &client, i))
        .buffer_unordered(AT_ONCE)
        .collect::<Vec<Duration>>()
        .await;
    let streaming = futures_util::stream::iter(0..ROUNDS)
        .map(|i| streaming_round(&app, &client, i))
        .buffer_unordered(AT_ONCE)
        .collect::<Vec<Duration>>()
        .await;
    asker.abort();
    let slowest = |took: &[Duration]| took.iter().max().copied().unwrap_or_default();
    eprintln!(
        "{ROUNDS} blocking sends, slowest {:?}; {ROUNDS} streaming sends, slowest {:?}",
        slowest(&blocking),
        slowest(&streaming)
    );
    app.stop().await;
}

/// The worker: every `TaskRequest` is answered with a question at once, without waiting
/// for the reply to it.
async fn ask_at_once(mut ws: crate::wsclient::Ws) {
    let mut asked = 0u64;
    loop {
        let frame = ws.next_of("TaskRequest").await;
        asked += 1;
        ws.send(json!({
            "type": "ClarificationRequest",
            "request_id": format!("ask-{asked}"),
            "task_id": frame["task_id"],
            "question": "Which region?",
        }))
        .await;
    }
}

/// A blocking `SendMessage`: it answers `INPUT_REQUIRED`, well within [`PATIENCE`].
async fn blocking_round(app: &TestApp, client: &Agent, i: usize) -> Duration {
    let started = Instant::now();
    let body = rpc_body(
        "SendMessage",
        json!({"message": text(&format!("block-{i}"), "review this")}),
    );
    let answer = tokio::time::timeout(PATIENCE, call(app, client, "worker", body, &[]))
        .await
        .unwrap_or_else(|_| panic!("blocking send {i} still waits after {PATIENCE:?}"));
    assert_eq!(
        answer["result"]["task"]["status"]["state"], "TASK_STATE_INPUT_REQUIRED",
        "send {i}: {answer:#}"
    );
    started.elapsed()
}

/// A `SendStreamingMessage`: its stream reaches `INPUT_REQUIRED` within [`PATIENCE`].
async fn streaming_round(app: &TestApp, client: &Agent, i: usize) -> Duration {
    let started = Instant::now();
    let body = rpc_body(
        "SendStreamingMessage",
        json!({"message": text(&format!("stream-{i}"), "review this")}),
    );
    let mut response = reqwest::Client::new()
        .post(app.url("/a2a/a2a/worker"))
        .bearer_auth(&client.token)
        .body(body.to_string())
        .send()
        .await
        .expect("a stream");
    assert_eq!(response.status(), 200);
    let mut seen = String::new();
    let reached = tokio::time::timeout(PATIENCE, async {
        while let Some(chunk) = response.chunk().await.expect("the stream reads") {
            seen.push_str(&String::from_utf8_lossy(&chunk));
            if events(&seen)
                .iter()
                .any(|e| e.to_string().contains("TASK_STATE_INPUT_REQUIRED"))
            {
                return true;
            }
        }
        false
    })
    .await;
    assert_eq!(
        reached,
        Ok(true),
        "streaming send {i} never reached INPUT_REQUIRED within {PATIENCE:?}: {seen}"
    );
    started.elapsed()
}

/// The JSON of each complete `data:` line of a server-sent event stream.
fn events(stream: &str) -> Vec<Value> {
    stream
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter_map(|d| serde_json::from_str(d.trim()).ok())
        .collect()
}
