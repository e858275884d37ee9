//! MCP: the official Python MCP SDK (`tests/interop/mcp_agents.py`), unmodified, over
//! Streamable HTTP against the real server; what it did is then checked through REST.

use serde_json::{Value, json};

use crate::support::{Agent, Team, TestApp};
use crate::{inspector, python};

mod adapters;
mod stateless;

/// A team with two agents: `a`, and `b` who can review.
pub(crate) async fn team(app: &TestApp) -> (Team, Agent, Agent) {
    let team = app.team("mcp").await;
    let a = app.agent(&team, "a", &[]).await;
    let b = app.agent(&team, "b", &["review"]).await;
    (team, a, b)
}

#[tokio::test]
async fn two_agents_talk_and_run_a_task_through_mcp_alone() {
    if !crate::python::available("two_agents_talk_and_run_a_task_through_mcp_alone") {
        return;
    }
    let app = TestApp::start().await;
    let (_, a, b) = team(&app).await;
    let out = python::run(
        "mcp_agents.py",
        &["conversation", &app.base, &a.token, &b.token],
    )
    .await;
    assert_eq!(out["server"], "switchboard");
    let tools: Vec<&str> = out["tools"]
        .as_array()
        .map(|l| l.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    for name in [
        "whoami",
        "find_agents",
        "send_message",
        "get_messages",
        "get_message",
        "mark_read",
        "respond",
        "broadcast",
        "request_assistance",
        "publish",
        "set_watch",
        "submit_task",
        "get_task",
        "list_tasks",
        "report_progress",
        "complete_task",
        "fail_task",
        "ask_clarification",
        "answer_clarification",
        "hand_off",
        "cancel_task",
    ] {
        assert!(tools.contains(&name), "{name} missing from {tools:?}");
    }
    // The schema is REST's: SEND_MESSAGE's fields, the caller's own id filled in.
    let send = &out["send_schema"];
    assert!(
        send["properties"]["recipient_agent_ids"].is_object(),
        "{send:#}"
    );
    assert!(send["properties"]["idempotency_key"].is_object());
    assert!(send["properties"].get("sender_agent_id").is_none());
    assert_eq!(send["$defs"]["MessageType"]["enum"][0], "information");
    assert_eq!(
        out["respond_required"],
        json!(["original_message_id", "response_content"])
    );
    the_text_blocks_hold_the_answers(&out);
    assert_eq!(out["whoami"]["agent_id"], "a");
    assert_eq!(out["found"], json!(["b"]));
    assert_eq!(out["received"]["content"]["text"], "Can you review PR 7?");
    assert_eq!(out["received"]["sender_agent_id"], "a");
    assert_eq!(out["answers"][0]["content"]["text"], "Approved");
    assert_eq!(
        out["marked"]["marked_read"].as_array().map(Vec::len),
        Some(1)
    );
    // Refusals are tool errors with the contract's codes.
    assert_eq!(out["unknown"]["error"], true);
    assert_eq!(out["unknown"]["data"]["error_code"], "INVALID_RECIPIENT");
    assert_eq!(out["invalid"]["data"]["error_code"], "VALIDATION_ERROR");
    assert_eq!(out["invalid"]["data"]["details"]["field"], "message_type");
    assert_eq!(out["other"]["data"]["error_code"], "FORBIDDEN");
    assert_eq!(out["progress"]["data"]["task"]["status"], "in-progress");
    assert_eq!(out["status"]["task"]["status"], "success");

    seen_through_rest(&app, &a, &out).await;
    app.stop().await;
}

/// The text block holds the answer itself (Agno's, LangChain's and CrewAI's adapters give
/// a model nothing else): the structured content, serialized; a refusal's text is the
/// code and message, then the whole error body. And respond's path id, renamed, is a
/// required string, not the body's nullable echo.
fn the_text_blocks_hold_the_answers(out: &Value) {
    let original = &out["respond_original"];
    assert_eq!(original["type"], "string", "{original:#}");
    let text_of = |key: &str| -> Value {
        serde_json::from_str(out[key].as_str().unwrap_or_default())
            .unwrap_or_else(|e| panic!("{key} is not the answer as JSON ({e}): {}", out[key]))
    };
    assert_eq!(text_of("sent_text"), out["sent"]);
    assert_eq!(
        text_of("inbox_text")["messages"][0]["content"]["text"],
        "Can you review PR 7?"
    );
    let refused = out["unknown"]["text"].as_str().unwrap_or_default();
    assert!(refused.starts_with("INVALID_RECIPIENT: "), "{refused}");
    let body: Value = serde_json::from_str(refused.lines().last().unwrap_or_default())
        .unwrap_or_else(|e| panic!("the error body as JSON ({e}): {refused}"));
    assert_eq!(body, out["unknown"]["data"]);
}

/// The conversation held over MCP, read back through REST: ordinary messages.
async fn seen_through_rest(app: &TestApp, a: &Agent, out: &Value) {
    let sent_id = out["sent"]["message_id"].as_str().expect("id");
    let read = app
        .get(&format!("/v1/messages/{sent_id}"))
        .token(&a.token)
        .send()
        .await
        .expect_status(200);
    assert_eq!(
        read.body["responses"][0]["responder_agent_id"], "b",
        "{:#}",
        read.body
    );
}

#[tokio::test]
async fn wait_for_messages_is_released_by_a_rest_send_and_bad_calls_are_tool_errors() {
    if !crate::python::available(
        "wait_for_messages_is_released_by_a_rest_send_and_bad_calls_are_tool_errors",
    ) {
        return;
    }
    let app = TestApp::start().await;
    let (_, a, b) = team(&app).await;
    let out = python::run("mcp_agents.py", &["waiting", &app.base, &a.token, &b.token]).await;
    assert_eq!(out["ack_status"], 201);
    let woken = &out["woken"]["data"];
    assert_eq!(woken["timed_out"], false, "{out:#}");
    assert_eq!(woken["messages"][0]["content"]["text"], "wake up");
    assert_eq!(woken["next_after_seq"], 1);
    // Released by the commit, not by a poll: well before the 20 s timeout, and soon after
    // the send was acknowledged (generous for a loaded CI machine).
    let release = out["release_after_ack_ms"].as_f64().expect("ms");
    assert!(release < 1000.0, "released {release} ms after the ack");
    assert_eq!(out["timed_out"]["timed_out"], true);
    assert_eq!(out["timed_out"]["next_after_seq"], 1);
    assert_eq!(out["ticked"]["timed_out"], true);
    assert!(
        out["progress"].as_array().is_some_and(|p| !p.is_empty()),
        "progress while waiting: {out:#}"
    );
    for (case, field) in [
        ("too_long", "timeout_ms"),
        ("wrong_type", "timeout_ms"),
        ("unknown_arg", "colour"),
    ] {
        assert_eq!(out[case]["error"], true, "{case}");
        assert_eq!(
            out[case]["data"]["error_code"], "VALIDATION_ERROR",
            "{case}"
        );
        assert_eq!(out[case]["data"]["details"]["field"], field, "{case}");
    }
    // An oversized call is refused before it is read; the session goes on.
    assert_eq!(out["huge"]["raised"], "MCPError", "{:#}", out["huge"]);
    assert_eq!(out["after_huge"]["data"]["agent_id"], "a");
}

#[tokio::test]
async fn a_team_key_adds_agents_over_mcp_and_the_prompts_teach_the_etiquette() {
    if !crate::python::available(
        "a_team_key_adds_agents_over_mcp_and_the_prompts_teach_the_etiquette",
    ) {
        return;
    }
    let app = TestApp::start().await;
    let (team, a, _) = team(&app).await;
    let out = python::run("mcp_agents.py", &["setup", &app.base, &team.key, &a.token]).await;
    assert_eq!(out["added"]["error"], false, "{out:#}");
    assert_eq!(out["added"]["data"]["agent"]["agent_id"], "helper");
    assert_eq!(out["helper"]["agent_id"], "helper");
    assert_eq!(out["helper"]["team_id"], team.id);
    assert_eq!(out["refused"]["data"]["error_code"], "FORBIDDEN");
    // A team key is no agent: it cannot send.
    assert_eq!(out["lead_sends"]["data"]["error_code"], "FORBIDDEN");
    assert_eq!(out["prompts"], json!(["team_etiquette", "check_inbox"]));
    let etiquette = out["etiquette"].as_str().expect("text");
    assert!(etiquette.contains("requires_response"), "{etiquette}");
    assert!(out["focused"].as_str().is_some_and(|t| t.contains("PR 9")));
    // The helper is an ordinary member, visible through REST.
    let listed = app
        .get(&format!("/v1/teams/{}/agents?capability=search", team.id))
        .token(&a.token)
        .send()
        .await
        .expect_status(200);
    assert_eq!(listed.body["agents"][0]["agent_id"], "helper");
}

#[tokio::test]
async fn subscribed_resources_hear_of_a_rest_send_and_of_their_task() {
    if !crate::python::available("subscribed_resources_hear_of_a_rest_send_and_of_their_task") {
        return;
    }
    let app = TestApp::start().await;
    let (_, a, b) = team(&app).await;
    let out = python::run(
        "mcp_agents.py",
        &["resources", &app.base, &a.token, &b.token],
    )
    .await;
    assert_eq!(out["resources"], json!(["switchboard://inbox"]));
    assert_eq!(out["templates"], json!(["switchboard://tasks/{task_id}"]));
    let before = out["before"].as_i64().expect("count");
    assert_eq!(out["after"], before + 1, "{out:#}");
    let task_uri = format!(
        "switchboard://tasks/{}",
        out["task_id"].as_str().expect("task id")
    );
    // Unsubscribed from the inbox: only the task's updates came after (a message did
    // not); one or more, as the task's change may commit in steps.
    let updates = out["task_updates"].as_array().expect("updates");
    assert!(!updates.is_empty(), "{out:#}");
    assert!(updates.iter().all(|u| *u == task_uri), "{out:#}");
    assert_eq!(out["task_status"], "in-progress");
    assert!(
        out["missing"]
            .as_str()
            .is_some_and(|m| m.contains("no resource")),
        "{out:#}"
    );
}

#[tokio::test]
async fn the_same_client_over_stdio_through_switchboard_mcp() {
    if !crate::python::available("the_same_client_over_stdio_through_switchboard_mcp") {
        return;
    }
    let app = TestApp::start().await;
    let (_, a, b) = team(&app).await;
    let binary = env!("CARGO_BIN_EXE_switchboard");
    let out = python::run(
        "mcp_agents.py",
        &["stdio", &app.base, &a.token, &b.token, binary],
    )
    .await;
    assert_eq!(out["server"], "switchboard");
    assert_eq!(out["whoami"]["agent_id"], "a");
    assert_eq!(
        out["sent"]["delivery_status"]["pending_delivery"],
        json!(["b"])
    );
    assert_eq!(out["refused"]["error_code"], "INVALID_RECIPIENT");
    assert_eq!(
        out["woken"]["messages"][0]["content"]["text"],
        "back over REST"
    );
    assert!(
        out["prompt"]
            .as_str()
            .is_some_and(|p| p.starts_with("You are"))
    );
    // What went through the bridge is an ordinary message.
    let inbox = app.inbox(&b, "").await.expect_status(200);
    assert_eq!(inbox.body["messages"][0]["content"]["text"], "over stdio");
}

#[tokio::test]
async fn nothing_of_another_team_is_reachable_over_mcp() {
    if !crate::python::available("nothing_of_another_team_is_reachable_over_mcp") {
        return;
    }
    let app = TestApp::start().await;
    let (_, a, _) = team(&app).await;
    let other = app.team("other").await;
    let x = app.agent(&other, "x", &[]).await;
    // The task's assignee.
    app.agent(&other, "y", &[]).await;
    let task = app
        .post("/v1/tasks")
        .token(&x.token)
        .json(json!({"originating_agent_id": "x", "description": "theirs", "target_agent_id": "y"}))
        .send()
        .await
        .expect_status(201);
    let task_id = task.body["task"]["task_id"]
        .as_str()
        .expect("task id")
        .to_owned();
    let out = python::run(
        "mcp_agents.py",
        &["isolation", &app.base, &a.token, &x.token, &task_id],
    )
    .await;
    assert_eq!(out["to_x"]["error_code"], "INVALID_RECIPIENT", "{out:#}");
    assert_eq!(out["task"]["error_code"], "TASK_NOT_FOUND", "{out:#}");
    assert_eq!(out["found"], json!(["a", "b"]));
    assert!(
        out["resource"]
            .as_str()
            .is_some_and(|r| r.contains("TASK_NOT_FOUND")),
        "{out:#}"
    );
}

#[tokio::test]
async fn the_mcp_inspector_cli_lists_and_calls_the_tools() {
    if !crate::inspector::available("the_mcp_inspector_cli_lists_and_calls_the_tools") {
        return;
    }
    let app = TestApp::start().await;
    let (_, a, _) = team(&app).await;
    let url = format!("{}/mcp", app.base);
    let (code, out, err) =
        inspector::cli(&url, &a.token, &["--method", "tools/list", "--strict"]).await;
    assert_eq!(code, 0, "{err}");
    let listed: Value = serde_json::from_str(&out).expect("JSON");
    let tools = listed["tools"].as_array().expect("tools");
    assert!(tools.iter().any(|t| t["name"] == "wait_for_messages"));
    // Portable schemas: nullable fields as anyOf, never a list of types.
    assert!(!err.contains("`type` is an array"), "{err}");
    let (code, out, err) = inspector::cli(
        &url,
        &a.token,
        &["--method", "tools/call", "--tool-name", "whoami"],
    )
    .await;
    assert_eq!(code, 0, "{err}");
    let called: Value = serde_json::from_str(&out).expect("JSON");
    assert_eq!(called["structuredContent"]["agent_id"], "a", "{out}");
}

#[tokio::test]
async fn every_other_tool_works_through_mcp() {
    if !crate::python::available("every_other_tool_works_through_mcp") {
        return;
    }
    let app = TestApp::start().await;
    let (team, a, b) = team(&app).await;
    let c = app.agent(&team, "c", &[]).await;
    let out = python::run(
        "mcp_agents.py",
        &["every_tool", &app.base, &a.token, &b.token, &c.token],
    )
    .await;
    for (tool, result) in out.as_object().expect("results") {
        assert_eq!(result["error"], false, "{tool}: {result:#}");
    }
    assert_eq!(
        out["assistance"]["data"]["potential_responders"][0]["agent_id"],
        "b"
    );
    assert_eq!(
        out["get_message"]["data"]["message"]["kind"], "broadcast",
        "{out:#}"
    );
    assert_eq!(out["hand_off"]["data"]["task"]["assignee_agent_id"], "c");
    assert_eq!(out["fail"]["data"]["task"]["status"], "failed");
    assert_eq!(out["cancel"]["data"]["task"]["status"], "canceled");
    assert_eq!(
        out["list"]["data"]["tasks"].as_array().map(Vec::len),
        Some(2)
    );
    // b watches "lint": the publish is news for it.
    let news = app
        .inbox(&b, "?news_only=true&cause_by=lint")
        .await
        .expect_status(200);
    assert_eq!(news.body["total_count"], 1, "{:#}", news.body);
}

#[tokio::test]
async fn subscriptions_listen_of_the_2026_revision_hears_the_inbox_and_a_task() {
    if !crate::python::available(
        "subscriptions_listen_of_the_2026_revision_hears_the_inbox_and_a_task",
    ) {
        return;
    }
    let app = TestApp::start().await;
    let (_, a, b) = team(&app).await;
    let out = python::run(
        "mcp_agents.py",
        &["listening", &app.base, &a.token, &b.token],
    )
    .await;
    assert_eq!(out["version"], "2026-07-28");
    let task_uri = out["task_uri"].as_str().expect("uri");
    assert_eq!(
        out["honored"],
        json!(["switchboard://inbox", task_uri]),
        "{out:#}"
    );
    let seen = out["seen"].as_array().expect("seen");
    assert!(seen.contains(&json!("switchboard://inbox")), "{out:#}");
    assert!(seen.contains(&json!(task_uri)), "{out:#}");
}

/// An `initialize` of the handshake revisions, as a host sends it first.
pub(crate) fn initialize() -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "test", "version": "1"}}})
}

