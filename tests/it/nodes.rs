//! Several nodes on one PostgreSQL database: what one node commits reaches the live
//! connections on another, and sequence numbers stay gap-free and in commit order with
//! both writing. (On SQLite, one process owns the file: these tests need PostgreSQL and
//! say `SKIPPED` without it.)

use std::collections::HashSet;
use std::time::Duration;

use serde_json::json;

use crate::support::TestApp;

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

/// Three nodes, one task: A submits on node 1 (B, live on node 2, gets the TaskRequest
/// pushed there), B asks for clarification on node 2 (A, live on node 3, gets the
/// question there), A answers on node 3, B hands off to C on node 2, and C, live on node
/// 1, gets the TaskRequest with the context so far; a broadcast from C reaches A and B
/// on their nodes. Every frame is pushed by a node other than the one that wrote it.
#[tokio::test]
async fn a_task_travels_across_three_nodes() {
    let Some(one) = TestApp::start_on_postgres().await else {
        return;
    };
    let team = one.team("three").await;
    let a = one.agent(&team, "A", &[]).await;
    let b = one.agent(&team, "B", &["x"]).await;
    let c = one.agent(&team, "C", &["x"]).await;
    let two = one.another_node().await;
    let three = one.another_node().await;
    let (mut b_ws, _, _) = two.ws_caught_up(&b, "").await;
    let (mut a_ws, _, _) = three.ws_caught_up(&a, "").await;
    let (mut c_ws, _, _) = one.ws_caught_up(&c, "").await;
    let within = |what: &'static str| {
        move |frame: Result<serde_json::Value, tokio::time::error::Elapsed>| {
            frame.unwrap_or_else(|_| panic!("{what} within 5 s"))
        }
    };
    let wait = Duration::from_secs(5);

    one.post("/v1/tasks")
        .token(&a.token)
        .json(
            json!({"task_id": "t", "description": "sum it up", "originating_agent_id": "A",
                     "target_agent_id": "B"}),
        )
        .send()
        .await
        .expect_status(201);
    let request = within("B's TaskRequest on node 2")(
        tokio::time::timeout(wait, b_ws.next_of("TaskRequest")).await,
    );
    assert_eq!(request["task_id"], "t");

    let asked = two
        .post("/v1/tasks/t/clarifications")
        .token(&b.token)
        .json(json!({"question": "Which quarter?"}))
        .send()
        .await
        .expect_status(201);
    let question = within("A's ClarificationRequest on node 3")(
        tokio::time::timeout(wait, a_ws.next_of("ClarificationRequest")).await,
    );
    let clarification = question["clarification_id"]
        .as_str()
        .expect("an id")
        .to_owned();
    assert_eq!(
        asked.body["task"]["open_clarification"]["clarification_id"],
        clarification.as_str()
    );

    three
        .post(&format!(
            "/v1/tasks/t/clarifications/{clarification}/answer"
        ))
        .token(&a.token)
        .json(json!({"answer": "Q3"}))
        .send()
        .await
        .expect_status(200);
    let answer = within("B's ClarificationResponse on node 2")(
        tokio::time::timeout(wait, b_ws.next_of("ClarificationResponse")).await,
    );
    assert_eq!(answer["answer"], "Q3");

    two.post("/v1/tasks/t/handoff")
        .token(&b.token)
        .json(json!({"new_agent_id": "C", "reason": "C reviews these"}))
        .send()
        .await
        .expect_status(200);
    let handed = within("C's TaskRequest on node 1")(
        tokio::time::timeout(wait, c_ws.next_of("TaskRequest")).await,
    );
    assert_eq!(handed["assignee_agent_id"], "C");
    assert_eq!(handed["context"][0]["answer"], "Q3");
    let note = within("A's HandoffNotification on node 3")(
        tokio::time::timeout(wait, a_ws.next_of("HandoffNotification")).await,
    );
    assert_eq!(note["new_agent_id"], "C");

    one.post("/v1/broadcasts")
        .token(&c.token)
        .json(
            json!({"sender_agent_id": "C", "update_type": "progress", "urgency": "info",
                     "content": {"summary": "reviewing"}}),
        )
        .send()
        .await
        .expect_status(201);
    for (ws, node) in [(&mut a_ws, "node 3"), (&mut b_ws, "node 2")] {
        let frame = tokio::time::timeout(wait, ws.next_of("message"))
            .await
            .unwrap_or_else(|_| panic!("the broadcast on {node}"));
        assert_eq!(frame["message"]["sender_agent_id"], "C", "{frame}");
    }
    three.stop().await;
    two.stop().await;
    one.stop().await;
}

