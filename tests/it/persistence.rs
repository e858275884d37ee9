//! Persistence: a restart (graceful or a killed process) keeps everything acknowledged.

use serde_json::{Value, json};

use crate::process::{Process, call, every_inbox_id, team_k};
use crate::support::{ADMIN, Agent, TestApp};

#[tokio::test]
async fn a_restart_keeps_teams_agents_tokens_and_settings() {
    let mut app = TestApp::start().await;
    let team = app.team("research").await;
    let planner = app.agent(&team, "planner", &["planning"]).await;
    let removed = app.agent(&team, "removed", &[]).await;
    app.delete("/v1/teams/research/agents/removed")
        .token(&team.key)
        .send()
        .await
        .expect_status(200);
    app.patch("/v1/teams/research/agents/planner")
        .token(&team.key)
        .json(json!({"status": "busy", "communication_enabled": false}))
        .send()
        .await
        .expect_status(200);

    app.restart().await;

    let me = app
        .get("/v1/teams/research/agents/planner")
        .token(&planner.token)
        .send()
        .await
        .expect_status(200);
    assert_eq!(me.body["agent"]["status"], "busy");
    assert_eq!(me.body["agent"]["communication_enabled"], false);
    assert_eq!(me.body["agent"]["capabilities"], json!(["planning"]));
    app.get("/v1/teams/research")
        .token(&team.key)
        .send()
        .await
        .expect_status(200);
    app.get("/v1/teams/research")
        .token(ADMIN)
        .send()
        .await
        .expect_status(200);
    app.get("/v1/teams/research")
        .token(&removed.token)
        .send()
        .await
        .expect_error(401, "UNAUTHORIZED");
    app.stop().await;
}

#[tokio::test]
async fn a_generated_admin_token_is_shown_once_and_survives_restarts() {
    let mut app = TestApp::start_with(|c| c.admin_token = None).await;
    let generated = app
        .server()
        .generated_admin_token()
        .expect("first start generates a token")
        .to_owned();
    app.post("/v1/teams")
        .token(&generated)
        .json(json!({"name": "x"}))
        .send()
        .await
        .expect_status(201);

    app.restart().await;
    assert_eq!(
        app.server().generated_admin_token(),
        None,
        "shown only once"
    );
    app.post("/v1/teams")
        .token(&generated)
        .json(json!({"name": "y"}))
        .send()
        .await
        .expect_status(201);
    // Only a digest is stored, never the token itself (read in the file; on
    // PostgreSQL the setting is the same digest, written by the same core).
    if !crate::support::on_postgres() {
        let bytes = std::fs::read(app.database()).expect("db file");
        assert!(
            !bytes
                .windows(generated.len())
                .any(|w| w == generated.as_bytes())
        );
    }
    app.stop().await;
}

#[tokio::test]
async fn a_clean_stop_leaves_the_wal_checkpointed() {
    let app = TestApp::start().await;
    app.team("research").await;
    let db = app.database();
    app.stop().await;
    let wal = db.with_extension("db-wal");
    let wal_len = std::fs::metadata(&wal).map(|m| m.len()).unwrap_or(0);
    assert_eq!(
        wal_len, 0,
        "WAL should be folded back into the database at shutdown"
    );
}

#[tokio::test]
async fn a_killed_process_loses_nothing_it_acknowledged() {
    let dir = tempfile::tempdir().expect("tmp");
    let db = dir.path().join("kill.db");
    let server = Process::start(&db);
    let http = reqwest::Client::new();
    let team: Value = http
        .post(format!("{}/v1/teams", server.base))
        .bearer_auth(ADMIN)
        .json(&json!({"name": "durable", "team_id": "durable"}))
        .send()
        .await
        .expect("sent")
        .json()
        .await
        .expect("json");
    let key = team["team_key"].as_str().expect("key").to_owned();
    let mut tokens = Vec::new();
    for i in 0..20 {
        let res = http
            .post(format!("{}/v1/teams/durable/agents", server.base))
            .bearer_auth(&key)
            .json(&json!({"agent_id": format!("a{i}"), "role": "r", "capabilities": []}))
            .send()
            .await
            .expect("sent");
        assert_eq!(res.status(), 201);
        let body: Value = res.json().await.expect("json");
        tokens.push(body["token"].as_str().expect("token").to_owned());
    }
    server.kill();

    let server = Process::start(&db);
    for token in &tokens {
        let res = http
            .get(format!("{}/v1/teams/durable", server.base))
            .bearer_auth(token)
            .send()
            .await
            .expect("sent");
        assert_eq!(res.status(), 200);
    }
    let listed: Value = http
        .get(format!("{}/v1/teams/durable/agents", server.base))
        .bearer_auth(&key)
        .send()
        .await
        .expect("sent")
        .json()
        .await
        .expect("json");
    assert_eq!(listed["total_count"], 20);
    server.kill();
}

/// What was written before the restart: a read message, an unread one, an answered
/// question, and a keyed send with its first answer.
struct Written {
    read_one: String,
    unread_one: String,
    question: String,
    keyed: Value,
    first: Value,
}

