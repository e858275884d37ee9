//! A large inbox (past the 2,000-entry windows of filtered pages and counts) read
//! through GET_MESSAGES, compared with a straightforward query on the same database:
//! following `next_cursor` yields exactly the entries the query finds, in its order, for
//! every filter and sort order; exact counts equal the query's, and counts marked
//! inexact are lower bounds.

use serde_json::{Value, json};
use sqlx::{Connection, Row};
use switchboard_types::time::Timestamp;

use crate::support::{Agent, TestApp};

const ENTRIES: usize = 5_000;

/// Sends [`ENTRIES`] messages to `h` from `a`, `b` and `c` (types, priorities and
/// threads rotating, some broadcasts, some publishes that are not news for `h`, half of them in one long thread larger than the
/// count window), marks every third read; returns a timestamp taken halfway.
async fn seed(app: &TestApp, senders: &[Agent; 3], h: &Agent) -> String {
    let types = ["information", "request", "response", "coordination"];
    let priorities = ["low", "normal", "high", "urgent"];
    let mut ids = Vec::new();
    let mut halfway = String::new();
    for chunk in (0..ENTRIES).collect::<Vec<_>>().chunks(100) {
        if chunk[0] == ENTRIES / 2 {
            halfway = Timestamp::now().to_string();
        }
        let sends = chunk.iter().map(|&i| {
            let from = &senders[i % 3];
            if i % 97 == 0 {
                return futures_util::future::Either::Left(
                    app.post("/v1/broadcasts")
                        .token(&from.token)
                        .json(json!({"sender_agent_id": from.id, "update_type": "progress", "urgency": "info", "content": {"summary": "b"}}))
                        .send(),
                );
            }
            if i % 13 == 5 {
                // A publish whose tag nobody watches: in h's inbox, but not news.
                return futures_util::future::Either::Left(
                    app.post("/v1/publish")
                        .token(&from.token)
                        .json(json!({"cause_by": "Unwatched", "content": {"text": "p"}}))
                        .send(),
                );
            }
            let mut body = json!({"recipient_agent_ids": [h.id], "message_type": types[i % 4],
                "priority": priorities[(i / 4) % 4]});
            if i % 10 == 0 {
                body["thread_id"] = json!(format!("t-{}", (i / 10) % 40));
            } else if i % 2 == 1 {
                body["thread_id"] = json!("t-long");
            }
            futures_util::future::Either::Right(app.send_with(from, body))
        });
        for res in futures_util::future::join_all(sends).await {
            let res = res.expect_status(201);
            if let Some(id) = res.body["message_id"].as_str() {
                ids.push(id.to_owned());
            }
        }
    }
    let marked: Vec<&String> = ids.iter().step_by(3).collect();
    for chunk in marked.chunks(1000) {
        app.post("/v1/messages/read")
            .token(&h.token)
            .json(json!({"agent_id": h.id, "message_ids": chunk}))
            .send()
            .await
            .expect_status(200);
    }
    halfway
}

/// Every message id GET_MESSAGES gives for `query`, following `next_cursor`, and the
/// first page's counts.
async fn paged(app: &TestApp, h: &Agent, query: &str) -> (Vec<String>, Value) {
    let mut ids = Vec::new();
    let mut cursor = String::new();
    let mut first = Value::Null;
    loop {
        let page = app
            .inbox(h, format!("?limit=100{query}{cursor}"))
            .await
            .expect_status(200);
        if first.is_null() {
            first = page.body.clone();
        }
        for m in page.body["messages"].as_array().expect("messages") {
            ids.push(m["message_id"].as_str().expect("id").to_owned());
        }
        match page.body["next_cursor"].as_str() {
            Some(next) => cursor = format!("&cursor={next}"),
            None => return (ids, first),
        }
    }
}

