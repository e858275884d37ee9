//! Storage under sustained writes: the write-ahead log keeps to its bound and shrinks
//! back when the load eases.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use serde_json::json;

use crate::support::{Agent, TestApp};

/// The size of a file, 0 when it does not exist.
fn size(path: &std::path::Path) -> u64 {
    std::fs::metadata(path).map_or(0, |m| m.len())
}

/// What a watcher saw of a file's size, looking every millisecond until stopped.
struct Watch {
    /// The largest size seen.
    peak: Arc<AtomicU64>,
    running: Arc<AtomicBool>,
}

fn watch(path: std::path::PathBuf) -> Watch {
    let w = Watch {
        peak: Arc::new(AtomicU64::new(0)),
        running: Arc::new(AtomicBool::new(true)),
    };
    let (p, r) = (w.peak.clone(), w.running.clone());
    std::thread::spawn(move || {
        while r.load(Ordering::Relaxed) {
            p.fetch_max(size(&path), Ordering::Relaxed);
            std::thread::sleep(Duration::from_millis(1));
        }
    });
    w
}

/// Waits up to `patience` for `check`; whether it came true.
async fn eventually(patience: Duration, check: impl Fn() -> bool) -> bool {
    let deadline = tokio::time::Instant::now() + patience;
    while tokio::time::Instant::now() < deadline {
        if check() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    check()
}

/// Sixteen senders write about `bytes` to "b" as fast as they can; what each sent.
async fn write_through(app: &TestApp, a: &Agent, bytes: u64) -> usize {
    let text = "w".repeat(1900);
    let per_sender = (bytes / 1900 / 16) as usize;
    let senders = (0..16).map(|s| {
        let text = &text;
        async move {
            for i in 0..per_sender {
                app.send_with(
                    a,
                    json!({"recipient_agent_ids": ["b"], "content": {"text": format!("{s}/{i} {text}")}}),
                )
                .await
                .expect_status(201);
            }
        }
    });
    futures_util::future::join_all(senders).await;
    per_sender
}

/// Sixteen senders write five times the bound through the log as fast as they can; the
/// log never grows past the bound (the writer restarts it before a batch that could take
/// it there, so this holds on a slow machine as on a fast one: a slower machine makes
/// larger batches, and the writer's margin is measured from the batches themselves).
/// Then one sender keeps writing a little, twice a second (so writes never stop for the
/// idle second): the load has eased, and the file is cut back to an eighth of the bound
/// while it writes; once writes stop, to nothing. That each cut frees at most one step
/// is the unit test `the_log_file_is_cut_one_step_at_a_time` (exact sizes, no timing);
/// the waits here are generous, so that only a server that never cuts fails them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_wal_keeps_to_its_bound_and_shrinks_when_the_load_eases() {
    const BOUND: u64 = 4 * 1024 * 1024;
    let app = TestApp::start_on_sqlite_with(|c| c.wal_max_bytes = BOUND).await;
    let team = app.team("wal").await;
    let a = app.agent(&team, "a", &[]).await;
    let _b = app.agent(&team, "b", &[]).await;
    let mut wal = app.database().into_os_string();
    wal.push("-wal");
    let wal = std::path::PathBuf::from(wal);
    let watched = watch(wal.clone());
    let per_sender = write_through(&app, &a, 5 * BOUND).await;
    let during = watched.peak.load(Ordering::Relaxed);
    assert!(during > 0, "the WAL was never seen");
    assert!(
        during <= BOUND,
        "the WAL reached {during} bytes, over its bound {BOUND}"
    );

    let small = BOUND / 8;
    let trickling = AtomicBool::new(true);
    let trickled = AtomicU64::new(0);
    let trickle = async {
        while trickling.load(Ordering::Relaxed) {
            app.send_with(
                &a,
                json!({"recipient_agent_ids": ["b"], "content": {"text": "t"}}),
            )
            .await
            .expect_status(201);
            trickled.fetch_add(1, Ordering::Relaxed);
            // Twice a second: each send commits about seven pages, some 60 KB of log a
            // second in all, well under the eighth of the bound per 5 s that counts as
            // eased; and often enough that writes never stop for the idle second.
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    };
    let eased = async {
        let shrank = eventually(Duration::from_secs(60), || {
            size(&wal) <= small && size(&wal) > 0
        })
        .await;
        trickling.store(false, Ordering::Relaxed);
        shrank
    };
    let ((), shrank) = tokio::join!(trickle, eased);
    assert!(
        shrank,
        "under a light load the WAL stayed at {} bytes, over its small limit {small}",
        size(&wal)
    );
    assert!(
        eventually(Duration::from_secs(30), || size(&wal) == 0).await,
        "an idle server's WAL stayed at {} bytes",
        size(&wal)
    );
    watched.running.store(false, Ordering::Relaxed);
    assert_eq!(
        app.inbox(&_b, "?limit=1").await.body["total_count"],
        16 * per_sender as u64 + trickled.load(Ordering::Relaxed),
        "every send is there"
    );
    app.stop().await;
}

/// Every entry of `agent`'s inbox under `query`, page by page: (total, unread).
async fn counted_by_paging(app: &TestApp, agent: &Agent, query: &str) -> (u64, u64) {
    let (mut total, mut unread) = (0, 0);
    let mut cursor = String::new();
    loop {
        let page = app
            .inbox(agent, format!("?limit=100{query}{cursor}"))
            .await
            .expect_status(200);
        for m in page.body["messages"].as_array().expect("messages") {
            total += 1;
            unread += u64::from(m["read_status"] == false);
        }
        match page.body["next_cursor"].as_str() {
            Some(next) => cursor = format!("&cursor={next}"),
            None => return (total, unread),
        }
    }
}

/// The counts GET_MESSAGES answers equal what paging through the inbox finds, exactly,
/// for the whole inbox, `unread_only` and the other filters.
async fn counts_match(app: &TestApp, agent: &Agent, step: &str) {
    for query in [
        "",
        "&unread_only=true",
        "&message_types=request",
        "&kinds=broadcast,task",
        "&priority=high&unread_only=true",
        "&news_only=true",
        "&news_only=true&unread_only=true",
    ] {
        let answer = app.inbox(agent, format!("?limit=1{query}")).await;
        let paged = counted_by_paging(app, agent, query).await;
        let answered = (
            answer.body["total_count"].as_u64().unwrap_or(u64::MAX),
            answer.body["unread_count"].as_u64().unwrap_or(u64::MAX),
        );
        assert_eq!(answered, paged, "after {step}, counts of {query:?}");
        assert_eq!(answer.body["counts_exact"], true, "{step} {query}");
    }
}

/// The kept counters stay exact through every kind of write that reaches an inbox
/// (sends, broadcasts, responses, assistance requests, task frames) and through
/// read-marks, including marking twice and marking what is not there.
#[tokio::test]
async fn inbox_counts_stay_exact_through_every_kind_of_write() {
    let app = TestApp::start().await;
    let team = app.team("counts").await;
    let a = app.agent(&team, "a", &["review"]).await;
    let b = app.agent(&team, "b", &["review"]).await;
    counts_match(&app, &b, "nothing").await;
    let mut ids = Vec::new();
    for (i, (kind, priority)) in [
        ("request", "high"),
        ("information", "low"),
        ("request", "normal"),
    ]
    .iter()
    .enumerate()
    {
        let body = json!({"recipient_agent_ids": ["b"], "message_type": kind, "priority": priority, "requires_response": i == 0});
        ids.push(
            app.send_with(&a, body)
                .await
                .expect_status(201)
                .str("message_id"),
        );
    }
    counts_match(&app, &b, "sends").await;
    app.post("/v1/broadcasts")
        .token(&a.token)
        .json(json!({"sender_agent_id": "a", "update_type": "progress", "urgency": "critical", "content": {"summary": "s"}}))
        .send()
        .await
        .expect_status(201);
    app.post("/v1/assistance-requests")
        .token(&a.token)
        .json(json!({"requester_agent_id": "a", "assistance_type": "review", "required_capabilities": ["review"], "request_details": {"description": "d"}}))
        .send()
        .await
        .expect_status(201);
    app.post("/v1/tasks")
        .token(&a.token)
        .json(json!({"task_id": "t", "description": "d", "originating_agent_id": "a", "target_agent_id": "b"}))
        .send()
        .await
        .expect_status(201);
    ids.push(publish_quietly(&app, &a, &b).await);
    for marked in [
        vec![ids[0].clone()],
        vec![ids[0].clone(), ids[1].clone(), "msg_nope".into()],
        vec![ids[3].clone()],
    ] {
        app.post("/v1/messages/read")
            .token(&b.token)
            .json(json!({"agent_id": "b", "message_ids": marked}))
            .send()
            .await
            .expect_status(200);
        counts_match(&app, &b, "read-marks").await;
    }
    // b answers a: a's inbox gets the response, b's counts do not move.
    app.post(&format!("/v1/messages/{}/responses", ids[0]))
        .token(&b.token)
        .json(json!({"responder_agent_id": "b", "response_content": {"text": "ok", "status": "completed"}}))
        .send()
        .await
        .expect_status(201);
    counts_match(&app, &a, "a response").await;
    counts_match(&app, &b, "a response").await;
    app.stop().await;
}

/// `a` publishes a tag `b` does not watch: the entry reaches b's inbox without being
/// news for it, so it counts in the inbox and not in its news.
async fn publish_quietly(app: &TestApp, a: &Agent, b: &Agent) -> String {
    let quiet = app
        .post("/v1/publish")
        .token(&a.token)
        .json(json!({"cause_by": "Unwatched", "content": {"text": "p"}}))
        .send()
        .await
        .expect_status(201)
        .str("message_id");
    counts_match(app, b, "broadcast, assistance, task, publish").await;
    let news = app.inbox(b, "?news_only=true").await;
    let all = app.inbox(b, "").await;
    assert_eq!(
        news.body["total_count"].as_u64().map(|n| n + 1),
        all.body["total_count"].as_u64(),
        "the publish is counted in the inbox but not in its news"
    );
    quiet
}

/// Past 2,000 entries, a filter other than `unread_only` is counted over the newest
/// 2,000 and says so; the whole inbox and `unread_only` stay exact.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_inbox_counts_filters_over_its_newest_entries_and_says_so() {
    const ENTRIES: usize = 2_050;
    let app = TestApp::start().await;
    let team = app.team("large").await;
    let a = app.agent(&team, "a", &[]).await;
    let b = app.agent(&team, "b", &[]).await;
    for chunk in (0..ENTRIES).collect::<Vec<_>>().chunks(50) {
        let sends = chunk.iter().map(|i| {
            let kind = if i % 2 == 0 { "request" } else { "information" };
            app.send_with(
                &a,
                json!({"recipient_agent_ids": ["b"], "message_type": kind}),
            )
        });
        for res in futures_util::future::join_all(sends).await {
            res.expect_status(201);
        }
    }
    let all = app.inbox(&b, "?limit=1").await;
    assert_eq!(all.body["total_count"], ENTRIES as u64);
    assert_eq!(all.body["unread_count"], ENTRIES as u64);
    assert_eq!(all.body["counts_exact"], true);
    let unread = app.inbox(&b, "?limit=1&unread_only=true").await;
    assert_eq!(unread.body["total_count"], ENTRIES as u64);
    assert_eq!(unread.body["counts_exact"], true);
    let requests = app.inbox(&b, "?limit=1&message_types=request").await;
    assert_eq!(requests.body["counts_exact"], false);
    let counted = requests.body["total_count"].as_u64().expect("count");
    // The newest 2,000 of 2,050 hold 1,000 of the 1,025 requests (every other one).
    assert_eq!(counted, 1_000);
    app.stop().await;
}

