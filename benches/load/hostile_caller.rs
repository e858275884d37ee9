//! One credential doing its worst (issue 61): an agent token holding as many waiting
//! calls as it can open, and a task whose assignee fills its history while four readers
//! read it, while a well-behaved client asks `/healthz` on a fresh connection every
//! 10 ms. The mark: `/healthz` p99 ≤ 50 ms and server RSS ≤ 300 MiB.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde_json::json;

use crate::Opts;
use crate::harness::{Row, ServerProcess, Setup, quantile_ms};
use crate::hostile::healthz;

const MARK_MS: f64 = 50.0;
const MARK_RSS_MIB: f64 = 300.0;

pub async fn rows(opts: &Opts) -> Vec<Row> {
    vec![held_calls(opts).await, long_history(opts).await]
}

/// 300 MCP `wait_for_messages` calls of one agent token at once, against 300 places.
async fn held_calls(opts: &Opts) -> Row {
    let server = ServerProcess::start(&["--max-connections", "300"]);
    let setup = Setup::new(&server);
    let (_, agents) = setup.team("held", "a", 1, &[]).await;
    let token = agents[0].token.clone();
    let base = server.base();
    let (refused, waited) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let deadline = Instant::now() + opts.duration();
    let mut calls = Vec::new();
    for _ in 0..300 {
        let (base, token) = (base.clone(), token.clone());
        let (refused, waited) = (refused.clone(), waited.clone());
        calls.push(tokio::spawn(async move {
            // A connection of its own, kept: the attacker holds 300 sockets and tries
            // again a second after each refusal.
            let client = reqwest::Client::new();
            while Instant::now() < deadline {
                let answer = wait_call(&client, &base, &token).await;
                if answer.contains("RATE_LIMITED") {
                    refused.fetch_add(1, Ordering::Relaxed);
                    tokio::time::sleep(Duration::from_secs(1)).await;
                } else {
                    waited.fetch_add(1, Ordering::Relaxed);
                }
            }
        }));
    }
    let (latencies, failures, peak) = probe(&server, deadline).await;
    for call in calls {
        call.abort();
    }
    row(
        "one token keeps 300 MCP waits going (again 1 s after a refusal), --max-connections 300",
        latencies,
        failures,
        peak,
        format!(
            "{} waits refused RATE_LIMITED, {} of 10 s ran to their end",
            refused.load(Ordering::Relaxed),
            waited.load(Ordering::Relaxed)
        ),
    )
}

/// One stateless MCP `wait_for_messages` of 10 s.
async fn wait_call(client: &reqwest::Client, base: &str, token: &str) -> String {
    let sent = client
        .post(format!("{base}/mcp"))
        .bearer_auth(token)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", "wait_for_messages")
        .json(
            &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": "wait_for_messages", "arguments": {"timeout_ms": 10000},
            "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                      "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "1"},
                      "io.modelcontextprotocol/clientCapabilities": {}}}}),
        )
        .send()
        .await;
    match sent {
        Ok(answer) => answer.text().await.unwrap_or_default(),
        Err(err) => err.to_string(),
    }
}

/// The assignee posts 0.9 MB progress reports until the history is full, then keeps
/// trying; four readers read the task in a loop.
async fn long_history(opts: &Opts) -> Row {
    let server = ServerProcess::start(&[]);
    let setup = Setup::new(&server);
    let (_, agents) = setup.team("history", "a", 2, &["work"]).await;
    let (origin, worker) = (agents[0].clone(), agents[1].clone());
    setup
        .call(
            reqwest::Method::POST,
            "/v1/tasks",
            &origin.token,
            Some(json!({"task_id": "big", "description": "fill it",
                        "originating_agent_id": origin.id, "target_agent_id": worker.id})),
        )
        .await;
    let base = server.base();
    let deadline = Instant::now() + opts.duration();
    let stop = Arc::new(AtomicBool::new(false));
    let (taken, refused, reads) = (
        Arc::new(AtomicU64::new(0)),
        Arc::new(AtomicU64::new(0)),
        Arc::new(AtomicU64::new(0)),
    );
    let mut work = vec![reporter(&base, &worker.token, &stop, (&taken, &refused))];
    for _ in 0..4 {
        work.push(reader(&base, &origin.token, &stop, &reads));
    }
    let (latencies, failures, peak) = probe(&server, deadline).await;
    stop.store(true, Ordering::Relaxed);
    for task in work {
        let _ = task.await;
    }
    row(
        "a task's assignee fills its history (0.9 MB reports), 4 readers",
        latencies,
        failures,
        peak,
        format!(
            "{} reports taken, {} refused 413, {} reads of the task",
            taken.load(Ordering::Relaxed),
            refused.load(Ordering::Relaxed),
            reads.load(Ordering::Relaxed)
        ),
    )
}

