//! The loop guard (issue 45): chains counted by the server, `max_hops`, the cycle rule on
//! every transport, the team's settings, and who is told.

use serde_json::{Value, json};

use crate::python;
use crate::support::{Agent, Team, TestApp};

/// Sets the team's loop guard (the team key).
async fn guard(app: &TestApp, team: &Team, guard: Value) -> Value {
    app.patch(&format!("/v1/teams/{}", team.id))
        .token(&team.key)
        .json(json!({"loop_guard": guard}))
        .send()
        .await
        .expect_status(200)
        .body["loop_guard"]
        .clone()
}

/// The team's traffic (the team key), oldest first.
async fn traffic(app: &TestApp, team: &Team) -> Vec<Value> {
    let res = app
        .get(&format!("/v1/teams/{}/messages?limit=100", team.id))
        .token(&team.key)
        .send()
        .await
        .expect_status(200);
    res.body["entries"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .map(|entry| entry["message"].clone())
        .collect()
}

/// A reply from `from` to `to` answering `original`.
async fn reply(app: &TestApp, from: &Agent, to: &Agent, original: &str) -> crate::support::Res {
    app.send_with(
        from,
        json!({"recipient_agent_ids": [to.id], "in_reply_to": original}),
    )
    .await
}

#[tokio::test]
async fn max_hops_refuses_the_65th_hop_and_not_the_64th() {
    let app = TestApp::start().await;
    let team = app.team("hops").await;
    let (a, b) = (
        app.agent(&team, "a", &[]).await,
        app.agent(&team, "b", &[]).await,
    );
    // Two agents answering each other is a cycle too: that rule is off here.
    guard(&app, &team, json!({"cycle_messages": 0})).await;
    let first = app.send(&a, &[&b], "hop 1").await;
    let mut last = first.clone();
    for hop in 2..=64 {
        let (from, to) = if hop % 2 == 0 { (&b, &a) } else { (&a, &b) };
        last = reply(&app, from, to, &last)
            .await
            .expect_status(201)
            .str("message_id");
    }
    // b sent hop 64; b again adds no hop (replying to itself moves no work), a does.
    reply(&app, &b, &a, &last).await.expect_status(201);
    let refused = reply(&app, &a, &b, &last)
        .await
        .expect_error(409, "LOOP_DETECTED");
    let details = &refused.body["details"];
    assert_eq!(details["rule"], "max_hops", "{details}");
    assert_eq!(details["chain_length"], 65);
    assert_eq!(details["max_hops"], 64);
    assert_eq!(details["first_message_id"], first.as_str());
    assert_eq!(details["agent_id"], "a");
    assert_eq!(details["chain_agent_ids"], json!(["b", "a"]), "{details}");
    // Nothing of the refused send was stored.
    assert_eq!(traffic(&app, &team).await.len(), 65);
    // Off, the chain goes on.
    guard(&app, &team, json!({"max_hops": 0, "cycle_messages": 0})).await;
    reply(&app, &a, &b, &last).await.expect_status(201);
    app.stop().await;
}

#[tokio::test]
async fn a_thread_a_response_and_a_publish_continue_a_chain() {
    let app = TestApp::start().await;
    let team = app.team("chain").await;
    let (a, b) = (
        app.agent(&team, "a", &[]).await,
        app.agent(&team, "b", &[]).await,
    );
    guard(&app, &team, json!({"max_hops": 3, "cycle_messages": 0})).await;
    let first = app
        .send_with(
            &a,
            json!({"recipient_agent_ids": ["b"], "thread_id": "t", "requires_response": true}),
        )
        .await
        .expect_status(201)
        .str("message_id");
    // Hop 2: b responds.
    app.post(&format!("/v1/messages/{first}/responses"))
        .token(&b.token)
        .json(json!({"responder_agent_id": "b", "response_content": {"text": "ok", "status": "partial"}}))
        .send()
        .await
        .expect_status(201);
    // Hop 3: a publishes in the thread (naming no message: the thread's newest).
    app.post("/v1/publish")
        .token(&a.token)
        .json(json!({"cause_by": "Plan", "content": {"text": "plan"}, "thread_id": "t"}))
        .send()
        .await
        .expect_status(201);
    // Hop 4: b names only the thread; a response to the first message is hop 2 again.
    let refused = app
        .send_with(&b, json!({"recipient_agent_ids": ["a"], "thread_id": "t"}))
        .await
        .expect_error(409, "LOOP_DETECTED");
    assert_eq!(refused.body["details"]["chain_length"], 4);
    assert_eq!(refused.body["details"]["first_message_id"], first.as_str());
    app.post(&format!("/v1/messages/{first}/responses"))
        .token(&b.token)
        .json(json!({"responder_agent_id": "b", "response_content": {"text": "done", "status": "completed"}}))
        .send()
        .await
        .expect_status(201);
    // Another thread is another chain.
    app.send_with(&b, json!({"recipient_agent_ids": ["a"], "thread_id": "u"}))
        .await
        .expect_status(201);
    app.stop().await;
}

#[tokio::test]
async fn a_chain_of_tasks_is_counted_through_parent_task_id() {
    let app = TestApp::start().await;
    let team = app.team("tasks").await;
    let (a, b) = (
        app.agent(&team, "a", &[]).await,
        app.agent(&team, "b", &[]).await,
    );
    let c = app.agent(&team, "c", &[]).await;
    guard(&app, &team, json!({"max_hops": 2, "cycle_messages": 0})).await;
    let submit =
        |who: &Agent, body: Value| app.post("/v1/tasks").token(&who.token).json(body).send();
    let task = |me: &str, id: &str, to: &str, parent: Option<&str>| {
        let mut body = json!({"task_id": id, "description": "work", "originating_agent_id": me, "target_agent_id": to});
        if let Some(parent) = parent {
            body["parent_task_id"] = json!(parent);
        }
        body
    };
    submit(&a, task("a", "t1", "b", None))
        .await
        .expect_status(201);
    // b works on t1 and hands part of it to c: hop 2.
    submit(&b, task("b", "t2", "c", Some("t1")))
        .await
        .expect_status(201);
    let refused = submit(&c, task("c", "t3", "a", Some("t2")))
        .await
        .expect_error(409, "LOOP_DETECTED");
    assert_eq!(refused.body["details"]["first_task_id"], "t1");
    assert_eq!(refused.body["details"]["chain_length"], 3);
    // A parent the caller cannot see is no parent.
    let hidden = submit(&c, task("c", "t4", "a", Some("t1")))
        .await
        .expect_error(404, "TASK_NOT_FOUND");
    assert_eq!(hidden.body["details"]["field"], "parent_task_id");
    app.stop().await;
}

#[tokio::test]
async fn the_team_sets_its_guard_within_bounds() {
    let mut app = TestApp::start().await;
    let team = app.team("settings").await;
    let a = app.agent(&team, "a", &[]).await;
    let shown = app
        .get("/v1/teams/settings")
        .token(&team.key)
        .send()
        .await
        .expect_status(200);
    assert_eq!(
        shown.body["loop_guard"],
        json!({"max_hops": 64, "cycle_messages": 12, "cycle_window_seconds": 3600, "supervisor_agent_id": null})
    );
    let patch = |body: Value, token: &str| {
        app.patch("/v1/teams/settings")
            .token(token)
            .json(json!({"loop_guard": body}))
            .send()
    };
    for (body, field) in [
        (json!({"cycle_messages": 3}), "loop_guard.cycle_messages"),
        (json!({"cycle_messages": 64}), "loop_guard.cycle_messages"),
        (json!({"max_hops": 100_001}), "loop_guard.max_hops"),
        (
            json!({"cycle_window_seconds": 0}),
            "loop_guard.cycle_window_seconds",
        ),
        (json!({"max_hops": -1}), "loop_guard.max_hops"),
    ] {
        patch(body, &team.key).await.expect_invalid(field);
    }
    patch(json!({"hops": 3}), &team.key)
        .await
        .expect_error(400, "VALIDATION_ERROR");
    // A 400 naming the field: the team the request is about exists.
    patch(json!({"supervisor_agent_id": "nobody"}), &team.key)
        .await
        .expect_invalid("loop_guard.supervisor_agent_id");
    patch(json!({"max_hops": 5}), &a.token)
        .await
        .expect_error(403, "FORBIDDEN");
    // A guard given replaces the team's: what it leaves out takes its default.
    let set = guard(
        &app,
        &team,
        json!({"max_hops": 5, "supervisor_agent_id": "a"}),
    )
    .await;
    assert_eq!(
        set,
        json!({"max_hops": 5, "cycle_messages": 12, "cycle_window_seconds": 3600, "supervisor_agent_id": "a"})
    );
    let set = guard(&app, &team, json!({"cycle_messages": 20})).await;
    assert_eq!(set["max_hops"], 64);
    assert_eq!(set["supervisor_agent_id"], Value::Null);
    // It is stored, not only held: a restart reads it back.
    app.restart().await;
    let shown = app
        .get("/v1/teams/settings")
        .token(&team.key)
        .send()
        .await
        .expect_status(200);
    assert_eq!(shown.body["loop_guard"]["cycle_messages"], 20);
    app.stop().await;
}

#[tokio::test]
async fn a_client_cannot_say_how_long_its_chain_is() {
    let app = TestApp::start().await;
    let team = app.team("claims").await;
    let (a, _b) = (
        app.agent(&team, "a", &[]).await,
        app.agent(&team, "b", &[]).await,
    );
    for field in ["hops", "chain", "hop_count"] {
        app.send_with(&a, json!({"recipient_agent_ids": ["b"], field: 1}))
            .await
            .expect_error(400, "VALIDATION_ERROR");
    }
    app.stop().await;
}

/// Three agents going round on REST, a WebSocket and STOMP (the stock clients, see
/// `tests/interop/loop_guard.py`) are stopped by the cycle rule on each transport, with
/// nothing stored after the refusal; the supervisor and the activity watchers are told.
#[tokio::test]
async fn three_agents_on_three_transports_going_round_are_stopped_on_each() {
    if !python::available("three_agents_on_three_transports_going_round_are_stopped_on_each") {
        return;
    }
    let app = TestApp::start_with(|config| {
        config.stomp_listen = Some("127.0.0.1:0".parse().expect("addr"));
    })
    .await;
    let team = app.wise_team("circle").await;
    let r = app.agent(&team, "R", &[]).await;
    let w = app.agent(&team, "W", &[]).await;
    let boss = app.agent(&team, "boss", &[]).await;
    guard(&app, &team, json!({"supervisor_agent_id": "boss"})).await;
    let (mut watch, _, _) = app.ws_caught_up(&boss, "?activity=true").await;
    let port = app.server().stomp_addr().expect("STOMP").port().to_string();
    let base = app.url("");
    let out = python::run(
        "loop_guard.py",
        &[&base, &port, &team.id, &team.key, &r.token, &w.token],
    )
    .await;
    for starter in ["R", "W", "S"] {
        let circle = &out[starter];
        assert_eq!(circle["accepted"], 12, "{circle}");
        assert_eq!(circle["refused"], starter, "{circle}");
    }
    // Each transport's own form of the refusal.
    let rest = &out["R"]["refusal"];
    assert_eq!(rest["status"], 409, "{rest}");
    assert_eq!(rest["body"]["error_code"], "LOOP_DETECTED");
    assert_eq!(rest["body"]["details"]["rule"], "cycle");
    assert_eq!(rest["body"]["details"]["chain_length"], 13);
    assert_eq!(
        rest["body"]["details"]["cycle_agent_ids"],
        json!(["R", "W", "S"])
    );
    let ws = &out["W"]["refusal"];
    assert_eq!(ws["type"], "reply", "{ws}");
    assert_eq!(ws["ok"], false);
    assert_eq!(ws["error"]["error_code"], "LOOP_DETECTED");
    assert_eq!(
        ws["error"]["details"]["cycle_agent_ids"],
        json!(["W", "S", "R"])
    );
    let stomp = &out["S"]["refusal"];
    let body = stomp["body"].as_str().unwrap_or_default();
    assert!(body.starts_with("LOOP_DETECTED: "), "{stomp}");
    assert_eq!(out["fresh_thread_accepted"], true, "{out}");
    // Nothing after a refusal was stored: twelve messages per circle.
    let messages = traffic(&app, &team).await;
    for starter in ["R", "W", "S"] {
        let thread = format!("circle-{starter}");
        let n = messages
            .iter()
            .filter(|m| m["thread_id"] == thread.as_str())
            .count();
        assert_eq!(n, 12, "{thread}");
    }
    told(&app, &boss, &mut watch).await;
    app.stop().await;
}

/// The supervisor got one notice per stopped chain; the watchers a `team_activity`
/// frame saying what was stopped; the metric counts the refusals.
async fn told(app: &TestApp, boss: &Agent, watch: &mut crate::wsclient::Ws) {
    let mut notices = Vec::new();
    for _ in 0..100 {
        let inbox = app.inbox(boss, "?limit=50").await.expect_status(200);
        notices = inbox.body["messages"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .into_iter()
            .filter(|m| m["content"]["data"]["type"] == "loop_detected")
            .collect();
        if notices.len() >= 3 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let mut refused: Vec<String> = notices
        .iter()
        .map(|n| n["sender_agent_id"].as_str().unwrap_or_default().to_owned())
        .collect();
    refused.sort();
    assert_eq!(refused, ["R", "S", "W"], "{notices:#?}");
    assert!(
        notices
            .iter()
            .all(|n| n["content"]["data"]["rule"] == "cycle")
    );
    let frame = watch.next_of("team_activity").await;
    let mut frame = frame;
    while frame["activity"]["loop_stopped"].is_null() {
        frame = watch.next_of("team_activity").await;
    }
    assert_eq!(
        frame["activity"]["loop_stopped"]["rule"], "cycle",
        "{frame}"
    );
    let metrics = app.get("/metrics").send().await.expect_status(200);
    let text = metrics.body.as_str().unwrap_or_default();
    let count: f64 = text
        .lines()
        .find(|l| l.starts_with("switchboard_loops_stopped_total{rule=\"cycle\"}"))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no loop counter in:\n{text}"));
    assert!(count >= 3.0, "{count}");
}
