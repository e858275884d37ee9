//! `switchboard migrate-db`: a deployment made through the API on SQLite, copied into a
//! PostgreSQL database of its own by the real binary, then compared table by table with
//! plain queries on both sides; and every refusal (a target that holds a deployment, a
//! database newer or older than the binary, a column the copy does not carry, a target
//! that is not PostgreSQL) leaves the target as it was.

use std::path::{Path, PathBuf};

use serde_json::json;
use sqlx::postgres::PgConnection;
use sqlx::sqlite::SqliteConnectOptions;
use sqlx::{ConnectOptions, Connection, Executor, SqliteConnection};

use crate::pg;
use crate::support::{Agent, TestApp};

/// Runs `switchboard migrate-db`; its exit code, stdout and stderr.
async fn migrate_db(from: &Path, to: &str) -> (i32, String, String) {
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_switchboard"))
        .arg("migrate-db")
        .arg("--from")
        .arg(from)
        .arg("--to")
        .arg(to)
        .output()
        .await
        .expect("run switchboard migrate-db");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A seeded deployment's SQLite file, its server stopped (the app keeps the folder).
async fn seeded_file() -> (TestApp, PathBuf) {
    let mut app = TestApp::start_on_sqlite_with(|c| c.callbacks.allow_private = true).await;
    seed(&app).await;
    app.pause().await;
    let file = app.database();
    (app, file)
}

/// A team with messages (one read, a response, a broadcast), a task with a history and
/// a pending URL callback, and an idempotent send: every table has rows.
async fn seed(app: &TestApp) {
    let team = app.team("copy").await;
    let a = app.agent(&team, "alpha", &["plan"]).await;
    let b = app.agent(&team, "beta", &["code"]).await;
    let c = app.agent(&team, "gamma", &[]).await;
    let first = app
        .send_with(
            &a,
            json!({"recipient_agent_ids": ["beta", "gamma"], "message_type": "request",
                   "requires_response": true, "content": {"text": "hello, both"}}),
        )
        .await
        .expect_status(201)
        .str("message_id");
    app.send(&b, &[&a], "hello back").await;
    read(app, &b, &first).await;
    app.post(&format!("/v1/messages/{first}/responses"))
        .token(&b.token)
        .json(json!({"responder_agent_id": "beta",
                     "response_content": {"text": "done", "status": "completed"}}))
        .send()
        .await
        .expect_status(201);
    app.post("/v1/broadcasts")
        .token(&a.token)
        .json(
            json!({"sender_agent_id": "alpha", "update_type": "progress", "urgency": "info",
                     "content": {"summary": "standup at 10"}}),
        )
        .send()
        .await
        .expect_status(201);
    app.post("/v1/messages")
        .token(&c.token)
        .header("Idempotency-Key", "once")
        .json(
            json!({"sender_agent_id": "gamma", "recipient_agent_ids": ["alpha"],
                     "content": {"text": "only once"}, "message_type": "information"}),
        )
        .send()
        .await
        .expect_status(201);
    app.post("/v1/tasks")
        .token(&a.token)
        .json(
            json!({"task_id": "t1", "description": "write it", "originating_agent_id": "alpha",
                     "target_agent_id": "beta", "callback_url": "http://127.0.0.1:9/hook"}),
        )
        .send()
        .await
        .expect_status(201);
    app.post("/v1/tasks/t1/result")
        .token(&b.token)
        .json(json!({"status": "success", "result_data": {"lines": 3}}))
        .send()
        .await
        .expect_status(200);
}

async fn read(app: &TestApp, who: &Agent, message_id: &str) {
    app.post("/v1/messages/read")
        .token(&who.token)
        .json(json!({"agent_id": who.id, "message_ids": [message_id]}))
        .send()
        .await
        .expect_status(200);
}

async fn sqlite(path: &Path) -> SqliteConnection {
    SqliteConnectOptions::new()
        .filename(path)
        .read_only(true)
        .connect()
        .await
        .expect("open the SQLite file")
}

/// A query's rows as text, the same way on both engines (every column cast to text;
/// SQLite's 0/1 flags read as PostgreSQL's booleans do).
async fn rows_sqlite(conn: &mut SqliteConnection, sql: &str) -> Vec<String> {
    sqlx::query_scalar::<_, String>(sqlx::AssertSqlSafe(sql.to_owned()))
        .fetch_all(conn)
        .await
        .expect(sql)
}

async fn rows_pg(conn: &mut PgConnection, sql: &str) -> Vec<String> {
    sqlx::query_scalar::<_, String>(sqlx::AssertSqlSafe(sql.to_owned()))
        .fetch_all(conn)
        .await
        .expect(sql)
}

/// What is compared: each line one row, built of the columns a client's answers come
/// from.
const SAME: &[(&str, &str, &str)] = &[
    (
        "inbox",
        "SELECT agent_pk || ':' || seq || ':' || message_pk || ':' || COALESCE(read_at, -1) || ':' || news FROM inbox ORDER BY agent_pk, seq",
        "SELECT agent_pk || ':' || seq || ':' || message_pk || ':' || COALESCE(read_at, -1) || ':' || news::int FROM inbox ORDER BY agent_pk, seq",
    ),
    (
        "messages",
        "SELECT pk || message_id || kind || content || recipient_ids || requires_response || created_at FROM messages ORDER BY pk",
        "SELECT pk || message_id || kind || content || recipient_ids || requires_response::int || created_at FROM messages ORDER BY pk",
    ),
    (
        "inbox_counts",
        "SELECT agent_pk || ':' || total || ':' || unread || ':' || sent || ':' || responded || ':' || quiet_unread || ':' || quiet_total || ':' || last_seq FROM inbox_counts ORDER BY agent_pk",
        "SELECT agent_pk || ':' || total || ':' || unread || ':' || sent || ':' || responded || ':' || quiet_unread || ':' || quiet_total || ':' || last_seq FROM inbox_counts ORDER BY agent_pk",
    ),
    (
        "agents",
        "SELECT pk || agent_id || hex(token_hash) || capabilities FROM agents ORDER BY pk",
        "SELECT pk || agent_id || upper(encode(token_hash, 'hex')) || capabilities FROM agents ORDER BY pk",
    ),
    (
        "tasks",
        "SELECT pk || task_id || status || version || COALESCE(result_data, '') FROM tasks ORDER BY pk",
        "SELECT pk || task_id || status || version || COALESCE(result_data, '') FROM tasks ORDER BY pk",
    ),
    (
        "task_events",
        "SELECT task_pk || ':' || seq || kind || status || data FROM task_events ORDER BY task_pk, seq",
        "SELECT task_pk || ':' || seq || kind || status || data FROM task_events ORDER BY task_pk, seq",
    ),
    (
        "callbacks",
        "SELECT pk || url || event_seq || state || body FROM callbacks ORDER BY pk",
        "SELECT pk || url || event_seq || state || body FROM callbacks ORDER BY pk",
    ),
    (
        "team secrets",
        "SELECT team_pk || secret FROM team_secrets ORDER BY team_pk",
        "SELECT team_pk || secret FROM team_secrets ORDER BY team_pk",
    ),
    (
        "idempotency keys",
        "SELECT agent_pk || key || answer FROM idempotency_keys ORDER BY agent_pk, key",
        "SELECT agent_pk || key || answer FROM idempotency_keys ORDER BY agent_pk, key",
    ),
    (
        "row counts",
        "SELECT family || n FROM row_counts ORDER BY family",
        "SELECT family || n FROM row_counts ORDER BY family",
    ),
];

#[tokio::test]
async fn migrate_db_copies_a_deployment_and_verifies_every_table() {
    let Some(target) = pg::database("migrate_copy").await else {
        return;
    };
    let (_app, file) = seeded_file().await;

    let (code, out, err) = migrate_db(&file, &target.url).await;
    assert_eq!(code, 0, "migrate-db failed: {out}{err}");
    assert!(out.contains("every table's count verified"), "{out}");
    assert!(out.contains("inbox"), "{out}");

    let mut lite = sqlite(&file).await;
    let mut pg = target.connect().await;
    for (what, on_sqlite, on_pg) in SAME {
        let source = rows_sqlite(&mut lite, on_sqlite).await;
        assert!(!source.is_empty(), "the seed left {what} empty");
        assert_eq!(source, rows_pg(&mut pg, on_pg).await, "{what} differ");
    }
    // Each recipient's seq counter stands at its newest entry, so the next entry a
    // PostgreSQL writer numbers follows on without a gap.
    let behind: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM inbox_counts c
         WHERE c.last_seq <> COALESCE((SELECT MAX(seq) FROM inbox i WHERE i.agent_pk = c.agent_pk), 0)",
    )
    .fetch_one(&mut pg)
    .await
    .expect("last_seq");
    assert_eq!(behind, 0);
    // Keys handed out from now on follow the copied ones.
    let max_team: i64 = sqlx::query_scalar("SELECT MAX(pk) FROM teams")
        .fetch_one(&mut pg)
        .await
        .expect("max");
    let next: i64 = sqlx::query_scalar(
        "INSERT INTO teams (team_id, name, key_id, key_hash, created_at, updated_at)
         VALUES ('new', 'new', 'new-key', '\\x00', 0, 0) RETURNING pk",
    )
    .fetch_one(&mut pg)
    .await
    .expect("a new team takes the next key");
    assert_eq!(next, max_team + 1);
    // The triggers are back on: a new agent gets its counter row.
    pg.execute(
        "INSERT INTO agents (team_pk, agent_id, role, capabilities, status, registered_at, updated_at)
         VALUES (1, 'late', 'r', '[]', 'available', 0, 0)",
    )
    .await
    .expect("insert an agent");
    let counted: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM inbox_counts c JOIN agents a ON a.pk = c.agent_pk WHERE a.agent_id = 'late'",
    )
    .fetch_one(&mut pg)
    .await
    .expect("counter row");
    assert_eq!(counted, 1);
    drop(pg);
    target.remove().await;
}

