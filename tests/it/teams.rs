//! Teams: creation by the admin, reading, the communication switch, isolation.

use serde_json::json;

use crate::support::{ADMIN, TestApp};

#[tokio::test]
async fn admin_creates_a_team_and_gets_its_key_once() {
    let app = TestApp::start().await;
    let res = app
        .post("/v1/teams")
        .token(ADMIN)
        .json(json!({"name": "Research squad", "team_id": "research"}))
        .send()
        .await
        .expect_status(201);
    assert_eq!(res.body["success"], true);
    assert_eq!(res.body["team_id"], "research");
    assert_eq!(res.body["name"], "Research squad");
    assert!(res.str("team_key").starts_with("sb_team_"));
    assert!(res.str("created_at").ends_with('Z'));

    // The key works, and reading the team never shows it again.
    let team = app
        .get("/v1/teams/research")
        .token(&res.str("team_key"))
        .send()
        .await
        .expect_status(200);
    assert_eq!(team.body["communication_enabled"], true);
    assert_eq!(team.body["agent_count"], 0);
    assert!(team.body.get("team_key").is_none());
    app.stop().await;
}

#[tokio::test]
async fn team_id_is_generated_when_absent() {
    let app = TestApp::start().await;
    let res = app
        .post("/v1/teams")
        .token(ADMIN)
        .json(json!({"name": "Anonymous"}))
        .send()
        .await
        .expect_status(201);
    let id = res.str("team_id");
    assert!(id.starts_with("team-"), "{id}");
    app.get(&format!("/v1/teams/{id}"))
        .token(&res.str("team_key"))
        .send()
        .await
        .expect_status(200);
    app.stop().await;
}

#[tokio::test]
async fn duplicate_team_id_is_a_conflict() {
    let app = TestApp::start().await;
    app.team("research").await;
    app.post("/v1/teams")
        .token(ADMIN)
        .json(json!({"name": "again", "team_id": "research"}))
        .send()
        .await
        .expect_error(409, "CONFLICT");
    app.stop().await;
}

#[tokio::test]
async fn team_input_is_validated_field_by_field() {
    let app = TestApp::start().await;
    let post = |body| app.post("/v1/teams").token(ADMIN).json(body).send();
    post(json!({})).await.expect_invalid("name");
    post(json!({"name": ""})).await.expect_invalid("name");
    post(json!({"name": "   "})).await.expect_invalid("name");
    post(json!({"name": "x".repeat(201)}))
        .await
        .expect_invalid("name");
    post(json!({"name": 7})).await.expect_invalid("name");
    post(json!({"name": "ok", "team_id": "has space"}))
        .await
        .expect_invalid("team_id");
    post(json!({"name": "ok", "team_id": "x".repeat(65)}))
        .await
        .expect_invalid("team_id");
    post(json!({"name": "ok", "colour": "blue"}))
        .await
        .expect_invalid("colour");
    app.stop().await;
}

#[tokio::test]
async fn only_the_admin_creates_teams() {
    let app = TestApp::start().await;
    let team = app.team("research").await;
    let agent = app.agent(&team, "planner", &[]).await;
    let body = json!({"name": "mine"});
    for token in [&team.key, &agent.token] {
        app.post("/v1/teams")
            .token(token)
            .json(body.clone())
            .send()
            .await
            .expect_error(403, "FORBIDDEN");
    }
    app.post("/v1/teams")
        .json(body.clone())
        .send()
        .await
        .expect_error(401, "UNAUTHORIZED");
    app.post("/v1/teams")
        .token("sb_admin_0000_1111")
        .json(body)
        .send()
        .await
        .expect_error(401, "UNAUTHORIZED");
    app.stop().await;
}

#[tokio::test]
async fn team_key_switches_communication_and_renames() {
    let app = TestApp::start().await;
    let team = app.team("research").await;
    let res = app
        .patch("/v1/teams/research")
        .token(&team.key)
        .json(json!({"communication_enabled": false, "name": "Renamed"}))
        .send()
        .await
        .expect_status(200);
    assert_eq!(res.body["communication_enabled"], false);
    assert_eq!(res.body["name"], "Renamed");
    let read = app
        .get("/v1/teams/research")
        .token(ADMIN)
        .send()
        .await
        .expect_status(200);
    assert_eq!(read.body["communication_enabled"], false);

    app.patch("/v1/teams/research")
        .token(&team.key)
        .json(json!({}))
        .send()
        .await
        .expect_invalid("body");
    app.patch("/v1/teams/research")
        .token(&team.key)
        .json(json!({"communication_enabled": "no"}))
        .send()
        .await
        .expect_invalid("communication_enabled");
    app.stop().await;
}

