//! The soak: a mixed load for `--minutes` (sends to one and to many, broadcasts, inbox
//! reads, read-marks, tasks answered by live WebSocket workers, live listeners, one hot
//! inbox), sampled every five seconds: throughput, p50/p99, errors, server RSS, WAL and
//! database size. Writes `target/soak/soak.csv` and draws `target/soak/soak.svg`.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use http_body_util::BodyExt;
use hyper::{Request, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

use crate::Opts;
use crate::harness::{AgentCreds, Row, ServerProcess, Setup, quantile_ms};
use crate::scenarios::{get, post};

const AGENTS: usize = 64;
const WORKERS: usize = 8;
const LISTENERS: usize = 16;
const HOT: usize = AGENTS - 1;
const CONNECTIONS: usize = 32;
const SAMPLE: Duration = Duration::from_secs(5);

/// One five-second sample.
#[derive(Debug, Clone, Copy)]
pub struct Sample {
    pub seconds: f64,
    pub ops_per_s: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    /// The slowest request of the sample: a stall of every connection at once is too
    /// few requests to move the p99, but not the max.
    pub max_ms: f64,
    pub errors: u64,
    pub pushed_per_s: f64,
    pub rss_mib: f64,
    pub wal_mib: f64,
    pub db_mib: f64,
}

#[derive(Default)]
struct Tally {
    ops: AtomicU64,
    errors: AtomicU64,
    pushed: AtomicU64,
    latencies: Mutex<Vec<u32>>,
    /// Latencies per kind of request ([`KINDS`]), to tell which one drifts.
    by_kind: Mutex<[Vec<u32>; KINDS.len()]>,
}

/// The kinds of request in the mix, in the order [`next_request`] reports them.
const KINDS: [&str; 8] = [
    "send",
    "send hot",
    "send 5",
    "broadcast",
    "read",
    "read hot",
    "mark",
    "task",
];

pub async fn soak(opts: Opts) -> Vec<Row> {
    let server = ServerProcess::start(&[]);
    let (_, agents) = Setup::new(&server)
        .team("soak", "s", AGENTS, &["work"])
        .await;
    let agents = Arc::new(agents);
    let tally = Arc::new(Tally::default());
    let running = Arc::new(AtomicBool::new(true));
    for (i, agent) in agents.iter().enumerate().take(WORKERS + LISTENERS) {
        let socket = crate::live::connect(&server, &agent.token, "").await;
        if i < WORKERS {
            tokio::spawn(crate::live::work(socket, agent.id.clone()));
        } else {
            tokio::spawn(count_pushes(socket, tally.clone()));
        }
    }
    let mut load = Vec::new();
    for conn in 0..CONNECTIONS {
        load.push(tokio::spawn(mixed(
            server.addr,
            conn,
            agents.clone(),
            tally.clone(),
            running.clone(),
        )));
    }
    let samples = sample(&server, &tally, Duration::from_secs(opts.minutes * 60)).await;
    running.store(false, Ordering::Relaxed);
    for task in load {
        let _ = task.await;
    }
    let out = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/soak");
    std::fs::create_dir_all(&out).expect("target/soak");
    std::fs::write(out.join("soak.csv"), csv(&samples)).expect("csv");
    std::fs::write(out.join("soak.svg"), crate::soak_svg::draw(&samples)).expect("svg");
    eprintln!("  wrote {0}/soak.csv and {0}/soak.svg", out.display());
    summary(&samples)
}

/// Samples every [`SAMPLE`] for `length`.
async fn sample(server: &ServerProcess, tally: &Tally, length: Duration) -> Vec<Sample> {
    let started = Instant::now();
    let mut samples = Vec::new();
    let mut last = Instant::now();
    while started.elapsed() < length {
        tokio::time::sleep(SAMPLE).await;
        let took = last.elapsed().as_secs_f64();
        last = Instant::now();
        let mut latencies = std::mem::take(&mut *tally.latencies.lock().expect("lock"));
        let mut by_kind = std::mem::take(&mut *tally.by_kind.lock().expect("lock"));
        let mib = |bytes: u64| bytes as f64 / (1024.0 * 1024.0);
        let s = Sample {
            seconds: started.elapsed().as_secs_f64(),
            ops_per_s: tally.ops.swap(0, Ordering::Relaxed) as f64 / took,
            p50_ms: quantile_ms(&mut latencies, 0.50),
            p99_ms: quantile_ms(&mut latencies, 0.99),
            max_ms: quantile_ms(&mut latencies, 1.0),
            errors: tally.errors.swap(0, Ordering::Relaxed),
            pushed_per_s: tally.pushed.swap(0, Ordering::Relaxed) as f64 / took,
            rss_mib: server.rss_kib() as f64 / 1024.0,
            wal_mib: mib(server.wal_bytes()),
            db_mib: mib(server.database_bytes()),
        };
        eprintln!(
            "  {:>5.0} s  {:>6.0} ops/s  p50 {:>6.2} ms  p99 {:>7.2} ms  max {:>7.1} ms  {} errors  RSS {:>5.1} MiB  WAL {:>6.1} MiB  DB {:>7.1} MiB",
            s.seconds,
            s.ops_per_s,
            s.p50_ms,
            s.p99_ms,
            s.max_ms,
            s.errors,
            s.rss_mib,
            s.wal_mib,
            s.db_mib
        );
        let kinds: Vec<String> = KINDS
            .iter()
            .zip(by_kind.iter_mut())
            .map(|(name, l)| format!("{name} {:.0}", quantile_ms(l, 0.99)))
            .collect();
        eprintln!("         p99 by kind (ms): {}", kinds.join(", "));
        samples.push(s);
    }
    samples
}

fn csv(samples: &[Sample]) -> String {
    let mut out = String::from(
        "seconds,ops_per_s,p50_ms,p99_ms,max_ms,errors,pushed_per_s,rss_mib,wal_mib,db_mib\n",
    );
    for s in samples {
        out.push_str(&format!(
            "{:.1},{:.1},{:.3},{:.3},{:.3},{},{:.1},{:.1},{:.2},{:.2}\n",
            s.seconds,
            s.ops_per_s,
            s.p50_ms,
            s.p99_ms,
            s.max_ms,
            s.errors,
            s.pushed_per_s,
            s.rss_mib,
            s.wal_mib,
            s.db_mib
        ));
    }
    out
}

/// The first and last minute side by side, and the peaks.
fn summary(samples: &[Sample]) -> Vec<Row> {
    let per_minute = (60.0 / SAMPLE.as_secs_f64()) as usize;
    let mean = |xs: &[Sample], f: fn(&Sample) -> f64| {
        xs.iter().map(f).sum::<f64>() / xs.len().max(1) as f64
    };
    let first = &samples[..per_minute.min(samples.len())];
    let last = &samples[samples.len().saturating_sub(per_minute)..];
    let peak = |f: fn(&Sample) -> f64| samples.iter().map(f).fold(0.0, f64::max);
    let row = |setting: &str, xs: &[Sample]| Row {
        scenario: "soak".into(),
        setting: setting.into(),
        rate: format!("{:.0} ops/s", mean(xs, |s| s.ops_per_s)),
        p50: format!("{:.2} ms", mean(xs, |s| s.p50_ms)),
        p99: format!("{:.2} ms", mean(xs, |s| s.p99_ms)),
        rss: format!("{:.1} MiB", mean(xs, |s| s.rss_mib)),
        note: format!(
            "WAL {:.1} MiB, DB {:.1} MiB, {} errors",
            mean(xs, |s| s.wal_mib),
            xs.last().map_or(0.0, |s| s.db_mib),
            xs.iter().map(|s| s.errors).sum::<u64>()
        ),
    };
    let mut rows = vec![row("first minute", first), row("last minute", last)];
    rows.push(Row {
        scenario: "soak".into(),
        setting: "peaks".into(),
        rate: String::new(),
        p50: String::new(),
        p99: format!("{:.2} ms", peak(|s| s.p99_ms)),
        rss: format!("{:.1} MiB", peak(|s| s.rss_mib)),
        note: format!(
            "WAL peak {:.1} MiB, slowest request {:.1} ms",
            peak(|s| s.wal_mib),
            peak(|s| s.max_ms)
        ),
    });
    rows
}

/// A live listener: counts every pushed frame.
async fn count_pushes(mut socket: crate::live::Socket, tally: Arc<Tally>) {
    while let Some(Ok(_)) = socket.next().await {
        tally.pushed.fetch_add(1, Ordering::Relaxed);
    }
}

/// One keep-alive connection running the mix until `running` turns false.
async fn mixed(
    addr: std::net::SocketAddr,
    conn: usize,
    agents: Arc<Vec<AgentCreds>>,
    tally: Arc<Tally>,
    running: Arc<AtomicBool>,
) {
    let stream = TcpStream::connect(addr).await.expect("connect");
    stream.set_nodelay(true).expect("nodelay");
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .expect("handshake");
    tokio::spawn(connection);
    let host = addr.to_string();
    let mut last_sent: Option<(usize, String)> = None;
    let mut i: u64 = 0;
    while running.load(Ordering::Relaxed) {
        i += 1;
        let (req, expect, keep, kind) = next_request(&host, conn, i, &agents, &mut last_sent);
        let started = Instant::now();
        let Ok(res) = sender.send_request(req).await else {
            tally.errors.fetch_add(1, Ordering::Relaxed);
            return;
        };
        let status = res.status();
        let body = res.into_body().collect().await.map(|b| b.to_bytes());
        let micros = u32::try_from(started.elapsed().as_micros()).unwrap_or(u32::MAX);
        tally.latencies.lock().expect("lock").push(micros);
        tally.by_kind.lock().expect("lock")[kind].push(micros);
        if status != expect || body.is_err() {
            if tally.errors.fetch_add(1, Ordering::Relaxed) == 0 {
                eprintln!("  first error: {status} {body:?}");
            }
            continue;
        }
        tally.ops.fetch_add(1, Ordering::Relaxed);
        if let (Some(to), Ok(body)) = (keep, body)
            && let Ok(v) = serde_json::from_slice::<serde_json::Value>(&body)
            && let Some(id) = v["message_id"].as_str()
        {
            last_sent = Some((to, id.to_owned()));
        }
    }
}

type Next = (
    Request<http_body_util::Full<hyper::body::Bytes>>,
    StatusCode,
    Option<usize>,
    usize,
);

/// Request `i` of connection `conn`: 50 % sends to one (a quarter of them to the hot
/// inbox), 10 % to five, 5 % broadcasts, 20 % inbox reads, 10 % read-marks, 5 % tasks.
fn next_request(
    host: &str,
    conn: usize,
    i: u64,
    agents: &[AgentCreds],
    last_sent: &mut Option<(usize, String)>,
) -> Next {
    let pick = |salt: u64| ((conn as u64 * 7919 + i * 104_729 + salt) % AGENTS as u64) as usize;
    let from = pick(0);
    let other = |k: u64| {
        let to = pick(k * 31 + 1);
        if to == from { (to + 1) % AGENTS } else { to }
    };
    let me = &agents[from];
    let send = |to: &[usize]| {
        let ids: Vec<&str> = to.iter().map(|&t| agents[t].id.as_str()).collect();
        let body = serde_json::json!({"sender_agent_id": me.id, "recipient_agent_ids": ids, "message_type": "information",
            "content": {"text": format!("soak {i}")}});
        post(host, "/v1/messages", &me.token, body.to_string())
    };
    match i % 20 {
        0..=9 => {
            let to = if i.is_multiple_of(4) && from != HOT {
                HOT
            } else {
                other(1)
            };
            let kind = if to == HOT { 1 } else { 0 };
            (send(&[to]), StatusCode::CREATED, Some(to), kind)
        }
        10..=11 => {
            let mut to: Vec<usize> = (1..=5).map(other).collect();
            to.sort_unstable();
            to.dedup();
            (send(&to), StatusCode::CREATED, None, 2)
        }
        12 => {
            let body = serde_json::json!({"sender_agent_id": me.id, "update_type": "progress", "urgency": "info",
                "content": {"summary": format!("soak {i}")}});
            (
                post(host, "/v1/broadcasts", &me.token, body.to_string()),
                StatusCode::CREATED,
                None,
                3,
            )
        }
        13..=16 if i % 4 == 1 => read_request(host, i, &agents[HOT], true),
        13..=16 => read_request(host, i, me, false),
        17..=18 if last_sent.is_some() => {
            let (to, id) = last_sent.take().expect("checked");
            let reader = &agents[to];
            let body = serde_json::json!({"agent_id": reader.id, "message_ids": [id]});
            (
                post(host, "/v1/messages/read", &reader.token, body.to_string()),
                StatusCode::OK,
                None,
                6,
            )
        }
        _ => {
            let w = (i as usize + conn) % WORKERS;
            let worker = &agents[if w == from { (w + 1) % WORKERS } else { w }];
            task_request(host, conn, i, me, worker)
        }
    }
}

/// An inbox read of `reader` (the hot inbox's when `hot`), every other one `unread_only`.
fn read_request(host: &str, i: u64, reader: &AgentCreds, hot: bool) -> Next {
    let query = if i.is_multiple_of(2) {
        "?limit=20"
    } else {
        "?limit=20&unread_only=true"
    };
    (
        get(host, &format!("/v1/messages{query}"), Some(&reader.token)),
        StatusCode::OK,
        None,
        if hot { 5 } else { 4 },
    )
}

/// A task from `me` for one of the live workers.
fn task_request(host: &str, conn: usize, i: u64, me: &AgentCreds, worker: &AgentCreds) -> Next {
    let body = serde_json::json!({"task_id": format!("c{conn}-{i}"), "description": "soak",
        "originating_agent_id": me.id, "target_agent_id": worker.id});
    (
        post(host, "/v1/tasks", &me.token, body.to_string()),
        StatusCode::CREATED,
        None,
        7,
    )
}
