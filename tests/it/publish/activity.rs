//! Team activity (idle or busy, pushed on change) and the MetaGPT loop example that ends
//! on it.

use serde_json::json;

use serde_json::Value;

use super::TestApp;
use crate::support::Agent;

/// Team t's activity, as `reader` sees it.
async fn activity_of(app: &TestApp, reader: &Agent) -> Value {
    app.get("/v1/teams/t/activity")
        .token(&reader.token)
        .send()
        .await
        .expect_status(200)
        .body
}

#[tokio::test]
async fn team_activity_says_who_has_news_and_when_the_team_is_idle() {
    let app = TestApp::start().await;
    let team = app.team("t").await;
    let a = app.agent(&team, "a", &[]).await;
    let b = app.agent(&team, "b", &[]).await;
    app.watch("t", &b, json!({"watch": ["Code"]})).await;
    let activity = || activity_of(&app, &a);
    let idle = activity().await;
    assert_eq!(idle["idle"], true, "{idle:#}");
    assert_eq!(idle["agents"].as_array().map(Vec::len), Some(2));
    let (mut watcher, _, _) = app.ws_caught_up(&a, "?activity=true").await;
    let first = watcher.next_of("team_activity").await;
    assert_eq!(first["activity"]["idle"], true, "{first}");
    // A quiet publish (nobody watches Test) keeps the team idle.
    app.publish(
        &a,
        json!({"cause_by": "Test", "content": {"text": "quiet"}}),
    )
    .await
    .expect_status(201);
    assert_eq!(activity().await["idle"], true);
    let res = app
        .publish(&a, json!({"cause_by": "Code", "content": {"text": "news"}}))
        .await
        .expect_status(201);
    let busy = activity().await;
    assert_eq!(busy["idle"], false);
    let b_row = busy["agents"]
        .as_array()
        .expect("agents")
        .iter()
        .find(|r| r["agent_id"] == "b")
        .expect("b")
        .clone();
    assert_eq!(b_row["unread_news"], 1);
    assert_eq!(b_row["idle"], false);
    let frame = watcher.next_of("team_activity").await;
    assert_eq!(frame["activity"]["idle"], false, "{frame}");
    // b reads it: idle again, and the watcher hears it.
    app.post("/v1/messages/read")
        .token(&b.token)
        .json(json!({"agent_id": "b", "message_ids": [res.str("message_id")]}))
        .send()
        .await
        .expect_status(200);
    let frame = watcher.next_of("team_activity").await;
    assert_eq!(frame["activity"]["idle"], true, "{frame}");
    app.stop().await;
}

/// `crates/switchboard-client/examples/metagpt_loop.rs`: MetaGPT's A → B → C → D loop with publish and watch only,
/// three rounds, ending when the team is idle.
#[tokio::test]
async fn the_metagpt_loop_example_runs_until_the_team_is_idle() {
    let app = TestApp::start().await;
    let stdout = app.run_example("metagpt_loop").await;
    let lines: Vec<&str> = stdout.lines().collect();
    let position = |line: &str| {
        lines
            .iter()
            .position(|l| *l == line)
            .unwrap_or_else(|| panic!("no line {line:?} in\n{stdout}"))
    };
    let mut last = position("[A] splitting the requirement into subtasks");
    for round in 1..=3 {
        for line in [
            format!("[C] round {round}: compiled"),
            if round < 3 {
                format!("[D] round {round}: feedback for B")
            } else {
                format!("[D] round {round}: verdict for A")
            },
        ] {
            let at = position(&line);
            assert!(at > last, "{line:?} out of order in\n{stdout}");
            last = at;
        }
    }
    assert!(position("[A] verdict after round 3: approved") > last);
    assert_eq!(
        lines.last().copied(),
        Some("team idle: done after 3 rounds")
    );
    app.stop().await;
}

#[tokio::test]
async fn open_tasks_keep_a_team_busy_and_other_teams_are_not_shown() {
    let app = TestApp::start().await;
    let team = app.team("t").await;
    let a = app.agent(&team, "a", &[]).await;
    let b = app.agent(&team, "b", &[]).await;
    let activity = || activity_of(&app, &a);
    // An open task keeps the team busy.
    app.post("/v1/tasks")
        .token(&a.token)
        .json(json!({"task_id": "t1", "description": "work", "originating_agent_id": "a", "target_agent_id": "b"}))
        .send()
        .await
        .expect_status(201);
    let busy = activity().await;
    assert_eq!(busy["idle"], false);
    assert_eq!(busy["open_tasks"], 1);
    // Another team's (or no team's) activity is not an agent's to see; the admin learns
    // that there is no such team.
    app.get("/v1/teams/nope/activity")
        .token(&a.token)
        .send()
        .await
        .expect_error(403, "FORBIDDEN");
    app.get("/v1/teams/nope/activity")
        .token(crate::support::ADMIN)
        .send()
        .await
        .expect_error(404, "NOT_FOUND");
    // The agent's own team without naming it.
    let own = app
        .get("/v1/activity")
        .token(&b.token)
        .send()
        .await
        .expect_status(200);
    assert_eq!(own.body["team_id"], "t");
    app.stop().await;
}
