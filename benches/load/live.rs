//! WebSocket scenarios: idle memory, push latency, broadcast fan-out, replay speed.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use serde_json::json;
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

use crate::Opts;
use crate::harness::{AgentCreds, Row, ServerProcess, Setup, http_count, quantile_ms};

pub type Socket = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// Opens a WebSocket for `token` and reads until `caught_up`.
pub async fn connect(server: &ServerProcess, token: &str, query: &str) -> Socket {
    let url = format!("ws://{}/v1/ws{query}", server.addr);
    let mut request = url.into_client_request().expect("request");
    request.headers_mut().insert(
        "authorization",
        format!("Bearer {token}").parse().expect("header"),
    );
    let (mut socket, _) = tokio_tungstenite::connect_async(request)
        .await
        .expect("connect");
    while let Some(Ok(message)) = socket.next().await {
        if let Message::Text(text) = message
            && text.contains(r#""type":"caught_up""#)
        {
            break;
        }
    }
    socket
}

pub fn row(
    scenario: &str,
    setting: String,
    rate: String,
    p50: String,
    p99: String,
    rss: u64,
    note: String,
) -> Row {
    Row {
        scenario: scenario.to_owned(),
        setting,
        rate,
        p50,
        p99,
        rss: format!("{:.1} MiB", rss as f64 / 1024.0),
        note,
    }
}

/// 10,000 idle authenticated connections; server memory growth per connection
/// (target ≤ 20 KiB).
pub async fn idle(_opts: Opts) -> Vec<Row> {
    const AGENTS: usize = 1000;
    const PER_AGENT: usize = 10;
    let server = ServerProcess::start(&[]);
    let (_, agents) = Setup::new(&server).team("idle", "i", AGENTS, &[]).await;
    // Warm the server (allocator arenas, caches) with one connection before measuring.
    drop(connect(&server, &agents[0].token, "").await);
    tokio::time::sleep(Duration::from_millis(200)).await;
    let before = server.rss_kib();
    let mut sockets = Vec::with_capacity(AGENTS * PER_AGENT);
    let started = Instant::now();
    for round in 0..PER_AGENT {
        let opened =
            futures_util::future::join_all(agents.iter().map(|a| connect(&server, &a.token, "")))
                .await;
        sockets.extend(opened);
        eprintln!("  {} connections open", (round + 1) * AGENTS);
    }
    let took = started.elapsed();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let after = server.rss_kib();
    let per = (after.saturating_sub(before)) as f64 * 1024.0 / sockets.len() as f64 / 1024.0;
    let rows = vec![row(
        "ws_idle",
        format!("{} connections", sockets.len()),
        format!(
            "{:.0} conn/s opened",
            sockets.len() as f64 / took.as_secs_f64()
        ),
        "-".into(),
        "-".into(),
        after,
        format!(
            "{per:.1} KiB per connection (target ≤ 20); before {:.1} MiB",
            before as f64 / 1024.0
        ),
    )];
    drop(sockets);
    rows
}

/// When each message's frame arrived, by message number.
type Arrivals = Arc<Mutex<HashMap<u64, Instant>>>;
/// When each message was sent and answered, by message number.
type Answers = Arc<Mutex<HashMap<u64, (Instant, Instant)>>>;

/// Push latency with 1,000 connected agents and 2,000 messages/s: from the SEND_MESSAGE
/// answer to the frame at the recipient (target p50 ≤ 1 ms, p99 ≤ 5 ms).
pub async fn push_latency(opts: Opts) -> Vec<Row> {
    const AGENTS: usize = 1000;
    const RATE: u64 = 2000;
    let server = ServerProcess::start(&[]);
    let (_, agents) = Setup::new(&server).team("push", "p", AGENTS, &[]).await;
    let agents = Arc::new(agents);
    let arrived: Arrivals = Arc::new(Mutex::new(HashMap::new()));
    let mut readers = Vec::new();
    for agent in agents.iter() {
        let socket = connect(&server, &agent.token, "").await;
        readers.push(tokio::spawn(record_arrivals(socket, arrived.clone())));
    }
    let started = Instant::now();
    let answered = send_at_rate(&server, &agents, RATE, RATE * opts.duration).await;
    let elapsed = started.elapsed();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let rss = server.rss_kib();
    let answered = answered.lock().expect("lock").clone();
    let arrived = arrived.lock().expect("lock").clone();
    for reader in readers {
        reader.abort();
    }
    let mut after_answer = Vec::new();
    let mut after_send = Vec::new();
    let mut missing = 0;
    for (n, (sent, answer)) in &answered {
        match arrived.get(n) {
            Some(at) => {
                after_answer.push(at.saturating_duration_since(*answer).as_micros() as u32);
                after_send.push(at.saturating_duration_since(*sent).as_micros() as u32);
            }
            None => missing += 1,
        }
    }
    let setting = format!("{AGENTS} agents, {RATE} msg/s");
    vec![
        row(
            "ws_push",
            setting.clone(),
            format!("{:.0} msg/s", answered.len() as f64 / elapsed.as_secs_f64()),
            format!("{:.2} ms", quantile_ms(&mut after_answer, 0.5)),
            format!("{:.2} ms", quantile_ms(&mut after_answer, 0.99)),
            rss,
            format!("answer → frame (0 when the frame came first); {missing} frames missing"),
        ),
        row(
            "ws_push",
            setting,
            "-".into(),
            format!("{:.2} ms", quantile_ms(&mut after_send, 0.5)),
            format!("{:.2} ms", quantile_ms(&mut after_send, 0.99)),
            rss,
            "request sent → frame at the recipient".into(),
        ),
    ]
}

/// `ws_push` across nodes (issue #16: p99 ≤ 10 ms): two servers on one PostgreSQL
/// database, the 1,000 agents connected to node 2, the messages sent to node 1 at 2,000
/// per second: from node 1's answer (committed there) to the frame on node 2, which
/// learns of the commit through LISTEN/NOTIFY and reads the entry from the database.
pub async fn push_across_nodes(opts: Opts) -> Vec<Row> {
    const AGENTS: usize = 1000;
    const RATE: u64 = 2000;
    let Some((url, admin)) = crate::postgres::database().await else {
        return Vec::new();
    };
    let database = std::path::Path::new(&url);
    let one = ServerProcess::start_on(database, &["--node-id", "node-1"]);
    let (_, agents) = Setup::new(&one).team("push", "p", AGENTS, &[]).await;
    let two = ServerProcess::start_on(database, &["--node-id", "node-2"]);
    let agents = Arc::new(agents);
    let arrived: Arrivals = Arc::new(Mutex::new(HashMap::new()));
    let mut readers = Vec::new();
    for agent in agents.iter() {
        let socket = connect(&two, &agent.token, "").await;
        readers.push(tokio::spawn(record_arrivals(socket, arrived.clone())));
    }
    let started = Instant::now();
    let answered = send_at_rate(&one, &agents, RATE, RATE * opts.duration).await;
    let elapsed = started.elapsed();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let answered = answered.lock().expect("lock").clone();
    let arrived = arrived.lock().expect("lock").clone();
    for reader in readers {
        reader.abort();
    }
    let mut after_answer = Vec::new();
    let mut missing = 0;
    for (n, (_, answer)) in &answered {
        match arrived.get(n) {
            Some(at) => after_answer.push(at.saturating_duration_since(*answer).as_micros() as u32),
            None => missing += 1,
        }
    }
    let rss = two.rss_kib();
    drop((one, two));
    crate::postgres::drop_database(&admin, &url).await;
    vec![row(
        "ws_push_nodes",
        format!("{AGENTS} agents on node 2, {RATE} msg/s sent to node 1"),
        format!("{:.0} msg/s", answered.len() as f64 / elapsed.as_secs_f64()),
        format!("{:.2} ms", quantile_ms(&mut after_answer, 0.5)),
        format!("{:.2} ms", quantile_ms(&mut after_answer, 0.99)),
        rss,
        format!("node 1's answer → frame on node 2 (target p99 ≤ 10 ms); {missing} frames missing"),
    )]
}

/// Notes when each numbered message (text `n<number>.`) arrives on `socket`.
async fn record_arrivals(mut socket: Socket, arrived: Arrivals) {
    while let Some(Ok(message)) = socket.next().await {
        if let Message::Text(text) = message {
            let now = Instant::now();
            // A string search is enough.
            if let Some(n) = text
                .as_str()
                .split("\"text\":\"n")
                .nth(1)
                .and_then(|r| r.split('.').next())
                .and_then(|n| n.parse().ok())
            {
                arrived.lock().expect("lock").insert(n, now);
            }
        }
    }
}

/// Sends `total` numbered messages between the agents at `rate` per second; returns
/// when each was sent and answered.
async fn send_at_rate(
    server: &ServerProcess,
    agents: &Arc<Vec<AgentCreds>>,
    rate: u64,
    total: u64,
) -> Answers {
    let answered: Answers = Arc::new(Mutex::new(HashMap::new()));
    let host = server.addr;
    let http = reqwest::Client::new();
    let mut tick = tokio::time::interval(Duration::from_micros(1_000_000 / rate));
    let mut inflight = Vec::new();
    for n in 0..total {
        tick.tick().await;
        let from = (n as usize * 7) % agents.len();
        let to = (from + 1 + (n as usize % (agents.len() - 1))) % agents.len();
        let AgentCreds { id, token } = &agents[from];
        let body = format!(
            r#"{{"sender_agent_id":"{id}","recipient_agent_ids":["{}"],"message_type":"information","content":{{"text":"n{n}."}}}}"#,
            agents[to].id
        );
        let req = http
            .post(format!("http://{host}/v1/messages"))
            .bearer_auth(token)
            .header("content-type", "application/json")
            .body(body);
        let answered = answered.clone();
        inflight.push(tokio::spawn(async move {
            let sent = Instant::now();
            let res = req.send().await.expect("send");
            let ok = res.status() == 201;
            let _ = res.bytes().await;
            if ok {
                answered
                    .lock()
                    .expect("lock")
                    .insert(n, (sent, Instant::now()));
            }
        }));
    }
    for task in inflight {
        let _ = task.await;
    }
    answered
}

/// An agent reconnecting with 100,000 missed entries (target ≥ 100,000 entries/s).
pub async fn replay(_opts: Opts) -> Vec<Row> {
    const ENTRIES: u64 = 100_000;
    let server = ServerProcess::start(&[]);
    let (_, agents) = Setup::new(&server).team("replay", "r", 9, &[]).await;
    let agents = Arc::new(agents);
    let host = server.addr.to_string();
    let seed_agents = agents.clone();
    let seed = Arc::new(move |_: usize, i: u64| {
        let from = &seed_agents[1 + (i % 8) as usize];
        let body = format!(
            r#"{{"sender_agent_id":"{}","recipient_agent_ids":["r0"],"message_type":"information","content":{{"text":"missed {i}"}}}}"#,
            from.id
        );
        hyper::Request::post("/v1/messages")
            .header("host", host.as_str())
            .header("authorization", format!("Bearer {}", from.token))
            .header("content-type", "application/json")
            .body(http_body_util::Full::new(hyper::body::Bytes::from(body)))
            .expect("request")
    });
    let (took, failed) =
        http_count(server.addr, 64, ENTRIES, hyper::StatusCode::CREATED, seed).await;
    eprintln!(
        "  seeded {ENTRIES} entries in {:.1} s ({failed} failed)",
        took.as_secs_f64()
    );
    server.settle().await;

    let mut rows = Vec::new();
    let attempts: usize = std::env::var("REPLAY_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3);
    for attempt in 0..attempts {
        let url = format!("ws://{}/v1/ws?since=0", server.addr);
        let mut request = url.into_client_request().expect("request");
        request.headers_mut().insert(
            "authorization",
            format!("Bearer {}", agents[0].token)
                .parse()
                .expect("header"),
        );
        let started = Instant::now();
        let (mut socket, _) = tokio_tungstenite::connect_async(request)
            .await
            .expect("connect");
        let mut frames = 0u64;
        while let Some(Ok(message)) = socket.next().await {
            if let Message::Text(text) = message {
                if text.starts_with(r#"{"type":"message""#) {
                    frames += 1;
                } else if text.contains(r#""type":"caught_up""#) {
                    break;
                }
            }
        }
        let elapsed = started.elapsed();
        let _ = socket.close(None).await;
        rows.push(row(
            "ws_replay",
            format!("{frames} missed entries, run {}", attempt + 1),
            format!("{:.0} entries/s", frames as f64 / elapsed.as_secs_f64()),
            "-".into(),
            "-".into(),
            server.rss_kib(),
            format!(
                "connect → caught_up in {:.0} ms; target ≥ 100,000/s",
                elapsed.as_secs_f64() * 1000.0
            ),
        ));
    }
    rows
}

/// Tasks submitted → assigned → completed per second with 100 worker agents connected
/// by WebSocket (target ≥ 2,000 completed tasks/s).
///
/// Originators submit `TaskRequest` frames over their own sockets, keeping a window of
/// tasks in flight; the server assigns each to a worker by capability; the worker
/// answers its `TaskRequest` push with a `TaskResponse` frame (success); the originator
/// counts the success `TaskResponse` push. Latency is submit → success at the
/// originator.
pub async fn tasks(opts: Opts) -> Vec<Row> {
    const WORKERS: usize = 100;
    const ORIGINATORS: usize = 8;
    const WINDOW: usize = 32;
    let server = ServerProcess::start(&[]);
    let setup = Setup::new(&server);
    let (key, workers) = setup.team("tasks", "w", WORKERS, &["work"]).await;
    let mut originators = Vec::with_capacity(ORIGINATORS);
    for i in 0..ORIGINATORS {
        let id = format!("o{i}");
        let res = setup
            .call(
                reqwest::Method::POST,
                "/v1/teams/tasks/agents",
                &key,
                Some(json!({"agent_id": id, "role": "originator", "capabilities": []})),
            )
            .await;
        originators.push(AgentCreds {
            id,
            token: res["token"].as_str().expect("token").to_owned(),
        });
    }
    let mut worker_tasks = Vec::new();
    for worker in &workers {
        let socket = connect(&server, &worker.token, "").await;
        worker_tasks.push(tokio::spawn(work(socket, worker.id.clone())));
    }
    let tally = Arc::new(Tally::default());
    let mut loops = Vec::new();
    for (o, originator) in originators.iter().enumerate() {
        let socket = connect(&server, &originator.token, "").await;
        let id = originator.id.clone();
        loops.push(tokio::spawn(originate(
            socket,
            o,
            id,
            WINDOW,
            tally.clone(),
        )));
    }
    tokio::time::sleep(opts.warmup()).await;
    tally.measuring.store(true, Ordering::Relaxed);
    let began = Instant::now();
    tokio::time::sleep(opts.duration()).await;
    let done = tally.completed.load(Ordering::Relaxed);
    let elapsed = began.elapsed();
    tally.measuring.store(false, Ordering::Relaxed);
    tally.stop.store(true, Ordering::Relaxed);
    for l in loops {
        let _ = tokio::time::timeout(Duration::from_secs(10), l).await;
    }
    let rss = server.rss_kib();
    for w in worker_tasks {
        w.abort();
    }
    let mut samples = tally.latencies.lock().expect("lock").clone();
    vec![row(
        "tasks",
        format!("{WORKERS} WS workers, {ORIGINATORS}×{WINDOW} in flight"),
        format!("{:.0} tasks/s", done as f64 / elapsed.as_secs_f64()),
        format!("{:.2} ms", quantile_ms(&mut samples, 0.5)),
        format!("{:.2} ms", quantile_ms(&mut samples, 0.99)),
        rss,
        format!(
            "submit → success at the originator (target ≥ 2,000 tasks/s); {} failed",
            tally.failed.load(Ordering::Relaxed)
        ),
    )]
}

/// What the originators count, shared.
#[derive(Default)]
struct Tally {
    measuring: AtomicBool,
    stop: AtomicBool,
    latencies: Mutex<Vec<u32>>,
    completed: AtomicU64,
    failed: AtomicU64,
}

/// A worker: answers every `TaskRequest` push with a success `TaskResponse`.
pub async fn work(socket: Socket, id: String) {
    use futures_util::SinkExt;
    let (mut sink, mut stream) = socket.split();
    let mut n = 0u64;
    while let Some(Ok(message)) = stream.next().await {
        let Message::Text(text) = message else {
            continue;
        };
        if !text.as_str().starts_with(r#"{"type":"TaskRequest""#) {
            continue;
        }
        let Ok(frame) = serde_json::from_str::<serde_json::Value>(text.as_str()) else {
            continue;
        };
        n += 1;
        let answer = json!({
            "type": "TaskResponse",
            "request_id": n,
            "task_id": frame["task_id"],
            "status": "success",
            "result_data": {"by": id},
            "agent_id": id,
        });
        if sink
            .send(Message::Text(answer.to_string().into()))
            .await
            .is_err()
        {
            break;
        }
    }
}

/// An originator: keeps `window` tasks in flight, timing each from submit to its final
/// `TaskResponse`, until told to stop and every task in flight has ended.
async fn originate(socket: Socket, o: usize, id: String, window: usize, tally: Arc<Tally>) {
    use futures_util::SinkExt;
    let (mut sink, mut stream) = socket.split();
    let mut started: HashMap<String, Instant> = HashMap::new();
    let mut next = 0u64;
    let submit = |n: u64| {
        json!({
            "type": "TaskRequest",
            "request_id": n,
            "task_id": format!("{o}-{n}"),
            "description": "benchmark task",
            "originating_agent_id": id,
            "required_capabilities": ["work"],
        })
        .to_string()
    };
    for _ in 0..window {
        started.insert(format!("{o}-{next}"), Instant::now());
        let _ = sink.send(Message::Text(submit(next).into())).await;
        next += 1;
    }
    let mut samples = Vec::new();
    while let Some(Ok(message)) = stream.next().await {
        let Some((task_id, success)) = final_response(&message) else {
            continue;
        };
        let Some(at) = started.remove(&task_id) else {
            continue;
        };
        if tally.measuring.load(Ordering::Relaxed) {
            if success {
                tally.completed.fetch_add(1, Ordering::Relaxed);
                samples.push(at.elapsed().as_micros() as u32);
            } else {
                tally.failed.fetch_add(1, Ordering::Relaxed);
            }
        }
        if tally.stop.load(Ordering::Relaxed) {
            if started.is_empty() {
                break;
            }
            continue;
        }
        started.insert(format!("{o}-{next}"), Instant::now());
        if sink.send(Message::Text(submit(next).into())).await.is_err() {
            break;
        }
        next += 1;
    }
    tally.latencies.lock().expect("lock").extend(samples);
}

/// A final `TaskResponse` frame's task id and whether it succeeded.
fn final_response(message: &Message) -> Option<(String, bool)> {
    let Message::Text(text) = message else {
        return None;
    };
    let text = text.as_str();
    if !text.starts_with(r#"{"type":"TaskResponse""#) || text.contains(r#""status":"in-progress""#)
    {
        return None;
    }
    let frame = serde_json::from_str::<serde_json::Value>(text).ok()?;
    let task_id = frame["task_id"].as_str()?.to_owned();
    Some((task_id, frame["status"] == "success"))
}