/// Twelve racing responses to one message: one is accepted, and the asker's counters
/// count exactly that one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn counts_stay_exact_under_racing_responses() {
    let app = TestApp::start().await;
    let team = app.team("one-by-one").await;
    let a = app.agent(&team, "a", &[]).await;
    let b = app.agent(&team, "b", &[]).await;
    let question = app
        .send_with(
            &a,
            json!({"recipient_agent_ids": ["b"], "requires_response": true}),
        )
        .await
        .expect_status(201)
        .str("message_id");
    let answers = (0..12).map(|i| {
        app.post(&format!("/v1/messages/{question}/responses"))
            .token(&b.token)
            .json(json!({"responder_agent_id": "b", "response_content": {"text": format!("r{i}"), "status": "completed"}}))
            .send()
    });
    let statuses: Vec<u16> = futures_util::future::join_all(answers)
        .await
        .iter()
        .map(|r| r.status)
        .collect();
    assert_eq!(
        statuses.iter().filter(|s| **s == 201).count(),
        1,
        "{statuses:?}"
    );
    counts_match(&app, &a, "racing responses").await;
    let answer = app.inbox(&a, "?limit=1").await;
    assert_eq!(answer.body["total_count"], 1);
    app.stop().await;
}

/// `/metrics` shows disk use: the database file, rows per table family and the age of
/// the oldest message (read every few seconds in the background). The server runs as a
/// process of its own: the metrics registry is process-wide, and other tests' servers
/// in this binary would write the same gauges.
#[tokio::test]
async fn disk_use_is_visible_in_the_metrics() {
    let dir = tempfile::tempdir().expect("tmp");
    let server = crate::process::Process::start(&dir.path().join("disk.db"));
    let value = disk_use_after_three_sends(&server).await;
    assert!(value("switchboard_store_free_bytes") >= 0.0);
    server.kill();
}

