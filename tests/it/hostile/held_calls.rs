//! Calls the server answers later — MCP `wait_for_messages`, A2A blocking
//! `SendMessage`, MCP resource subscriptions — are bounded per credential (issue 61,
//! item 3): one agent token holding 300 waits filled the server's connection places and
//! `/healthz` answered 503 for 30 s.

use std::time::Duration;

use serde_json::{Value, json};

use super::{addr, healthz};
use crate::support::TestApp;

const ACCEPT: &str = "application/json, text/event-stream";

/// A stateless MCP `wait_for_messages` of `timeout_ms` by `token`'s agent, on a
/// connection of its own: the whole answer (an SSE stream or a JSON body).
fn mcp_wait(app: &TestApp, token: &str, timeout_ms: u64) -> tokio::task::JoinHandle<String> {
    let base = app.base.clone();
    let token = token.to_owned();
    tokio::spawn(async move {
        let answer = reqwest::Client::new()
            .post(format!("{base}/mcp"))
            .bearer_auth(&token)
            .header("accept", ACCEPT)
            .header("mcp-protocol-version", "2026-07-28")
            .header("mcp-method", "tools/call")
            .header("mcp-name", "wait_for_messages")
            .json(
                &json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
                "name": "wait_for_messages", "arguments": {"timeout_ms": timeout_ms},
                "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                          "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
                          "io.modelcontextprotocol/clientCapabilities": {}}}}),
            )
            .send()
            .await;
        match answer {
            Ok(answer) => answer.text().await.unwrap_or_default(),
            Err(err) => format!("no answer: {err}"),
        }
    })
}

/// One agent token starts 60 minute-long waits against a server of 48 connection
/// places: 16 (`--ws-max-per-agent`) wait, the other 44 are refused at once with
/// `RATE_LIMITED`, `/healthz` answers throughout, and a blocking A2A `SendMessage` — a
/// waiting call too — is refused before it makes a task. Once the waits end, their
/// places are given back. (Before: 48 waits held every place, the rest and `/healthz`
/// got 503.)
#[tokio::test]
async fn one_token_cannot_fill_the_server_with_waiting_calls() {
    let app = TestApp::start_with(|c| c.max_connections = Some(48)).await;
    let team = app.team("held").await;
    let a = app.agent(&team, "a", &[]).await;
    app.agent(&team, "worker", &[]).await;
    // One after another (a connection a refused call used is closed before the next
    // opens), so the gate's own limit on sockets opened at once is not what is tried.
    let mut waits = Vec::new();
    for _ in 0..60 {
        waits.push(mcp_wait(&app, &a.token, 4_000));
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let at = addr(&app);
    assert_eq!(healthz(at).await.as_deref(), Some("HTTP/1.1 200 OK"));

    let blocking = app
        .post("/a2a/held/worker")
        .token(&a.token)
        .json(
            json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {
            "message": {"messageId": "m-held", "role": "ROLE_USER", "parts": [{"text": "work"}]}}}),
        )
        .send()
        .await
        .expect_status(200);
    assert_eq!(blocking.body["error"]["code"], -32000, "{}", blocking.body);
    let said = blocking.body.to_string();
    assert!(said.contains("RATE_LIMITED"), "{said}");
    assert!(said.contains("waiting calls"), "{said}");
    let tasks = app
        .get("/v1/tasks")
        .token(&a.token)
        .send()
        .await
        .expect_status(200);
    assert_eq!(tasks.body["tasks"], json!([]), "a refused send made a task");

    let mut refused = 0;
    let mut waited = 0;
    for wait in waits {
        let answer = wait.await.expect("the call ended");
        if answer.contains("RATE_LIMITED") {
            assert!(
                answer.contains("already holds 16 waiting calls"),
                "{answer}"
            );
            refused += 1;
        } else if answer.contains("timed_out") {
            waited += 1;
        } else {
            panic!("neither waited nor refused: {answer}");
        }
    }
    assert_eq!((waited, refused), (16, 44));
    // The places were given back: a wait is taken again.
    let again = mcp_wait(&app, &a.token, 100).await.expect("ended");
    assert!(again.contains("timed_out"), "{again}");
    app.stop().await;
}

/// A session subscribes to at most 64 resources (each is a task and a feed of the
/// server's); the 65th is refused with `RATE_LIMITED` as a JSON-RPC server error, and
/// unsubscribing makes room again.
#[tokio::test]
async fn a_session_follows_a_bounded_number_of_resources() {
    let app = TestApp::start().await;
    let team = app.team("follows").await;
    let a = app.agent(&team, "a", &[]).await;
    app.agent(&team, "b", &[]).await;
    for n in 0..65 {
        app.submit(
            &a,
            json!({"task_id": format!("t{n}"), "target_agent_id": "b"}),
        )
        .await
        .expect_status(201);
    }
    let session = open_session(&app, &a.token).await;
    let call = |id: u64, method: &str, uri: String| {
        app.post("/mcp")
            .token(&a.token)
            .header("accept", ACCEPT)
            .header("mcp-session-id", &session)
            .json(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": {"uri": uri}}))
            .send()
    };
    for n in 0..64 {
        let res = call(
            10 + n,
            "resources/subscribe",
            format!("switchboard://tasks/t{n}"),
        )
        .await;
        let body = rpc(&res.body);
        assert_eq!(body["result"], json!({}), "{body}");
    }
    let res = call(100, "resources/subscribe", "switchboard://tasks/t64".into()).await;
    let body = rpc(&res.body);
    assert_eq!(body["error"]["code"], -32000, "{body}");
    assert_eq!(
        body["error"]["data"]["error_code"], "RATE_LIMITED",
        "{body}"
    );
    assert_eq!(body["error"]["data"]["details"]["max"], 64, "{body}");
    call(
        101,
        "resources/unsubscribe",
        "switchboard://tasks/t0".into(),
    )
    .await;
    let res = call(102, "resources/subscribe", "switchboard://tasks/t64".into()).await;
    assert_eq!(rpc(&res.body)["result"], json!({}));
    app.stop().await;
}

/// An initialized MCP session of `token`'s agent (the 2025-06-18 handshake).
pub(super) async fn open_session(app: &TestApp, token: &str) -> String {
    let opened = app
        .post("/mcp")
        .token(token)
        .header("accept", ACCEPT)
        .json(
            json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "held", "version": "1"}}}),
        )
        .send()
        .await
        .expect_status(200);
    let session = opened
        .headers
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .expect("a session")
        .to_owned();
    app.post("/mcp")
        .token(token)
        .header("accept", ACCEPT)
        .header("mcp-session-id", &session)
        .json(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        .send()
        .await;
    session
}

/// The JSON-RPC message of an answer sent as JSON or as one SSE event.
fn rpc(body: &Value) -> Value {
    let Value::String(text) = body else {
        return body.clone();
    };
    let json = text
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or(text);
    serde_json::from_str(json).unwrap_or(Value::Null)
}
