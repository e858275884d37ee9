//! Faults: a disk that fills up, and `kill -9` in the middle of mixed load, repeated.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use futures_util::StreamExt;
use reqwest::Method;
use serde_json::{Value, json};

use crate::process::{Process, call, every_inbox_entry, every_inbox_id, team_k};

/// A send from a to b (1.9 KB of text, so the disk fills in a few hundred).
fn message(text: &str) -> Value {
    json!({"sender_agent_id": "a", "recipient_agent_ids": ["b"], "message_type": "information",
           "content": {"text": format!("{text} {}", "x".repeat(1900))}})
}

/// An inbox's sequence numbers, oldest first.
async fn seqs(http: &reqwest::Client, server: &Process, token: &str) -> Vec<i64> {
    let entries = every_inbox_entry(http, server, token).await;
    entries.into_iter().map(|(seq, _)| seq).collect()
}

/// Writes until the disk refuses: the refusal is `503 UNAVAILABLE` that says the disk is
/// full and when to come back. The ids acknowledged before it.
async fn fill_the_disk(http: &reqwest::Client, server: &Process, a: &str) -> BTreeSet<String> {
    let mut acknowledged = BTreeSet::new();
    for i in 0..3000 {
        let res = http
            .post(format!("{}/v1/messages", server.base))
            .bearer_auth(a)
            .json(&message(&format!("m{i}")))
            .send()
            .await
            .expect("sent");
        let status = res.status().as_u16();
        let retry_after = res.headers().get("retry-after").cloned();
        let body: Value = res.json().await.expect("json");
        if status == 201 {
            acknowledged.insert(body["message_id"].as_str().expect("id").to_owned());
            continue;
        }
        assert_eq!(status, 503, "{body}");
        assert_eq!(body["error_code"], "UNAVAILABLE");
        assert!(
            body["error_message"]
                .as_str()
                .is_some_and(|m| m.contains("full")),
            "{body}"
        );
        assert_eq!(body["details"]["retry_after_ms"], 1000);
        assert_eq!(
            retry_after.as_ref().and_then(|v| v.to_str().ok()),
            Some("1")
        );
        return acknowledged;
    }
    panic!("the disk never filled");
}

