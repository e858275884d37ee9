//! Budgets (issue 45): the operator's ceilings (`--budget`), a team's lower ones, the
//! refusal (`429 RATE_LIMITED` with `Retry-After`), tasks counted apart from messages, a
//! thread's budget, the count shared by two nodes, and who is told.
//!
//! Day windows throughout: a minute window could turn over in the middle of a test.

use serde_json::{Value, json};
use switchboard_types::budgets::Budget;

use crate::support::{Agent, Res, Team, TestApp};

/// Sets the team's budgets with `token`.
async fn set_budgets(app: &TestApp, team: &Team, token: &str, budgets: Value) -> Res {
    app.patch(&format!("/v1/teams/{}", team.id))
        .token(token)
        .json(json!({"budgets": budgets}))
        .send()
        .await
}

/// A send from `from` to `to` in `thread` (none: no thread).
async fn send_in(app: &TestApp, from: &Agent, to: &Agent, thread: Option<&str>) -> Res {
    app.send_with(
        from,
        json!({"recipient_agent_ids": [to.id], "thread_id": thread}),
    )
    .await
}

/// A request from `from` to `to` that requires a response; its id.
async fn ask(app: &TestApp, from: &Agent, to: &Agent) -> String {
    let body = json!({"recipient_agent_ids": [to.id], "message_type": "request", "requires_response": true});
    app.send_with(from, body)
        .await
        .expect_status(201)
        .str("message_id")
}

async fn respond(app: &TestApp, by: &Agent, message: &str) -> Res {
    app.post(&format!("/v1/messages/{message}/responses"))
        .token(&by.token)
        .json(json!({"responder_agent_id": by.id, "response_content": {"text": "done", "status": "completed"}}))
        .send()
        .await
}

/// How many messages the team holds (the team key's traffic view).
async fn stored(app: &TestApp, team: &Team) -> usize {
    let res = app
        .get(&format!("/v1/teams/{}/messages?limit=100", team.id))
        .token(&team.key)
        .send()
        .await
        .expect_status(200);
    res.body["entries"].as_array().map_or(0, Vec::len)
}

/// The refusal is the contract's body with the spent budget in `details`, and the header
/// a stock HTTP client waits by.
fn assert_spent(res: Res, budget: &str, limit: u64, agent: &str) -> Value {
    let res = res.expect_error(429, "RATE_LIMITED");
    let details = res.body["details"].clone();
    assert_eq!(details["budget"], budget, "{details}");
    assert_eq!(details["limit"], limit, "{details}");
    assert_eq!(details["agent_id"], agent, "{details}");
    assert_eq!(details["window_seconds"], 86_400, "{details}");
    let wait = details["retry_after_ms"].as_u64().expect("retry_after_ms");
    assert!((1_000..=86_400_000).contains(&wait), "{details}");
    let header: u64 = res
        .headers
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok())
        .expect("a Retry-After header in seconds");
    assert_eq!(header, wait.div_ceil(1000), "{details}");
    details
}

#[tokio::test]
async fn an_agents_budget_refuses_past_its_limit_and_stores_nothing() {
    let app = TestApp::start_with(|c| {
        c.budgets.set(Budget::AgentMessagesPerDay, Some(3));
    })
    .await;
    let team = app.team("spend").await;
    let (a, b, c) = (
        app.agent(&team, "a", &[]).await,
        app.agent(&team, "b", &[]).await,
        app.agent(&team, "c", &[]).await,
    );
    let view = app
        .get(&format!("/v1/teams/{}", team.id))
        .token(&team.key)
        .send()
        .await
        .expect_status(200);
    assert_eq!(view.body["budgets"]["agent_messages_per_day"], Value::Null);
    assert_eq!(view.body["budgets_in_force"]["agent_messages_per_day"], 3);
    let question = ask(&app, &b, &a).await;
    let first = ask(&app, &a, &b).await;
    app.send(&a, &[&b], "2").await;
    // A broadcast is a message too.
    app.post("/v1/broadcasts")
        .token(&a.token)
        .json(json!({"sender_agent_id": "a", "update_type": "progress", "urgency": "info", "content": {"summary": "s"}}))
        .send()
        .await
        .expect_status(201);
    assert_spent(
        send_in(&app, &a, &b, None).await,
        "agent_messages_per_day",
        3,
        "a",
    );
    // So is a response: `a` has nothing left for it either.
    let answer = respond(&app, &a, &question).await;
    assert_spent(answer, "agent_messages_per_day", 3, "a");
    assert_eq!(
        stored(&app, &team).await,
        4,
        "nothing of a refused send is kept"
    );
    // Each agent has its own count.
    app.send(&c, &[&b], "c's own").await;
    respond(&app, &b, &first).await.expect_status(201);
    app.stop().await;
}

