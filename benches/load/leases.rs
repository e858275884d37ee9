//! Leases (issue 65): how long a grant takes when the team already holds 1,000 live
//! leases — every grant is decided against all of them, inside the writer's transaction.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde_json::json;

use crate::Opts;
use crate::harness::{AgentCreds, Row, ServerProcess, Setup, quantile_ms};
use crate::live::row;

/// Live leases held before the measurement, and the connections that then take and
/// release leases of their own (none of them conflicting).
const HELD: usize = 1_000;
const CONNECTIONS: usize = 8;

pub async fn leases(opts: Opts) -> Vec<Row> {
    let server = ServerProcess::start(&[]);
    let setup = Setup::new(&server);
    // Ten agents hold 100 leases each (an agent's most); eight others take and release.
    let (_, agents) = setup.team("leases", "h", 10 + CONNECTIONS, &[]).await;
    let (holders, takers) = agents.split_at(10);
    for (i, holder) in holders.iter().enumerate() {
        for j in 0..HELD / holders.len() {
            let body = json!({"resource": format!("held/{i}/{j}/**"), "ttl_seconds": 3600});
            setup
                .call(
                    reqwest::Method::PUT,
                    "/v1/teams/leases/leases",
                    &holder.token,
                    Some(body),
                )
                .await;
        }
    }
    let stop = Arc::new(AtomicBool::new(false));
    let mut loops = Vec::new();
    for (c, agent) in takers.iter().enumerate() {
        loops.push(tokio::spawn(take_and_give_back(
            server.base(),
            agent.clone(),
            c,
            stop.clone(),
            opts.warmup(),
        )));
    }
    tokio::time::sleep(opts.warmup() + opts.duration()).await;
    stop.store(true, Ordering::Relaxed);
    let mut grants = Vec::new();
    for l in loops {
        grants.extend(l.await.expect("loop"));
    }
    let rate = grants.len() as f64 / opts.duration().as_secs_f64();
    vec![row(
        "leases",
        format!("grant + release, {CONNECTIONS} conns, {HELD} live leases in the team"),
        format!("{rate:.0} grants/s"),
        format!("{:.2} ms", quantile_ms(&mut grants, 0.5)),
        format!("{:.2} ms", quantile_ms(&mut grants, 0.99)),
        server.rss_kib(),
        "the grant's p50/p99 (target p99 ≤ 5 ms on SQLite); each release follows its grant".into(),
    )]
}

/// Takes a lease on a resource no one else holds and gives it back, over and over; the
/// grants' latencies (µs) after the warm-up.
async fn take_and_give_back(
    base: String,
    agent: AgentCreds,
    c: usize,
    stop: Arc<AtomicBool>,
    warmup: Duration,
) -> Vec<u32> {
    let http = reqwest::Client::new();
    let began = Instant::now();
    let mut samples = Vec::new();
    let mut n = 0u64;
    while !stop.load(Ordering::Relaxed) {
        n += 1;
        let body = json!({"resource": format!("free/{c}/{n}"), "ttl_seconds": 60});
        let sent = Instant::now();
        let res = http
            .put(format!("{base}/v1/teams/leases/leases"))
            .bearer_auth(&agent.token)
            .json(&body)
            .send()
            .await
            .expect("grant");
        let took = sent.elapsed();
        assert!(res.status().is_success(), "grant: {}", res.status());
        let granted: serde_json::Value = res.json().await.expect("body");
        if began.elapsed() > warmup {
            samples.push(u32::try_from(took.as_micros()).unwrap_or(u32::MAX));
        }
        let id = granted["lease"]["lease_id"].as_str().expect("lease id");
        http.delete(format!("{base}/v1/teams/leases/leases/{id}"))
            .bearer_auth(&agent.token)
            .send()
            .await
            .expect("release");
    }
    samples
}
