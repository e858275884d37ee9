//! Work offered to a role (issue 65): submitted with `assignee_role`, open until one of
//! the role's agents claims it (`POST /v1/tasks/claim`), held by a lease that progress
//! renews, given back explicitly, by a removal or when the lease runs out, and failed
//! after the team's `max_attempts`.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::{Agent, Res, Team, TestApp};

/// Registers `agent_id` with `role` and `capabilities`.
pub(crate) async fn member(
    app: &TestApp,
    team: &Team,
    agent_id: &str,
    role: &str,
    caps: &[&str],
) -> Agent {
    let res = app
        .post(&format!("/v1/teams/{}/agents", team.id))
        .token(&team.key)
        .json(json!({"agent_id": agent_id, "role": role, "capabilities": caps}))
        .send()
        .await
        .expect_status(201);
    Agent {
        id: agent_id.to_owned(),
        token: res.body["token"].as_str().expect("token").to_owned(),
    }
}

/// Offers a task to `role` as `from`, with `extra` fields merged in.
pub(crate) async fn offer(
    app: &TestApp,
    from: &Agent,
    task_id: &str,
    role: &str,
    extra: Value,
) -> Res {
    let mut body = json!({
        "task_id": task_id,
        "description": format!("work item {task_id}"),
        "originating_agent_id": from.id,
        "assignee_role": role,
    });
    if let (Some(body), Value::Object(extra)) = (body.as_object_mut(), extra) {
        body.extend(extra);
    }
    app.post("/v1/tasks")
        .token(&from.token)
        .json(body)
        .send()
        .await
}

/// `POST /v1/tasks/claim` as `who`.
pub(crate) async fn claim(app: &TestApp, who: &Agent, body: Value) -> Res {
    app.post("/v1/tasks/claim")
        .token(&who.token)
        .json(body)
        .send()
        .await
}

/// The id of the task a claim answered, or `None`.
pub(crate) fn claimed(res: &Res) -> Option<String> {
    res.body["task"]["task_id"].as_str().map(str::to_owned)
}

async fn report(app: &TestApp, who: &Agent, task: &str, status: &str) -> Res {
    app.post(&format!("/v1/tasks/{task}/result"))
        .token(&who.token)
        .json(json!({"status": status, "result_data": {"by": who.id}}))
        .send()
        .await
}

async fn crew(app: &TestApp, name: &str) -> (Team, Agent, Agent, Agent) {
    let team = app.team(name).await;
    let planner = member(app, &team, "planner", "planner", &[]).await;
    let c1 = member(app, &team, "c1", "coder", &["rust"]).await;
    let c2 = member(app, &team, "c2", "coder", &["python"]).await;
    (team, planner, c1, c2)
}

