//! What the server does with a `--database` file that is not its own, or that an
//! older release wrote.

use std::process::{Command, Stdio};

use serde_json::json;

use crate::support::{ADMIN, TestApp};

/// `--database sqlite://path` is that SQLite file; a PostgreSQL URL is served from
/// that database (the binary, as an operator starts it), and nothing is created in the
/// folder the server runs in (a URL taken for a file name once made a folder called
/// `postgres:`).
#[tokio::test]
async fn a_sqlite_url_is_a_file_and_a_postgres_url_is_that_database() {
    use switchboard::server::{Server, ServerConfig};
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("by-url.db");
    let mut config = ServerConfig::new(
        "127.0.0.1:0".parse().expect("addr"),
        format!("sqlite://{}", file.display()).into(),
    );
    config.admin_token = Some(ADMIN.to_owned());
    let server = Server::start(config)
        .await
        .expect("starts on a sqlite:// URL");
    server.shutdown().await;
    assert!(file.is_file(), "the server wrote {}", file.display());

    let Some(db) = crate::pg::database("served").await else {
        return;
    };
    let server = crate::process::Process::start(std::path::Path::new(&db.url));
    let (status, body) = crate::process::call(
        &reqwest::Client::new(),
        &server,
        reqwest::Method::POST,
        "/v1/teams",
        ADMIN,
        Some(json!({"name": "On PostgreSQL", "team_id": "pg"})),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    server.kill();
    let mut conn = db.connect().await;
    let teams: Vec<String> = sqlx::query_scalar("SELECT team_id FROM teams")
        .fetch_all(&mut conn)
        .await
        .expect("read the teams");
    assert_eq!(teams, ["pg"]);
    drop(conn);
    db.remove().await;
    assert!(!std::path::Path::new("postgres:").exists());
}

/// A `--database` that names a damaged file, a file that is no database, or another
/// program's SQLite database is refused at start with a clear error, and the file is
/// left byte for byte as it was (no WAL switch, no tables of ours added).
#[tokio::test]
async fn a_file_that_is_not_ours_is_refused_and_left_untouched() {
    use sqlx::{ConnectOptions, Executor};
    let dir = tempfile::tempdir().expect("tempdir");
    let damaged = dir.path().join("damaged.db");
    let noise: Vec<u8> = (0..50_000u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    std::fs::write(&damaged, noise).expect("write");
    let text = dir.path().join("notes.db");
    std::fs::write(&text, "shopping list: milk, eggs\n").expect("write");
    let foreign = dir.path().join("crm.db");
    {
        let mut conn = sqlx::sqlite::SqliteConnectOptions::new()
            .filename(&foreign)
            .create_if_missing(true)
            .connect()
            .await
            .expect("create");
        conn.execute("CREATE TABLE customers (id INTEGER, name TEXT); INSERT INTO customers VALUES (1, 'Ada')")
            .await
            .expect("fill");
    }
    for (file, why) in [
        (&damaged, "SQLite cannot read it"),
        (&text, "SQLite cannot read it"),
        (&foreign, "another program's database (tables: customers)"),
    ] {
        let before = std::fs::read(file).expect("read");
        let mut child = Command::new(env!("CARGO_BIN_EXE_switchboard"))
            .args([
                "serve",
                "--listen",
                "127.0.0.1:0",
                "--admin-token",
                ADMIN,
                "--database",
            ])
            .arg(file)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        let status = loop {
            if let Some(status) = child.try_wait().expect("wait") {
                break status;
            }
            if std::time::Instant::now() > deadline {
                let _ = child.kill();
                panic!("the server started on {}", file.display());
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        };
        let mut stderr = String::new();
        std::io::Read::read_to_string(&mut child.stderr.take().expect("stderr"), &mut stderr)
            .expect("stderr");
        assert!(!status.success(), "{}", file.display());
        assert!(stderr.contains("is not a Switchboard database"), "{stderr}");
        assert!(stderr.contains(why), "{stderr}");
        assert!(stderr.contains("left untouched"), "{stderr}");
        assert_eq!(
            std::fs::read(file).expect("read"),
            before,
            "{} changed",
            file.display()
        );
        let wal = file.with_extension("db-wal");
        assert!(!wal.exists(), "{} got a WAL", file.display());
    }
}

/// A SQLite file as the released binary left it: migrations 1–4 exactly as released,
/// applied by sqlx as the old binary did. Its connect options.
async fn released_schema(dir: &std::path::Path) -> sqlx::sqlite::SqliteConnectOptions {
    use sqlx::ConnectOptions;

    let path = dir.join("legacy.db");
    let released = dir.join("migrations");
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
    options
}

/// The secret of legacy agent `c` (64 times the letter).
fn legacy_secret(c: char) -> String {
    c.to_string().repeat(64)
}

/// A team, alice and bob, a request from alice to bob and bob's response, written as
/// the old binary wrote them.
async fn legacy_rows(options: &sqlx::sqlite::SqliteConnectOptions) {
    use sha2::{Digest, Sha256};
    use sqlx::{ConnectOptions, Connection, Executor};

    let mut conn = options.connect().await.expect("connect");
    let hash = |c: char| Sha256::digest(legacy_secret(c).as_bytes()).to_vec();
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
                              priority, content, requires_response, recipient_ids, created_at,
                              thread_id)
        VALUES (1, 'msg_legacy_1', 1, 'message', 1, 'worker', 'request', 'high',
                '{"text":"written before the upgrade"}', 1, '["bob"]', 1000000, 'legacy-thread');
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
}

/// The old messages read over the API, and new ones are numbered on from them.
async fn legacy_messages_are_served(app: &TestApp) {
    let token = |c: char| format!("sb_agent_00000000000000{c}{c}_{}", legacy_secret(c));
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
    // Migration 0014 copied the thread into the entry: the thread is read from the inbox.
    let thread = app
        .get("/v1/messages?thread_id=legacy-thread")
        .token(&token('b'))
        .send()
        .await
        .expect_status(200);
    assert_eq!(thread.body["total_count"], 1, "{}", thread.body);
    assert_eq!(thread.body["messages"][0]["message_id"], "msg_legacy_1");
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
}

/// The table was rebuilt with the same rules, nothing dangles, and every migration ran.
async fn rebuilt_table_keeps_its_rules(options: &sqlx::sqlite::SqliteConnectOptions) {
    use sqlx::{ConnectOptions, Row};

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
    // SQLite's migrations: the .sql files (postgres/ beside them is another engine's).
    let shipped = std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/migrations"))
        .expect("migrations")
        .filter(|e| {
            e.as_ref()
                .is_ok_and(|e| e.path().extension().is_some_and(|x| x == "sql"))
        })
        .count();
    let every: Vec<i64> = (1..=shipped as i64).collect();
    assert_eq!(
        applied, every,
        "every migration since 0005 ran on the old file"
    );
}

/// Migration 0005 rebuilds `messages` (its CHECKs as comparisons). A database written
/// before it, with messages, inbox entries and a response, must come through whole:
/// readable over the API, still numbered on from where it was, its constraints kept.
#[tokio::test]
async fn a_database_from_before_migration_5_keeps_its_messages() {
    let old = tempfile::tempdir().expect("temp dir");
    let options = released_schema(old.path()).await;
    legacy_rows(&options).await;
    let legacy = old.path().join("legacy.db");
    let app = TestApp::start_with(move |config| config.database = legacy).await;
    legacy_messages_are_served(&app).await;
    rebuilt_table_keeps_its_rules(&options).await;
    app.stop().await;
}
