//! Revocation across nodes (issue 42): what one node took away is refused on every node
//! from the moment its answer was sent, not "within milliseconds" — a removal, a switch,
//! a replaced token or key.

use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::json;

use crate::process::{Process, call};
use crate::support::{ADMIN, TestApp};

/// An agent removed on node 1 is refused on node 2 by the very next request (its token
/// `401`, a message to it `400 INVALID_RECIPIENT`), though node 2 had it in its registry
/// a moment before; a team switched off on node 1 cannot send through node 2 at once, and
/// switched on again can. Before, node 2 learned of each change from a notification a few
/// milliseconds after the answer, and said yes until then.
#[tokio::test]
async fn a_removal_or_a_switch_holds_on_every_node_from_its_answer_on() {
    let Some(one) = TestApp::start_on_postgres().await else {
        return;
    };
    let team = one.team("revoke").await;
    let sender = one.agent(&team, "sender", &[]).await;
    let two = one.another_node().await;
    for i in 0..30 {
        let id = format!("gone{i}");
        let doomed = one.agent(&team, &id, &[]).await;
        two.get("/v1/whoami")
            .token(&doomed.token)
            .send()
            .await
            .expect_status(200);
        one.delete(&format!("/v1/teams/revoke/agents/{id}"))
            .token(&team.key)
            .send()
            .await
            .expect_status(200);
        two.get("/v1/whoami")
            .token(&doomed.token)
            .send()
            .await
            .expect_error(401, "UNAUTHORIZED");
        two.send_with(
            &sender,
            json!({"recipient_agent_ids": [id], "content": {"text": "still there?"}}),
        )
        .await
        .expect_error(400, "INVALID_RECIPIENT");
    }
    let other = one.agent(&team, "other", &[]).await;
    for round in 0..10 {
        for (enabled, status) in [(false, 403), (true, 201)] {
            one.patch("/v1/teams/revoke")
                .token(&team.key)
                .json(json!({"communication_enabled": enabled}))
                .send()
                .await
                .expect_status(200);
            let res = two
                .send_with(
                    &sender,
                    json!({"recipient_agent_ids": [other.id], "content": {"text": "hi"}}),
                )
                .await;
            assert_eq!(
                res.status, status,
                "round {round}, enabled {enabled}: {}",
                res.body
            );
        }
    }
}

/// A token or a key replaced on node 1 is refused on node 2 by the very next request,
/// and the new one works there at once.
#[tokio::test]
async fn a_rotated_token_or_key_is_refused_on_every_node_from_its_answer_on() {
    let Some(one) = TestApp::start_on_postgres().await else {
        return;
    };
    let team = one.team("rotate").await;
    let agent = one.agent(&team, "agent", &[]).await;
    let two = one.another_node().await;
    // A connection to node 2 opened with the token ends when node 1 replaces it.
    let mut live = two.ws(&agent, "").await;
    let mut token = agent.token.clone();
    let mut key = team.key.clone();
    for round in 0..10 {
        two.get("/v1/whoami")
            .token(&token)
            .send()
            .await
            .expect_status(200);
        let fresh = one
            .post("/v1/teams/rotate/agents/agent/token")
            .token(&key)
            .json(json!({}))
            .send()
            .await
            .expect_status(200)
            .str("token");
        two.get("/v1/whoami")
            .token(&token)
            .send()
            .await
            .expect_error(401, "UNAUTHORIZED");
        two.get("/v1/whoami")
            .token(&fresh)
            .send()
            .await
            .expect_status(200);
        if round == 0 {
            live.closed().await;
        }
        token = fresh;
        let new_key = one
            .post("/v1/teams/rotate/key")
            .token(&key)
            .json(json!({}))
            .send()
            .await
            .expect_status(200)
            .str("team_key");
        two.get("/v1/teams/rotate")
            .token(&key)
            .send()
            .await
            .expect_error(401, "UNAUTHORIZED");
        two.get("/v1/teams/rotate")
            .token(&new_key)
            .send()
            .await
            .expect_status(200);
        key = new_key;
    }
}

/// A node paused (SIGSTOP) for longer than the heartbeat expiry: the removal on node 1 does
/// not wait for it past the expiry, and when it wakes (SIGCONT) it refuses the removed
/// agent's token on its first request — it reads the registry again before it answers,
/// because its own confirmation lapsed while it slept.
#[tokio::test]
async fn a_node_that_slept_through_a_removal_refuses_at_once_when_it_wakes() {
    let Some(db) = crate::pg::database("slept").await else {
        return;
    };
    let url = std::path::Path::new(&db.url);
    let one = Process::start_with(url, &["--node-id", "awake"]);
    let http = reqwest::Client::new();
    let body = json!({"name": "Slept", "team_id": "slept"});
    let (_, team) = call(&http, &one, Method::POST, "/v1/teams", ADMIN, Some(body)).await;
    let key = team["team_key"].as_str().expect("team key").to_owned();
    let body = json!({"agent_id": "doomed", "role": "r", "capabilities": []});
    let path = "/v1/teams/slept/agents";
    let (_, agent) = call(&http, &one, Method::POST, path, &key, Some(body)).await;
    let token = agent["token"].as_str().expect("token").to_owned();
    let two = Process::start_with(url, &["--node-id", "sleeper"]);
    let (status, _) = call(&http, &two, Method::GET, "/v1/whoami", &token, None).await;
    assert_eq!(status, 200, "the sleeper knows the agent");
    // Let the sleeper's heartbeat be seen, then stop it.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    two.signal("-STOP");
    let started = Instant::now();
    let path = "/v1/teams/slept/agents/doomed";
    let (status, body) = call(&http, &one, Method::DELETE, path, &key, None).await;
    let waited = started.elapsed();
    assert_eq!(status, 200, "{body}");
    assert!(
        waited < Duration::from_secs(12),
        "the removal waits for a silent node at most the heartbeat expiry: {waited:?}"
    );
    // Sleep past the expiry in any case, then wake the sleeper.
    tokio::time::sleep(Duration::from_secs(11).saturating_sub(waited)).await;
    two.signal("-CONT");
    let (status, body) = call(&http, &two, Method::GET, "/v1/whoami", &token, None).await;
    assert_eq!(
        status, 401,
        "the woken node still took the removed token: {body}"
    );
    two.kill();
    one.kill();
}