/// Opens a session for `agent`; its id, or the refusal.
pub(crate) async fn open_session(app: &TestApp, agent: &Agent) -> Result<String, Value> {
    let res = app
        .post("/mcp")
        .header("Accept", "application/json, text/event-stream")
        .token(&agent.token)
        .json(initialize())
        .send()
        .await;
    match res.headers.get("mcp-session-id") {
        Some(id) if res.status == 200 => Ok(id.to_str().expect("ascii").to_owned()),
        _ => Err(json!({"status": res.status, "body": res.body})),
    }
}

#[tokio::test]
async fn an_agent_holds_a_bounded_number_of_mcp_sessions() {
    let app = TestApp::start_with(|c| c.ws_max_per_agent = 2).await;
    let (_, a, b) = team(&app).await;
    let first = open_session(&app, &a).await.expect("first session");
    open_session(&app, &a).await.expect("second session");
    let refused = open_session(&app, &a)
        .await
        .expect_err("a third is refused");
    assert_eq!(refused["status"], 429, "{refused:#}");
    assert_eq!(refused["body"]["error_code"], "RATE_LIMITED");
    assert_eq!(refused["body"]["details"]["max"], 2);
    // Another agent is not affected; ending a session makes room.
    open_session(&app, &b).await.expect("b's own session");
    // Ending is 204 (the official clients take 200 or 204 and log a failure for
    // anything else, the SDK's 202 included), and idempotent: again, still 204.
    for _ in 0..2 {
        app.req(reqwest::Method::DELETE, "/mcp")
            .header("mcp-session-id", &first)
            .token(&a.token)
            .send()
            .await
            .expect_status(204);
    }
    open_session(&app, &a)
        .await
        .expect("room again after DELETE");
}

