//! Retention: what is younger than a team keeps is never removed, what is older goes,
//! on both sides of the boundary to the microsecond; the counters stay exact; and the
//! background pass does it on its own.

use std::collections::HashMap;
use std::time::Duration;

use serde_json::json;
use switchboard::core::retention::RetentionSettings;
use switchboard::core::{Core, CoreSettings};
use switchboard::hub::HubSettings;
use switchboard::store::{Store, StoreOptions};
use switchboard_types::teams::Retention;
use switchboard_types::time::Timestamp;

use crate::support::{ADMIN, Agent, Team, TestApp};

/// The message's commit time, as its recipient sees it.
pub(crate) async fn sent_at(app: &TestApp, reader: &Agent, id: &str) -> Timestamp {
    let res = app
        .get(&format!("/v1/messages/{id}"))
        .token(&reader.token)
        .send()
        .await
        .expect_status(200);
    Timestamp::parse(
        res.body["message"]["timestamp"]
            .as_str()
            .expect("timestamp"),
    )
    .expect("parses")
}

async fn exists(app: &TestApp, reader: &Agent, id: &str) -> bool {
    let res = app
        .get(&format!("/v1/messages/{id}"))
        .token(&reader.token)
        .send()
        .await;
    match res.status {
        200 => true,
        404 => false,
        other => panic!("GET {id}: {other} {}", res.body),
    }
}

/// One retention pass over the (stopped) server's database, as of `now`.
pub(crate) async fn pass_at(app: &TestApp, now: Timestamp) {
    let store = Store::open(&app.database(), StoreOptions::default())
        .await
        .expect("store");
    let settings = CoreSettings {
        admin_token: Some(ADMIN.to_owned()),
        rate_limit: None,
        hub: HubSettings {
            outbox: 16,
            max_per_agent: 1,
            max_total: 1,
        },
        tasks: Default::default(),
        retention: RetentionSettings::default(),
        node_id: switchboard::core::node::NodeId::generate(),
        budgets: Default::default(),
        spans: None,
    };
    let (core, _) = Core::open(store.clone(), settings).await.expect("core");
    core.node()
        .expire(now, &mut HashMap::new())
        .await
        .expect("pass");
    store.close().await;
}

/// `reader` marks `ids` read, and the team keeps read messages for 60 s.
pub(crate) async fn read_and_keep_read_for_a_minute(
    app: &TestApp,
    team: &Team,
    reader: &Agent,
    ids: &[String],
) {
    app.post("/v1/messages/read")
        .token(&reader.token)
        .json(json!({"agent_id": reader.id, "message_ids": ids}))
        .send()
        .await
        .expect_status(200);
    app.patch(&format!("/v1/teams/{}", team.id))
        .token(&team.key)
        .json(json!({"retention": {"read_messages_seconds": 60}}))
        .send()
        .await
        .expect_status(200);
}

/// With a read retention of 60 s, a pass at `young + 60 s` keeps the message sent at
/// `young` (exactly on the boundary) and removes the older read one; a message someone
/// has not read stays; one microsecond later the boundary message goes too. Counters
/// follow every removal.
#[tokio::test]
async fn read_messages_go_exactly_at_their_retention_and_unread_ones_stay() {
    let mut app = TestApp::start().await;
    let team = app.team("keep").await;
    let a = app.agent(&team, "a", &[]).await;
    let b = app.agent(&team, "b", &[]).await;
    let old = app.send(&a, &[&b], "old").await;
    let unread = app.send(&a, &[&b], "unread").await;
    tokio::time::sleep(Duration::from_millis(5)).await;
    let young = app.send(&a, &[&b], "young").await;
    read_and_keep_read_for_a_minute(&app, &team, &b, &[old.clone(), young.clone()]).await;
    let boundary = sent_at(&app, &b, &young).await.micros() + 60_000_000;
    app.pause().await;
    pass_at(&app, Timestamp::from_micros(boundary)).await;
    app.restart().await;
    assert!(!exists(&app, &b, &old).await, "older than its retention");
    assert!(exists(&app, &b, &young).await, "exactly at its retention");
    assert!(
        exists(&app, &b, &unread).await,
        "unread, with no unread retention"
    );
    let inbox = app.inbox(&b, "").await.expect_status(200);
    assert_eq!(
        (
            inbox.body["total_count"].as_u64(),
            inbox.body["unread_count"].as_u64()
        ),
        (Some(2), Some(1))
    );
    app.pause().await;
    pass_at(&app, Timestamp::from_micros(boundary + 1)).await;
    app.restart().await;
    assert!(!exists(&app, &b, &young).await, "one microsecond past");
    assert!(exists(&app, &b, &unread).await);
    let metrics = app
        .get(&format!("/v1/teams/{}/metrics", team.id))
        .token(&team.key)
        .send()
        .await;
    let agents = metrics.expect_status(200).body["agents"].clone();
    let a_sent = agents
        .as_array()
        .expect("agents")
        .iter()
        .find(|x| x["agent_id"] == "a")
        .expect("a")["sent"]
        .clone();
    assert_eq!(a_sent, 1, "the sent counter follows: {agents}");
    app.stop().await;
}

