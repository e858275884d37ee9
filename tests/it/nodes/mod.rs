//! Several nodes on one PostgreSQL database: what one node commits reaches the live
//! connections on another, and sequence numbers stay gap-free and in commit order with
//! both writing. (On SQLite, one process owns the file: these tests need PostgreSQL and
//! say `SKIPPED` without it.)

use std::collections::HashSet;
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::TestApp;

mod checker;
mod journeys;
mod outside;
mod read_your_writes;
mod revocation;

/// A on node 1 sends to B, whose WebSocket is on node 2: the frame arrives live (no
/// polling: node 2 hears node 1's commit through LISTEN/NOTIFY), with the seq node 1
/// answered, and a broadcast reaches it the same way.
#[tokio::test]
async fn a_message_committed_on_one_node_is_pushed_on_another() {
    let Some(one) = TestApp::start_on_postgres().await else {
        return;
    };
    let team = one.team("spread").await;
    let a = one.agent(&team, "a", &[]).await;
    let b = one.agent(&team, "b", &[]).await;
    let two = one.another_node().await;
    let (mut ws, _, _) = two.ws_caught_up(&b, "").await;
    for text in ["first", "second"] {
        let id = one.send(&a, &[&b], text).await;
        let frame = tokio::time::timeout(Duration::from_secs(5), ws.next_of("message"))
            .await
            .expect("pushed on the other node within 5 s");
        assert_eq!(frame["message"]["message_id"], id.as_str(), "{frame}");
        assert_eq!(frame["message"]["content"]["text"], text);
    }
    let res = one
        .post("/v1/broadcasts")
        .token(&a.token)
        .json(
            json!({"sender_agent_id": "a", "update_type": "progress", "urgency": "info",
                     "content": {"summary": "to everyone"}}),
        )
        .send()
        .await
        .expect_status(201);
    let frame = tokio::time::timeout(Duration::from_secs(5), ws.next_of("message"))
        .await
        .expect("the broadcast pushed on the other node");
    assert_eq!(frame["seq"], 3, "{frame} after {}", res.body);
    two.stop().await;
    one.stop().await;
}

/// Two nodes send to one recipient at once: the recipient's inbox, read from either
/// node in seq order, is exactly seqs 1..=n, no gap and no entry twice, and holds every
/// message that was acknowledged.
#[tokio::test]
async fn concurrent_senders_on_two_nodes_get_gap_free_seqs() {
    let Some(one) = TestApp::start_on_postgres().await else {
        return;
    };
    let team = one.team("busy").await;
    let sink = one.agent(&team, "sink", &[]).await;
    let mut senders = Vec::new();
    for i in 0..8 {
        senders.push(one.agent(&team, &format!("s{i}"), &[]).await);
    }
    let two = one.another_node().await;
    let per_sender = 25;
    let mut calls = Vec::new();
    for (i, s) in senders.iter().enumerate() {
        let node = if i % 2 == 0 { &one } else { &two };
        let sink = &sink;
        for k in 0..per_sender {
            calls.push(async move { node.send(s, &[sink], &format!("{k} from {}", s.id)).await });
        }
    }
    let sent: HashSet<String> = futures_util::future::join_all(calls)
        .await
        .into_iter()
        .collect();
    let n = (senders.len() * per_sender) as i64;
    assert_eq!(sent.len() as i64, n);
    for node in [&one, &two] {
        let mut seqs = Vec::new();
        let mut ids = HashSet::new();
        let mut cursor = String::new();
        loop {
            let page = node
                .inbox(&sink, format!("?limit=100&sort_order=oldest_first{cursor}"))
                .await
                .expect_status(200);
            for m in page.body["messages"].as_array().expect("messages") {
                seqs.push(m["seq"].as_i64().expect("seq"));
                ids.insert(m["message_id"].as_str().expect("id").to_owned());
            }
            match page.body["next_cursor"].as_str() {
                Some(next) => cursor = format!("&cursor={next}"),
                None => break,
            }
        }
        assert_eq!(seqs, (1..=n).collect::<Vec<i64>>());
        assert_eq!(ids, sent);
    }
    two.stop().await;
    one.stop().await;
}

