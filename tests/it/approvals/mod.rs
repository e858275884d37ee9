//! Approval checkpoints (`docs/approvals.md`, issue 66): an agent asks, the team key or
//! an approver decides, the asker is told and can wait; every refusal; expiry. Every
//! test here runs on SQLite and again on PostgreSQL (`engines.rs`).

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::{Agent, Res, Team, TestApp};
use crate::wsclient::Ws;

mod cli;
mod mcp;
mod refusals;
mod unswept;

pub(crate) async fn ask(app: &TestApp, who: &Agent, body: Value) -> Res {
    app.post("/v1/approvals")
        .token(&who.token)
        .json(body)
        .send()
        .await
}

pub(crate) async fn decide(app: &TestApp, token: &str, id: &str, body: Value) -> Res {
    app.post(&format!("/v1/approvals/{id}/decision"))
        .token(token)
        .json(body)
        .send()
        .await
}

pub(crate) fn approval_id(res: &Res) -> String {
    res.body["approval"]["approval_id"]
        .as_str()
        .expect("approval_id")
        .to_owned()
}

/// A team of `asker`, `other` and `boss`; `boss` is named an approver.
pub(crate) async fn setup(app: &TestApp, name: &str) -> (Team, Agent, Agent, Agent) {
    let team = app.team(name).await;
    let asker = app.agent(&team, "asker", &[]).await;
    let other = app.agent(&team, "other", &[]).await;
    let boss = app.agent(&team, "boss", &[]).await;
    let patched = app
        .patch(&format!("/v1/teams/{}", team.id))
        .token(&team.key)
        .json(json!({"approvers": ["boss"]}))
        .send()
        .await
        .expect_status(200);
    assert_eq!(patched.body["approvers"], json!(["boss"]));
    (team, asker, other, boss)
}

/// The next approval event pushed to `ws`.
async fn next_event(ws: &mut Ws) -> Value {
    let frame = tokio::time::timeout(Duration::from_secs(10), ws.next_of("message"))
        .await
        .expect("an approval event within 10 s");
    let message = &frame["message"];
    assert_eq!(message["cause_by"], "switchboard.approval", "{frame}");
    assert_eq!(
        message["content"]["data"]["type"], "approval_event",
        "{frame}"
    );
    message["instruct_content"].clone()
}

#[tokio::test]
async fn a_person_decides_with_the_team_key_and_the_asker_is_told() {
    let app = TestApp::start().await;
    let (team, asker, _, _) = setup(&app, "approve-key").await;
    let mut asker_ws = app.ws(&asker, "").await;
    let asked = ask(
        &app,
        &asker,
        json!({"summary": "Deploy 4.2?", "details": "12 migrations", "expires_in_seconds": 600}),
    )
    .await
    .expect_status(201);
    let approval = &asked.body["approval"];
    assert_eq!(approval["status"], "pending");
    assert_eq!(approval["asked_by"], "asker");
    assert_eq!(approval["team_id"], team.id);
    assert_eq!(approval["options"], json!(["approve", "deny"]));
    assert_eq!(approval["details"], "12 migrations");
    assert_eq!(approval["decision"], Value::Null);
    let id = approval_id(&asked);

    // The person's queue: pending, newest first.
    let queue = app
        .get("/v1/approvals?status=pending")
        .token(&team.key)
        .send()
        .await
        .expect_status(200);
    assert_eq!(queue.body["approvals"][0]["approval_id"], id.as_str());

    let decided = decide(
        &app,
        &team.key,
        &id,
        json!({"decision": "approve", "comment": "after 18:00"}),
    )
    .await
    .expect_status(200);
    let approval = &decided.body["approval"];
    assert_eq!(approval["status"], "decided");
    assert_eq!(approval["decision"], "approve");
    assert_eq!(approval["comment"], "after 18:00");
    assert_eq!(approval["decided_with"], "team_key");
    assert_eq!(approval["decided_by"], Value::Null);
    assert!(approval["decided_at"].is_string());

    // Pushed to the asker, who watches nothing.
    let event = next_event(&mut asker_ws).await;
    assert_eq!(event["event"], "decided");
    assert_eq!(event["approval"]["approval_id"], id.as_str());
    assert_eq!(event["approval"]["decision"], "approve");

    // The asker reads the same; the queue is empty.
    let read = app
        .get(&format!("/v1/approvals/{id}"))
        .token(&asker.token)
        .send()
        .await
        .expect_status(200);
    assert_eq!(read.body["approval"], decided.body["approval"]);
    let queue = app
        .get("/v1/approvals?status=pending")
        .token(&team.key)
        .send()
        .await
        .expect_status(200);
    assert_eq!(queue.body["approvals"], json!([]));
}