/// An inbox that retention emptied goes on numbering after its last seq: a client that
/// remembers seq 3 and reconnects with `since=3` gets what was sent after the pass
/// (numbering from 1 again told it that it had seen it), also across a restart.
#[tokio::test]
async fn an_emptied_inbox_numbers_on_after_its_last_seq() {
    let mut app = TestApp::start().await;
    let team = app.team("renumber").await;
    let a = app.agent(&team, "a", &[]).await;
    let b = app.agent(&team, "b", &[]).await;
    let mut sent = Vec::new();
    for text in ["one", "two", "three"] {
        sent.push(app.send(&a, &[&b], text).await);
    }
    read_and_keep_read_for_a_minute(&app, &team, &b, &sent).await;
    let last = sent_at(&app, &b, &sent[2]).await.micros();
    app.pause().await;
    pass_at(&app, Timestamp::from_micros(last + 61_000_000)).await;
    app.restart().await;
    let inbox = app.inbox(&b, "").await.expect_status(200);
    assert_eq!(inbox.body["total_count"], 0, "{}", inbox.body);

    let four = app.send(&a, &[&b], "four").await;
    let (ws, replayed, caught_up) = app.ws_caught_up(&b, "?since=3").await;
    let ids: Vec<&str> = replayed
        .iter()
        .filter_map(|f| f["message"]["message_id"].as_str())
        .collect();
    assert_eq!(ids, [four.as_str()], "{replayed:?}");
    assert_eq!((replayed[0]["seq"].as_i64(), caught_up), (Some(4), 4));
    drop(ws);
    app.restart().await;
    app.send(&a, &[&b], "five").await;
    let inbox = app
        .inbox(&b, "?sort_order=oldest_first")
        .await
        .expect_status(200);
    let seqs: Vec<i64> = inbox.body["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .filter_map(|m| m["seq"].as_i64())
        .collect();
    assert_eq!(seqs, [4, 5], "{}", inbox.body);
    app.stop().await;
}

/// Polls `check` every 100 ms for up to 15 s.
async fn eventually(what: &str, mut check: impl AsyncFnMut() -> bool) {
    for _ in 0..150 {
        if check().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{what} did not happen within 15 s");
}

/// The server's own pass (every 200 ms here) removes a read message, a canceled task
/// and an idempotency record once they are past retention, and leaves an unread message
/// (no unread retention) alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_background_pass_removes_what_is_past_retention() {
    let app = TestApp::start_with(|c| {
        c.retention.interval = Duration::from_millis(200);
        c.retention.idempotency_keys = Duration::from_secs(1);
    })
    .await;
    let team = app.team("sweep").await;
    let a = app.agent(&team, "a", &[]).await;
    let b = app.agent(&team, "b", &[]).await;
    let patched = app
        .patch(&format!("/v1/teams/{}", team.id))
        .token(&team.key)
        .json(json!({"retention": {"read_messages_seconds": 1, "finished_tasks_seconds": 1}}))
        .send()
        .await
        .expect_status(200);
    assert_eq!(
        patched.body["effective_retention"]["read_messages_seconds"],
        1
    );
    assert_eq!(
        patched.body["effective_retention"]["unread_messages_seconds"],
        json!(null)
    );
    let read = app.send(&a, &[&b], "read").await;
    let unread = app.send(&a, &[&b], "unread").await;
    app.post("/v1/messages/read")
        .token(&b.token)
        .json(json!({"agent_id": "b", "message_ids": [read]}))
        .send()
        .await
        .expect_status(200);
    app.post("/v1/tasks")
        .token(&a.token)
        .json(json!({"task_id": "t", "description": "d", "originating_agent_id": "a", "target_agent_id": "b"}))
        .send()
        .await
        .expect_status(201);
    app.post("/v1/tasks/t/cancel")
        .token(&a.token)
        .json(json!({}))
        .send()
        .await
        .expect_status(200);
    let keyed = |text: &str| {
        app.post("/v1/messages")
            .token(&a.token)
            .header("idempotency-key", "once")
            .json(json!({"sender_agent_id": "a", "recipient_agent_ids": ["b"], "message_type": "information", "content": {"text": text}}))
            .send()
    };
    let first = keyed("k").await.expect_status(201).str("message_id");
    eventually("the read message going", async || {
        !exists(&app, &b, &read).await
    })
    .await;
    eventually("the canceled task going", async || {
        app.get("/v1/tasks/t").token(&a.token).send().await.status == 404
    })
    .await;
    // Past its lifetime, the key no longer replays the first answer: the retry is new.
    eventually("the idempotency record going", async || {
        keyed("k").await.expect_status(201).str("message_id") != first
    })
    .await;
    assert!(exists(&app, &b, &unread).await, "unread stays");
    let mut app = app;
    app.pause().await;
    kept_row_counts_match(&app.database()).await;
}

/// The counters `/metrics` reads for the task, callback and idempotency tables equal a
/// plain count after the inserts and the retention deletes a test made.
async fn kept_row_counts_match(database: &std::path::Path) {
    use sqlx::{ConnectOptions, Connection};
    let url = database.to_string_lossy();
    for family in ["tasks", "task_events", "callbacks", "idempotency_keys"] {
        // The family names are this test's constants.
        let sql = format!(
            "SELECT (SELECT n FROM row_counts WHERE family = '{family}'), COUNT(*) FROM {family}"
        );
        let sql = sqlx::AssertSqlSafe(sql);
        let (kept, counted): (i64, i64) = if url.starts_with("postgres") {
            let mut conn = sqlx::PgConnection::connect(&url).await.expect("open");
            sqlx::query_as(sql).fetch_one(&mut conn).await
        } else {
            let mut conn = sqlx::sqlite::SqliteConnectOptions::new()
                .filename(database)
                .read_only(true)
                .connect()
                .await
                .expect("open");
            sqlx::query_as(sql).fetch_one(&mut conn).await
        }
        .expect("counts");
        assert_eq!(kept, counted, "{family}");
    }
}

/// A team cannot keep more than the server does, and a retention out of range is a
/// validation error naming the field.
#[tokio::test]
async fn team_retention_is_validated_and_capped_by_the_servers() {
    let app = TestApp::start_with(|c| {
        c.retention.server = Retention {
            read_messages_seconds: Some(3600),
            ..Retention::default()
        };
    })
    .await;
    let team = app.team("capped").await;
    let patch = |retention: serde_json::Value| {
        app.patch(&format!("/v1/teams/{}", team.id))
            .token(&team.key)
            .json(json!({ "retention": retention }))
            .send()
    };
    let res = patch(json!({"read_messages_seconds": 86400}))
        .await
        .expect_status(200);
    assert_eq!(res.body["retention"]["read_messages_seconds"], 86400);
    assert_eq!(
        res.body["effective_retention"]["read_messages_seconds"],
        3600
    );
    let res = patch(json!({"unread_messages_seconds": 60}))
        .await
        .expect_status(200);
    assert_eq!(
        res.body["effective_retention"]["read_messages_seconds"], 3600,
        "null follows the server"
    );
    assert_eq!(
        res.body["effective_retention"]["unread_messages_seconds"],
        60
    );
    patch(json!({"read_messages_seconds": 0}))
        .await
        .expect_invalid("retention.read_messages_seconds");
    patch(json!({"finished_tasks_seconds": 3_153_600_001u64}))
        .await
        .expect_invalid("retention.finished_tasks_seconds");
    patch(json!({"kept_seconds": 5}))
        .await
        .expect_error(400, "VALIDATION_ERROR");
    app.stop().await;
}
