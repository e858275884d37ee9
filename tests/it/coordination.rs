//! BROADCAST_UPDATE, REQUEST_ASSISTANCE, team communication metrics, rate limiting.

use serde_json::{Value, json};

use crate::support::{Agent, Res, TestApp};
use switchboard::core::ratelimit::RateLimit;

async fn broadcast(app: &TestApp, from: &Agent, fields: Value) -> Res {
    let mut body = json!({
        "sender_agent_id": from.id,
        "update_type": "progress",
        "urgency": "info",
        "content": {"summary": "Parser done", "details": "All tests pass", "impact": "Unblocks review", "action_required": false},
    });
    crate::support::merge(&mut body, fields);
    app.post("/v1/broadcasts")
        .token(&from.token)
        .json(body)
        .send()
        .await
}

async fn assist(app: &TestApp, from: &Agent, fields: Value) -> Res {
    let mut body = json!({
        "requester_agent_id": from.id,
        "assistance_type": "review",
        "required_capabilities": [],
        "request_details": {"description": "Need a second pair of eyes"},
    });
    crate::support::merge(&mut body, fields);
    app.post("/v1/assistance-requests")
        .token(&from.token)
        .json(body)
        .send()
        .await
}

#[tokio::test]
async fn a_broadcast_reaches_every_other_member() {
    let app = TestApp::start().await;
    let team = app.team("t").await;
    let lead = app.agent(&team, "lead", &[]).await;
    let a = app.agent(&team, "a", &[]).await;
    let b = app.agent(&team, "b", &[]).await;
    let res = broadcast(
        &app,
        &lead,
        json!({"urgency": "action_required", "content": {"action_required": true}}),
    )
    .await
    .expect_status(201);
    assert_eq!(res.body["success"], true);
    assert_eq!(res.body["recipients"], json!(["a", "b"]));
    assert_eq!(res.body["error"], Value::Null);
    let id = res.str("broadcast_id");
    assert!(res.str("timestamp").ends_with('Z'));
    for agent in [&a, &b] {
        let m = &app.inbox(agent, "?kinds=broadcast").await.body["messages"][0];
        assert_eq!(m["message_id"], id.as_str());
        assert_eq!(m["kind"], "broadcast");
        assert_eq!(m["content"]["text"], "Parser done");
        assert_eq!(
            m["content"]["data"],
            json!({"update_type": "progress", "urgency": "action_required", "details": "All tests pass", "impact": "Unblocks review", "action_required": true})
        );
        assert_eq!(m["priority"], "high");
    }
    assert_eq!(app.inbox(&lead, "").await.body["total_count"], 0);
    app.stop().await;
}

#[tokio::test]
async fn urgency_sets_the_priority_and_every_enum_is_checked() {
    let app = TestApp::start().await;
    let team = app.team("t").await;
    let lead = app.agent(&team, "lead", &[]).await;
    let a = app.agent(&team, "a", &[]).await;
    for (urgency, priority) in [
        ("info", "normal"),
        ("attention", "normal"),
        ("action_required", "high"),
        ("critical", "urgent"),
    ] {
        broadcast(&app, &lead, json!({"urgency": urgency}))
            .await
            .expect_status(201);
        assert_eq!(
            app.inbox(&a, "?limit=1").await.body["messages"][0]["priority"],
            priority,
            "{urgency}"
        );
    }
    for update in ["progress", "discovery", "issue", "completion"] {
        broadcast(&app, &lead, json!({"update_type": update}))
            .await
            .expect_status(201);
    }
    broadcast(&app, &lead, json!({"update_type": "gossip"}))
        .await
        .expect_invalid("update_type");
    broadcast(&app, &lead, json!({"urgency": "meh"}))
        .await
        .expect_invalid("urgency");
    broadcast(&app, &lead, json!({"content": {"summary": ""}}))
        .await
        .expect_invalid("content.summary");
    broadcast(
        &app,
        &lead,
        json!({"content": {"summary": "s".repeat(2001)}}),
    )
    .await
    .expect_error(400, "MESSAGE_TOO_LONG");
    broadcast(
        &app,
        &lead,
        json!({"content": {"details": "d".repeat(10_001)}}),
    )
    .await
    .expect_error(400, "MESSAGE_TOO_LONG");
    broadcast(
        &app,
        &lead,
        json!({"content": {"impact": "i".repeat(10_001)}}),
    )
    .await
    .expect_error(400, "MESSAGE_TOO_LONG");
    broadcast(&app, &lead, json!({"content": {"action_required": "yes"}}))
        .await
        .expect_invalid("content.action_required");
    broadcast(&app, &lead, json!({"sender_agent_id": "a"}))
        .await
        .expect_error(403, "FORBIDDEN");
    app.stop().await;
}

#[tokio::test]
async fn a_broadcast_to_an_empty_team_reaches_nobody() {
    let app = TestApp::start().await;
    let team = app.team("t").await;
    let alone = app.agent(&team, "alone", &[]).await;
    let res = broadcast(&app, &alone, json!({})).await.expect_status(201);
    assert_eq!(res.body["recipients"], json!([]));
    app.stop().await;
}