/// The straightforward query: every entry of `h`'s inbox matching `condition`, in
/// `order`, with its read flag.
async fn straight(db: &std::path::Path, condition: &str, order: &str) -> Vec<(String, bool)> {
    let url = format!("sqlite://{}?mode=ro", db.display());
    let mut conn = sqlx::SqliteConnection::connect(&url).await.expect("open");
    let sql = format!(
        "SELECT m.message_id, i.read_at IS NULL FROM inbox i JOIN messages m ON m.pk = i.message_pk
         JOIN agents h ON h.pk = i.agent_pk JOIN agents s ON s.pk = i.sender_pk
         WHERE h.agent_id = 'h' AND ({condition}) ORDER BY i.seq {order}"
    );
    let rows = sqlx::query(sqlx::AssertSqlSafe(sql.clone()))
        .fetch_all(&mut conn)
        .await
        .expect(&sql);
    conn.close().await.expect("close");
    rows.iter()
        .map(|r| (r.get::<String, _>(0), r.get::<bool, _>(1)))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_inbox_pages_and_counts_like_a_straightforward_query() {
    let app = TestApp::start_on_sqlite_with(|_| {}).await;
    let team = app.team("large-reads").await;
    let a = app.agent(&team, "a", &[]).await;
    let b = app.agent(&team, "b", &[]).await;
    let c = app.agent(&team, "c", &[]).await;
    let h = app.agent(&team, "h", &[]).await;
    let halfway = seed(&app, &[a, b, c], &h).await;
    let since_micros = Timestamp::parse(&halfway).expect("timestamp").micros();
    let since_condition = format!("i.created_at > {since_micros}");
    let cases: Vec<(String, String)> = vec![
        ("".into(), "1".into()),
        ("&unread_only=true".into(), "i.read_at IS NULL".into()),
        (
            "&message_types=request,coordination".into(),
            "i.message_type IN ('request', 'coordination')".into(),
        ),
        ("&priority=urgent".into(), "i.priority = 'urgent'".into()),
        (
            "&priority=high&unread_only=true".into(),
            "i.priority = 'high' AND i.read_at IS NULL".into(),
        ),
        ("&senders=a,c".into(), "s.agent_id IN ('a', 'c')".into()),
        ("&kinds=broadcast".into(), "i.kind = 'broadcast'".into()),
        ("&thread_id=t-3".into(), "m.thread_id = 't-3'".into()),
        (
            "&thread_id=t-3&unread_only=true".into(),
            "m.thread_id = 't-3' AND i.read_at IS NULL".into(),
        ),
        ("&thread_id=t-long".into(), "m.thread_id = 't-long'".into()),
        (
            "&thread_id=t-long&message_types=request".into(),
            "m.thread_id = 't-long' AND i.message_type = 'request'".into(),
        ),
        (format!("&since_timestamp={halfway}"), since_condition),
        ("&news_only=true".into(), "i.news = 1".into()),
        (
            "&news_only=true&unread_only=true".into(),
            "i.news = 1 AND i.read_at IS NULL".into(),
        ),
        (
            "&news_only=true&priority=low".into(),
            "i.news = 1 AND i.priority = 'low'".into(),
        ),
    ];
    let db = app.database();
    for (query, condition) in &cases {
        for (order, sql_order) in [("newest_first", "DESC"), ("oldest_first", "ASC")] {
            let query = format!("{query}&sort_order={order}");
            let expected = straight(&db, condition, sql_order).await;
            let (ids, first) = paged(&app, &h, &query).await;
            let expected_ids: Vec<&String> = expected.iter().map(|(id, _)| id).collect();
            assert_eq!(ids.iter().collect::<Vec<_>>(), expected_ids, "{query}");
            check_counts(&first, &expected, &query);
        }
    }
    // A thread is counted from its index: exactly while it fits the count window, and
    // over its newest 2,000 entries past it.
    let short = app.inbox(&h, "?thread_id=t-3").await.expect_status(200);
    assert_eq!(short.body["counts_exact"], true);
    let long = app.inbox(&h, "?thread_id=t-long").await.expect_status(200);
    assert_eq!(long.body["counts_exact"], false);
    assert_eq!(long.body["total_count"], 2000);
    // News (alone or unread) is counted by the kept counters, exactly, at any size.
    for query in ["?news_only=true", "?news_only=true&unread_only=true"] {
        let news = app.inbox(&h, query).await.expect_status(200);
        assert_eq!(news.body["counts_exact"], true, "{query}");
    }
    app.stop().await;
}

/// Exact counts equal the query's; inexact ones are lower bounds.
fn check_counts(first: &Value, expected: &[(String, bool)], query: &str) {
    let total = expected.len() as u64;
    let unread = expected.iter().filter(|(_, unread)| *unread).count() as u64;
    let answered = (
        first["total_count"].as_u64().expect("total"),
        first["unread_count"].as_u64().expect("unread"),
    );
    if first["counts_exact"] == true {
        assert_eq!(answered, (total, unread), "{query}");
    } else {
        assert_eq!(first["counts_exact"], false, "{query}");
        assert!(
            answered.0 <= total && answered.1 <= unread,
            "{query}: {answered:?}"
        );
        assert!(answered.0 > 0, "{query}: a lower bound counted something");
    }
}