#[tokio::test]
async fn mcp_refuses_a_missing_or_wrong_token_with_the_rest_error_body() {
    let app = TestApp::start().await;
    let initialize = initialize();
    for token in [None, Some("sb_agent_0000000000000000_nope")] {
        let mut req = app
            .post("/mcp")
            .header("Accept", "application/json, text/event-stream")
            .json(initialize.clone());
        if let Some(token) = token {
            req = req.token(token);
        }
        req.send().await.expect_error(401, "UNAUTHORIZED");
    }
}

/// A host that writes its first messages at once and closes stdin (initialize, the
/// initialized notification and a call, in one write) gets the call answered: the stdio
/// bridge keeps the session's order and ends the session only after the call. Twenty
/// rounds, each of which used to lose the call (404 or 500) nearly every time.
#[tokio::test]
async fn the_stdio_bridge_answers_a_call_pipelined_after_initialize() {
    use tokio::io::AsyncWriteExt;
    let app = TestApp::start().await;
    let (_, a, _) = team(&app).await;
    let lines = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "pipelining-host", "version": "1"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
               "params": {"name": "whoami", "arguments": {}}}),
    ];
    let written: String = lines.iter().map(|l| format!("{l}\n")).collect();
    for round in 0..20 {
        let mut bridge = tokio::process::Command::new(env!("CARGO_BIN_EXE_switchboard"))
            .args(["mcp", "--url", &app.base, "--token", &a.token])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("the bridge starts");
        let mut stdin = bridge.stdin.take().expect("stdin");
        stdin.write_all(written.as_bytes()).await.expect("written");
        drop(stdin);
        let out = tokio::time::timeout(
            std::time::Duration::from_secs(30),
            bridge.wait_with_output(),
        )
        .await
        .expect("the bridge ends once stdin did")
        .expect("output");
        let answers: Vec<Value> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect();
        let call = answers
            .iter()
            .find(|m| m["id"] == 2)
            .unwrap_or_else(|| panic!("round {round}: no answer to the call: {answers:?}"));
        assert_eq!(
            call["result"]["structuredContent"]["agent_id"], "a",
            "round {round}: {call}"
        );
    }
    app.stop().await;
}