/// The assignee: 0.9 MB progress reports until `stop`, counting those taken and refused.
fn reporter(
    base: &str,
    token: &str,
    stop: &Arc<AtomicBool>,
    (taken, refused): (&Arc<AtomicU64>, &Arc<AtomicU64>),
) -> tokio::task::JoinHandle<()> {
    let (base, token, stop) = (base.to_owned(), token.to_owned(), stop.clone());
    let (taken, refused) = (taken.clone(), refused.clone());
    tokio::spawn(async move {
        let client = reqwest::Client::new();
        let blob = "x".repeat(900 * 1024);
        while !stop.load(Ordering::Relaxed) {
            let status = client
                .post(format!("{base}/v1/tasks/big/result"))
                .bearer_auth(&token)
                .json(&json!({"status": "in-progress", "result_data": {"blob": blob}}))
                .send()
                .await
                .map(|r| r.status().as_u16())
                .unwrap_or(0);
            let counter = if status == 200 { &taken } else { &refused };
            counter.fetch_add(1, Ordering::Relaxed);
        }
    })
}

/// A reader of the task, whole answers, until `stop`.
fn reader(
    base: &str,
    token: &str,
    stop: &Arc<AtomicBool>,
    reads: &Arc<AtomicU64>,
) -> tokio::task::JoinHandle<()> {
    let (base, token, stop, reads) = (
        base.to_owned(),
        token.to_owned(),
        stop.clone(),
        reads.clone(),
    );
    tokio::spawn(async move {
        let client = reqwest::Client::new();
        while !stop.load(Ordering::Relaxed) {
            if let Ok(r) = client
                .get(format!("{base}/v1/tasks/big"))
                .bearer_auth(&token)
                .send()
                .await
            {
                let _ = r.bytes().await;
                reads.fetch_add(1, Ordering::Relaxed);
            }
        }
    })
}

/// `/healthz` on a fresh connection every 10 ms until `deadline`: latencies, failures
/// and the server's peak RSS (KiB), sampled as it goes.
async fn probe(server: &ServerProcess, deadline: Instant) -> (Vec<u32>, u64, u64) {
    let addr = server
        .base()
        .trim_start_matches("http://")
        .parse()
        .expect("addr");
    let mut latencies = Vec::new();
    let (mut failures, mut peak) = (0, 0);
    let mut tick = tokio::time::interval(Duration::from_millis(10));
    while Instant::now() < deadline {
        tick.tick().await;
        match healthz(addr).await {
            Some(micros) => latencies.push(micros),
            None => failures += 1,
        }
        peak = peak.max(server.rss_kib());
    }
    (latencies, failures, peak)
}

fn row(setting: &str, mut latencies: Vec<u32>, failures: u64, peak_kib: u64, note: String) -> Row {
    let p50 = quantile_ms(&mut latencies, 0.50);
    let p99 = quantile_ms(&mut latencies, 0.99);
    let rss = peak_kib as f64 / 1024.0;
    let met = failures == 0 && p99 <= MARK_MS && rss <= MARK_RSS_MIB;
    Row {
        scenario: "hostile".to_owned(),
        setting: setting.to_owned(),
        rate: if met { "met" } else { "NOT met" }.to_owned(),
        p50: format!("{p50:.2} ms"),
        p99: if failures > 0 {
            format!("{failures} /healthz failed")
        } else {
            format!("{p99:.2} ms")
        },
        rss: format!("{rss:.1} MiB peak"),
        note: format!("{note}; mark /healthz p99 ≤ {MARK_MS} ms, RSS ≤ {MARK_RSS_MIB} MiB"),
    }
}