#[tokio::test]
async fn a_task_offered_to_a_role_is_claimed_by_one_of_its_agents_and_finished() {
    let app = TestApp::start().await;
    let (team, planner, c1, c2) = crew(&app, "claims-story").await;
    let writer = member(&app, &team, "w", "writer", &["rust"]).await;
    let res = offer(&app, &planner, "t1", "coder", json!({}))
        .await
        .expect_status(201);
    let task = &res.body["task"];
    assert_eq!(task["status"], "open", "{res:?}");
    assert_eq!(task["assignee_agent_id"], Value::Null);
    assert_eq!(task["assignee_role"], "coder");
    assert_eq!(res.body["task_response"]["agent_id"], "switchboard");

    // Another role gets nothing; one coder gets it; the other coder then gets nothing.
    let none = claim(&app, &writer, json!({})).await.expect_status(200);
    assert_eq!(none.body["task"], Value::Null, "{none:?}");
    let got = claim(&app, &c1, json!({"lease_seconds": 60}))
        .await
        .expect_status(200);
    assert_eq!(claimed(&got).as_deref(), Some("t1"));
    assert_eq!(got.body["task"]["status"], "in-progress");
    assert_eq!(got.body["task"]["assignee_agent_id"], "c1");
    assert_eq!(got.body["task"]["attempts"], 1);
    let first_end = got.body["task"]["lease_expires_at"]
        .as_str()
        .expect("lease")
        .to_owned();
    assert_eq!(claimed(&claim(&app, &c2, json!({})).await), None);

    // Progress starts the lease again; the result ends it.
    tokio::time::sleep(Duration::from_millis(20)).await;
    let progressed = report(&app, &c1, "t1", "in-progress")
        .await
        .expect_status(200);
    let later = progressed.body["task"]["lease_expires_at"]
        .as_str()
        .expect("lease");
    assert!(later > first_end.as_str(), "{later} after {first_end}");
    let done = report(&app, &c1, "t1", "success").await.expect_status(200);
    assert_eq!(done.body["task"]["status"], "success");
    assert_eq!(done.body["task"].get("lease_expires_at"), None);
    let detail = app
        .get("/v1/tasks/t1")
        .token(&planner.token)
        .send()
        .await
        .expect_status(200);
    let kinds: Vec<&str> = detail.body["events"]
        .as_array()
        .expect("events")
        .iter()
        .filter_map(|e| e["kind"].as_str())
        .collect();
    assert_eq!(kinds, ["submitted", "claimed", "progress", "succeeded"]);
    assert_eq!(detail.body["events"][1]["agent_id"], "c1");
    app.stop().await;
}

#[tokio::test]
async fn a_claim_takes_the_most_urgent_then_the_oldest_task_it_qualifies_for() {
    let app = TestApp::start().await;
    let (_team, planner, c1, c2) = crew(&app, "claims-order").await;
    offer(&app, &planner, "old-normal", "coder", json!({}))
        .await
        .expect_status(201);
    offer(&app, &planner, "new-normal", "coder", json!({}))
        .await
        .expect_status(201);
    offer(
        &app,
        &planner,
        "urgent",
        "coder",
        json!({"priority": "urgent"}),
    )
    .await
    .expect_status(201);
    offer(
        &app,
        &planner,
        "py-only",
        "coder",
        json!({"priority": "high", "required_capabilities": ["python"]}),
    )
    .await
    .expect_status(201);
    // c1 (rust) cannot take the python task: urgent, then the normal ones by age.
    let mut order = Vec::new();
    for _ in 0..3 {
        let res = claim(&app, &c1, json!({})).await.expect_status(200);
        order.push(claimed(&res).expect("a task"));
    }
    assert_eq!(order, ["urgent", "old-normal", "new-normal"]);
    assert_eq!(claimed(&claim(&app, &c1, json!({})).await), None);
    assert_eq!(
        claimed(&claim(&app, &c2, json!({})).await).as_deref(),
        Some("py-only")
    );
    // The originator, even of the role, never claims its own task.
    offer(&app, &c1, "own", "coder", json!({}))
        .await
        .expect_status(201);
    assert_eq!(claimed(&claim(&app, &c1, json!({})).await), None);
    assert_eq!(
        claimed(&claim(&app, &c2, json!({})).await).as_deref(),
        Some("own")
    );
    app.stop().await;
}

/// A claimer finds the one task it qualifies for behind many it does not, in every
/// priority: a claim reads pages of its role's open tasks until one holds a task for it.
#[tokio::test]
async fn a_claim_finds_its_task_behind_many_it_cannot_take() {
    let app = TestApp::start().await;
    let (_team, planner, c1, c2) = crew(&app, "claims-deep").await;
    for i in 0..100 {
        let priority = if i % 2 == 0 { "urgent" } else { "normal" };
        let body = json!({"priority": priority, "required_capabilities": ["rust"]});
        offer(&app, &planner, &format!("rust-{i}"), "coder", body)
            .await
            .expect_status(201);
    }
    let low = json!({"priority": "low", "required_capabilities": ["python"]});
    offer(&app, &planner, "python-last", "coder", low)
        .await
        .expect_status(201);
    let res = claim(&app, &c2, json!({})).await.expect_status(200);
    assert_eq!(claimed(&res).as_deref(), Some("python-last"), "{res:?}");
    // The rust tasks are all still there for c1, most urgent first.
    let res = claim(&app, &c1, json!({})).await.expect_status(200);
    assert_eq!(claimed(&res).as_deref(), Some("rust-0"));
    app.stop().await;
}