/// The loop guard's refusal reaches an MCP host as a tool error with the contract's code
/// (`mcp_agents.py loop`), and nothing of the refused send is stored.
#[tokio::test]
async fn the_loop_guard_refuses_as_a_tool_error() {
    if !python::available("the_loop_guard_refuses_as_a_tool_error") {
        return;
    }
    let app = TestApp::start().await;
    let (team, a, b) = team(&app).await;
    app.patch("/v1/teams/mcp")
        .token(&team.key)
        .json(json!({"loop_guard": {"max_hops": 2}}))
        .send()
        .await
        .expect_status(200);
    let out = python::run("mcp_agents.py", &["loop", &app.base, &a.token, &b.token]).await;
    assert_eq!(out["first"], false, "{out}");
    assert_eq!(out["second"], false, "{out}");
    let third = &out["third"];
    assert_eq!(third["error"], true, "{out}");
    assert!(
        third.to_string().contains("LOOP_DETECTED"),
        "the tool error names the code: {out}"
    );
    let inbox = app.inbox(&b, "").await.expect_status(200);
    assert_eq!(inbox.body["messages"].as_array().map(Vec::len), Some(1));
    app.stop().await;
}

/// An instrumented MCP host's `traceparent` header reaches the tool call (the session
/// runs it on a task of its own) and the message joins that trace.
#[tokio::test]
async fn a_tool_call_joins_the_trace_its_http_request_came_with() {
    if !python::available("a_tool_call_joins_the_trace_its_http_request_came_with") {
        return;
    }
    let app = TestApp::start().await;
    let (_, a, b) = team(&app).await;
    let out = python::run("mcp_agents.py", &["traced", &app.base, &a.token, &b.token]).await;
    let read = &out["read"];
    assert_eq!(read["message_id"], out["sent"], "{out}");
    let traceparent = read["traceparent"].as_str().unwrap_or_default();
    assert!(
        traceparent.starts_with("00-4bf92f3577b34da6a3ce929d0e0e4736-"),
        "{out}"
    );
    assert_eq!(read["tracestate"], "congo=t61rcWkgMzE", "{out}");
    app.stop().await;
}