/// `kill -9` of one node under send load (the binary, as an operator runs it): every
/// message it acknowledged before dying is in the recipient's inbox read through the
/// surviving node, with seqs 1..=n and no gap, and the survivor keeps taking sends.
#[tokio::test]
async fn a_killed_node_loses_nothing_it_acknowledged() {
    use crate::process::{Process, call};
    use crate::support::ADMIN;
    use reqwest::Method;
    use std::sync::{Arc, Mutex};
    let Some(db) = crate::pg::database("killed").await else {
        return;
    };
    let url = std::path::Path::new(&db.url);
    let doomed = Process::start_with(url, &["--node-id", "doomed"]);
    let http = reqwest::Client::new();
    let (status, team) = call(
        &http,
        &doomed,
        Method::POST,
        "/v1/teams",
        ADMIN,
        Some(json!({"name": "Kill", "team_id": "kill"})),
    )
    .await;
    assert_eq!(status, 201, "{team}");
    let key = team["team_key"].as_str().expect("team key").to_owned();
    let mut tokens = Vec::new();
    for id in ["a", "b"] {
        let (status, agent) = call(
            &http,
            &doomed,
            Method::POST,
            "/v1/teams/kill/agents",
            &key,
            Some(json!({"agent_id": id, "role": "r", "capabilities": []})),
        )
        .await;
        assert_eq!(status, 201, "{agent}");
        tokens.push(agent["token"].as_str().expect("token").to_owned());
    }
    let survivor = Process::start_with(url, &["--node-id", "survivor"]);

    let acked: Arc<Mutex<Vec<String>>> = Arc::default();
    let mut senders = Vec::new();
    for worker in 0..8 {
        let (http, base, token, acked) = (
            http.clone(),
            doomed.base.clone(),
            tokens[0].clone(),
            acked.clone(),
        );
        senders.push(tokio::spawn(async move {
            for n in 0.. {
                let sent = http
                    .post(format!("{base}/v1/messages"))
                    .bearer_auth(&token)
                    .json(
                        &json!({"sender_agent_id": "a", "recipient_agent_ids": ["b"],
                                  "message_type": "information",
                                  "content": {"text": format!("{worker}/{n}")}}),
                    )
                    .send()
                    .await;
                let Ok(res) = sent else { return };
                if res.status() != 201 {
                    return;
                }
                let Ok(body) = res.json::<serde_json::Value>().await else {
                    return;
                };
                let id = body["message_id"].as_str().expect("an id").to_owned();
                acked.lock().expect("lock").push(id);
            }
        }));
    }
    tokio::time::sleep(Duration::from_millis(700)).await;
    doomed.kill();
    for sender in senders {
        let _ = sender.await;
    }
    let acked: HashSet<String> = acked.lock().expect("lock").iter().cloned().collect();
    assert!(
        acked.len() > 10,
        "the load ran: {} acknowledged",
        acked.len()
    );

    let mut seqs = Vec::new();
    let mut ids = HashSet::new();
    let mut cursor = String::new();
    loop {
        let (status, page) = call(
            &http,
            &survivor,
            Method::GET,
            &format!("/v1/messages?agent_id=b&limit=100&sort_order=oldest_first{cursor}"),
            &tokens[1],
            None,
        )
        .await;
        assert_eq!(status, 200, "{page}");
        for m in page["messages"].as_array().expect("messages") {
            seqs.push(m["seq"].as_i64().expect("seq"));
            ids.insert(m["message_id"].as_str().expect("id").to_owned());
        }
        match page["next_cursor"].as_str() {
            Some(next) => cursor = format!("&cursor={next}"),
            None => break,
        }
    }
    let missing: Vec<&String> = acked.difference(&ids).collect();
    assert!(missing.is_empty(), "acknowledged but lost: {missing:?}");
    assert_eq!(
        seqs,
        (1..=seqs.len() as i64).collect::<Vec<i64>>(),
        "no gap"
    );
    let (status, _) = call(
        &http,
        &survivor,
        Method::POST,
        "/v1/messages",
        &tokens[0],
        Some(json!({"sender_agent_id": "a", "recipient_agent_ids": ["b"],
                    "message_type": "information", "content": {"text": "after"}})),
    )
    .await;
    assert_eq!(status, 201);
    survivor.kill();
    db.remove().await;
}
