//! The team console under load: 1,000 agents connected by WebSocket, 500 messages a
//! second between them, and the console open on the team's timeline in Debian's
//! Chromium (`benches/console_watch.py`, Playwright from `target/pyenv-browser`, which
//! the console's test makes). Measures commit → row in the page (p50, p99) and the tab's
//! JS heap over the run (`--minutes`, 5 for the figure in the docs).

use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};

use crate::Opts;
use crate::harness::{AgentCreds, Row, ServerProcess, Setup};
use crate::live::{connect, row};

const AGENTS: usize = 1000;
const RATE: u64 = 500;

pub async fn console(opts: Opts) -> Vec<Row> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let python = root.join("target/pyenv-browser/bin/python");
    if !python.exists() || !Path::new("/usr/bin/chromium").exists() {
        return vec![skipped(
            "needs target/pyenv-browser (`cargo test console::` makes it) and /usr/bin/chromium",
        )];
    }
    let server = ServerProcess::start(&[]);
    let (key, agents) = Setup::new(&server).team("console", "a", AGENTS, &[]).await;
    for agent in &agents {
        let mut socket = connect(&server, &agent.token, "").await;
        // Read and drop whatever is pushed: the agents are only there to be connected.
        tokio::spawn(async move { while let Some(Ok(_)) = socket.next().await {} });
    }
    let seconds = opts.minutes * 60;
    let mut watcher = tokio::process::Command::new(&python)
        .arg(root.join("benches/console_watch.py"))
        .args([server.base(), key, seconds.to_string()])
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("the watcher starts");
    let mut lines = BufReader::new(watcher.stdout.take().expect("piped")).lines();
    let ready = lines.next_line().await.expect("watcher output");
    assert!(
        ready.is_some_and(|l| l.contains("ready")),
        "the watcher signed in"
    );
    let (sent, errors) = send_for(&server, &agents, Duration::from_secs(seconds)).await;
    let mut last = String::new();
    while let Some(line) = lines.next_line().await.expect("watcher output") {
        last = line;
    }
    let seen: Value = serde_json::from_str(&last).unwrap_or(Value::Null);
    let mib = |v: &Value| {
        v.as_f64()
            .map_or("?".into(), |b| format!("{:.1}", b / 1048576.0))
    };
    vec![row(
        "console",
        format!(
            "{AGENTS} agents on WebSockets, {RATE} messages/s, {} min",
            opts.minutes
        ),
        format!(
            "{:.0} msg/s sent ({errors} errors)",
            sent as f64 / seconds as f64
        ),
        format!("{} ms", seen["p50_ms"]),
        format!("{} ms", seen["p99_ms"]),
        server.rss_kib(),
        format!(
            "commit → row in the browser's timeline ({} rows seen, slowest {} ms); tab JS heap {} → {} MiB (max {}), at most {} rows kept",
            seen["rows_seen"],
            seen["max_ms"],
            mib(&seen["heap_first"]),
            mib(&seen["heap_last"]),
            mib(&seen["heap_max"]),
            seen["rows_kept_max"],
        ),
    )]
}

/// Sends `RATE` messages a second from random agents to random others for `span`;
/// returns how many were answered 201 and how many were not.
async fn send_for(server: &ServerProcess, agents: &[AgentCreds], span: Duration) -> (u64, u64) {
    let http = reqwest::Client::new();
    let url = format!("{}/v1/messages", server.base());
    let sent = Arc::new(AtomicU64::new(0));
    let errors = Arc::new(AtomicU64::new(0));
    let inflight = Arc::new(tokio::sync::Semaphore::new(64));
    let mut tick = tokio::time::interval(Duration::from_millis(10));
    let started = Instant::now();
    let mut n: u64 = 0;
    while started.elapsed() < span {
        tick.tick().await;
        // Catch up to the rate (a tick that came late sends more).
        let due = started.elapsed().as_millis() as u64 * RATE / 1000;
        while n < due {
            let from = &agents[(n as usize * 7919) % AGENTS];
            let to = &agents[(n as usize * 104_729 + 1) % AGENTS];
            n += 1;
            if from.id == to.id {
                continue;
            }
            let body = json!({"sender_agent_id": from.id, "recipient_agent_ids": [to.id], "message_type": "information", "content": {"text": format!("load {n}")}});
            let req = http.post(&url).bearer_auth(&from.token).json(&body);
            let (sent, errors) = (sent.clone(), errors.clone());
            let permit = inflight.clone().acquire_owned().await.expect("semaphore");
            tokio::spawn(async move {
                match req.send().await {
                    Ok(res) if res.status() == 201 => sent.fetch_add(1, Ordering::Relaxed),
                    _ => errors.fetch_add(1, Ordering::Relaxed),
                };
                drop(permit);
            });
        }
    }
    (sent.load(Ordering::Relaxed), errors.load(Ordering::Relaxed))
}

fn skipped(why: &str) -> Row {
    row(
        "console",
        "skipped".into(),
        "-".into(),
        "-".into(),
        "-".into(),
        0,
        why.into(),
    )
}
