//! Claimable work (issue 65): how many tasks 64 claimers take and finish per second from
//! an open backlog of 10,000 offered to their role, kept topped up while they work. The
//! target is half the `tasks` scenario's completed tasks/s (there the server assigns;
//! here every task is also raced for).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::Opts;
use crate::harness::{AgentCreds, Row, ServerProcess, Setup, quantile_ms};
use crate::live::row;

const CLAIMERS: usize = 64;
const BACKLOG: u64 = 10_000;
const SUBMITTERS: usize = 4;

/// Offered, claimed and finished so far.
#[derive(Default)]
struct Counts {
    offered: AtomicU64,
    finished: AtomicU64,
    stop: AtomicBool,
}

pub async fn claims(opts: Opts) -> Vec<Row> {
    let server = ServerProcess::start(&[]);
    let setup = Setup::new(&server);
    // All of role "bench": the first offers (and never claims its own), the rest claim.
    let (_, agents) = setup.team("claims", "c", CLAIMERS + 1, &[]).await;
    let (planner, claimers) = agents.split_at(1);
    let counts = Arc::new(Counts::default());
    let base = server.base();
    let http = reqwest::Client::new();
    let mut submitters = Vec::new();
    for s in 0..SUBMITTERS {
        submitters.push(tokio::spawn(offer_loop(
            http.clone(),
            base.clone(),
            planner[0].clone(),
            s,
            counts.clone(),
        )));
    }
    while counts.offered.load(Ordering::Relaxed) < BACKLOG {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let measuring = Arc::new(AtomicBool::new(false));
    let mut loops = Vec::new();
    for claimer in claimers {
        loops.push(tokio::spawn(claim_loop(
            http.clone(),
            base.clone(),
            claimer.clone(),
            counts.clone(),
            measuring.clone(),
        )));
    }
    tokio::time::sleep(opts.warmup()).await;
    measuring.store(true, Ordering::Relaxed);
    let before = counts.finished.load(Ordering::Relaxed);
    let began = Instant::now();
    tokio::time::sleep(opts.duration()).await;
    let done = counts.finished.load(Ordering::Relaxed) - before;
    let elapsed = began.elapsed();
    measuring.store(false, Ordering::Relaxed);
    counts.stop.store(true, Ordering::Relaxed);
    let mut samples = Vec::new();
    for l in loops {
        samples.extend(l.await.expect("claimer"));
    }
    for s in submitters {
        let _ = s.await;
    }
    vec![row(
        "claims",
        format!("{CLAIMERS} claimers (REST), backlog {BACKLOG} kept topped up"),
        format!("{:.0} claims/s", done as f64 / elapsed.as_secs_f64()),
        format!("{:.2} ms", quantile_ms(&mut samples, 0.5)),
        format!("{:.2} ms", quantile_ms(&mut samples, 0.99)),
        server.rss_kib(),
        "each a claim then its result; p50/p99 of the claim (target: ≥ 50 % of `tasks` completed/s)"
            .into(),
    )]
}

/// Offers tasks to role "bench" while fewer than the backlog are open.
async fn offer_loop(
    http: reqwest::Client,
    base: String,
    me: AgentCreds,
    s: usize,
    counts: Arc<Counts>,
) {
    let mut n = 0u64;
    while !counts.stop.load(Ordering::Relaxed) {
        let open = counts.offered.load(Ordering::Relaxed) - counts.finished.load(Ordering::Relaxed);
        if open >= BACKLOG {
            tokio::time::sleep(Duration::from_millis(5)).await;
            continue;
        }
        n += 1;
        let body = json!({"task_id": format!("s{s}-{n}"), "description": "work",
                          "originating_agent_id": me.id, "assignee_role": "bench"});
        let res = http
            .post(format!("{base}/v1/tasks"))
            .bearer_auth(&me.token)
            .json(&body)
            .send()
            .await
            .expect("offer");
        assert_eq!(res.status().as_u16(), 201, "offer");
        counts.offered.fetch_add(1, Ordering::Relaxed);
    }
}

/// Claims a task and reports it done, over and over; the claims' latencies (µs) while
/// measuring.
async fn claim_loop(
    http: reqwest::Client,
    base: String,
    me: AgentCreds,
    counts: Arc<Counts>,
    measuring: Arc<AtomicBool>,
) -> Vec<u32> {
    let mut samples = Vec::new();
    while !counts.stop.load(Ordering::Relaxed) {
        let sent = Instant::now();
        let res = http
            .post(format!("{base}/v1/tasks/claim"))
            .bearer_auth(&me.token)
            .json(&json!({"wait_seconds": 1}))
            .send()
            .await
            .expect("claim");
        let took = sent.elapsed();
        assert!(res.status().is_success(), "claim: {}", res.status());
        let body: Value = res.json().await.expect("body");
        let Some(task) = body["task"]["task_id"].as_str() else {
            continue;
        };
        if measuring.load(Ordering::Relaxed) {
            samples.push(u32::try_from(took.as_micros()).unwrap_or(u32::MAX));
        }
        let done = http
            .post(format!("{base}/v1/tasks/{task}/result"))
            .bearer_auth(&me.token)
            .json(&json!({"status": "success", "result_data": null}))
            .send()
            .await
            .expect("result");
        assert!(done.status().is_success(), "result: {}", done.status());
        counts.finished.fetch_add(1, Ordering::Relaxed);
    }
    samples
}
