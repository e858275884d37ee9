//! The agent registry: registration, lookup, update, removal.

use serde_json::json;

use crate::support::{ADMIN, TestApp};

#[tokio::test]
async fn team_key_registers_an_agent_whose_token_works() {
    let app = TestApp::start().await;
    let team = app.team("research").await;
    let res = app
        .post("/v1/teams/research/agents")
        .token(&team.key)
        .json(json!({
            "agent_id": "planner",
            "role": "Planner",
            "capabilities": ["Planning", "python", "PYTHON"],
            "address": "tcp://10.0.0.5:9000",
            "status": "busy"
        }))
        .send()
        .await
        .expect_status(201);
    let agent = &res.body["agent"];
    assert_eq!(agent["agent_id"], "planner");
    assert_eq!(agent["team_id"], "research");
    assert_eq!(agent["role"], "Planner");
    // Case-insensitive duplicates collapse to the first spelling.
    assert_eq!(agent["capabilities"], json!(["Planning", "python"]));
    assert_eq!(agent["address"], "tcp://10.0.0.5:9000");
    assert_eq!(agent["status"], "busy");
    assert_eq!(agent["communication_enabled"], true);
    let token = res.str("token");
    assert!(token.starts_with("sb_agent_"));

    let me = app
        .get("/v1/teams/research/agents/planner")
        .token(&token)
        .send()
        .await
        .expect_status(200);
    assert_eq!(me.body["agent"]["status"], "busy");
    assert!(me.body["agent"].get("token").is_none());
    app.stop().await;
}

#[tokio::test]
async fn status_defaults_to_available_and_admin_may_register() {
    let app = TestApp::start().await;
    app.team("research").await;
    let res = app
        .post("/v1/teams/research/agents")
        .token(ADMIN)
        .json(json!({"agent_id": "w1", "role": "Worker", "capabilities": []}))
        .send()
        .await
        .expect_status(201);
    assert_eq!(res.body["agent"]["status"], "available");
    assert_eq!(res.body["agent"]["address"], serde_json::Value::Null);
    app.stop().await;
}