async fn write_before_restart(app: &TestApp, a: &Agent, b: &Agent) -> Written {
    let read_one = app.send(a, &[b], "read me").await;
    let unread_one = app.send(a, &[b], "leave me").await;
    let question = app
        .send_with(
            a,
            json!({"recipient_agent_ids": ["b"], "requires_response": true}),
        )
        .await
        .expect_status(201)
        .str("message_id");
    app.post("/v1/messages/read")
        .token(&b.token)
        .json(json!({"agent_id": "b", "message_ids": [read_one]}))
        .send()
        .await
        .expect_status(200);
    app.post(&format!("/v1/messages/{question}/responses"))
        .token(&b.token)
        .json(json!({"responder_agent_id": "b", "response_content": {"text": "yes", "status": "completed"}}))
        .send()
        .await
        .expect_status(201);
    let keyed = json!({"sender_agent_id": "a", "recipient_agent_ids": ["b"], "message_type": "information", "content": {"text": "keyed"}});
    let first = app
        .post("/v1/messages")
        .token(&a.token)
        .header("idempotency-key", "k1")
        .json(keyed.clone())
        .send()
        .await
        .expect_status(201);

    Written {
        read_one,
        unread_one,
        question,
        keyed,
        first: first.body,
    }
}

#[tokio::test]
async fn messages_read_flags_responses_and_idempotency_survive_a_restart() {
    let mut app = TestApp::start().await;
    let team = app.team("t").await;
    let a = app.agent(&team, "a", &[]).await;
    let b = app.agent(&team, "b", &[]).await;
    let Written {
        read_one,
        unread_one,
        question,
        keyed,
        first,
    } = write_before_restart(&app, &a, &b).await;

    app.restart().await;

    let inbox = app
        .inbox(&b, "?sort_order=oldest_first")
        .await
        .expect_status(200);
    let seen: Vec<(String, bool)> = inbox.body["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .map(|m| {
            (
                m["message_id"].as_str().unwrap_or_default().to_owned(),
                m["read_status"] == true,
            )
        })
        .collect();
    assert_eq!(
        seen[..3],
        [
            (read_one, true),
            (unread_one, false),
            (question.clone(), false)
        ]
    );
    assert_eq!(inbox.body["total_count"], 4);
    let original = app
        .get(&format!("/v1/messages/{question}"))
        .token(&a.token)
        .send()
        .await
        .expect_status(200);
    assert_eq!(original.body["responses"][0]["status"], "completed");
    // A retry after the restart still gets the first answer, not a second message.
    let retry = app
        .post("/v1/messages")
        .token(&a.token)
        .header("idempotency-key", "k1")
        .json(keyed)
        .send()
        .await
        .expect_status(201);
    assert_eq!(retry.body, first);
    assert_eq!(app.inbox(&b, "").await.body["total_count"], 4);
    // Sequence numbers continue where they were.
    let next = app.send(&a, &[&b], "after").await;
    let newest = app.inbox(&b, "?limit=1").await;
    assert_eq!(newest.body["messages"][0]["message_id"], next.as_str());
    assert_eq!(newest.body["messages"][0]["seq"], 5);
    app.stop().await;
}

#[tokio::test]
async fn a_killed_process_keeps_every_acknowledged_message() {
    let dir = tempfile::tempdir().expect("tmp");
    let db = dir.path().join("kill.db");
    let server = Process::start(&db);
    let http = reqwest::Client::new();
    let tokens = team_k(&http, &server).await;
    let sends = (0..100).map(|i| {
        call(
            &http,
            &server,
            reqwest::Method::POST,
            "/v1/messages",
            &tokens[0],
            Some(json!({"sender_agent_id": "a", "recipient_agent_ids": ["b"], "message_type": "information", "content": {"text": format!("m{i}")}})),
        )
    });
    let answers = futures_util::future::join_all(sends).await;
    let acknowledged: std::collections::HashSet<String> = answers
        .iter()
        .filter(|(status, _)| *status == 201)
        .map(|(_, body)| body["message_id"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(acknowledged.len(), 100);
    server.kill();

    let server = Process::start(&db);
    let stored = every_inbox_id(&http, &server, &tokens[1]).await;
    assert!(
        acknowledged.is_subset(&stored),
        "every acknowledged message survived SIGKILL"
    );
    server.kill();
}

/// Messages written in one batch (one statement for all their rows) each keep their own
/// row: every recipient finds exactly the message sent to it, with its text and sender.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_written_together_each_keep_their_own_row() {
    let app = TestApp::start().await;
    let team = app.team("t").await;
    let names: Vec<String> = (0..40).map(|i| format!("a{i}")).collect();
    let agents: Vec<Agent> =
        futures_util::future::join_all(names.iter().map(|n| app.agent(&team, n, &[]))).await;
    // Agent i sends to agent i+1 (mod n): concurrent, so they share batches.
    let texts: Vec<String> = (0..agents.len())
        .map(|i| format!("from a{i} to {}", agents[(i + 1) % agents.len()].id))
        .collect();
    let sends = (0..agents.len()).map(|i| {
        let app = &app;
        let (from, to, text) = (&agents[i], &agents[(i + 1) % agents.len()], &texts[i]);
        async move { app.send(from, &[to], text).await }
    });
    let ids = futures_util::future::join_all(sends).await;
    for (i, id) in ids.iter().enumerate() {
        let to = &agents[(i + 1) % agents.len()];
        let inbox = app.inbox(to, "").await.expect_status(200);
        let messages = inbox.body["messages"].as_array().expect("messages");
        assert_eq!(messages.len(), 1, "{} has exactly one message", to.id);
        let m = &messages[0];
        assert_eq!(m["message_id"], json!(id));
        assert_eq!(m["sender_agent_id"], json!(format!("a{i}")));
        assert_eq!(m["content"]["text"], json!(texts[i]));
        assert_eq!(m["seq"], json!(1));
    }
    app.stop().await;
}