#[tokio::test]
async fn helpers_are_ranked_by_capability_match_then_availability() {
    let app = TestApp::start().await;
    let team = app.team("t").await;
    let asker = app.agent(&team, "asker", &["python"]).await;
    app.agent(&team, "both-busy", &["Rust", "SQL"]).await;
    app.agent(&team, "both-free", &["rust", "sql", "go"]).await;
    app.agent(&team, "rust-only", &["RUST"]).await;
    app.agent(&team, "nothing", &["cooking"]).await;
    app.patch("/v1/teams/t/agents/both-busy")
        .token(&team.key)
        .json(json!({"status": "busy"}))
        .send()
        .await
        .expect_status(200);

    let res = assist(
        &app,
        &asker,
        json!({"required_capabilities": ["rust", "sql"]}),
    )
    .await
    .expect_status(201);
    assert_eq!(res.body["broadcast_sent"], true);
    assert_eq!(
        res.body["potential_responders"],
        json!([
            {"agent_id": "both-free", "role": "role of both-free", "capability_match": 1.0, "availability": "available", "connected": false},
            {"agent_id": "both-busy", "role": "role of both-busy", "capability_match": 1.0, "availability": "busy", "connected": false},
            {"agent_id": "rust-only", "role": "role of rust-only", "capability_match": 0.5, "availability": "available", "connected": false},
        ])
    );
    // Broadcast to the whole team: everyone else got it, as a request needing a response.
    let request_id = res.str("request_id");
    for id in ["both-busy", "both-free", "rust-only", "nothing"] {
        assert!(
            res.body["delivery_status"]["pending_delivery"]
                .as_array()
                .expect("list")
                .contains(&json!(id))
        );
    }
    app.stop().await;
    let _ = request_id;
}

#[tokio::test]
async fn named_targets_get_the_request_and_can_answer_it() {
    let app = TestApp::start().await;
    let team = app.team("t").await;
    let asker = app.agent(&team, "asker", &[]).await;
    let cook = app.agent(&team, "cook", &["cooking"]).await;
    let other = app.agent(&team, "other", &["rust"]).await;
    let deadline = (chrono::Utc::now() + chrono::Duration::hours(2)).to_rfc3339();
    let res = assist(
        &app,
        &asker,
        json!({
            "assistance_type": "expertise",
            "target_agents": ["cook"],
            "required_capabilities": ["rust"],
            "request_details": {"description": "Which crate?", "context": "Porting a parser", "deadline": deadline, "priority": "urgent"},
        }),
    )
    .await
    .expect_status(201);
    assert_eq!(res.body["broadcast_sent"], false);
    // Named, so listed even without a match.
    assert_eq!(res.body["potential_responders"][0]["agent_id"], "cook");
    assert_eq!(res.body["potential_responders"][0]["capability_match"], 0.0);
    let request_id = res.str("request_id");
    assert_eq!(app.inbox(&other, "").await.body["total_count"], 0);

    let m = &app.inbox(&cook, "").await.body["messages"][0];
    assert_eq!(m["message_id"], request_id.as_str());
    assert_eq!(m["kind"], "assistance_request");
    assert_eq!(m["message_type"], "request");
    assert_eq!(m["requires_response"], true);
    assert_eq!(m["priority"], "urgent");
    assert_eq!(m["content"]["text"], "Which crate?");
    assert_eq!(m["content"]["data"]["assistance_type"], "expertise");
    assert_eq!(m["content"]["data"]["context"], "Porting a parser");
    let stored_deadline = m["response_deadline"].as_str().expect("deadline");
    assert_eq!(
        chrono::DateTime::parse_from_rfc3339(stored_deadline)
            .expect("rfc")
            .timestamp(),
        chrono::DateTime::parse_from_rfc3339(&deadline)
            .expect("rfc")
            .timestamp()
    );
    app.post(&format!("/v1/messages/{request_id}/responses"))
        .token(&cook.token)
        .json(json!({"responder_agent_id": "cook", "response_content": {"text": "use nom", "status": "completed"}}))
        .send()
        .await
        .expect_status(201);
    assert_eq!(
        app.inbox(&asker, "?kinds=response").await.body["total_count"],
        1
    );
    app.stop().await;
}

