//! Routing when one agent is connected several ways (AEA's precedence, adapted): an
//! explicit `route` wins, a reply goes back by the transport its request came from
//! while that one is live, everything else goes to every live connection, and nothing
//! routed is lost: it stays in the inbox. Driven with stomp.py as Wise Agents drive it
//! (`tests/interop/stomp_wise.py routes`) and a WebSocket of the same agent.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::start;
use super::wire::presence;
use crate::python;
use crate::support::{Agent, Team, TestApp};

/// Waits until the registry shows `agent`'s STOMP queues as `queues`.
async fn until_queues(app: &TestApp, team: &Team, agent: &str, queues: Value) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while presence(app, team, agent).await.0 != queues {
        assert!(
            Instant::now() < deadline,
            "{:?}",
            presence(app, team, agent).await
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The newest message of `agent`'s inbox from `sender`, polled until one is there.
async fn newest_from(app: &TestApp, agent: &Agent, sender: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let inbox = app.inbox(agent, "").await.expect_status(200);
        if let Some(found) = inbox.body["messages"]
            .as_array()
            .and_then(|list| list.iter().find(|m| m["sender_agent_id"] == sender))
        {
            return found.clone();
        }
        assert!(Instant::now() < deadline, "nothing from {sender}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn route_of(inbox: &Value, text: &str) -> Value {
    inbox["messages"]
        .as_array()
        .and_then(|list| list.iter().find(|m| m["content"]["text"] == text))
        .map(|m| m.get("route").cloned().unwrap_or(Value::Null))
        .unwrap_or_else(|| panic!("'{text}' in the inbox: {inbox:#}"))
}

#[tokio::test]
async fn explicit_routes_win_and_a_reply_goes_back_the_way_its_request_came() {
    if !crate::python::available(
        "explicit_routes_win_and_a_reply_goes_back_the_way_its_request_came",
    ) {
        return;
    }
    let (app, team) = start().await;
    let planner = app.agent(&team, "planner", &[]).await;
    let wise = app.wise_agent(&team, "WiseRt").await;
    let (mut ws, _, _) = app.ws_caught_up(&wise, "").await;
    let port = app
        .server()
        .stomp_addr()
        .expect("STOMP listener")
        .port()
        .to_string();
    let (script, ready) = python::start(
        "stomp_wise.py",
        &["routes", "127.0.0.1", &port, &team.id, &team.key],
    )
    .await;
    assert_eq!(ready["ready"], true);
    until_queues(&app, &team, "WiseRt", json!(["request", "response"])).await;
    let request = newest_from(&app, &planner, "WiseRt").await;

    // The reply goes back by STOMP only, where the request came from.
    let reply = app
        .send_with(
            &planner,
            json!({"recipient_agent_ids": ["WiseRt"], "message_type": "response",
                   "content": {"text": "by STOMP"}, "in_reply_to": request["message_id"]}),
        )
        .await
        .expect_status(201);
    assert_eq!(
        reply.body["delivery_status"]["delivered_to"],
        json!(["WiseRt"])
    );
    // An explicit route wins: one for the WebSocket only, then one for STOMP only.
    for (text, route) in [("ws only", "websocket"), ("stomp only", "stomp")] {
        app.send_with(
            &planner,
            json!({"recipient_agent_ids": ["WiseRt"], "content": {"text": text},
                   "route": route}),
        )
        .await
        .expect_status(201);
    }
    let out = python::finish(script).await;
    assert_eq!(out["responses"], json!(["by STOMP"]));
    assert_eq!(
        out["requests"],
        json!(["stomp only"]),
        "nothing routed elsewhere"
    );
    // The WebSocket got only what was routed to it.
    let pushed = ws.next_of("message").await;
    assert_eq!(pushed["message"]["content"]["text"], "ws only");
    assert_eq!(pushed["message"]["route"], "websocket");
    ws.assert_quiet().await;

    let request_id = request["message_id"].as_str().expect("id").to_owned();
    without_stomp(&app, &team, &planner, &wise, &mut ws, &request_id).await;
}

/// After WiseRt's STOMP connections closed: the reply rule no longer routes, explicit
/// routes wait, the WebSocket replay skips what went to STOMP, the inbox holds it all.
async fn without_stomp(
    app: &TestApp,
    team: &Team,
    planner: &Agent,
    wise: &Agent,
    ws: &mut crate::wsclient::Ws,
    request_id: &str,
) {
    // STOMP is gone: a derived route no longer applies (it would wait for a connection
    // Wise Agents never reopen), so the next reply goes to every live connection.
    until_queues(app, team, "WiseRt", json!([])).await;
    let again = app
        .send_with(
            planner,
            json!({"recipient_agent_ids": ["WiseRt"], "message_type": "response",
                   "content": {"text": "anywhere"}, "in_reply_to": request_id}),
        )
        .await
        .expect_status(201);
    assert_eq!(
        again.body["delivery_status"]["delivered_to"],
        json!(["WiseRt"])
    );
    let pushed = ws.next_of("message").await;
    assert_eq!(pushed["message"]["content"]["text"], "anywhere");
    assert!(pushed["message"].get("route").is_none(), "{pushed:#}");
    // An explicit route to a transport that is not live: it waits in the inbox.
    let waiting = app
        .send_with(
            planner,
            json!({"recipient_agent_ids": ["WiseRt"], "content": {"text": "later"},
                   "route": "stomp"}),
        )
        .await
        .expect_status(201);
    assert_eq!(
        waiting.body["delivery_status"]["pending_delivery"],
        json!(["WiseRt"])
    );
    ws.assert_quiet().await;

    // A WebSocket replay skips what was routed to STOMP.
    let (_, replayed, _) = app.ws_caught_up(wise, "?since=0").await;
    let texts: Vec<&Value> = replayed
        .iter()
        .filter(|f| f["type"] == "message")
        .map(|f| &f["message"]["content"]["text"])
        .collect();
    assert_eq!(texts, [&json!("ws only"), &json!("anywhere")]);
    // Nothing is lost: the inbox holds all of it, each with its route.
    let inbox = app.inbox(wise, "").await.expect_status(200);
    assert_eq!(inbox.body["total_count"], 5);
    assert_eq!(route_of(&inbox.body, "by STOMP"), "stomp");
    assert_eq!(route_of(&inbox.body, "ws only"), "websocket");
    assert_eq!(route_of(&inbox.body, "stomp only"), "stomp");
    assert_eq!(route_of(&inbox.body, "anywhere"), Value::Null);
    assert_eq!(route_of(&inbox.body, "later"), "stomp");
}

#[tokio::test]
async fn a_response_goes_back_by_websocket_and_a_rest_request_has_no_route() {
    let (app, team) = start().await;
    let asker = app.agent(&team, "asker", &[]).await;
    let helper = app.agent(&team, "helper", &[]).await;
    let (mut ws, _, _) = app.ws_caught_up(&asker, "").await;
    // Asked over the WebSocket, answered with RESPOND_TO_MESSAGE: back by WebSocket.
    let asked = ws
        .call(
            "send_message",
            json!({"sender_agent_id": "asker", "recipient_agent_ids": ["helper"],
                   "message_type": "request", "content": {"text": "by ws?"},
                   "requires_response": true}),
        )
        .await;
    assert_eq!(asked["ok"], true, "{asked:#}");
    let asked_id = asked["result"]["message_id"]
        .as_str()
        .expect("id")
        .to_owned();
    app.post(&format!("/v1/messages/{asked_id}/responses"))
        .token(&helper.token)
        .json(json!({"responder_agent_id": "helper",
                     "response_content": {"text": "yes", "status": "completed"}}))
        .send()
        .await
        .expect_status(201);
    let pushed = ws.next_of("message").await;
    assert_eq!(pushed["message"]["content"]["text"], "yes");
    assert_eq!(pushed["message"]["route"], "websocket");
    // Asked over REST: REST is no live route, so the answer goes everywhere.
    let rest_id = app.send(&asker, &[&helper], "by rest?").await;
    app.send_with(
        &helper,
        json!({"recipient_agent_ids": ["asker"], "content": {"text": "unrouted"},
               "in_reply_to": rest_id}),
    )
    .await
    .expect_status(201);
    let pushed = ws.next_of("message").await;
    assert_eq!(pushed["message"]["content"]["text"], "unrouted");
    assert!(pushed["message"].get("route").is_none(), "{pushed:#}");
    // A reply that also goes to others is not routed by the rule (it is the requester's
    // way back, not theirs).
    let third = app.agent(&team, "third", &[]).await;
    app.send_with(
        &helper,
        json!({"recipient_agent_ids": ["asker", "third"], "content": {"text": "to both"},
               "in_reply_to": asked_id}),
    )
    .await
    .expect_status(201);
    let inbox = app.inbox(&third, "").await.expect_status(200);
    assert_eq!(route_of(&inbox.body, "to both"), Value::Null);
    // A route that is not a live transport is a validation error.
    app.send_with(
        &asker,
        json!({"recipient_agent_ids": ["helper"], "route": "pigeon"}),
    )
    .await
    .expect_invalid("route");
    app.send_with(
        &asker,
        json!({"recipient_agent_ids": ["helper"], "route": "rest"}),
    )
    .await
    .expect_invalid("route");
}

/// A message routed to the WebSocket waits in the inbox while nothing is live; a STOMP
/// subscription that starts afterwards replays past it, as it does live. The route
/// filter is the core feed's alone, for every transport, replay and pushes alike (the
/// STOMP queues had a copy of it). Driven with stomp.py (`stomp_wise.py receive`: the
/// first message the subscriber gets).
#[tokio::test]
async fn a_stomp_replay_skips_what_was_routed_to_the_websocket() {
    if !crate::python::available("a_stomp_replay_skips_what_was_routed_to_the_websocket") {
        return;
    }
    let (app, team) = start().await;
    let planner = app.agent(&team, "planner", &[]).await;
    app.wise_agent(&team, "WiseR").await;
    for (text, route) in [
        ("for the dashboard", json!("websocket")),
        ("for anyone", Value::Null),
    ] {
        app.send_with(
            &planner,
            json!({"recipient_agent_ids": ["WiseR"], "content": {"text": text}, "route": route}),
        )
        .await
        .expect_status(201);
    }
    let out = super::scenario(&app, &team, "receive").await;
    assert_eq!(out["got"]["_message"], "for anyone", "{out:#}");
}
