//! New credentials for old ones (issue 68, team lifecycle): a team key and an agent
//! token are replaced by a call, the old one refused from its answer on — here, and on
//! every node (`nodes::revocation`) — and what the old one opened (an agent's live
//! connections) ends with it.

use serde_json::{Value, json};

use crate::support::{ADMIN, TestApp};

#[tokio::test]
async fn an_agent_gets_a_new_token_and_the_old_one_stops_at_once() {
    let app = TestApp::start().await;
    let team = app.team("rot").await;
    let coder = app.agent(&team, "coder", &[]).await;
    let other = app.agent(&team, "other", &[]).await;
    let mut live = app.ws(&coder, "").await;
    // Another agent may not; the agent itself may.
    app.post("/v1/teams/rot/agents/coder/token")
        .token(&other.token)
        .json(json!({}))
        .send()
        .await
        .expect_error(403, "FORBIDDEN");
    let rotated = app
        .post("/v1/teams/rot/agents/coder/token")
        .token(&coder.token)
        .json(json!({}))
        .send()
        .await
        .expect_status(200);
    let fresh = rotated.str("token");
    assert_ne!(fresh, coder.token);
    assert_eq!(rotated.body["agent"]["agent_id"], "coder");
    // The connection opened with the old token ends; the old token is refused.
    live.closed().await;
    for (token, status) in [(&coder.token, 401), (&fresh, 200)] {
        let res = app.get("/v1/whoami").token(token).send().await;
        assert_eq!(res.status, status, "{}", res.body);
    }
    // The team key rotates it again; the previous one stops too.
    let again = app
        .post("/v1/teams/rot/agents/coder/token")
        .token(&team.key)
        .json(json!({}))
        .send()
        .await
        .expect_status(200)
        .str("token");
    app.get("/v1/whoami")
        .token(&fresh)
        .send()
        .await
        .expect_error(401, "UNAUTHORIZED");
    let whoami = app.get("/v1/whoami").token(&again).send().await;
    assert_eq!(whoami.expect_status(200).body["agent_id"], "coder");
    // A removed agent has no token to rotate.
    app.delete("/v1/teams/rot/agents/other")
        .token(&team.key)
        .send()
        .await
        .expect_status(200);
    app.post("/v1/teams/rot/agents/other/token")
        .token(&team.key)
        .json(json!({}))
        .send()
        .await
        .expect_error(404, "AGENT_NOT_FOUND");
}

#[tokio::test]
async fn a_team_gets_a_new_key_and_its_agents_keep_theirs() {
    let app = TestApp::start().await;
    let team = app.team("keyed").await;
    let coder = app.agent(&team, "coder", &[]).await;
    let rotated = app
        .post("/v1/teams/keyed/key")
        .token(&team.key)
        .json(json!({}))
        .send()
        .await
        .expect_status(200);
    assert_eq!(rotated.body["team_id"], "keyed");
    let fresh = rotated.str("team_key");
    assert_ne!(fresh, team.key);
    app.get("/v1/teams/keyed")
        .token(&team.key)
        .send()
        .await
        .expect_error(401, "UNAUTHORIZED");
    app.get("/v1/teams/keyed")
        .token(&fresh)
        .send()
        .await
        .expect_status(200);
    app.get("/v1/whoami")
        .token(&coder.token)
        .send()
        .await
        .expect_status(200);
    // The admin may rotate it too; an agent may not.
    app.post("/v1/teams/keyed/key")
        .token(&coder.token)
        .json(json!({}))
        .send()
        .await
        .expect_error(403, "FORBIDDEN");
    let by_admin: Value = app
        .post("/v1/teams/keyed/key")
        .token(ADMIN)
        .json(json!({}))
        .send()
        .await
        .expect_status(200)
        .body;
    app.get("/v1/teams/keyed")
        .token(&fresh)
        .send()
        .await
        .expect_error(401, "UNAUTHORIZED");
    let newest = by_admin["team_key"].as_str().unwrap_or_default();
    app.get("/v1/teams/keyed")
        .token(newest)
        .send()
        .await
        .expect_status(200);
}

/// The CLI says the same: `admin agent rotate-token` and `admin team rotate-key` print
/// the new secret, which works, while the old one no longer does.
#[tokio::test]
async fn the_cli_gives_new_credentials() {
    let app = TestApp::start().await;
    let team = app.team("cli-rot").await;
    let coder = app.agent(&team, "coder", &[]).await;
    let run = |token: &str, args: &[&str]| {
        let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_switchboard"));
        command
            .env("SWITCHBOARD_URL", &app.base)
            .env("SWITCHBOARD_TOKEN", token)
            .args(args)
            .arg("--json");
        command
    };
    let args = [
        "admin",
        "agent",
        "rotate-token",
        "--team",
        "cli-rot",
        "coder",
    ];
    let out = run(&team.key, &args).output().await.expect("runs");
    assert!(out.status.success(), "{out:?}");
    let answer: Value = serde_json::from_slice(&out.stdout).expect("json");
    let token = answer["token"].as_str().expect("a token");
    for (token, status) in [(coder.token.as_str(), 401), (token, 200)] {
        let res = app.get("/v1/whoami").token(token).send().await;
        assert_eq!(res.status, status, "{}", res.body);
    }
    let out = run(&team.key, &["admin", "team", "rotate-key", "cli-rot"])
        .output()
        .await
        .expect("runs");
    assert!(out.status.success(), "{out:?}");
    let answer: Value = serde_json::from_slice(&out.stdout).expect("json");
    let key = answer["team_key"].as_str().expect("a key");
    for (key, status) in [(team.key.as_str(), 401), (key, 200)] {
        let res = app.get("/v1/teams/cli-rot").token(key).send().await;
        assert_eq!(res.status, status, "{}", res.body);
    }
}