/// Above the server's ceiling, out of range, unknown, or by an agent: refused.
async fn refused_settings(app: &TestApp, team: &Team, member: &Agent) {
    let key = &team.key;
    set_budgets(app, team, key, json!({"agent_messages_per_day": 11}))
        .await
        .expect_invalid("budgets.agent_messages_per_day");
    set_budgets(app, team, key, json!({"thread_messages_per_day": 0}))
        .await
        .expect_invalid("budgets.thread_messages_per_day");
    set_budgets(app, team, key, json!({"messages_per_hour": 5}))
        .await
        .expect_error(400, "VALIDATION_ERROR");
    set_budgets(
        app,
        team,
        &member.token,
        json!({"agent_messages_per_day": 1}),
    )
    .await
    .expect_error(403, "FORBIDDEN");
}

#[tokio::test]
async fn a_team_lowers_a_budget_never_raises_it_and_a_thread_has_its_own() {
    let app = TestApp::start_with(|c| {
        c.budgets.set(Budget::AgentMessagesPerDay, Some(10));
    })
    .await;
    let team = app.team("lower").await;
    let (a, b, c) = (
        app.agent(&team, "a", &[]).await,
        app.agent(&team, "b", &[]).await,
        app.agent(&team, "c", &[]).await,
    );
    refused_settings(&app, &team, &a).await;
    let set = set_budgets(
        &app,
        &team,
        &team.key,
        json!({"agent_messages_per_day": 4, "thread_messages_per_day": 3}),
    )
    .await
    .expect_status(200);
    assert_eq!(set.body["budgets"]["agent_messages_per_day"], 4);
    assert_eq!(set.body["budgets_in_force"]["agent_messages_per_day"], 4);
    assert_eq!(set.body["budgets_in_force"]["thread_messages_per_day"], 3);
    // The thread's budget counts everyone in it.
    send_in(&app, &a, &b, Some("t1")).await.expect_status(201);
    send_in(&app, &a, &b, Some("t1")).await.expect_status(201);
    send_in(&app, &c, &b, Some("t1")).await.expect_status(201);
    let details = assert_spent(
        send_in(&app, &c, &b, Some("t1")).await,
        "thread_messages_per_day",
        3,
        "c",
    );
    assert_eq!(details["thread_id"], "t1");
    send_in(&app, &c, &b, Some("t2")).await.expect_status(201);
    // The team's lower agent budget: `a` has sent 2, then 2 more, then no more.
    send_in(&app, &a, &b, None).await.expect_status(201);
    send_in(&app, &a, &b, Some("t3")).await.expect_status(201);
    assert_spent(
        send_in(&app, &a, &b, None).await,
        "agent_messages_per_day",
        4,
        "a",
    );
    // Back to the server's ceiling: `a` sends again (5 of 10), and the setting survives
    // a restart.
    set_budgets(&app, &team, &team.key, json!({}))
        .await
        .expect_status(200);
    send_in(&app, &a, &b, None).await.expect_status(201);
    set_budgets(&app, &team, &team.key, json!({"agent_messages_per_day": 5}))
        .await
        .expect_status(200);
    let mut app = app;
    app.restart().await;
    assert_spent(
        send_in(&app, &a, &b, None).await,
        "agent_messages_per_day",
        5,
        "a",
    );
    app.stop().await;
}