/// Two nodes, both running their callback senders, and a receiver that takes 3 s to
/// answer (so a callback is in flight on one node while the other looks for due ones):
/// each task's callback is delivered exactly once, by whichever node claimed it first.
#[tokio::test]
async fn each_callback_is_sent_by_one_node_only() {
    use crate::tasks::Receiver;
    let Some(one) = TestApp::start_on_postgres_with(|c| c.callbacks.allow_private = true).await
    else {
        return;
    };
    let team = one.team("hooks").await;
    let boss = one.agent(&team, "boss", &[]).await;
    let worker = one.agent(&team, "worker", &["x"]).await;
    let two = one.another_node().await;
    let receiver = Receiver::default();
    receiver.answer_after(Duration::from_secs(3));
    let hook = receiver.start().await;
    let tasks = 4;
    for i in 0..tasks {
        let node = if i % 2 == 0 { &one } else { &two };
        node.post("/v1/tasks")
            .token(&boss.token)
            .json(
                json!({"description": "report back", "originating_agent_id": boss.id,
                         "task_id": format!("t{i}"), "target_agent_id": worker.id,
                         "callback_url": hook}),
            )
            .send()
            .await
            .expect_status(201);
    }
    receiver.wait_for(tasks).await;
    // Long enough for a second sender to have sent any of them again.
    tokio::time::sleep(Duration::from_secs(7)).await;
    let calls = receiver.calls();
    assert_eq!(
        calls.len(),
        tasks,
        "each callback once: {} calls",
        calls.len()
    );
    two.stop().await;
    one.stop().await;
}