/// With the disk full, every write is all or nothing: sends, broadcasts and task
/// submissions that were acknowledged are there in full, the refused ones left no trace
/// (no message, no inbox entry, no gap in the numbering); reads keep working; and once
/// space returns, writes succeed again without a restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_refuses_writes_whole_and_recovers_when_space_returns() {
    let dir = tempfile::tempdir().expect("mount point");
    let server = Process::start_on_small_disk(dir.path(), "3m");
    let filler = server.seen_by_server(&dir.path().join("filler"));
    std::fs::write(&filler, vec![0_u8; 1_500_000]).expect("filler written");
    let http = reqwest::Client::new();
    let tokens = team_k(&http, &server).await;
    let (a, b) = (&tokens[0], &tokens[1]);

    let mut acknowledged = fill_the_disk(&http, &server, a).await;
    // Mixed writes while full: whatever is acknowledged counts, the rest must vanish.
    let mut refused = 0;
    for i in 0..30 {
        let (path, body) = match i % 3 {
            0 => ("/v1/messages", message(&format!("full{i}"))),
            1 => (
                "/v1/broadcasts",
                json!({"sender_agent_id": "a", "update_type": "progress", "urgency": "info", "content": {"summary": format!("b{i}")}}),
            ),
            _ => (
                "/v1/tasks",
                json!({"task_id": format!("t{i}"), "description": "d", "originating_agent_id": "a", "target_agent_id": "b"}),
            ),
        };
        let (status, answer) = call(&http, &server, Method::POST, path, a, Some(body)).await;
        match status {
            201 if i % 3 == 0 => {
                acknowledged.insert(answer["message_id"].as_str().expect("id").to_owned());
            }
            201 => {}
            503 => refused += 1,
            other => panic!("{path}: {other} {answer}"),
        }
    }
    assert!(
        refused > 0,
        "the disk was full, yet every write went through"
    );
    let stored = every_inbox_id(&http, &server, b).await;
    let before = seqs(&http, &server, b).await;
    assert_eq!(
        before,
        (1..=before.len() as i64).collect::<Vec<_>>(),
        "no gaps"
    );
    assert!(
        acknowledged.iter().all(|m| stored.contains(m)),
        "every acknowledged send is there"
    );

    std::fs::remove_file(&filler).expect("space returns");
    let mut recovered = false;
    for _ in 0..50 {
        let (status, _) = call(
            &http,
            &server,
            Method::POST,
            "/v1/messages",
            a,
            Some(message("after")),
        )
        .await;
        if status == 201 {
            recovered = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(recovered, "writes succeed again once space returns");
    let after = seqs(&http, &server, b).await;
    assert_eq!(
        after,
        (1..=after.len() as i64).collect::<Vec<_>>(),
        "numbering goes on"
    );
    server.kill();
}

/// What the server acknowledged during one round of load.
#[derive(Default)]
struct Acknowledged {
    messages: BTreeSet<String>,
    /// Task id → the furthest status the server acknowledged for it.
    tasks: BTreeMap<String, &'static str>,
}

/// One worker of the mixed load: a sends and broadcasts, submits tasks to b, and b
/// completes them; each acknowledged step is recorded, until the server dies.
async fn load(
    http: reqwest::Client,
    server: String,
    tokens: Vec<String>,
    worker: usize,
    round: usize,
) -> Acknowledged {
    let mut acked = Acknowledged::default();
    let post = |path: String, token: &str, body: Value| {
        http.post(format!("{server}{path}"))
            .bearer_auth(token)
            .json(&body)
            .timeout(Duration::from_secs(5))
            .send()
    };
    for i in 0.. {
        let step = format!("r{round}w{worker}i{i}");
        let sent = match i % 3 {
            0 => post("/v1/messages".into(), &tokens[0], message(&step)).await,
            1 => post("/v1/broadcasts".into(), &tokens[0], json!({"sender_agent_id": "a", "update_type": "progress", "urgency": "info", "content": {"summary": step}})).await,
            _ => post("/v1/tasks".into(), &tokens[0], json!({"task_id": step, "description": "d", "originating_agent_id": "a", "target_agent_id": "b"})).await,
        };
        let Ok(res) = sent else { return acked };
        if res.status().as_u16() != 201 {
            return acked;
        }
        let Ok(body) = res.json::<Value>().await else {
            return acked;
        };
        match i % 3 {
            2 => {
                acked.tasks.insert(step.clone(), "in-progress");
                let done = post(
                    format!("/v1/tasks/{step}/result"),
                    &tokens[1],
                    json!({"status": "success"}),
                )
                .await;
                match done {
                    Ok(res) if res.status().as_u16() == 200 => {
                        acked.tasks.insert(step, "success");
                    }
                    _ => return acked,
                }
            }
            _ => {
                // A broadcast's id is its message id in b's inbox.
                let id = body["message_id"]
                    .as_str()
                    .or(body["broadcast_id"].as_str());
                if let Some(id) = id {
                    acked.messages.insert(id.to_owned());
                }
            }
        }
    }
    acked
}

/// `kill -9` in the middle of mixed load (sends, broadcasts, task submissions and
/// results, and a live connection acking), three times on one database: after each
/// restart every acknowledged message is in the inbox, every acknowledged task has at
/// least the acknowledged status, the numbering has no gap, and the ack cursor never
/// passed what was acked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_under_mixed_load_loses_nothing_acknowledged() {
    let dir = tempfile::tempdir().expect("tmp");
    let db = dir.path().join("kill.db");
    let mut server = Process::start(&db);
    let http = reqwest::Client::new();
    let tokens = team_k(&http, &server).await;
    let mut all = Acknowledged::default();
    let mut highest_ack = 0;
    for round in 0..3 {
        let workers: Vec<_> = (0..4)
            .map(|w| {
                tokio::spawn(load(
                    http.clone(),
                    server.base.clone(),
                    tokens.clone(),
                    w,
                    round,
                ))
            })
            .collect();
        let acker = tokio::spawn(ack_as_they_come(server.base.clone(), tokens[1].clone()));
        tokio::time::sleep(Duration::from_millis(400 + 150 * round as u64)).await;
        server.kill();
        for worker in workers {
            let acked = worker.await.expect("worker");
            all.messages.extend(acked.messages);
            all.tasks.extend(acked.tasks);
        }
        highest_ack = highest_ack.max(acker.await.expect("acker"));
        server = Process::start(&db);
        check_everything_acknowledged(&http, &server, &tokens, &all, highest_ack).await;
    }
    assert!(
        all.messages.len() > 20 && all.tasks.len() > 5,
        "the load ran"
    );
    server.kill();
}