#[tokio::test]
async fn agents_read_their_team_but_cannot_manage_it() {
    let app = TestApp::start().await;
    let team = app.team("research").await;
    let agent = app.agent(&team, "planner", &[]).await;
    let res = app
        .get("/v1/teams/research")
        .token(&agent.token)
        .send()
        .await
        .expect_status(200);
    assert_eq!(res.body["agent_count"], 1);
    app.patch("/v1/teams/research")
        .token(&agent.token)
        .json(json!({"communication_enabled": false}))
        .send()
        .await
        .expect_error(403, "FORBIDDEN");
    app.stop().await;
}

#[tokio::test]
async fn teams_are_isolated_from_each_other() {
    let app = TestApp::start().await;
    let a = app.team("alpha").await;
    let b = app.team("beta").await;
    let a1 = app.agent(&a, "a1", &["search"]).await;
    let b1 = app.agent(&b, "b1", &["search"]).await;

    // Another team's key or agent token is refused on every team resource…
    for token in [&b.key, &b1.token] {
        app.get("/v1/teams/alpha")
            .token(token)
            .send()
            .await
            .expect_error(403, "FORBIDDEN");
        app.get("/v1/teams/alpha/agents")
            .token(token)
            .send()
            .await
            .expect_error(403, "FORBIDDEN");
        app.get("/v1/teams/alpha/agents/a1")
            .token(token)
            .send()
            .await
            .expect_error(403, "FORBIDDEN");
        app.patch("/v1/teams/alpha/agents/a1")
            .token(token)
            .json(json!({"status": "busy"}))
            .send()
            .await
            .expect_error(403, "FORBIDDEN");
        app.delete("/v1/teams/alpha/agents/a1")
            .token(token)
            .send()
            .await
            .expect_error(403, "FORBIDDEN");
        app.post("/v1/teams/alpha/agents")
            .token(token)
            .json(json!({"agent_id": "spy", "role": "spy", "capabilities": []}))
            .send()
            .await
            .expect_error(403, "FORBIDDEN");
    }
    // …and a team that does not exist looks the same, so tokens cannot probe for teams.
    app.get("/v1/teams/nonexistent")
        .token(&b.key)
        .send()
        .await
        .expect_error(403, "FORBIDDEN");
    // The admin sees the difference.
    app.get("/v1/teams/nonexistent")
        .token(ADMIN)
        .send()
        .await
        .expect_error(404, "NOT_FOUND");

    // A lookup only ever lists the caller's own team.
    let listed = app
        .get("/v1/teams/beta/agents")
        .token(&b1.token)
        .send()
        .await
        .expect_status(200);
    let ids: Vec<&str> = listed.body["agents"]
        .as_array()
        .expect("agents")
        .iter()
        .filter_map(|a| a["agent_id"].as_str())
        .collect();
    assert_eq!(ids, vec![b1.id.as_str()]);
    assert!(!ids.contains(&a1.id.as_str()));
    app.stop().await;
}

/// `GET /v1/teams` (it was 405): every team, by id, for the admin token only; the CLI's
/// `admin team list` reads it.
#[tokio::test]
async fn the_admin_lists_every_team() {
    let app = TestApp::start().await;
    let second = app.team("second").await;
    let first = app.team("first").await;
    app.agent(&first, "one", &[]).await;
    let list = app
        .get("/v1/teams")
        .token(ADMIN)
        .send()
        .await
        .expect_status(200);
    let teams = list.body["teams"].as_array().cloned().unwrap_or_default();
    let ids: Vec<&str> = teams.iter().filter_map(|t| t["team_id"].as_str()).collect();
    assert_eq!(ids, ["first", "second"]);
    assert_eq!(teams[0]["agent_count"], 1);
    for key in [&first.key, &second.key] {
        app.get("/v1/teams")
            .token(key)
            .send()
            .await
            .expect_error(403, "FORBIDDEN");
    }
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_switchboard"))
        .env("SWITCHBOARD_URL", &app.base)
        .env("SWITCHBOARD_TOKEN", ADMIN)
        .args(["admin", "team", "list"])
        .output()
        .await
        .expect("runs");
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("first  Team first (1 agents)"), "{text}");
    assert!(text.contains("second"), "{text}");
}
