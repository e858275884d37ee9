//! A2A against REST on one server: SEND_MESSAGE (`POST /v1/messages`), a task submitted
//! over REST (`POST /v1/tasks`) and an A2A `SendMessage` with `returnImmediately` (which
//! is a task submission), in alternating slices with the same connections; then how soon
//! a streaming client sees a status event after the worker's report was acknowledged.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::Full;
use hyper::{Request, StatusCode};

use crate::Opts;
use crate::harness::{
    AgentCreds, MakeRequest, Row, ServerProcess, Setup, Side, interleaved, quantile_ms,
};
use crate::live::row;
use crate::scenarios::post;

const SLICES: u32 = 4;
const REPORTS: usize = 200;

/// An A2A `SendMessage` that returns at once, with a message id never used before.
fn a2a_send(host: &str, worker: &str, token: &str, message_id: u64) -> Request<Full<Bytes>> {
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{{"message":{{"messageId":"m{message_id}","role":"ROLE_USER","parts":[{{"text":"job {message_id}"}}]}},"configuration":{{"returnImmediately":true}}}}}}"#
    );
    Request::post(format!("/a2a/bench/{worker}"))
        .header("host", host)
        .header("authorization", format!("Bearer {token}"))
        .header("content-type", "application/json")
        .header("a2a-version", "1.0")
        .body(Full::new(Bytes::from(body)))
        .expect("request")
}

pub async fn a2a(opts: Opts) -> Vec<Row> {
    let server = ServerProcess::start(&[]);
    let setup = Setup::new(&server);
    let (_, agents) = setup.team("bench", "a", opts.connections + 1, &[]).await;
    let host = server.addr.to_string();
    let senders: Arc<Vec<AgentCreds>> = Arc::new(agents[1..].to_vec());
    let sink = agents[0].id.clone();
    let (rest_host, rest_senders, rest_sink) = (host.clone(), senders.clone(), sink.clone());
    let make_rest: MakeRequest = Arc::new(move |conn: usize, i: u64| {
        let a = &rest_senders[conn % rest_senders.len()];
        let body = format!(
            r#"{{"sender_agent_id":"{}","recipient_agent_ids":["{rest_sink}"],"message_type":"information","content":{{"text":"message {i}"}}}}"#,
            a.id
        );
        post(&rest_host, "/v1/messages", &a.token, body)
    });
    let (task_host, task_senders, task_sink) = (host.clone(), senders.clone(), sink.clone());
    let make_task: MakeRequest = Arc::new(move |conn: usize, i: u64| {
        let a = &task_senders[conn % task_senders.len()];
        let body = format!(
            r#"{{"description":"job {i}","originating_agent_id":"{}","target_agent_id":"{task_sink}"}}"#,
            a.id
        );
        post(&task_host, "/v1/tasks", &a.token, body)
    });
    let next = Arc::new(AtomicU64::new(0));
    let make_a2a: MakeRequest = Arc::new(move |conn: usize, _| {
        let a = &senders[conn % senders.len()];
        a2a_send(&host, &sink, &a.token, next.fetch_add(1, Ordering::Relaxed))
    });
    let side = |expect, make| Side {
        addr: server.addr,
        expect,
        make,
    };
    let sides = [
        side(StatusCode::CREATED, make_rest),
        side(StatusCode::CREATED, make_task),
        side(StatusCode::OK, make_a2a),
    ];
    let [rest, task, over_a2a] = interleaved(&opts, SLICES, &sides).await;
    let ratio = 100.0 * over_a2a.per_second() / rest.per_second();
    let of_tasks = 100.0 * over_a2a.per_second() / task.per_second();
    let rss = server.rss_kib();
    let conns = opts.connections;
    vec![
        Row::from_load(
            "a2a",
            format!("REST send_message, {conns} conns"),
            rest,
            rss,
            "alternating slices with the rows below, same server".into(),
        ),
        Row::from_load(
            "a2a",
            format!("REST POST /v1/tasks, {conns} conns"),
            task,
            rss,
            String::new(),
        ),
        Row::from_load(
            "a2a",
            format!("A2A SendMessage returnImmediately, {conns} conns"),
            over_a2a,
            rss,
            format!("{ratio:.0}% of send_message (target ≥ 50%), {of_tasks:.0}% of REST tasks"),
        ),
        status_latency(&server, &agents).await,
    ]
}

/// A client follows a task over SSE (`SubscribeToTask`); the worker reports progress
/// over REST, one report at a time: from each report's 200 to its status event.
async fn status_latency(server: &ServerProcess, agents: &[AgentCreds]) -> Row {
    let (worker, client) = (&agents[0], &agents[1]);
    let http = reqwest::Client::new();
    let base = server.base();
    let interface = format!("{base}/a2a/bench/{}", worker.id);
    let made: serde_json::Value = http
        .post(&interface)
        .bearer_auth(&client.token)
        .body(
            r#"{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"followed","role":"ROLE_USER","parts":[{"text":"report often"}]},"configuration":{"returnImmediately":true}}}"#,
        )
        .send()
        .await
        .expect("A2A answers")
        .json()
        .await
        .expect("JSON");
    let task_id = made["result"]["task"]["id"]
        .as_str()
        .expect("a task")
        .to_owned();
    let mut stream = http
        .post(&interface)
        .bearer_auth(&client.token)
        .body(format!(
            r#"{{"jsonrpc":"2.0","id":2,"method":"SubscribeToTask","params":{{"id":"{task_id}"}}}}"#
        ))
        .send()
        .await
        .expect("the stream opens");
    let (seen_tx, mut seen_rx) = tokio::sync::mpsc::unbounded_channel::<Instant>();
    let reader = tokio::spawn(async move {
        while let Ok(Some(chunk)) = stream.chunk().await {
            let at = Instant::now();
            let text = String::from_utf8_lossy(&chunk);
            for _ in text.matches("\"statusUpdate\"") {
                let _ = seen_tx.send(at);
            }
        }
    });
    let mut latency_us = Vec::with_capacity(REPORTS);
    for i in 0..REPORTS {
        let res = http
            .post(format!("{base}/v1/tasks/{task_id}/result"))
            .bearer_auth(&worker.token)
            .json(&serde_json::json!({"status": "in-progress", "result_data": {"step": i}}))
            .send()
            .await
            .expect("REST answers");
        let acked = Instant::now();
        assert_eq!(res.status(), 200, "progress report refused");
        let seen = tokio::time::timeout(Duration::from_secs(5), seen_rx.recv())
            .await
            .expect("the status event arrives")
            .expect("the stream is open");
        let us = seen.saturating_duration_since(acked).as_micros();
        latency_us.push(u32::try_from(us).unwrap_or(u32::MAX));
    }
    reader.abort();
    row(
        "a2a",
        format!("SSE status event after a progress report, {REPORTS} times"),
        String::new(),
        format!("{:.2} ms", quantile_ms(&mut latency_us, 0.50)),
        format!("{:.2} ms", quantile_ms(&mut latency_us, 0.99)),
        server.rss_kib(),
        "from the report's 200 to the event (target p99 ≤ 5 ms)".into(),
    )
}