#[tokio::test]
async fn migrate_db_refuses_a_target_in_use_and_a_schema_it_does_not_know() {
    let Some(target) = pg::database("migrate_refusals").await else {
        return;
    };
    let (_app, file) = seeded_file().await;

    let (code, _, err) = migrate_db(&file, "/tmp/not-a-url.db").await;
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("PostgreSQL URL"), "{err}");

    assert_eq!(migrate_db(&file, &target.url).await.0, 0);
    let mut pg = target.connect().await;
    let count = |sql: &'static str| sqlx::query_scalar::<_, i64>(sql);
    let messages = count("SELECT COUNT(*) FROM messages")
        .fetch_one(&mut pg)
        .await
        .expect("count");

    // A second copy into the same database: refused, nothing added.
    let (code, _, err) = migrate_db(&file, &target.url).await;
    assert_eq!(code, 1);
    assert!(err.contains("already holds a deployment"), "{err}");
    let after = count("SELECT COUNT(*) FROM messages")
        .fetch_one(&mut pg)
        .await
        .expect("count");
    assert_eq!(after, messages);

    // A database a newer binary migrated: refused before anything is written.
    pg.execute(
        "INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time)
         VALUES (99990101000000, 'from the future', true, '\\x00', 0)",
    )
    .await
    .expect("pretend a newer migration");
    let (code, _, err) = migrate_db(&file, &target.url).await;
    assert_eq!(code, 1);
    assert!(err.contains("newer than this binary"), "{err}");
    drop(pg);
    target.remove().await;
}