#[tokio::test]
async fn a_claimer_gives_a_task_back_and_the_next_claim_counts_an_attempt() {
    let app = TestApp::start().await;
    let (_team, planner, c1, c2) = crew(&app, "claims-release").await;
    offer(&app, &planner, "t", "coder", json!({}))
        .await
        .expect_status(201);
    assert_eq!(
        claimed(&claim(&app, &c1, json!({})).await).as_deref(),
        Some("t")
    );
    // Only the claimer gives it back.
    app.post("/v1/tasks/t/release")
        .token(&c2.token)
        .json(json!({}))
        .send()
        .await
        .expect_error(404, "TASK_NOT_FOUND");
    let back = app
        .post("/v1/tasks/t/release")
        .token(&c1.token)
        .json(json!({"reason": "blocked on review"}))
        .send()
        .await
        .expect_status(200);
    assert_eq!(back.body["task"]["status"], "open");
    assert_eq!(back.body["task"]["assignee_agent_id"], Value::Null);
    let again = claim(&app, &c2, json!({})).await.expect_status(200);
    assert_eq!(again.body["task"]["attempts"], 2);
    assert_eq!(again.body["task"]["assignee_agent_id"], "c2");
    // c1 was an assignee once: it still sees the task, and may not give it back now.
    app.post("/v1/tasks/t/release")
        .token(&c1.token)
        .json(json!({}))
        .send()
        .await
        .expect_error(403, "FORBIDDEN");
    // A task given to a named agent is handed off, never given back.
    app.post("/v1/tasks")
        .token(&planner.token)
        .json(
            json!({"task_id": "named", "description": "d", "originating_agent_id": "planner",
                     "target_agent_id": "c1"}),
        )
        .send()
        .await
        .expect_status(201);
    app.post("/v1/tasks/named/release")
        .token(&c1.token)
        .json(json!({}))
        .send()
        .await
        .expect_error(409, "INVALID_TASK_TRANSITION");
    app.stop().await;
}

#[tokio::test]
async fn a_lapsed_lease_puts_the_task_back_and_the_last_attempt_fails_it() {
    let app = TestApp::start().await;
    let (team, planner, c1, c2) = crew(&app, "claims-lapse").await;
    app.patch(&format!("/v1/teams/{}", team.id))
        .token(&team.key)
        .json(json!({"max_attempts": 2}))
        .send()
        .await
        .expect_status(200);
    offer(&app, &planner, "t", "coder", json!({}))
        .await
        .expect_status(201);
    claim(&app, &c1, json!({"lease_seconds": 1}))
        .await
        .expect_status(200);
    let reopened = wait_for_status(&app, &planner, "t", "open").await;
    assert_eq!(reopened["attempts"], 1);
    let res = claim(&app, &c2, json!({"lease_seconds": 1}))
        .await
        .expect_status(200);
    assert_eq!(res.body["task"]["attempts"], 2);
    let failed = wait_for_status(&app, &planner, "t", "failed").await;
    assert_eq!(
        failed["result_data"]["error_code"], "LEASE_EXPIRED",
        "{failed}"
    );
    // The history says who held it and how each claim ended; the originator was told.
    let detail = app
        .get("/v1/tasks/t")
        .token(&planner.token)
        .send()
        .await
        .expect_status(200);
    let ends: Vec<(String, String)> = detail.body["events"]
        .as_array()
        .expect("events")
        .iter()
        .filter(|e| e["kind"] == "lease_expired")
        .map(|e| {
            (
                e["agent_id"].as_str().unwrap_or("").into(),
                e["status"].as_str().unwrap_or("").into(),
            )
        })
        .collect();
    assert_eq!(
        ends,
        [("c1".into(), "open".into()), ("c2".into(), "failed".into())]
    );
    let inbox = app.inbox(&planner, "?limit=50").await.expect_status(200);
    let told = inbox.body["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .any(|m| {
            m["content"]["data"]["type"] == "ErrorMessage"
                && m["content"]["data"]["error_code"] == "LEASE_EXPIRED"
        });
    assert!(told, "{inbox:?}");
    // The lapsed claimer's late report is refused: the task is not its any more.
    report(&app, &c2, "t", "success")
        .await
        .expect_error(409, "INVALID_TASK_TRANSITION");
    app.stop().await;
}