#[tokio::test]
async fn assistance_input_is_validated() {
    let app = TestApp::start().await;
    let team = app.team("t").await;
    let asker = app.agent(&team, "asker", &[]).await;
    app.agent(&team, "helper", &[]).await;
    let past = (chrono::Utc::now() - chrono::Duration::minutes(1)).to_rfc3339();
    assist(&app, &asker, json!({"assistance_type": "money"}))
        .await
        .expect_invalid("assistance_type");
    assist(&app, &asker, json!({"required_capabilities": null}))
        .await
        .expect_invalid("required_capabilities");
    assist(&app, &asker, json!({"required_capabilities": [""]}))
        .await
        .expect_invalid("required_capabilities[0]");
    assist(&app, &asker, json!({"target_agents": ["ghost"]}))
        .await
        .expect_error(400, "INVALID_RECIPIENT");
    assist(&app, &asker, json!({"target_agents": ["asker"]}))
        .await
        .expect_error(400, "INVALID_RECIPIENT");
    let crowd: Vec<String> = (0..1001).map(|i| format!("a{i}")).collect();
    assist(&app, &asker, json!({"target_agents": crowd}))
        .await
        .expect_invalid("target_agents");
    assist(
        &app,
        &asker,
        json!({"request_details": {"description": ""}}),
    )
    .await
    .expect_invalid("request_details.description");
    assist(
        &app,
        &asker,
        json!({"request_details": {"description": "d".repeat(2001)}}),
    )
    .await
    .expect_error(400, "MESSAGE_TOO_LONG");
    assist(
        &app,
        &asker,
        json!({"request_details": {"context": "c".repeat(10_001)}}),
    )
    .await
    .expect_error(400, "MESSAGE_TOO_LONG");
    assist(&app, &asker, json!({"request_details": {"deadline": past}}))
        .await
        .expect_invalid("request_details.deadline");
    assist(
        &app,
        &asker,
        json!({"request_details": {"priority": "whenever"}}),
    )
    .await
    .expect_invalid("request_details.priority");
    assist(&app, &asker, json!({"requester_agent_id": "helper"}))
        .await
        .expect_error(403, "FORBIDDEN");
    for kind in ["expertise", "resources", "review", "collaboration"] {
        assist(&app, &asker, json!({"assistance_type": kind}))
            .await
            .expect_status(201);
    }
    app.stop().await;
}

#[tokio::test]
async fn team_metrics_count_traffic_per_agent() {
    let app = TestApp::start().await;
    let team = app.team("t").await;
    let boss = app.agent(&team, "boss", &[]).await;
    let worker = app.agent(&team, "worker", &[]).await;
    let original = app
        .send_with(
            &boss,
            json!({"recipient_agent_ids": ["worker"], "requires_response": true}),
        )
        .await
        .expect_status(201)
        .str("message_id");
    app.send(&boss, &[&worker], "fyi").await;
    app.post(&format!("/v1/messages/{original}/responses"))
        .token(&worker.token)
        .json(json!({"responder_agent_id": "worker", "response_content": {"text": "ok", "status": "completed"}}))
        .send()
        .await
        .expect_status(201);
    app.post("/v1/messages/read")
        .token(&worker.token)
        .json(json!({"agent_id": "worker", "message_ids": [original]}))
        .send()
        .await;

    let res = app
        .get("/v1/teams/t/metrics")
        .token(&worker.token)
        .send()
        .await
        .expect_status(200);
    let agents = res.body["agents"].as_array().expect("agents");
    let boss_m = &agents[0];
    let worker_m = &agents[1];
    assert_eq!(
        (
            boss_m["agent_id"].clone(),
            boss_m["sent"].clone(),
            boss_m["received"].clone()
        ),
        (json!("boss"), json!(2), json!(1))
    );
    assert_eq!(boss_m["unread"], 1);
    assert_eq!(boss_m["responses_given"], 0);
    assert_eq!(boss_m["median_response_time_ms"], Value::Null);
    assert_eq!(
        (
            worker_m["sent"].clone(),
            worker_m["received"].clone(),
            worker_m["unread"].clone()
        ),
        (json!(1), json!(2), json!(1))
    );
    assert_eq!(worker_m["responses_given"], 1);
    assert!(
        worker_m["median_response_time_ms"]
            .as_f64()
            .is_some_and(|ms| ms >= 0.0)
    );
    // Other teams cannot look.
    let other = app.team("o").await;
    app.get("/v1/teams/t/metrics")
        .token(&other.key)
        .send()
        .await
        .expect_error(403, "FORBIDDEN");
    app.stop().await;
}

#[tokio::test]
async fn senders_over_the_rate_limit_are_told_to_slow_down() {
    let app = TestApp::start_with(|c| {
        c.rate_limit = Some(RateLimit {
            per_second: 0.5,
            burst: 2.0,
        })
    })
    .await;
    let team = app.team("t").await;
    let a = app.agent(&team, "a", &[]).await;
    let b = app.agent(&team, "b", &[]).await;
    app.send(&a, &[&b], "1").await;
    app.send(&a, &[&b], "2").await;
    let res = app
        .send_with(&a, json!({"recipient_agent_ids": ["b"]}))
        .await
        .expect_error(429, "RATE_LIMITED");
    assert!(
        res.body["details"]["retry_after_ms"]
            .as_u64()
            .is_some_and(|ms| ms > 0 && ms <= 2000)
    );
    broadcast(&app, &a, json!({}))
        .await
        .expect_error(429, "RATE_LIMITED");
    // Others have their own allowance, and reading is not limited.
    app.send(&b, &[&a], "mine").await;
    app.inbox(&a, "").await.expect_status(200);
    assert_eq!(app.inbox(&b, "").await.body["total_count"], 2);
    app.stop().await;
}