/// Registry changes cross nodes: an agent registered on node 1 after node 2 started is
/// known on node 2 (its token works there, it can be sent to), and an agent removed on
/// node 1 has its connection on node 2 closed (4003) and its token refused there.
#[tokio::test]
async fn registry_changes_on_one_node_take_effect_on_another() {
    use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
    let Some(one) = TestApp::start_on_postgres().await else {
        return;
    };
    let team = one.team("moving").await;
    let a = one.agent(&team, "a", &[]).await;
    let two = one.another_node().await;
    let late = one.agent(&team, "late", &[]).await;
    let mut known = false;
    for _ in 0..50 {
        let res = two.get("/v1/whoami").token(&late.token).send().await;
        if res.status == 200 {
            known = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(known, "node 2 knows the agent registered on node 1");
    two.send(&a, &[&late], "hello from node 2").await;

    let (mut ws, _, _) = two.ws_caught_up(&late, "").await;
    one.delete("/v1/teams/moving/agents/late")
        .token(&team.key)
        .send()
        .await
        .expect_status(200);
    assert_eq!(
        ws.closed().await.expect("a close frame").code,
        CloseCode::from(4003)
    );
    let res = two.get("/v1/whoami").token(&late.token).send().await;
    assert_eq!(res.status, 401, "{}", res.body);
    two.stop().await;
    one.stop().await;
}

/// The database goes away under a running node (its connections cut, new ones refused):
/// requests fail with 503 `UNAVAILABLE` and write nothing, `/healthz` fails within
/// seconds, and when the database is back the node recovers on its own — the same
/// request succeeds, `/healthz` answers 200 again.
#[tokio::test]
async fn a_node_survives_its_database_going_away_and_coming_back() {
    use sqlx::Executor;
    let Some(app) = TestApp::start_on_postgres().await else {
        return;
    };
    let team = app.team("outage").await;
    let a = app.agent(&team, "a", &[]).await;
    let b = app.agent(&team, "b", &[]).await;
    let url = app.database().to_string_lossy().into_owned();
    let name = url.rsplit('/').next().expect("a database name").to_owned();
    let mut admin = crate::pg::admin().await;
    let cut = |allow: bool| format!("ALTER DATABASE {name} WITH ALLOW_CONNECTIONS {allow}");
    admin
        .execute(sqlx::AssertSqlSafe(cut(false)))
        .await
        .expect("refuse connections");
    admin
        .execute(sqlx::AssertSqlSafe(format!(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{name}'"
        )))
        .await
        .expect("cut the node's connections");
    let send = |text: &'static str| {
        app.post("/v1/messages")
            .token(&a.token)
            .json(json!({"sender_agent_id": "a", "recipient_agent_ids": ["b"],
                         "message_type": "information", "content": {"text": text}}))
            .send()
    };
    let refused = send("while down").await;
    assert_eq!(refused.status, 503, "{}", refused.body);
    assert_eq!(refused.body["error_code"], "UNAVAILABLE");
    let mut unhealthy = false;
    for _ in 0..50 {
        if app.get("/healthz").send().await.status == 503 {
            unhealthy = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(unhealthy, "/healthz fails while the database is away");

    admin
        .execute(sqlx::AssertSqlSafe(cut(true)))
        .await
        .expect("allow connections again");
    let mut recovered = false;
    for _ in 0..100 {
        if send("after").await.status == 201 {
            recovered = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(recovered, "the node writes again once the database is back");
    let mut healthy = false;
    for _ in 0..50 {
        if app.get("/healthz").send().await.status == 200 {
            healthy = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(healthy, "/healthz answers 200 again");
    let inbox = app.inbox(&b, "").await.expect_status(200);
    let texts: Vec<&str> = inbox.body["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .filter_map(|m| m["content"]["text"].as_str())
        .collect();
    assert_eq!(
        texts,
        ["after"],
        "nothing of the refused request was written"
    );
    app.stop().await;
}

/// Presence crosses nodes: with B's WebSocket on node 2, a send on node 1 reports B in
/// `delivered_to` (node 2 pushes it) and node 1 shows B connected; once B's connection
/// closes, node 1 reports it in `pending_delivery` again. (The nodes exchange their
/// connections every second; a connection that stays stays seen, past the time after
/// which a silent node's connections count as gone.)
#[tokio::test]
async fn delivered_to_and_presence_see_every_node() {
    let Some(one) = TestApp::start_on_postgres().await else {
        return;
    };
    let team = one.team("seen").await;
    let a = one.agent(&team, "a", &[]).await;
    let b = one.agent(&team, "b", &[]).await;
    let c = one.agent(&team, "c", &[]).await;
    let two = one.another_node().await;
    let send = || {
        one.post("/v1/messages")
            .token(&a.token)
            .json(json!({"sender_agent_id": "a", "recipient_agent_ids": ["b"],
                         "message_type": "information", "content": {"text": "where?"}}))
            .send()
    };
    let first = send().await.expect_status(201);
    assert_eq!(
        first.body["delivery_status"]["pending_delivery"],
        json!(["b"])
    );

    let (mut ws, _, _) = two.ws_caught_up(&b, "").await;
    let mut seen = false;
    for _ in 0..40 {
        let res = send().await.expect_status(201);
        if res.body["delivery_status"]["delivered_to"] == json!(["b"]) {
            seen = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(seen, "node 1 learns that b is connected on node 2");
    let frame = tokio::time::timeout(Duration::from_secs(5), ws.next_of("message"))
        .await
        .expect("and node 2 pushes it");
    assert_eq!(frame["message"]["content"]["text"], "where?");
    let agent = one
        .get("/v1/teams/seen/agents/b")
        .token(&team.key)
        .send()
        .await
        .expect_status(200);
    assert_eq!(agent.body["agent"]["connected"], true, "{}", agent.body);

    // Another agent connects to node 2 while b stays, and both stay past the 10 s after
    // which a silent node's connections count as gone: node 2 kept its heartbeat and
    // b's row through the change.
    let (c_ws, _, _) = two.ws_caught_up(&c, "").await;
    tokio::time::sleep(Duration::from_secs(12)).await;
    let later = send().await.expect_status(201);
    assert_eq!(
        later.body["delivery_status"]["delivered_to"],
        json!(["b"]),
        "b is still seen on node 2: {}",
        later.body
    );
    ws.next_of("message").await;
    drop(c_ws);

    drop(ws);
    let mut gone = false;
    for _ in 0..40 {
        let res = send().await.expect_status(201);
        if res.body["delivery_status"]["pending_delivery"] == json!(["b"]) {
            gone = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(gone, "node 1 learns that b's connection closed");
    two.stop().await;
    one.stop().await;
}

/// Agents converse across two nodes — each sends to its partner on the other node and
/// marks what it got read, all at once: write batches on both nodes lock the same
/// counter rows, and never in a cycle (PostgreSQL counted no deadlock: each would have
/// stalled both nodes for a second and failed a batch or fallen back), no request
/// fails, and every inbox ends with each message once and counts that match it.
#[tokio::test]
async fn a_conversation_across_nodes_never_deadlocks() {
    let Some(mut one) = TestApp::start_on_postgres().await else {
        return;
    };
    let db = one.keep_database().expect("a database of its own");
    let team = one.team("talk").await;
    let mut agents = Vec::new();
    for i in 0..16 {
        agents.push(one.agent(&team, &format!("p{i}"), &[]).await);
    }
    let two = one.another_node().await;
    let rounds = 60;
    let talkers = agents.iter().enumerate().map(|(i, me)| {
        let node = if i % 2 == 0 { &one } else { &two };
        let partner = &agents[i ^ 1];
        async move {
            let mut failures = Vec::new();
            for k in 0..rounds {
                let body = json!({"recipient_agent_ids": [partner.id], "content": {"text": format!("{k}")}});
                let sent = node.send_with(me, body).await;
                if sent.status != 201 {
                    failures.push(sent.body);
                }
                let unread = node.inbox(me, "?unread_only=true").await;
                let ids: Vec<Value> = unread.body["messages"]
                    .as_array()
                    .map(|m| m.iter().map(|m| m["message_id"].clone()).collect())
                    .unwrap_or_default();
                if ids.is_empty() {
                    continue;
                }
                let marked = node
                    .post("/v1/messages/read")
                    .token(&me.token)
                    .json(json!({"agent_id": me.id, "message_ids": ids}))
                    .send()
                    .await;
                if marked.status != 200 {
                    failures.push(marked.body);
                }
            }
            failures
        }
    });
    let failures: Vec<Value> = futures_util::future::join_all(talkers)
        .await
        .into_iter()
        .flatten()
        .collect();
    assert!(
        failures.is_empty(),
        "{} failed, first: {:?}",
        failures.len(),
        failures.first()
    );
    for me in &agents {
        let all = one.inbox(me, "?limit=100").await.expect_status(200);
        let listed = all.body["messages"].as_array().expect("messages").len();
        assert_eq!(
            (all.body["total_count"].clone(), listed),
            (json!(rounds), rounds)
        );
        let unread = one.inbox(me, "?unread_only=true&limit=100").await;
        let unread_listed = unread.body["messages"].as_array().expect("messages").len();
        assert_eq!(unread.body["unread_count"], json!(unread_listed));
    }
    two.stop().await;
    one.stop().await;
    // Their backends have ended, so their statistics are in.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let deadlocks: i64 = sqlx::query_scalar(
        "SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()",
    )
    .fetch_one(&mut db.connect().await)
    .await
    .expect("statistics");
    assert_eq!(deadlocks, 0, "write batches of the two nodes deadlocked");
    db.remove().await;
}

/// The uniqueness rules hold with two nodes writing at once: retries of one
/// idempotency key through both nodes all get the first answer and write one message;
/// one task id submitted through both is created once (the rest `409 CONFLICT`); and
/// two results for one task, one through each node, are taken once (the other is an
/// invalid transition), the task's version and history moving by one change.
#[tokio::test]
async fn uniqueness_holds_across_nodes() {
    let Some(one) = TestApp::start_on_postgres().await else {
        return;
    };
    let team = one.team("unique").await;
    let a = one.agent(&team, "a", &[]).await;
    let b = one.agent(&team, "b", &["x"]).await;
    let two = one.another_node().await;
    let nodes = [&one, &two];
    let body = json!({"sender_agent_id": "a", "recipient_agent_ids": ["b"],
                      "message_type": "information", "content": {"text": "once"}});
    let retries = (0..16).map(|i| {
        nodes[i % 2]
            .post("/v1/messages")
            .token(&a.token)
            .header("idempotency-key", "both-nodes")
            .json(body.clone())
            .send()
    });
    let answers = futures_util::future::join_all(retries).await;
    let ids: HashSet<String> = answers.iter().map(|r| r.str("message_id")).collect();
    assert!(answers.iter().all(|r| r.status == 201), "{answers:?}");
    assert_eq!(ids.len(), 1, "every retry got the first answer");
    assert_eq!(one.inbox(&b, "").await.body["total_count"], 1);

    let task = json!({"description": "once", "originating_agent_id": "a",
                      "task_id": "only", "target_agent_id": "b"});
    let submissions = (0..8).map(|i| {
        nodes[i % 2]
            .post("/v1/tasks")
            .token(&a.token)
            .json(task.clone())
            .send()
    });
    let answers = futures_util::future::join_all(submissions).await;
    let statuses: Vec<u16> = answers.iter().map(|r| r.status).collect();
    assert_eq!(
        statuses.iter().filter(|s| **s == 201).count(),
        1,
        "{statuses:?}"
    );
    for res in answers.into_iter().filter(|r| r.status != 201) {
        res.expect_error(409, "CONFLICT");
    }

    let results = nodes.map(|node| {
        node.post("/v1/tasks/only/result")
            .token(&b.token)
            .json(json!({"status": "success"}))
            .send()
    });
    let answers = futures_util::future::join_all(results).await;
    let taken = answers.iter().filter(|r| r.status == 200).count();
    assert_eq!(taken, 1, "{answers:?}");
    for res in answers.into_iter().filter(|r| r.status != 200) {
        res.expect_error(409, "INVALID_TASK_TRANSITION");
    }
    let detail = two
        .get("/v1/tasks/only")
        .token(&a.token)
        .send()
        .await
        .expect_status(200);
    let kinds = crate::tasks::kinds(&detail.body);
    assert_eq!(
        kinds.iter().filter(|k| *k == "succeeded").count(),
        1,
        "{kinds:?}"
    );
    two.stop().await;
    one.stop().await;
}

/// On PostgreSQL too, `/metrics` shows the database's size, rows per table family and
/// the oldest message's age (the same gauges as SQLite's, read every few seconds).
#[tokio::test]
async fn disk_use_is_visible_on_postgresql() {
    let Some(db) = crate::pg::database("usage").await else {
        return;
    };
    let server = crate::process::Process::start(std::path::Path::new(&db.url));
    let value = crate::storage::disk_use_after_three_sends(&server).await;
    // Not SQLite's few pages: a PostgreSQL database starts at several MiB.
    assert!(value("switchboard_store_database_bytes") > 1e6);
    server.kill();
    db.remove().await;
}

/// A node's live connections are written to the database when they change, not every
/// second: the row of a connection that stays is the same row seconds later.
#[tokio::test]
async fn unchanged_connections_are_not_written_again() {
    use sqlx::Connection;
    let Some(app) = TestApp::start_on_postgres().await else {
        return;
    };
    let team = app.team("still").await;
    let a = app.agent(&team, "a", &[]).await;
    let (_ws, _, _) = app.ws_caught_up(&a, "").await;
    let url = app.database().to_string_lossy().into_owned();
    let mut db = sqlx::PgConnection::connect(&url).await.expect("connect");
    let version = async |db: &mut sqlx::PgConnection| -> Option<String> {
        sqlx::query_scalar("SELECT xmin::text FROM node_connections")
            .fetch_optional(db)
            .await
            .expect("read")
    };
    let mut written = None;
    for _ in 0..50 {
        written = version(&mut db).await;
        if written.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(written.is_some(), "the connection was recorded");
    // Three more exchanges (one a second) with the same connection.
    tokio::time::sleep(Duration::from_millis(3200)).await;
    assert_eq!(version(&mut db).await, written, "rewritten while unchanged");
    db.close().await.expect("close");
    app.stop().await;
}