/// Source files the copy cannot carry whole are refused before the target is touched:
/// one an older binary left (its newest migration not applied yet), and one with a
/// column the copy does not know (a migration that forgot the copy), which would be
/// left behind without a word.
#[tokio::test]
async fn migrate_db_refuses_a_source_it_cannot_carry_whole() {
    let Some(empty) = pg::database("migrate_source").await else {
        return;
    };
    let (_app, file) = seeded_file().await;
    let count = |sql: &'static str| sqlx::query_scalar::<_, i64>(sql);
    // A SQLite file an older binary left (its newest migration not applied yet).
    let older = file.with_file_name("older.db");
    std::fs::copy(&file, &older).expect("copy the file");
    let mut lite = SqliteConnection::connect(&format!("sqlite://{}", older.display()))
        .await
        .expect("open the copy");
    lite.execute(
        "DELETE FROM _sqlx_migrations WHERE version = (SELECT MAX(version) FROM _sqlx_migrations)",
    )
    .await
    .expect("forget the newest migration");
    lite.close().await.expect("close");
    let (code, _, err) = migrate_db(&older, &empty.url).await;
    assert_eq!(code, 1);
    assert!(err.contains("older than this binary"), "{err}");

    // A column the copy does not know (a migration that forgot the copy) would be left
    // behind without a word: refused, naming it.
    let wider = file.with_file_name("wider.db");
    std::fs::copy(&file, &wider).expect("copy the file");
    let mut lite = SqliteConnection::connect(&format!("sqlite://{}", wider.display()))
        .await
        .expect("open the copy");
    lite.execute("ALTER TABLE teams ADD COLUMN motto TEXT")
        .await
        .expect("add a column");
    lite.close().await.expect("close");
    let (code, _, err) = migrate_db(&wider, &empty.url).await;
    assert_eq!(code, 1);
    assert!(err.contains("does not carry teams.motto"), "{err}");
    let mut pg = empty.connect().await;
    let tables =
        count("SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = 'public'")
            .fetch_one(&mut pg)
            .await
            .expect("count");
    assert_eq!(tables, 0, "nothing is written for a source that is refused");
    drop(pg);
    empty.remove().await;
}

/// Two copies into the same empty database at once: one copies, the other waits for it
/// and is refused, and the rows are there once.
#[tokio::test]
async fn two_copies_at_once_make_one() {
    let Some(target) = pg::database("migrate_twice").await else {
        return;
    };
    let (_app, file) = seeded_file().await;
    let (first, second) = tokio::join!(
        migrate_db(&file, &target.url),
        migrate_db(&file, &target.url)
    );
    let mut codes = [first.0, second.0];
    codes.sort_unstable();
    assert_eq!(codes, [0, 1], "{first:?} {second:?}");
    let refused = if first.0 == 1 { &first.2 } else { &second.2 };
    assert!(refused.contains("already holds a deployment"), "{refused}");
    let mut pg = target.connect().await;
    let mut lite = sqlite(&file).await;
    let on_sqlite = rows_sqlite(&mut lite, "SELECT CAST(COUNT(*) AS TEXT) FROM inbox").await;
    let on_pg = rows_pg(&mut pg, "SELECT COUNT(*)::text FROM inbox").await;
    assert_eq!(on_sqlite, on_pg);
    drop(pg);
    target.remove().await;
}
