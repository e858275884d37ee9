//! Outbound A2A: an outside agent built with the official SDK's server side
//! (`tests/interop/a2a_remote.py`) is registered into a team by its card; tasks given to
//! it are forwarded and come back completed, with a question round trip; bad cards are
//! refused; an unreachable agent fails its task with a clear reason.

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::{Agent, Res, Team, TestApp};
use crate::{python, readme};

/// A server that may call the outside agent on loopback.
async fn app() -> TestApp {
    TestApp::start_with(|c| c.callbacks.allow_private = true).await
}

async fn register(app: &TestApp, team: &Team, body: Value) -> Res {
    app.post(&format!("/v1/teams/{}/a2a-agents", team.id))
        .token(&team.key)
        .json(body)
        .send()
        .await
}

async fn submit(app: &TestApp, from: &Agent, description: &str, target: &str) -> String {
    let made = app
        .post("/v1/tasks")
        .token(&from.token)
        .json(
            json!({"description": description, "originating_agent_id": from.id,
                     "target_agent_id": target}),
        )
        .send()
        .await
        .expect_status(201);
    made.body["task"]["task_id"]
        .as_str()
        .unwrap_or_else(|| panic!("a task id: {:?}", made.body))
        .to_owned()
}

/// Waits (at most 20 s) until the task's status is `status`; returns the task.
async fn until(app: &TestApp, who: &Agent, task_id: &str, status: &str) -> Value {
    let mut last = Value::Null;
    for _ in 0..200 {
        let detail = app.task(who, task_id).await.expect_status(200);
        if detail.body["task"]["status"] == status {
            return detail.body;
        }
        last = detail.body;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("task {task_id} never became {status}: {last:#}");
}

#[tokio::test]
async fn an_outside_agent_takes_tasks_and_asks_back() {
    if !crate::python::available("an_outside_agent_takes_tasks_and_asks_back") {
        return;
    }
    let app = app().await;
    let team = app.team("outside").await;
    let planner = app.agent(&team, "planner", &[]).await;
    let (_remote, ready) = python::start("a2a_remote.py", &[]).await;
    let base = format!("http://127.0.0.1:{}", ready["port"]);

    let made = register(&app, &team, json!({"card_url": base})).await;
    let made = made.expect_status(201);
    assert_eq!(
        made.body["agent"]["agent_id"], "Translator-Bot",
        "{:?}",
        made.body
    );
    assert_eq!(
        made.body["agent"]["role"],
        "Translates text into another language"
    );
    assert_eq!(
        made.body["agent"]["capabilities"],
        json!(["translate", "echo"])
    );
    assert_eq!(
        made.body["card_url"],
        format!("{base}/.well-known/agent-card.json").as_str()
    );
    assert_eq!(made.body["interface_url"], format!("{base}/").as_str());
    // Found by capability like any member; registering it twice is a conflict.
    let found = app
        .get(&format!(
            "/v1/teams/{}/agents?capability=translate",
            team.id
        ))
        .token(&planner.token)
        .send()
        .await
        .expect_status(200);
    assert_eq!(found.body["agents"][0]["agent_id"], "Translator-Bot");
    register(&app, &team, json!({"card_url": base}))
        .await
        .expect_error(409, "AGENT_ALREADY_REGISTERED");

    // A task goes there and comes back completed with the agent's artifact.
    let task_id = submit(&app, &planner, "hello there", "Translator-Bot").await;
    let done = until(&app, &planner, &task_id, "success").await;
    assert_eq!(done["task"]["result_data"], json!({"echo": "hello there"}));
    let recorded = done["events"].as_array().and_then(|e| {
        e.iter()
            .find(|e| e["data"]["result_data"]["a2a_remote_task_id"].is_string())
    });
    assert!(recorded.is_some(), "the remote task is on record: {done:#}");

    // A question there is a clarification here; the answer goes back.
    let task_id = submit(&app, &planner, "ask: good morning", "Translator-Bot").await;
    let asking = until(&app, &planner, &task_id, "input-required").await;
    let open = &asking["task"]["open_clarification"];
    assert_eq!(open["question"], "Which language?");
    let clarification_id = open["clarification_id"].as_str().expect("an id");
    app.post(&format!(
        "/v1/tasks/{task_id}/clarifications/{clarification_id}/answer"
    ))
    .token(&planner.token)
    .json(json!({"answer": "French"}))
    .send()
    .await
    .expect_status(200);
    let done = until(&app, &planner, &task_id, "success").await;
    assert_eq!(done["task"]["result_data"], json!({"translated": "French"}));
}

#[tokio::test]
async fn an_outside_failure_or_absence_fails_the_task_with_a_reason() {
    if !crate::python::available("an_outside_failure_or_absence_fails_the_task_with_a_reason") {
        return;
    }
    let app = app().await;
    let team = app.team("outside").await;
    let planner = app.agent(&team, "planner", &[]).await;
    let (remote, ready) = python::start("a2a_remote.py", &[]).await;
    let base = format!("http://127.0.0.1:{}", ready["port"]);
    register(&app, &team, json!({"card_url": base}))
        .await
        .expect_status(201);

    // The agent's own failure is the task's, with its words.
    let task_id = submit(&app, &planner, "fail: no dictionary", "Translator-Bot").await;
    let failed = until(&app, &planner, &task_id, "failed").await;
    assert_eq!(failed["task"]["result_data"]["reason"], "no dictionary");

    // Gone: the task fails with a clear reason, nothing hangs.
    drop(remote);
    let task_id = submit(&app, &planner, "anyone there?", "Translator-Bot").await;
    let failed = until(&app, &planner, &task_id, "failed").await;
    let reason = failed["task"]["result_data"]["reason"]
        .as_str()
        .unwrap_or_default();
    assert!(reason.contains("could not be reached"), "{reason}");
    assert!(reason.contains(&base), "{reason}");
    // Counted (the recorder is the process's: other tests add to it too).
    let metrics = app.get("/metrics").send().await.expect_status(200);
    let text = metrics.body.as_str().unwrap_or_default().to_owned();
    let failed: f64 = text
        .lines()
        .find_map(|l| l.strip_prefix("switchboard_a2a_outside_tasks_total{outcome=\"failed\"} "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_default();
    assert!(failed >= 2.0, "{text}");
}

#[tokio::test]
async fn bad_cards_and_addresses_are_refused() {
    let app = app().await;
    let team = app.team("outside").await;
    let member = app.agent(&team, "member", &[]).await;
    // Not a card (our own health answer is JSON, but no card).
    let not_card = register(
        &app,
        &team,
        json!({"card_url": format!("{}/healthz", app.base)}),
    )
    .await;
    let body = not_card.expect_error(400, "VALIDATION_ERROR").body;
    assert!(
        body["error_message"]
            .as_str()
            .unwrap_or_default()
            .contains("card"),
        "{body}"
    );
    // Nobody there.
    let nobody = register(&app, &team, json!({"card_url": "http://127.0.0.1:9"})).await;
    let body = nobody.expect_error(400, "VALIDATION_ERROR").body;
    assert!(
        body["error_message"]
            .as_str()
            .unwrap_or_default()
            .contains("could not be fetched"),
        "{body}"
    );
    // Not http; unknown fields; an agent token may not register.
    register(
        &app,
        &team,
        json!({"card_url": "ftp://example.com/card.json"}),
    )
    .await
    .expect_error(400, "VALIDATION_ERROR");
    register(
        &app,
        &team,
        json!({"card_url": "https://example.com", "extra": 1}),
    )
    .await
    .expect_error(400, "VALIDATION_ERROR");
    app.post(&format!("/v1/teams/{}/a2a-agents", team.id))
        .token(&member.token)
        .json(json!({"card_url": "https://example.com"}))
        .send()
        .await
        .expect_error(403, "FORBIDDEN");
    // Without --allow-private-callbacks, loopback is not called at all.
    let strict = TestApp::start().await;
    let strict_team = strict.team("strict").await;
    let refused = register(
        &strict,
        &strict_team,
        json!({"card_url": "http://127.0.0.1:9"}),
    )
    .await;
    let body = refused.expect_error(400, "VALIDATION_ERROR").body;
    assert_eq!(body["details"]["field"], "card_url", "{body}");
}

#[tokio::test]
async fn a_task_in_flight_survives_a_restart() {
    if !crate::python::available("a_task_in_flight_survives_a_restart") {
        return;
    }
    let mut app = app().await;
    let team = app.team("outside").await;
    let planner = app.agent(&team, "planner", &[]).await;
    let (_remote, ready) = python::start("a2a_remote.py", &[]).await;
    let base = format!("http://127.0.0.1:{}", ready["port"]);
    let body = json!({"card_url": format!("{base}/.well-known/agent-card.json"),
                      "agent_id": "translator"});
    register(&app, &team, body).await.expect_status(201);
    let task_id = submit(&app, &planner, "ask: see you", "translator").await;
    let asking = until(&app, &planner, &task_id, "input-required").await;
    let clarification_id = asking["task"]["open_clarification"]["clarification_id"]
        .as_str()
        .expect("an id")
        .to_owned();
    // The server goes down while the question is open; the answer comes after.
    app.restart().await;
    app.post(&format!(
        "/v1/tasks/{task_id}/clarifications/{clarification_id}/answer"
    ))
    .token(&planner.token)
    .json(json!({"answer": "German"}))
    .send()
    .await
    .expect_status(200);
    let done = until(&app, &planner, &task_id, "success").await;
    assert_eq!(done["task"]["result_data"], json!({"translated": "German"}));
    // The notices the agent got were taken: nothing of its inbox is left unread. (The
    // gateway marks its notices read once it has followed them, which may be a moment after
    // the task shows its result.)
    let mut translator = Value::Null;
    for _ in 0..50 {
        let metrics = app
            .get(&format!("/v1/teams/{}/metrics", team.id))
            .token(&team.key)
            .send()
            .await
            .expect_status(200);
        translator = metrics.body["agents"]
            .as_array()
            .and_then(|a| a.iter().find(|a| a["agent_id"] == "translator"))
            .cloned()
            .unwrap_or_default();
        if translator["unread"] == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(translator["received"].as_i64() > Some(0), "{translator}");
    assert_eq!(translator["unread"], 0, "{translator}");
}

#[tokio::test]
async fn the_delegation_walkthrough_works_as_written() {
    if !crate::python::available("the_delegation_walkthrough_works_as_written") {
        return;
    }
    let app = TestApp::start_with(|c| {
        c.admin_token = Some(readme::WALKTHROUGH_ADMIN.to_owned());
        c.callbacks.allow_private = true;
    })
    .await;
    // The walkthrough runs the example agent from the test virtualenv, found through
    // `REPO` as the page says (here from a directory outside the repository).
    python::python();
    let dir = tempfile::tempdir().expect("temp dir");
    let script = format!(
        "{}\n{}",
        readme::readme(),
        readme::walkthrough("docs/a2a.md", "a2a-outbound"),
    );
    let out = readme::run_in(&app, &script, Some(dir.path())).await;
    let answers = readme::printed_json(&out);
    let registered = answers
        .iter()
        .find(|a| a["interface_url"].is_string())
        .unwrap_or_else(|| panic!("the registration answer: {out}"));
    assert_eq!(registered["agent"]["agent_id"], "Translator-Bot");
    assert_eq!(answers.last(), Some(&json!({"echo": "bonjour"})), "{out}");
    app.stop().await;
}

#[tokio::test]
async fn a_changed_card_changes_the_member() {
    if !crate::python::available("a_changed_card_changes_the_member") {
        return;
    }
    let app = TestApp::start_with(|c| {
        c.callbacks.allow_private = true;
        c.a2a_card_refresh = Duration::from_millis(200);
    })
    .await;
    let team = app.team("outside").await;
    let (_remote, ready) = python::start("a2a_remote.py", &["--grows"]).await;
    let base = format!("http://127.0.0.1:{}", ready["port"]);
    let made = register(&app, &team, json!({"card_url": base, "agent_id": "bot"})).await;
    assert_eq!(
        made.expect_status(201).body["agent"]["capabilities"],
        json!(["translate", "echo"])
    );
    // The next reading of the card has a new skill: the member gets it as a capability.
    let mut capabilities = Value::Null;
    for _ in 0..100 {
        let agent = app
            .get(&format!("/v1/teams/{}/agents/bot", team.id))
            .token(&team.key)
            .send()
            .await
            .expect_status(200);
        capabilities = agent.body["agent"]["capabilities"].clone();
        if capabilities == json!(["translate", "echo", "summarise"]) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the refreshed card's skills never arrived: {capabilities}");
}

#[tokio::test]
async fn a_streaming_agent_is_heard_at_once() {
    if !crate::python::available("a_streaming_agent_is_heard_at_once") {
        return;
    }
    let app = app().await;
    let team = app.team("outside").await;
    let planner = app.agent(&team, "planner", &[]).await;
    let (_remote, ready) = python::start("a2a_remote.py", &[]).await;
    let base = format!("http://127.0.0.1:{}", ready["port"]);
    let body = json!({"card_url": base, "agent_id": "bot"});
    register(&app, &team, body).await.expect_status(201);
    // Seven seconds of work: polling alone would be 3 s apart by then (and see the end
    // 2 s late); the agent's stream says when it ends.
    let task_id = submit(&app, &planner, "slow: a long one", "bot").await;
    let mut seen_late = None;
    for _ in 0..300 {
        let detail = app.task(&planner, &task_id).await.expect_status(200);
        if detail.body["task"]["status"] == "success" {
            let done_at = detail.body["task"]["result_data"]["done_at"]
                .as_f64()
                .expect("done_at");
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .expect("clock")
                .as_secs_f64();
            seen_late = Some(now - done_at);
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let late = seen_late.expect("the task finished");
    assert!(late < 1.0, "the end was seen {late:.2} s late");
}
