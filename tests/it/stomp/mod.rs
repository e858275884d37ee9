//! STOMP: unmodified stomp.py, as Wise Agents drive it, against the real server
//! (`tests/interop/stomp_wise.py`); what they exchanged is then read back through REST
//! and seen live on a WebSocket.

mod never_deaf;
mod protocol;
mod routes;
mod wire;

use serde_json::{Value, json};

use crate::python;
use crate::support::{Team, TestApp};

/// A server with its STOMP listener on an ephemeral port, and a team.
async fn start() -> (TestApp, Team) {
    let app = TestApp::start_with(|config| {
        config.stomp_listen = Some("127.0.0.1:0".parse().expect("addr"));
    })
    .await;
    let team = app.wise_team("wise").await;
    (app, team)
}

/// Runs a scenario of the Wise Agents script against `app` with the team's shared
/// credentials.
async fn scenario(app: &TestApp, team: &Team, name: &str) -> Value {
    let stomp = app.server().stomp_addr().expect("STOMP listener");
    let port = stomp.port().to_string();
    python::run(
        "stomp_wise.py",
        &[name, "127.0.0.1", &port, &team.id, &team.key],
    )
    .await
}

#[tokio::test]
async fn two_wise_agents_converse_and_the_conversation_is_ordinary_switchboard_messages() {
    if !crate::python::available(
        "two_wise_agents_converse_and_the_conversation_is_ordinary_switchboard_messages",
    ) {
        return;
    }
    let (app, team) = start().await;
    // WiseA exists beforehand (so REST and a WebSocket can watch as it); WiseB is
    // registered by its first subscription on the bridge.
    let a = app.wise_agent(&team, "WiseA").await;
    let (mut ws, _, _) = app.ws_caught_up(&a, "").await;

    let out = scenario(&app, &team, "conversation").await;
    assert_eq!(out["request"]["_sender"], "WiseA");
    assert_eq!(out["response"]["_message"], "4");
    assert_eq!(out["old"]["_chat_id"], "chat-7");
    // The body Switchboard wrote carries the keys of both Wise Agents generations.
    assert_eq!(out["request"]["_chat_id"], Value::Null);
    assert_eq!(
        out["request_headers"]["destination"],
        "/queue/request/WiseB"
    );

    // B was registered by its subscription, with the Wise Agents role.
    let agents = app
        .get("/v1/teams/wise/agents")
        .token(&team.key)
        .send()
        .await
        .expect_status(200);
    let b = agents.body["agents"]
        .as_array()
        .and_then(|list| list.iter().find(|x| x["agent_id"] == "WiseB"))
        .cloned()
        .expect("WiseB registered");
    assert_eq!(b["role"], "wise-agent");

    // WiseA's inbox, through REST: B's answer, a response with the Wise fields in data.
    let inbox = app.inbox(&a, "").await.expect_status(200);
    let messages = inbox.body["messages"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(messages.len(), 1, "{:#}", inbox.body);
    let answer = &messages[0];
    assert_eq!(answer["sender_agent_id"], "WiseB");
    assert_eq!(answer["message_type"], "response");
    assert_eq!(answer["content"]["text"], "4");
    assert_eq!(answer["content"]["data"]["_message_type"], "RESPONSE");
    assert_eq!(answer["context_reference"], "ctx-1");
    let raw = answer["content"]["data"]["stomp_body"]
        .as_str()
        .unwrap_or_default();
    assert!(raw.starts_with("!wiseagents.WiseAgentMessage"), "{raw}");
    assert!(
        raw.contains("_message: '4'"),
        "the body is kept byte for byte: {raw}"
    );

    // … and live on WiseA's WebSocket.
    let pushed = ws.next_of("message").await;
    assert_eq!(pushed["message"]["message_id"], answer["message_id"]);

    let metrics = app.get("/metrics").send().await.expect_status(200);
    let text = metrics.body.as_str().unwrap_or_default().to_owned();
    assert!(text.contains("switchboard_stomp_frames_in_total"), "{text}");
}

#[tokio::test]
async fn a_message_waits_for_an_agent_that_subscribes_later() {
    if !crate::python::available("a_message_waits_for_an_agent_that_subscribes_later") {
        return;
    }
    let (app, team) = start().await;
    app.wise_agent(&team, "WiseLate").await;
    let out = scenario(&app, &team, "late").await;
    assert_eq!(out["late"]["_message"], "are you there?");
}

#[tokio::test]
async fn a_body_that_would_run_code_is_refused_and_never_reaches_the_receiver() {
    if !crate::python::available(
        "a_body_that_would_run_code_is_refused_and_never_reaches_the_receiver",
    ) {
        return;
    }
    let (app, team) = start().await;
    let b = app.wise_agent(&team, "WiseB").await;
    let out = scenario(&app, &team, "malicious").await;
    let error = out["error"].as_str().unwrap_or_default();
    assert!(error.contains("python/object/apply"), "{error}");
    assert_eq!(out["receiver_got"], json!(["harmless"]));
    // Stored: only the harmless one.
    let inbox = app.inbox(&b, "").await.expect_status(200);
    let texts: Vec<&Value> = inbox.body["messages"]
        .as_array()
        .map(|m| m.iter().map(|x| &x["content"]["text"]).collect())
        .unwrap_or_default();
    assert_eq!(texts, [&json!("harmless")]);
    let metrics = app.get("/metrics").send().await.expect_status(200);
    let text = metrics.body.as_str().unwrap_or_default().to_owned();
    assert!(
        text.lines()
            .any(|l| l.starts_with("switchboard_stomp_refused_bodies_total") && !l.ends_with(" 0")),
        "{text}"
    );
}

#[tokio::test]
async fn a_rest_message_reaches_a_stomp_agent_as_a_body_pyyaml_loads() {
    if !crate::python::available("a_rest_message_reaches_a_stomp_agent_as_a_body_pyyaml_loads") {
        return;
    }
    let (app, team) = start().await;
    let sender = app.agent(&team, "planner", &[]).await;
    app.wise_agent(&team, "WiseR").await;
    let stomp = app.server().stomp_addr().expect("STOMP listener");
    let port = stomp.port().to_string();
    let (script, ready) = python::start(
        "stomp_wise.py",
        &["receive", "127.0.0.1", &port, &team.id, &team.key],
    )
    .await;
    assert_eq!(ready["ready"], true);
    let text = "Review \"this\": a\nb\u{85}c: d # not a comment";
    app.send_with(
        &sender,
        json!({"recipient_agent_ids": ["WiseR"], "message_type": "request",
               "content": {"text": text}, "context_reference": "doc-9", "thread_id": "t-1"}),
    )
    .await
    .expect_status(201);
    let out = python::finish(script).await;
    assert_eq!(out["type"], "WiseAgentMessage");
    assert_eq!(out["got"]["_message"], text);
    assert_eq!(out["got"]["_sender"], "planner");
    assert_eq!(out["got"]["_message_type"], "QUERY");
    assert_eq!(out["got"]["_context_name"], "doc-9");
    assert_eq!(out["got"]["_chat_id"], "t-1");
    assert_eq!(out["headers"]["switchboard-sender"], "planner");
}

/// Wise Agents' `PassThroughClientAgent` forwards the request it got as the `_message`
/// of its own (`tests/interop/stomp_wise.py pass_through`, with its exact call): the gate
/// refused the nested message ("tag … is not allowed"), closed the connection, and since
/// Wise Agents never resubscribes, the pass-through was deaf for good. It goes through
/// now, nested as it came, and the text the team reads is the question.
#[tokio::test]
async fn a_pass_through_agent_forwards_a_request_nested_in_its_own() {
    if !crate::python::available("a_pass_through_agent_forwards_a_request_nested_in_its_own") {
        return;
    }
    let (app, team) = start().await;
    let out = scenario(&app, &team, "pass_through").await;
    assert_eq!(out["questions"], json!(["What is 2+2?", "And 3+3?"]));
    assert_eq!(out["outer"]["_sender"], "Pass");
    assert_eq!(out["inner"]["_sender"], "WiseClient");
    assert_eq!(out["inner"]["_message_type"], "QUERY");
    assert_eq!(out["inner"]["_route_response_to"], "WiseClient");
    // Both stayed subscribed to the end (a refused body would have closed Pass).
    let worker = app
        .get("/v1/teams/wise/agents/WiseWorker")
        .token(&team.key)
        .send()
        .await
        .expect_status(200);
    assert_eq!(worker.body["agent"]["deaf"], false, "{:#}", worker.body);
    let pass = app
        .get("/v1/teams/wise/agents/Pass")
        .token(&team.key)
        .send()
        .await
        .expect_status(200);
    assert_eq!(pass.body["agent"]["deaf"], false, "{:#}", pass.body);
}