/// b's live connection: acks every entry it is sent; the highest seq it acked.
async fn ack_as_they_come(base: String, token: String) -> i64 {
    use futures_util::SinkExt;
    use tokio_tungstenite::tungstenite::Message;

    let url = format!(
        "{}/v1/ws?access_token={token}",
        base.replacen("http", "ws", 1)
    );
    let Ok((mut socket, _)) = tokio_tungstenite::connect_async(url).await else {
        return 0;
    };
    let mut highest = 0;
    while let Some(Ok(message)) = socket.next().await {
        let Message::Text(text) = message else {
            continue;
        };
        let frame: Value = serde_json::from_str(text.as_str()).unwrap_or(Value::Null);
        if let Some(seq) = frame["seq"].as_i64() {
            if socket
                .send(Message::Text(
                    json!({"type": "ack", "seq": seq}).to_string().into(),
                ))
                .await
                .is_err()
            {
                break;
            }
            highest = highest.max(seq);
        }
    }
    highest
}

/// After a restart: every acknowledged message and task is there, the numbering has no
/// gap, and the replay of a reconnect neither passes the acks nor skips an entry.
async fn check_everything_acknowledged(
    http: &reqwest::Client,
    server: &Process,
    tokens: &[String],
    all: &Acknowledged,
    highest_ack: i64,
) {
    let stored = every_inbox_id(http, server, &tokens[1]).await;
    let missing: Vec<&String> = all
        .messages
        .iter()
        .filter(|m| !stored.contains(*m))
        .collect();
    assert!(missing.is_empty(), "acknowledged but lost: {missing:?}");
    let numbers = seqs(http, server, &tokens[1]).await;
    assert_eq!(
        numbers,
        (1..=numbers.len() as i64).collect::<Vec<_>>(),
        "no gaps"
    );
    // The kept counters were committed with the rows they count (b reads nothing).
    let (_, page) = call(
        http,
        server,
        Method::GET,
        "/v1/messages?limit=1",
        &tokens[1],
        None,
    )
    .await;
    assert_eq!(page["total_count"], numbers.len(), "{page}");
    assert_eq!(page["unread_count"], numbers.len(), "{page}");
    for (task, status) in &all.tasks {
        let (code, detail) = call(
            http,
            server,
            Method::GET,
            &format!("/v1/tasks/{task}"),
            &tokens[0],
            None,
        )
        .await;
        assert_eq!(code, 200, "acknowledged task {task} lost: {detail}");
        if *status == "success" {
            assert_eq!(detail["task"]["status"], "success", "{task}");
        }
    }
    // A reconnect without `since` replays after the stored cursor: never past what was
    // acked, and everything after it, in order.
    let url = format!(
        "{}/v1/ws?access_token={}",
        server.base.replacen("http", "ws", 1),
        tokens[1]
    );
    let (mut socket, _) = tokio_tungstenite::connect_async(url)
        .await
        .expect("reconnects");
    let mut replayed = Vec::new();
    while let Some(Ok(message)) = socket.next().await {
        let frame: Value =
            serde_json::from_str(message.to_text().unwrap_or("null")).unwrap_or(Value::Null);
        if frame["type"] == "caught_up" {
            break;
        }
        replayed.extend(frame["seq"].as_i64());
    }
    let total = numbers.len() as i64;
    let from = replayed.first().copied().unwrap_or(total + 1);
    assert!(
        from <= highest_ack + 1,
        "replay starts at {from}, past the last ack {highest_ack}"
    );
    assert_eq!(
        replayed,
        (from..=total).collect::<Vec<_>>(),
        "the replay skips nothing"
    );
}