/// Reads the task until its status is `status` (the sweep runs every second).
async fn wait_for_status(app: &TestApp, who: &Agent, task: &str, status: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let res = app
            .get(&format!("/v1/tasks/{task}"))
            .token(&who.token)
            .send()
            .await;
        if res.body["task"]["status"] == status {
            return res.body["task"].clone();
        }
        assert!(
            Instant::now() < deadline,
            "still {}",
            res.body["task"]["status"]
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn a_waiting_claim_gets_a_task_offered_meanwhile_and_online_agents_are_offered_it() {
    let app = TestApp::start().await;
    let (_team, planner, c1, c2) = crew(&app, "claims-wait").await;
    let mut ws = app.ws(&c2, "").await;
    let waiting = {
        let (base, token) = (app.base.clone(), c1.token.clone());
        tokio::spawn(async move {
            let began = Instant::now();
            let res = reqwest::Client::new()
                .post(format!("{base}/v1/tasks/claim"))
                .bearer_auth(token)
                .json(&json!({"wait_seconds": 20}))
                .send()
                .await
                .expect("claim");
            let body: Value = res.json().await.expect("json");
            (body, began.elapsed())
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    offer(&app, &planner, "late", "coder", json!({}))
        .await
        .expect_status(201);
    let (body, took) = waiting.await.expect("claim task");
    assert_eq!(body["task"]["task_id"], "late", "{body}");
    assert!(
        took < Duration::from_secs(5),
        "woken by the offer, not the timeout: {took:?}"
    );
    // c2 was online: it was offered the task as a TaskOffer frame.
    let offered = ws.next_of("TaskOffer").await;
    assert_eq!(offered["task_id"], "late");
    assert_eq!(offered["assignee_role"], "coder");
    assert_eq!(offered["attempts"], 0);
    app.stop().await;
}

#[tokio::test]
async fn removing_a_claimer_gives_its_tasks_back_at_once() {
    let app = TestApp::start().await;
    let (team, planner, c1, c2) = crew(&app, "claims-removed").await;
    offer(&app, &planner, "t", "coder", json!({}))
        .await
        .expect_status(201);
    claim(&app, &c1, json!({"lease_seconds": 3600}))
        .await
        .expect_status(200);
    app.delete(&format!("/v1/teams/{}/agents/c1", team.id))
        .token(&team.key)
        .send()
        .await
        .expect_status(200);
    let res = claim(&app, &c2, json!({})).await.expect_status(200);
    assert_eq!(claimed(&res).as_deref(), Some("t"));
    assert_eq!(res.body["task"]["attempts"], 2);
    app.stop().await;
}

#[tokio::test]
async fn every_claim_rule_is_refused_naming_its_field() {
    let app = TestApp::start().await;
    let (team, planner, c1, _c2) = crew(&app, "claims-rules").await;
    for (body, field) in [
        (json!({"wait_seconds": 61}), "wait_seconds"),
        (json!({"lease_seconds": 0}), "lease_seconds"),
        (json!({"lease_seconds": 3601}), "lease_seconds"),
    ] {
        let res = claim(&app, &c1, body)
            .await
            .expect_error(400, "VALIDATION_ERROR");
        assert_eq!(res.body["details"]["field"], field);
    }
    claim(&app, &c1, json!({"wait_seconds": "soon"}))
        .await
        .expect_error(400, "VALIDATION_ERROR");
    let both = offer(
        &app,
        &planner,
        "t",
        "coder",
        json!({"target_agent_id": "c1"}),
    )
    .await;
    assert_eq!(
        both.expect_error(400, "VALIDATION_ERROR").body["details"]["field"],
        "assignee_role"
    );
    let blank = offer(&app, &planner, "t", " ", json!({})).await;
    assert_eq!(
        blank.expect_error(400, "VALIDATION_ERROR").body["details"]["field"],
        "assignee_role"
    );
    for n in [0, 101] {
        let res = app
            .patch(&format!("/v1/teams/{}", team.id))
            .token(&team.key)
            .json(json!({"max_attempts": n}))
            .send()
            .await
            .expect_error(400, "VALIDATION_ERROR");
        assert_eq!(res.body["details"]["field"], "max_attempts");
    }
    // Only agents claim.
    app.post("/v1/tasks/claim")
        .token(&team.key)
        .json(json!({}))
        .send()
        .await
        .expect_error(403, "FORBIDDEN");
    app.stop().await;
}

/// The MCP tools through the official SDK (`tests/interop/mcp_agents.py`, `claims`):
/// offer, claim, progress, give back, claim again, complete, find nothing.
#[tokio::test]
async fn mcp_agents_claim_and_give_back_through_the_stock_sdk() {
    if !crate::python::available("mcp_agents_claim_and_give_back_through_the_stock_sdk") {
        return;
    }
    let app = TestApp::start().await;
    let team = app.team("claims-mcp").await;
    let a = app.agent(&team, "a", &[]).await;
    let b = app.agent(&team, "b", &[]).await;
    let out = crate::python::run("mcp_agents.py", &["claims", &app.base, &a.token, &b.token]).await;
    assert_eq!(out["offered"]["task"]["status"], "open", "{out:#}");
    // B only listened over MCP (no live connection), and was offered the task.
    let heard = out["heard"].as_array().expect("heard");
    assert_eq!(heard.len(), 1, "{out:#}");
    assert_eq!(
        heard[0]["content"]["data"]["task_id"],
        out["offered"]["task"]["task_id"]
    );
    assert_eq!(out["first"]["task"]["assignee_agent_id"], "b");
    assert_eq!(out["progress"]["error"], false, "{out:#}");
    let first_end = out["first"]["task"]["lease_expires_at"].as_str();
    assert!(
        out["extended"]["task"]["lease_expires_at"].as_str() > first_end,
        "{out:#}"
    );
    assert_eq!(out["released"]["task"]["status"], "open");
    assert_eq!(out["second"]["task"]["attempts"], 2);
    assert_eq!(out["done"]["task"]["status"], "success");
    assert_eq!(out["empty"]["task"], Value::Null);
    app.stop().await;
}

/// A claim that waits is a waiting call: one credential holds at most
/// `--ws-max-per-agent` of them, a further one is refused at once, and a claim that does
/// not wait takes no place.
#[tokio::test]
async fn waiting_claims_are_bounded_per_credential() {
    let app = TestApp::start_with(|c| c.ws_max_per_agent = 2).await;
    let (_team, _planner, c1, _c2) = crew(&app, "claims-held").await;
    let waiting: Vec<_> = (0..2)
        .map(|_| {
            let (base, token) = (app.base.clone(), c1.token.clone());
            tokio::spawn(async move {
                reqwest::Client::new()
                    .post(format!("{base}/v1/tasks/claim"))
                    .bearer_auth(token)
                    .json(&json!({"wait_seconds": 3}))
                    .send()
                    .await
                    .map(|r| r.status().as_u16())
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let refused = claim(&app, &c1, json!({"wait_seconds": 3})).await;
    let refused = refused.expect_error(429, "RATE_LIMITED");
    assert!(
        refused.body["error_message"]
            .as_str()
            .unwrap_or("")
            .contains("waiting calls")
    );
    claim(&app, &c1, json!({})).await.expect_status(200);
    for w in waiting {
        assert_eq!(w.await.expect("joined").expect("answered"), 200);
    }
    app.stop().await;
}