#[tokio::test]
async fn an_approver_agent_decides_and_hears_every_request() {
    let app = TestApp::start().await;
    let (team, asker, other, boss) = setup(&app, "approve-agent").await;
    app.put("/v1/watch")
        .token(&boss.token)
        .json(json!({"watch": ["switchboard.approval"]}))
        .send()
        .await
        .expect_status(200);
    let mut boss_ws = app.ws(&boss, "").await;
    let asked = ask(
        &app,
        &asker,
        json!({"summary": "Pay invoice 88?", "options": ["pay", "hold", "reject"]}),
    )
    .await
    .expect_status(201);
    let id = approval_id(&asked);
    let event = next_event(&mut boss_ws).await;
    assert_eq!(event["event"], "requested");
    assert_eq!(event["approval"]["summary"], "Pay invoice 88?");

    // The approver sees the team's approvals; another agent only its own (none).
    let seen = app
        .get("/v1/approvals")
        .token(&boss.token)
        .send()
        .await
        .expect_status(200);
    assert_eq!(seen.body["approvals"][0]["approval_id"], id.as_str());
    let theirs = app
        .get("/v1/approvals")
        .token(&other.token)
        .send()
        .await
        .expect_status(200);
    assert_eq!(theirs.body["approvals"], json!([]));
    app.get(&format!("/v1/approvals/{id}"))
        .token(&other.token)
        .send()
        .await
        .expect_error(404, "APPROVAL_NOT_FOUND");
    app.get("/v1/approvals?asked_by=asker")
        .token(&other.token)
        .send()
        .await
        .expect_error(403, "FORBIDDEN");

    let decided = decide(&app, &boss.token, &id, json!({"decision": "hold"}))
        .await
        .expect_status(200);
    assert_eq!(decided.body["approval"]["decided_with"], "approver");
    assert_eq!(decided.body["approval"]["decided_by"], "boss");
    assert_eq!(next_event(&mut boss_ws).await["event"], "decided");

    // The team's approvers are its members only.
    app.patch(&format!("/v1/teams/{}", team.id))
        .token(&team.key)
        .json(json!({"approvers": ["nobody"]}))
        .send()
        .await
        .expect_error(400, "VALIDATION_ERROR");
}