/// Sends three messages through `server` and checks the disk-use gauges both engines
/// publish; the metrics text, to look further.
pub(crate) async fn disk_use_after_three_sends(
    server: &crate::process::Process,
) -> impl Fn(&str) -> f64 + use<> {
    use crate::process::{call, team_k};

    let http = reqwest::Client::new();
    let tokens = team_k(&http, server).await;
    for text in ["one", "two", "three"] {
        let body = json!({"sender_agent_id": "a", "recipient_agent_ids": ["b"], "message_type": "information", "content": {"text": text}});
        let (status, _) = call(
            &http,
            server,
            reqwest::Method::POST,
            "/v1/messages",
            &tokens[0],
            Some(body),
        )
        .await;
        assert_eq!(status, 201);
    }
    let mut text = String::new();
    for _ in 0..80 {
        let res = http
            .get(format!("{}/metrics", server.base))
            .send()
            .await
            .expect("metrics");
        text = res.text().await.expect("text");
        if text.contains(r#"switchboard_store_rows{table="messages"} 3"#) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let value = move |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name).map(str::trim))
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or_else(|| panic!("no {name} in:\n{text}"))
    };
    assert_eq!(value(r#"switchboard_store_rows{table="messages"}"#), 3.0);
    assert_eq!(value(r#"switchboard_store_rows{table="inbox"}"#), 3.0);
    assert_eq!(value(r#"switchboard_store_rows{table="responses"}"#), 0.0);
    assert_eq!(value(r#"switchboard_store_rows{table="agents"}"#), 2.0);
    assert_eq!(value(r#"switchboard_store_rows{table="teams"}"#), 1.0);
    for kept in ["tasks", "task_events", "callbacks", "idempotency_keys"] {
        let name = format!(r#"switchboard_store_rows{{table="{kept}"}}"#);
        assert_eq!(value(&name), 0.0, "{kept}");
    }
    assert!(value("switchboard_store_database_bytes") > 0.0);
    assert!(value("switchboard_store_oldest_message_age_seconds") >= 0.0);
    value
}