#[tokio::test]
async fn tasks_spend_the_task_budgets_and_messages_the_message_budgets() {
    let app = TestApp::start().await;
    let team = app.team("tasks").await;
    let (a, b) = (
        app.agent(&team, "a", &["work"]).await,
        app.agent(&team, "b", &["work"]).await,
    );
    set_budgets(
        &app,
        &team,
        &team.key,
        json!({"agent_tasks_per_day": 2, "team_messages_per_day": 2}),
    )
    .await
    .expect_status(200);
    for i in 0..2 {
        app.submit(
            &a,
            json!({"task_id": format!("t{i}"), "target_agent_id": "b"}),
        )
        .await
        .expect_status(201);
    }
    let refused = app
        .submit(&a, json!({"task_id": "t2", "target_agent_id": "b"}))
        .await;
    assert_spent(refused, "agent_tasks_per_day", 2, "a");
    let missing = app.get("/v1/tasks/t2").token(&a.token).send().await;
    missing.expect_error(404, "TASK_NOT_FOUND");
    // The task notices the server sent spent no message budget: two sends still go.
    app.send(&b, &[&a], "one").await;
    app.send(&a, &[&b], "two").await;
    assert_spent(
        send_in(&app, &b, &a, None).await,
        "team_messages_per_day",
        2,
        "b",
    );
    app.stop().await;
}

/// Two nodes spend from one count: of 30 sends spread over both at once, exactly the
/// team's 20 are accepted, and exactly those are stored.
#[tokio::test]
async fn two_nodes_spend_from_one_count() {
    let Some(one) = TestApp::start_on_postgres_with(|c| {
        c.budgets.set(Budget::TeamMessagesPerDay, Some(20));
    })
    .await
    else {
        return;
    };
    let team = one.team("nodes").await;
    let sink = one.agent(&team, "sink", &[]).await;
    let mut senders = Vec::new();
    for i in 0..3 {
        senders.push(one.agent(&team, &format!("s{i}"), &[]).await);
    }
    let two = one.another_node().await;
    let mut calls = Vec::new();
    for (i, s) in senders.iter().enumerate() {
        for k in 0..10 {
            let node = if (i + k) % 2 == 0 { &one } else { &two };
            calls.push(send_in(node, s, &sink, None));
        }
    }
    let answers = futures_util::future::join_all(calls).await;
    let accepted = answers.iter().filter(|r| r.status == 201).count();
    let refused: Vec<&Res> = answers.iter().filter(|r| r.status != 201).collect();
    assert_eq!(accepted, 20, "the budget, across the nodes");
    assert!(
        refused
            .iter()
            .all(|r| r.status == 429 && r.body["details"]["budget"] == "team_messages_per_day"),
        "{:?}",
        refused.iter().map(|r| &r.body).collect::<Vec<_>>()
    );
    assert_eq!(stored(&two, &team).await, 20);
    two.stop().await;
    one.stop().await;
}

