//! Span export over OTLP/HTTP (`--otlp-endpoint`, issue 45): a receiver decoding the
//! protobuf with the official `opentelemetry-proto` package (`tests/interop/
//! otlp_receiver.py`) gets a span per message, in the trace the request came with, each
//! reply the child of what it answers, pushes as events, a refused send as an error span,
//! the team, agents and ids as attributes — and never a message's content.

use serde_json::{Value, json};

use reqwest::Method;

use crate::process::{Process, call, team_k};
use crate::python;
use crate::support::{Agent, TestApp};

const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const SECRET: &str = "the launch code is 0000";

/// The span of message `id` among `spans`.
fn span_of<'a>(spans: &'a [Value], id: &str) -> &'a Value {
    spans
        .iter()
        .find(|s| s["attributes"]["switchboard.message_id"] == id)
        .unwrap_or_else(|| panic!("no span of {id} in {spans:#?}"))
}

/// The OTLP receiver started with `args` (`tests/interop/otlp_receiver.py`), and a
/// server exporting its spans to it.
async fn exporting_app(args: &[&str]) -> (python::Script, TestApp) {
    let (receiver, ready) = python::start("otlp_receiver.py", args).await;
    let port = ready["port"].as_u64().expect("the receiver's port");
    let app = TestApp::start_with(|c| {
        c.otlp_endpoint = Some(format!("http://127.0.0.1:{port}"));
    })
    .await;
    (receiver, app)
}

