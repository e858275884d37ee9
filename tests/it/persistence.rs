//! Persistence: a restart (graceful or a killed process) keeps everything acknowledged.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

use serde_json::{Value, json};

use crate::support::{ADMIN, TestApp};

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
    // Only a digest is stored, never the token itself.
    let bytes = std::fs::read(app.database()).expect("db file");
    assert!(
        !bytes
            .windows(generated.len())
            .any(|w| w == generated.as_bytes())
    );
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

/// The server binary as a child process, so it can be killed without warning.
struct Process {
    child: Child,
    base: String,
}

impl Process {
    fn start(database: &std::path::Path) -> Process {
        let mut child = Command::new(env!("CARGO_BIN_EXE_switchboard"))
            .args([
                "serve",
                "--listen",
                "127.0.0.1:0",
                "--log-format",
                "json",
                "--admin-token",
                ADMIN,
            ])
            .arg("--database")
            .arg(database)
            .env("RUST_LOG", "info")
            .stderr(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .expect("server binary starts");
        let stderr = child.stderr.take().expect("stderr");
        let mut lines = BufReader::new(stderr).lines();
        let addr = loop {
            let line = lines
                .next()
                .expect("server printed its address")
                .expect("line");
            if let Ok(entry) = serde_json::from_str::<Value>(&line)
                && let Some(addr) = entry["addr"].as_str()
            {
                break addr.to_owned();
            }
        };
        // Keep draining the log so the child never blocks on a full pipe.
        std::thread::spawn(move || for _ in lines {});
        Process {
            child,
            base: format!("http://{addr}"),
        }
    }

    fn kill(mut self) {
        self.child.kill().expect("SIGKILL");
        self.child.wait().expect("reaped");
    }
}

#[tokio::test]
async fn a_killed_process_loses_nothing_it_acknowledged() {
    let dir = tempfile::tempdir().expect("tmp");
    let db = dir.path().join("kill.db");
    let http = reqwest::Client::new();

    let server = Process::start(&db);
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

#[tokio::test]
async fn messages_read_flags_responses_and_idempotency_survive_a_restart() {
    let mut app = TestApp::start().await;
    let team = app.team("t").await;
    let a = app.agent(&team, "a", &[]).await;
    let b = app.agent(&team, "b", &[]).await;
    let read_one = app.send(&a, &[&b], "read me").await;
    let unread_one = app.send(&a, &[&b], "leave me").await;
    let question = app
        .send_with(
            &a,
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
    assert_eq!(retry.body, first.body);
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
    let http = reqwest::Client::new();
    let call = |server: &Process,
                method: reqwest::Method,
                path: &str,
                token: &str,
                body: Option<Value>| {
        let mut req = http
            .request(method, format!("{}{path}", server.base))
            .bearer_auth(token);
        if let Some(body) = body {
            req = req.json(&body);
        }
        async move {
            let res = req.send().await.expect("sent");
            let status = res.status().as_u16();
            (status, res.json::<Value>().await.unwrap_or(Value::Null))
        }
    };

    let server = Process::start(&db);
    let (_, team) = call(
        &server,
        reqwest::Method::POST,
        "/v1/teams",
        ADMIN,
        Some(json!({"name": "k", "team_id": "k"})),
    )
    .await;
    let key = team["team_key"].as_str().expect("key").to_owned();
    let mut tokens = Vec::new();
    for id in ["a", "b"] {
        let (_, agent) = call(
            &server,
            reqwest::Method::POST,
            "/v1/teams/k/agents",
            &key,
            Some(json!({"agent_id": id, "role": "r", "capabilities": []})),
        )
        .await;
        tokens.push(agent["token"].as_str().expect("token").to_owned());
    }
    let sends = (0..100).map(|i| {
        call(
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
    let mut stored = std::collections::HashSet::new();
    let mut cursor = String::new();
    loop {
        let (_, page) = call(
            &server,
            reqwest::Method::GET,
            &format!("/v1/messages?limit=100{cursor}"),
            &tokens[1],
            None,
        )
        .await;
        for m in page["messages"].as_array().expect("messages") {
            stored.insert(m["message_id"].as_str().unwrap_or_default().to_owned());
        }
        match page["next_cursor"].as_str() {
            Some(next) => cursor = format!("&cursor={next}"),
            None => break,
        }
    }
    assert!(
        acknowledged.is_subset(&stored),
        "every acknowledged message survived SIGKILL"
    );
    server.kill();
}

/// Migration 0005 rebuilds `messages` (its CHECKs as comparisons). A database written
/// before it, with messages, inbox entries and a response, must come through whole:
/// readable over the API, still numbered on from where it was, its constraints kept.
#[tokio::test]
async fn a_database_from_before_migration_5_keeps_its_messages() {
    use sha2::{Digest, Sha256};
    use sqlx::{ConnectOptions, Connection, Executor, Row};

    let old = tempfile::tempdir().expect("temp dir");
    let path = old.path().join("legacy.db");
    // Migrations 1–4 exactly as released, applied by sqlx as the old binary did.
    let released = old.path().join("migrations");
    std::fs::create_dir(&released).expect("dir");
    for entry in std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/migrations")).expect("ls")
    {
        let entry = entry.expect("entry");
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.as_str() < "0005" {
            std::fs::copy(entry.path(), released.join(&name)).expect("copy");
        }
    }
    let options = sqlx::sqlite::SqliteConnectOptions::new()
        .filename(&path)
        .create_if_missing(true)
        .journal_mode(sqlx::sqlite::SqliteJournalMode::Wal)
        .foreign_keys(true);
    let mut conn = options.connect().await.expect("connect");
    sqlx::migrate::Migrator::new(released.as_path())
        .await
        .expect("migrator")
        .run(&mut conn)
        .await
        .expect("migrations 1-4");

    let secret = |c: char| c.to_string().repeat(64);
    let hash = |c: char| Sha256::digest(secret(c).as_bytes()).to_vec();
    sqlx::query(
        "INSERT INTO teams (pk, team_id, name, key_id, key_hash, created_at, updated_at)
         VALUES (1, 'legacy', 'Legacy', '00000000000000ff', zeroblob(32), 1, 1)",
    )
    .execute(&mut conn)
    .await
    .expect("team");
    for (pk, id, c) in [(1, "alice", 'a'), (2, "bob", 'b')] {
        sqlx::query(
            "INSERT INTO agents (pk, team_pk, agent_id, role, capabilities, status, token_id,
                                 token_hash, registered_at, updated_at)
             VALUES (?, 1, ?, 'worker', '[]', 'available', ?, ?, 1, 1)",
        )
        .bind(pk)
        .bind(id)
        .bind(format!("00000000000000{c}{c}"))
        .bind(hash(c))
        .execute(&mut conn)
        .await
        .expect("agent");
    }
    conn.execute(
        r#"
        INSERT INTO messages (pk, message_id, team_pk, kind, sender_pk, sender_role, message_type,
                              priority, content, requires_response, recipient_ids, created_at)
        VALUES (1, 'msg_legacy_1', 1, 'message', 1, 'worker', 'request', 'high',
                '{"text":"written before the upgrade"}', 1, '["bob"]', 1000000);
        INSERT INTO inbox (agent_pk, seq, message_pk, sender_pk, kind, message_type, priority, created_at)
        VALUES (2, 1, 1, 1, 'message', 'request', 'high', 1000000);
        INSERT INTO messages (pk, message_id, team_pk, kind, sender_pk, sender_role, message_type,
                              priority, content, requires_response, in_reply_to, response_status,
                              recipient_ids, created_at)
        VALUES (2, 'msg_legacy_2', 1, 'response', 2, 'worker', 'response', 'normal',
                '{"text":"answered before the upgrade"}', 0, 'msg_legacy_1', 'completed',
                '["alice"]', 2000000);
        INSERT INTO inbox (agent_pk, seq, message_pk, sender_pk, kind, message_type, priority, created_at)
        VALUES (1, 1, 2, 2, 'response', 'response', 'normal', 2000000);
        INSERT INTO responses (original_pk, response_pk, responder_pk, status, created_at)
        VALUES (1, 2, 2, 'completed', 2000000);
        "#,
    )
    .await
    .expect("messages");
    conn.close().await.expect("close");

    let legacy = path.clone();
    let app = TestApp::start_with(move |config| config.database = legacy).await;
    let token = |c: char| format!("sb_agent_00000000000000{c}{c}_{}", secret(c));

    let inbox = app
        .get("/v1/messages")
        .token(&token('b'))
        .send()
        .await
        .expect_status(200);
    assert_eq!(inbox.body["total_count"], 1);
    assert_eq!(inbox.body["messages"][0]["message_id"], "msg_legacy_1");
    assert_eq!(
        inbox.body["messages"][0]["content"]["text"],
        "written before the upgrade"
    );
    assert_eq!(inbox.body["messages"][0]["priority"], "high");
    let original = app
        .get("/v1/messages/msg_legacy_1")
        .token(&token('a'))
        .send()
        .await
        .expect_status(200);
    assert_eq!(
        original.body["responses"].as_array().map(Vec::len),
        Some(1),
        "{}",
        original.body
    );

    // New messages are numbered on from the old ones.
    app.post("/v1/messages")
        .token(&token('a'))
        .json(
            json!({"sender_agent_id": "alice", "recipient_agent_ids": ["bob"],
                     "message_type": "information", "content": {"text": "after"}}),
        )
        .send()
        .await
        .expect_status(201);
    let inbox = app
        .get("/v1/messages?sort_order=oldest_first")
        .token(&token('b'))
        .send()
        .await
        .expect_status(200);
    assert_eq!(inbox.body["total_count"], 2);
    assert_eq!(inbox.body["messages"][1]["content"]["text"], "after");
    assert_eq!(inbox.body["messages"][1]["seq"], 2, "{}", inbox.body);

    // The table was rebuilt with the same rules, and nothing dangles.
    let mut check = options.connect().await.expect("connect");
    let schema: String =
        sqlx::query_scalar("SELECT sql FROM sqlite_master WHERE name = 'messages'")
            .fetch_one(&mut check)
            .await
            .expect("schema");
    assert!(!schema.contains(" IN ('message'"), "{schema}");
    let dangling = sqlx::query("PRAGMA foreign_key_check")
        .fetch_all(&mut check)
        .await
        .expect("fk check");
    assert!(dangling.is_empty());
    let bad = sqlx::query(
        "INSERT INTO messages (message_id, team_pk, kind, sender_pk, sender_role, message_type,
                               priority, content, requires_response, recipient_ids, created_at)
         VALUES ('msg_bad', 1, 'bogus', 1, 'worker', 'request', 'high', '{}', 0, '[]', 1)",
    )
    .execute(&mut check)
    .await
    .expect_err("an unknown kind is refused");
    assert!(bad.to_string().contains("CHECK constraint failed"), "{bad}");
    let applied: Vec<i64> = sqlx::query("SELECT version FROM _sqlx_migrations ORDER BY version")
        .fetch_all(&mut check)
        .await
        .expect("versions")
        .iter()
        .map(|r| r.get(0))
        .collect();
    let shipped = std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/migrations"))
        .expect("migrations")
        .count();
    let every: Vec<i64> = (1..=shipped as i64).collect();
    assert_eq!(
        applied, every,
        "every migration since 0005 ran on the old file"
    );
}