#[tokio::test]
async fn duplicate_registration_is_agent_already_registered() {
    let app = TestApp::start().await;
    let team = app.team("research").await;
    app.agent(&team, "planner", &[]).await;
    app.post("/v1/teams/research/agents")
        .token(&team.key)
        .json(json!({"agent_id": "planner", "role": "Other", "capabilities": []}))
        .send()
        .await
        .expect_error(409, "AGENT_ALREADY_REGISTERED");
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_registrations_of_one_id_admit_exactly_one() {
    let app = TestApp::start().await;
    let team = app.team("research").await;
    let attempts = (0..16).map(|i| {
        app.post("/v1/teams/research/agents")
            .token(&team.key)
            .json(json!({"agent_id": "contested", "role": format!("r{i}"), "capabilities": []}))
            .send()
    });
    let results = futures_util::future::join_all(attempts).await;
    let created = results.iter().filter(|r| r.status == 201).count();
    let conflicts = results
        .iter()
        .filter(|r| r.status == 409 && r.body["error_code"] == "AGENT_ALREADY_REGISTERED")
        .count();
    assert_eq!((created, conflicts), (1, 15));
    app.stop().await;
}

#[tokio::test]
async fn registration_input_is_validated_field_by_field() {
    let app = TestApp::start().await;
    let team = app.team("research").await;
    let post = |body| {
        app.post("/v1/teams/research/agents")
            .token(&team.key)
            .json(body)
            .send()
    };
    let ok = json!({"agent_id": "a", "role": "r", "capabilities": []});
    let with = |key: &str, value: serde_json::Value| {
        let mut body = ok.clone();
        body[key] = value;
        body
    };
    let without = |key: &str| {
        let mut body = ok.clone();
        body.as_object_mut().expect("object").remove(key);
        body
    };
    post(without("agent_id")).await.expect_invalid("agent_id");
    post(with("agent_id", json!("")))
        .await
        .expect_invalid("agent_id");
    post(with("agent_id", json!("a b")))
        .await
        .expect_invalid("agent_id");
    post(with("agent_id", json!("a/b")))
        .await
        .expect_invalid("agent_id");
    post(with("agent_id", json!("x".repeat(65))))
        .await
        .expect_invalid("agent_id");
    post(with("agent_id", json!(12)))
        .await
        .expect_invalid("agent_id");
    post(without("role")).await.expect_invalid("role");
    post(with("role", json!(""))).await.expect_invalid("role");
    post(with("role", json!("r".repeat(101))))
        .await
        .expect_invalid("role");
    post(without("capabilities"))
        .await
        .expect_invalid("capabilities");
    post(with("capabilities", json!("python")))
        .await
        .expect_invalid("capabilities");
    post(with("capabilities", json!([1])))
        .await
        .expect_invalid("capabilities[0]");
    post(with("capabilities", json!(["ok", ""])))
        .await
        .expect_invalid("capabilities[1]");
    post(with("capabilities", json!(vec!["c"; 65])))
        .await
        .expect_invalid("capabilities");
    post(with("status", json!("sleeping")))
        .await
        .expect_invalid("status");
    post(with("address", json!("a".repeat(2049))))
        .await
        .expect_invalid("address");
    post(with("nickname", json!("x")))
        .await
        .expect_invalid("nickname");
    // The maximum lengths themselves are accepted.
    post(with("agent_id", json!("x".repeat(64))))
        .await
        .expect_status(201);
    app.stop().await;
}

#[tokio::test]
async fn agents_cannot_register_agents() {
    let app = TestApp::start().await;
    let team = app.team("research").await;
    let agent = app.agent(&team, "planner", &[]).await;
    app.post("/v1/teams/research/agents")
        .token(&agent.token)
        .json(json!({"agent_id": "friend", "role": "r", "capabilities": []}))
        .send()
        .await
        .expect_error(403, "FORBIDDEN");
    app.stop().await;
}

#[tokio::test]
async fn lookup_by_capability_is_case_insensitive_and_combines_with_status() {
    let app = TestApp::start().await;
    let team = app.team("research").await;
    let me = app.agent(&team, "me", &[]).await;
    app.agent(&team, "coder", &["Python", "Rust"]).await;
    app.agent(&team, "scripter", &["python"]).await;
    app.agent(&team, "writer", &["prose"]).await;
    app.patch("/v1/teams/research/agents/scripter")
        .token(&team.key)
        .json(json!({"status": "busy"}))
        .send()
        .await
        .expect_status(200);

    let ids = |res: crate::support::Res| -> Vec<String> {
        res.body["agents"]
            .as_array()
            .expect("agents")
            .iter()
            .map(|a| a["agent_id"].as_str().unwrap_or_default().to_owned())
            .collect()
    };
    let lookup = |q: &str| {
        app.get(&format!("/v1/teams/research/agents{q}"))
            .token(&me.token)
            .send()
    };

    assert_eq!(
        ids(lookup("?capability=PYTHON").await.expect_status(200)),
        ["coder", "scripter"]
    );
    assert_eq!(
        ids(lookup("?capability=python,rust").await.expect_status(200)),
        ["coder"]
    );
    assert_eq!(
        ids(lookup("?capability=python&status=available")
            .await
            .expect_status(200)),
        ["coder"]
    );
    assert_eq!(
        ids(lookup("?status=busy").await.expect_status(200)),
        ["scripter"]
    );
    assert_eq!(
        ids(lookup("?capability=cooking").await.expect_status(200)),
        Vec::<String>::new()
    );
    let all = lookup("").await.expect_status(200);
    assert_eq!(all.body["total_count"], 4);
    lookup("?status=asleep").await.expect_invalid("status");
    lookup("?colour=blue").await.expect_invalid("colour");
    app.stop().await;
}

#[tokio::test]
async fn unknown_agent_is_agent_not_found() {
    let app = TestApp::start().await;
    let team = app.team("research").await;
    app.get("/v1/teams/research/agents/ghost")
        .token(&team.key)
        .send()
        .await
        .expect_error(404, "AGENT_NOT_FOUND");
    app.patch("/v1/teams/research/agents/ghost")
        .token(&team.key)
        .json(json!({"status": "busy"}))
        .send()
        .await
        .expect_error(404, "AGENT_NOT_FOUND");
    app.delete("/v1/teams/research/agents/ghost")
        .token(&team.key)
        .send()
        .await
        .expect_error(404, "AGENT_NOT_FOUND");
    app.stop().await;
}

#[tokio::test]
async fn an_agent_updates_itself_but_not_others_nor_its_switch() {
    let app = TestApp::start().await;
    let team = app.team("research").await;
    let me = app.agent(&team, "me", &["a"]).await;
    app.agent(&team, "other", &[]).await;

    let res = app
        .patch("/v1/teams/research/agents/me")
        .token(&me.token)
        .json(json!({"status": "busy", "role": "Lead", "capabilities": ["b", "c"], "address": "x"}))
        .send()
        .await
        .expect_status(200);
    assert_eq!(res.body["agent"]["status"], "busy");
    assert_eq!(res.body["agent"]["role"], "Lead");
    assert_eq!(res.body["agent"]["capabilities"], json!(["b", "c"]));
    assert_eq!(res.body["agent"]["address"], "x");

    // Fields not in the patch keep their value.
    let res = app
        .patch("/v1/teams/research/agents/me")
        .token(&me.token)
        .json(json!({"status": "available"}))
        .send()
        .await
        .expect_status(200);
    assert_eq!(res.body["agent"]["role"], "Lead");

    app.patch("/v1/teams/research/agents/other")
        .token(&me.token)
        .json(json!({"status": "busy"}))
        .send()
        .await
        .expect_error(403, "FORBIDDEN");
    app.patch("/v1/teams/research/agents/me")
        .token(&me.token)
        .json(json!({"communication_enabled": false}))
        .send()
        .await
        .expect_error(403, "FORBIDDEN");
    app.patch("/v1/teams/research/agents/me")
        .token(&me.token)
        .json(json!({}))
        .send()
        .await
        .expect_invalid("body");
    app.patch("/v1/teams/research/agents/me")
        .token(&me.token)
        .json(json!({"role": ""}))
        .send()
        .await
        .expect_invalid("role");
    app.patch("/v1/teams/research/agents/me")
        .token(&me.token)
        .json(json!({"status": "gone"}))
        .send()
        .await
        .expect_invalid("status");

    // The team key may switch the agent's communication.
    let res = app
        .patch("/v1/teams/research/agents/me")
        .token(&team.key)
        .json(json!({"communication_enabled": false}))
        .send()
        .await
        .expect_status(200);
    assert_eq!(res.body["agent"]["communication_enabled"], false);
    app.stop().await;
}

#[tokio::test]
async fn removal_revokes_the_token_and_frees_the_id() {
    let app = TestApp::start().await;
    let team = app.team("research").await;
    let gone = app.agent(&team, "gone", &["x"]).await;
    let stays = app.agent(&team, "stays", &[]).await;

    // An agent cannot remove anyone; the team key can.
    app.delete("/v1/teams/research/agents/gone")
        .token(&stays.token)
        .send()
        .await
        .expect_error(403, "FORBIDDEN");
    let res = app
        .delete("/v1/teams/research/agents/gone")
        .token(&team.key)
        .send()
        .await
        .expect_status(200);
    assert_eq!(res.body["agent_id"], "gone");
    assert!(res.body["removed_at"].is_string());

    app.get("/v1/teams/research")
        .token(&gone.token)
        .send()
        .await
        .expect_error(401, "UNAUTHORIZED");
    app.get("/v1/teams/research/agents/gone")
        .token(&stays.token)
        .send()
        .await
        .expect_error(404, "AGENT_NOT_FOUND");
    let listed = app
        .get("/v1/teams/research/agents")
        .token(&stays.token)
        .send()
        .await;
    assert_eq!(listed.body["total_count"], 1);

    // The id can be registered again, with a new token; the old one stays dead.
    let again = app.agent(&team, "gone", &["y"]).await;
    assert_ne!(again.token, gone.token);
    app.get("/v1/teams/research")
        .token(&again.token)
        .send()
        .await
        .expect_status(200);
    app.get("/v1/teams/research")
        .token(&gone.token)
        .send()
        .await
        .expect_error(401, "UNAUTHORIZED");
    app.stop().await;
}