#[tokio::test]
async fn every_message_and_refusal_reaches_the_collector_as_a_span() {
    if !python::available("every_message_and_refusal_reaches_the_collector_as_a_span") {
        return;
    }
    let (receiver, app) = exporting_app(&["3", "20"]).await;
    let team = app.team("spans").await;
    let (a, b) = (
        app.agent(&team, "a", &[]).await,
        app.agent(&team, "b", &[]).await,
    );
    app.patch(&format!("/v1/teams/{}", team.id))
        .token(&team.key)
        .json(json!({"budgets": {"agent_messages_per_day": 1}}))
        .send()
        .await
        .expect_status(200);
    let (mut b_live, _, _) = app.ws_caught_up(&b, "").await;
    let ask = app
        .post("/v1/messages")
        .token(&a.token)
        .header("traceparent", &format!("00-{TRACE}-00f067aa0ba902b7-01"))
        .json(json!({"sender_agent_id": "a", "recipient_agent_ids": ["b"], "message_type": "request", "content": {"text": SECRET}}))
        .send()
        .await
        .expect_status(201)
        .str("message_id");
    b_live.next_of("message").await;
    let reply = b_live
        .call(
            "send_message",
            json!({"sender_agent_id": "b", "recipient_agent_ids": ["a"], "in_reply_to": ask, "message_type": "response", "content": {"text": SECRET}}),
        )
        .await;
    let reply = reply["result"]["message_id"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    // `a` has spent its budget: the refusal is a span too.
    app.send_with(&a, json!({"recipient_agent_ids": ["b"]}))
        .await
        .expect_error(429, "RATE_LIMITED");
    let out = python::finish(receiver).await;
    let spans = out["spans"].as_array().cloned().unwrap_or_default();
    assert!(
        out["requests"].as_array().is_some_and(|r| r
            .iter()
            .all(|r| r["path"] == "/v1/traces" && r["content_type"] == "application/x-protobuf")),
        "{out}"
    );
    let first = span_of(&spans, &ask);
    assert_eq!(first["trace_id"], TRACE, "{first}");
    assert_eq!(first["parent_span_id"], "00f067aa0ba902b7");
    assert_eq!(first["name"], "switchboard.message");
    assert_eq!(first["attributes"]["switchboard.team_id"], "spans");
    assert_eq!(first["attributes"]["switchboard.recipient_agent_ids"], "b");
    assert_eq!(first["attributes"]["switchboard.via"], "rest");
    assert_eq!(first["events"][0]["name"], "pushed", "{first}");
    assert_eq!(
        first["events"][0]["attributes"]["switchboard.agent_id"],
        "b"
    );
    assert_eq!(first["resource"]["service.name"], "switchboard");
    let second = span_of(&spans, &reply);
    assert_eq!(second["trace_id"], TRACE, "{second}");
    assert_eq!(second["parent_span_id"], first["span_id"]);
    assert_eq!(second["attributes"]["switchboard.via"], "websocket");
    assert_refusal(&spans);
    // What the collector got holds ids and names, never what the agents said.
    let everything = out.to_string();
    assert!(!everything.contains(SECRET), "content leaked: {everything}");
    app.stop().await;
}

/// The refused send is an error span naming the budget.
fn assert_refusal(spans: &[Value]) {
    let refused = spans
        .iter()
        .find(|s| s["name"] == "switchboard.refused")
        .unwrap_or_else(|| panic!("no refusal span in {spans:#?}"));
    assert_eq!(refused["status"]["code"], 2, "{refused}");
    assert_eq!(refused["status"]["message"], "RATE_LIMITED");
    assert_eq!(
        refused["attributes"]["switchboard.budget"],
        "agent_messages_per_day"
    );
}

/// The server binary exports from its first message on, whatever order its tasks start
/// in: the exporter once built its HTTP client before anything had installed the TLS
/// provider, and died at start in some runs (every span then counted as dropped).
#[tokio::test]
async fn a_fresh_server_process_exports_its_first_span() {
    if !python::available("a_fresh_server_process_exports_its_first_span") {
        return;
    }
    for _ in 0..3 {
        let (receiver, ready) = python::start("otlp_receiver.py", &["1", "20"]).await;
        let endpoint = format!("http://127.0.0.1:{}", ready["port"]);
        let dir = tempfile::tempdir().expect("tmp");
        let server =
            Process::start_with(&dir.path().join("otlp.db"), &["--otlp-endpoint", &endpoint]);
        let http = reqwest::Client::new();
        let tokens = team_k(&http, &server).await;
        let body = json!({"sender_agent_id": "a", "recipient_agent_ids": ["b"], "message_type": "information", "content": {"text": "hi"}});
        let (status, sent) = call(
            &http,
            &server,
            Method::POST,
            "/v1/messages",
            &tokens[0],
            Some(body),
        )
        .await;
        assert_eq!(status, 201, "{sent}");
        let out = python::finish(receiver).await;
        let id = sent["message_id"].as_str().unwrap_or_default();
        let spans = out["spans"].as_array().cloned().unwrap_or_default();
        span_of(&spans, id);
        let panicked = server
            .logged()
            .iter()
            .any(|l| l.to_string().contains("panicked"));
        assert!(!panicked, "{:#?}", server.logged());
        server.kill();
    }
}

/// A collector that cannot be reached: every span is counted as dropped, the server warns
/// once (not once per batch), and every send is still answered at once.
#[tokio::test]
async fn an_unreachable_collector_drops_counted_spans_and_warns_once() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let endpoint = format!("http://{}", closed.local_addr().expect("addr"));
    drop(closed);
    let dir = tempfile::tempdir().expect("tmp");
    let server = Process::start_with(&dir.path().join("otlp.db"), &["--otlp-endpoint", &endpoint]);
    let http = reqwest::Client::new();
    let tokens = team_k(&http, &server).await;
    let body = json!({"sender_agent_id": "a", "recipient_agent_ids": ["b"], "message_type": "information", "content": {"text": "hi"}});
    // Apart by more than a batch's linger: each span is a batch of its own.
    for _ in 0..4 {
        let sent = call(
            &http,
            &server,
            Method::POST,
            "/v1/messages",
            &tokens[0],
            Some(body.clone()),
        );
        assert_eq!(sent.await.0, 201);
        tokio::time::sleep(std::time::Duration::from_millis(700)).await;
    }
    let mut dropped = 0.0;
    for _ in 0..50 {
        let metrics = http.get(format!("{}/metrics", server.base)).send().await;
        let text = metrics.expect("metrics").text().await.expect("text");
        dropped = text
            .lines()
            .find_map(|l| l.strip_prefix("switchboard_otlp_dropped_spans_total "))
            .and_then(|v| v.trim().parse::<f64>().ok())
            .unwrap_or(0.0);
        if dropped >= 4.0 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(dropped >= 4.0, "dropped {dropped}");
    let warnings = server
        .logged()
        .iter()
        .filter(|l| l.to_string().contains("OTLP collector did not take"))
        .count();
    assert_eq!(warnings, 1, "{:#?}", server.logged());
}

/// A `traceparent` whose `sampled` flag is unset: the message, a reply to it and a task
/// in that trace are kept (the trace view has them) and handed out unsampled (`-00`), and
/// no span of the trace reaches the collector — while a message of a trace the server
/// starts does.
#[tokio::test]
async fn an_unsampled_trace_is_handed_on_unsampled_and_never_exported() {
    if !python::available("an_unsampled_trace_is_handed_on_unsampled_and_never_exported") {
        return;
    }
    let (receiver, app) = exporting_app(&["1", "20", "1.5"]).await;
    let team = app.team("unsampled").await;
    let (a, b) = (
        app.agent(&team, "a", &[]).await,
        app.agent(&team, "b", &[]).await,
    );
    let unsampled = format!("00-{TRACE}-00f067aa0ba902b7-00");
    let ask = app
        .post("/v1/messages")
        .token(&a.token)
        .header("traceparent", &unsampled)
        .json(json!({"sender_agent_id": "a", "recipient_agent_ids": ["b"], "message_type": "request", "content": {"text": "?"}}))
        .send()
        .await
        .expect_status(201)
        .str("message_id");
    let reply = app
        .send_with(
            &b,
            json!({"recipient_agent_ids": ["a"], "in_reply_to": ask}),
        )
        .await
        .expect_status(201)
        .str("message_id");
    let task = app
        .post("/v1/tasks")
        .token(&a.token)
        .header("traceparent", &unsampled)
        .json(json!({"description": "do it", "originating_agent_id": "a", "target_agent_id": "b"}))
        .send()
        .await
        .expect_status(201);
    let task_parent = task.body["task"]["traceparent"]
        .as_str()
        .unwrap_or_default();
    assert!(task_parent.ends_with("-00"), "{}", task.body);
    assert_handed_on_unsampled(&app, &a, &[&ask, &reply]).await;
    let sampled = app
        .send_with(&a, json!({"recipient_agent_ids": ["b"]}))
        .await
        .expect_status(201)
        .str("message_id");
    let out = python::finish(receiver).await;
    let spans = out["spans"].as_array().cloned().unwrap_or_default();
    let own = span_of(&spans, &sampled);
    assert!(own["trace_id"] != TRACE, "{own}");
    assert!(
        spans.iter().all(|s| s["trace_id"] != TRACE),
        "an unsampled trace was exported: {spans:#?}"
    );
    assert_kept(&app, &team.key).await;
    app.stop().await;
}

/// Each of `ids`, read by `reader`, is handed out in [`TRACE`] with its `sampled` flag
/// unset.
async fn assert_handed_on_unsampled(app: &TestApp, reader: &Agent, ids: &[&str]) {
    for id in ids {
        let read = app
            .get(&format!("/v1/messages/{id}"))
            .token(&reader.token)
            .send()
            .await
            .expect_status(200);
        let handed = read.body["message"]["traceparent"].as_str().unwrap_or("");
        assert!(handed.starts_with(&format!("00-{TRACE}-")), "{}", read.body);
        assert!(
            handed.ends_with("-00"),
            "handed on unsampled: {}",
            read.body
        );
    }
}

/// The server's own records still have the trace: the question, the reply and the
/// task's two notifications (to its assignee, and to its originator), and the task.
async fn assert_kept(app: &TestApp, key: &str) {
    let view = app
        .get(&format!("/v1/traces/{TRACE}"))
        .token(key)
        .send()
        .await
        .expect_status(200);
    assert_eq!(
        view.body["hops"].as_array().map(Vec::len),
        Some(4),
        "{}",
        view.body
    );
    assert_eq!(
        view.body["tasks"].as_array().map(Vec::len),
        Some(1),
        "{}",
        view.body
    );
}