#[tokio::test]
async fn a_wait_returns_as_soon_as_the_decision_commits() {
    let app = TestApp::start().await;
    let (team, asker, _, _) = setup(&app, "approve-wait").await;
    let id = approval_id(
        &ask(&app, &asker, json!({"summary": "Go?"}))
            .await
            .expect_status(201),
    );
    let waiting = {
        let read = app
            .get(&format!("/v1/approvals/{id}?wait_seconds=30"))
            .token(&asker.token);
        tokio::spawn(async move {
            let started = Instant::now();
            (read.send().await, started.elapsed())
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    decide(&app, &team.key, &id, json!({"decision": "deny"}))
        .await
        .expect_status(200);
    let (read, took) = waiting.await.expect("the wait");
    let read = read.expect_status(200);
    assert_eq!(read.body["approval"]["decision"], "deny");
    assert!(took < Duration::from_secs(10), "the wait took {took:?}");

    // A request that waits: answered pending when nobody decides in time.
    let started = Instant::now();
    let asked = ask(
        &app,
        &asker,
        json!({"summary": "Again?", "wait_seconds": 1}),
    )
    .await
    .expect_status(201);
    assert_eq!(asked.body["approval"]["status"], "pending");
    assert!(started.elapsed() >= Duration::from_millis(900));
}

#[tokio::test]
async fn an_approval_nobody_decides_expires_and_cannot_be_decided_after() {
    let app = TestApp::start().await;
    let (team, asker, _, _) = setup(&app, "approve-expire").await;
    let mut asker_ws = app.ws(&asker, "").await;
    let id = approval_id(
        &ask(
            &app,
            &asker,
            json!({"summary": "Quick?", "expires_in_seconds": 1}),
        )
        .await
        .expect_status(201),
    );
    let event = next_event(&mut asker_ws).await;
    assert_eq!(event["event"], "expired");
    assert_eq!(event["approval"]["status"], "expired");
    assert_eq!(event["approval"]["decision"], Value::Null);
    let refused = decide(&app, &team.key, &id, json!({"decision": "approve"}))
        .await
        .expect_error(409, "APPROVAL_CLOSED");
    assert_eq!(refused.body["details"]["status"], "expired");
    let listed = app
        .get("/v1/approvals?status=expired")
        .token(&team.key)
        .send()
        .await
        .expect_status(200);
    assert_eq!(listed.body["approvals"][0]["approval_id"], id.as_str());
}

#[tokio::test]
async fn a_task_with_an_approval_shows_it_and_its_history_records_both_ends() {
    let app = TestApp::start().await;
    let (team, asker, other, _) = setup(&app, "approve-task").await;
    app.post("/v1/tasks")
        .token(&other.token)
        .json(json!({"task_id": "release", "description": "ship it",
                     "originating_agent_id": "other", "target_agent_id": "asker"}))
        .send()
        .await
        .expect_status(201);
    let asked = ask(
        &app,
        &asker,
        json!({"summary": "Ship to prod?", "task_id": "release"}),
    )
    .await
    .expect_status(201);
    let id = approval_id(&asked);
    assert_eq!(asked.body["approval"]["task_id"], "release");
    let task = app
        .get("/v1/tasks/release")
        .token(&other.token)
        .send()
        .await
        .expect_status(200);
    assert_eq!(
        task.body["approvals"][0]["status"], "pending",
        "{:#}",
        task.body
    );
    decide(
        &app,
        &team.key,
        &id,
        json!({"decision": "approve", "comment": "go"}),
    )
    .await
    .expect_status(200);
    let task = app
        .get("/v1/tasks/release")
        .token(&other.token)
        .send()
        .await
        .expect_status(200);
    assert_eq!(task.body["approvals"][0]["status"], "decided");
    let events = task.body["events"].as_array().expect("events");
    let kinds: Vec<&str> = events.iter().filter_map(|e| e["kind"].as_str()).collect();
    assert!(
        kinds.ends_with(&["approval_requested", "approval_decided"]),
        "{kinds:?}"
    );
    let last = events.last().expect("an entry");
    assert_eq!(last["data"]["decision"], "approve");
    assert_eq!(last["data"]["decided_with"], "team_key");
    assert_eq!(last["agent_id"], Value::Null);
    assert_eq!(last["status"], "in-progress");
    // Listed by task; a task the caller takes no part in is not found.
    let by_task = app
        .get("/v1/approvals?task_id=release")
        .token(&team.key)
        .send()
        .await
        .expect_status(200);
    assert_eq!(by_task.body["approvals"][0]["approval_id"], id.as_str());
    ask(&app, &asker, json!({"summary": "x", "task_id": "nope"}))
        .await
        .expect_error(404, "TASK_NOT_FOUND");
}

#[tokio::test]
async fn nothing_of_another_team_and_pages_walk_every_approval_once() {
    let app = TestApp::start().await;
    let (team, asker, _, _) = setup(&app, "approve-a").await;
    let (elsewhere, _, _, _) = setup(&app, "approve-b").await;
    let mut ids = Vec::new();
    for i in 0..5 {
        ids.push(approval_id(
            &ask(&app, &asker, json!({"summary": format!("n{i}")}))
                .await
                .expect_status(201),
        ));
    }
    app.get(&format!("/v1/approvals/{}", ids[0]))
        .token(&elsewhere.key)
        .send()
        .await
        .expect_error(404, "APPROVAL_NOT_FOUND");
    decide(
        &app,
        &elsewhere.key,
        &ids[0],
        json!({"decision": "approve"}),
    )
    .await
    .expect_error(404, "APPROVAL_NOT_FOUND");
    let theirs = app
        .get("/v1/approvals")
        .token(&elsewhere.key)
        .send()
        .await
        .expect_status(200);
    assert_eq!(theirs.body["approvals"], json!([]));

    let mut seen = Vec::new();
    let mut cursor = String::new();
    loop {
        let page = app
            .get(&format!("/v1/approvals?limit=2{cursor}"))
            .token(&team.key)
            .send()
            .await
            .expect_status(200);
        for a in page.body["approvals"].as_array().expect("approvals") {
            seen.push(a["approval_id"].as_str().expect("id").to_owned());
        }
        match page.body["next_cursor"].as_str() {
            Some(next) => cursor = format!("&cursor={next}"),
            None => break,
        }
    }
    ids.reverse();
    assert_eq!(seen, ids);
}

/// The coder asks before it merges, the team key decides, as `docs/approvals.md` shows:
/// the queue held it pending; the coder's read is the decision with its comment.
#[tokio::test]
async fn the_approvals_walkthrough_works_as_written() {
    let app = crate::readme::walkthrough_server().await;
    let script = format!(
        "{}echo '=== docs/approvals.md'\n{}",
        crate::readme::readme(),
        crate::readme::walkthrough("docs/approvals.md", "approvals")
    );
    let out = crate::readme::run(&app, &script).await;
    let answers = crate::readme::page_answers(&out, "docs/approvals.md");
    assert_eq!(answers.len(), 2, "{out}");
    let queued = &answers[0]["approvals"][0];
    assert_eq!(queued["status"], "pending", "{out}");
    assert_eq!(queued["asked_by"], "coder");
    assert_eq!(queued["options"], json!(["merge", "hold"]));
    let read = &answers[1]["approval"];
    assert_eq!(read["status"], "decided", "{out}");
    assert_eq!(read["decision"], "merge");
    assert_eq!(read["comment"], "after the release");
    assert_eq!(read["decided_with"], "team_key");
    app.stop().await;
}