/// The supervisor gets one notice per spent count and window, the activity watchers a
/// frame saying what is spent, and the metric counts every refusal.
#[tokio::test]
async fn a_spent_budget_is_told_once_to_the_supervisor_and_the_watchers() {
    let app = TestApp::start().await;
    let team = app.team("told").await;
    let (a, b, boss) = (
        app.agent(&team, "a", &[]).await,
        app.agent(&team, "b", &[]).await,
        app.agent(&team, "boss", &[]).await,
    );
    app.patch(&format!("/v1/teams/{}", team.id))
        .token(&team.key)
        .json(json!({
            "loop_guard": {"supervisor_agent_id": "boss"},
            "budgets": {"agent_messages_per_day": 1}
        }))
        .send()
        .await
        .expect_status(200);
    let (mut watch, _, _) = app.ws_caught_up(&boss, "?activity=true").await;
    app.send(&a, &[&b], "the one").await;
    for _ in 0..2 {
        assert_spent(
            send_in(&app, &a, &b, None).await,
            "agent_messages_per_day",
            1,
            "a",
        );
    }
    let mut frame = watch.next_of("team_activity").await;
    while frame["activity"]["budget_exhausted"].is_null() {
        frame = watch.next_of("team_activity").await;
    }
    let spent = &frame["activity"]["budget_exhausted"];
    assert_eq!(spent["budget"], "agent_messages_per_day", "{frame}");
    assert_eq!(spent["agent_id"], "a", "{frame}");
    let mut notices = Vec::new();
    for _ in 0..100 {
        let inbox = app.inbox(&boss, "?limit=50").await.expect_status(200);
        notices = inbox.body["messages"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .into_iter()
            .filter(|m| m["content"]["data"]["type"] == "budget_exhausted")
            .collect();
        if !notices.is_empty() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    // A moment for a second notice that must not come.
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    let inbox = app.inbox(&boss, "?limit=50").await.expect_status(200);
    let all = inbox.body["messages"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(all.len(), 1, "one notice for two refusals: {all:#?}");
    assert_eq!(notices[0]["sender_agent_id"], "a");
    assert_eq!(
        notices[0]["content"]["data"]["budget"],
        "agent_messages_per_day"
    );
    let metrics = app.get("/metrics").send().await.expect_status(200);
    let text = metrics.body.as_str().unwrap_or_default();
    let line = "switchboard_budgets_exhausted_total{budget=\"agent_messages_per_day\"}";
    let count: f64 = text
        .lines()
        .find(|l| l.starts_with(line))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no budget counter in:\n{text}"));
    assert!(count >= 2.0, "{count}");
    app.stop().await;
}

/// Each transport's stock client gets a spent budget in its own form (see
/// `tests/interop/budgets.py`), and nothing refused is stored.
#[tokio::test]
async fn every_transport_says_a_budget_is_spent_in_its_own_form() {
    if !crate::python::available("every_transport_says_a_budget_is_spent_in_its_own_form") {
        return;
    }
    let app = TestApp::start_with(|c| {
        c.stomp_listen = Some("127.0.0.1:0".parse().expect("addr"));
        c.budgets.set(Budget::AgentMessagesPerDay, Some(1));
    })
    .await;
    let team = app.team("forms").await;
    let mut tokens = Vec::new();
    for id in ["R", "W", "S", "M", "T"] {
        tokens.push(app.agent(&team, id, &[]).await.token);
    }
    let port = app.server().stomp_addr().expect("STOMP").port().to_string();
    let base = app.url("");
    let mut args = vec![base.as_str(), port.as_str()];
    args.extend(tokens[..4].iter().map(String::as_str));
    let out = crate::python::run("budgets.py", &args).await;
    for agent in ["R", "W", "S", "M"] {
        assert_eq!(out[agent]["first"], true, "{agent}: {out}");
    }
    assert_eq!(out["R"]["status"], 429, "{out}");
    assert!(
        out["R"]["retry_after"]
            .as_str()
            .is_some_and(|s| s.parse::<u64>().is_ok())
    );
    assert_eq!(
        out["R"]["body"]["details"]["budget"],
        "agent_messages_per_day"
    );
    let ws = &out["W"]["refusal"];
    assert_eq!(ws["ok"], false, "{out}");
    assert_eq!(ws["error"]["error_code"], "RATE_LIMITED");
    assert_eq!(ws["error"]["details"]["agent_id"], "W");
    assert_eq!(out["S"]["receipt"], false, "{out}");
    let stomp = out["S"]["error"][0].as_str().unwrap_or_default();
    assert!(stomp.starts_with("RATE_LIMITED:"), "{out}");
    assert_eq!(out["M"]["error"], true, "{out}");
    assert!(out["M"].to_string().contains("RATE_LIMITED"), "{out}");
    assert_eq!(
        stored(&app, &team).await,
        4,
        "one message each, nothing refused"
    );
    app.stop().await;
}
