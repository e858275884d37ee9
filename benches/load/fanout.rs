//! Fan-out: one post to many connected agents, timed until the last frame arrived.

use std::time::{Duration, Instant};

use futures_util::StreamExt;
use serde_json::json;
use tokio_tungstenite::tungstenite::Message;

use crate::Opts;
use crate::harness::{AgentCreds, Row, ServerProcess, Setup, quantile_ms};
use crate::live::{connect, row};

/// One broadcast to 1,000 connected agents: time until every frame arrived (target
/// ≤ 50 ms).
pub async fn fanout(_opts: Opts) -> Vec<Row> {
    const AGENTS: usize = 1001;
    const ROUNDS: usize = 20;
    let server = ServerProcess::start(&[]);
    let (_, agents) = Setup::new(&server).team("fan", "f", AGENTS, &[]).await;
    let sender = &agents[0];
    let arrivals = time_fanout(&server, sender, &agents[1..], ROUNDS, |round| {
        let body = json!({"sender_agent_id": sender.id, "update_type": "progress", "urgency": "info", "content": {"summary": format!("round {round}")}});
        ("/v1/broadcasts", body)
    })
    .await;
    let mut spans: Vec<u32> = arrivals.iter().map(|a| a.last_of(|_| true)).collect();
    let rss = server.rss_kib();
    vec![row(
        "ws_fanout",
        format!("1 broadcast → {} connections", AGENTS - 1),
        format!("{ROUNDS} rounds"),
        format!("{:.2} ms", quantile_ms(&mut spans.clone(), 0.5)),
        format!("{:.2} ms", quantile_ms(&mut spans, 1.0)),
        rss,
        "request sent → last frame arrived (p99 column: worst round); target ≤ 50 ms".into(),
    )]
}

/// When each listener got one round's frame, in microseconds after the request was sent.
pub struct RoundArrivals(pub Vec<u32>);

impl RoundArrivals {
    /// The latest arrival among the listeners `pick` keeps (by index).
    pub fn last_of(&self, pick: impl Fn(usize) -> bool) -> u32 {
        self.0
            .iter()
            .enumerate()
            .filter(|(i, _)| pick(*i))
            .map(|(_, at)| *at)
            .max()
            .unwrap_or(0)
    }
}

/// Connects `listeners`, then `rounds` times has `sender` POST `request(round)` (a path
/// and a body whose content text is `round N`) and waits until every listener got it.
pub async fn time_fanout(
    server: &ServerProcess,
    sender: &AgentCreds,
    listeners: &[AgentCreds],
    rounds: usize,
    request: impl Fn(usize) -> (&'static str, serde_json::Value),
) -> Vec<RoundArrivals> {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(usize, usize, Instant)>();
    let mut readers = Vec::new();
    for (index, agent) in listeners.iter().enumerate() {
        let mut socket = connect(server, &agent.token, "").await;
        let tx = tx.clone();
        readers.push(tokio::spawn(async move {
            while let Some(Ok(message)) = socket.next().await {
                if let Message::Text(text) = message
                    && let Some(round) = text
                        .as_str()
                        .split("\"round ")
                        .nth(1)
                        .and_then(|r| r.split('"').next())
                        .and_then(|n| n.parse().ok())
                {
                    let _ = tx.send((round, index, Instant::now()));
                }
            }
        }));
    }
    let http = reqwest::Client::new();
    let mut all = Vec::new();
    for round in 0..rounds {
        let (path, body) = request(round);
        let started = Instant::now();
        let res = http
            .post(format!("{}{path}", server.base()))
            .bearer_auth(&sender.token)
            .json(&body)
            .send()
            .await
            .expect("post");
        assert_eq!(res.status(), 201);
        let mut arrivals = vec![0u32; listeners.len()];
        let mut got = 0;
        while got < listeners.len() {
            let (r, index, at) = tokio::time::timeout(Duration::from_secs(10), rx.recv())
                .await
                .expect("frames arrive")
                .expect("open");
            if r == round {
                got += 1;
                arrivals[index] = at.duration_since(started).as_micros() as u32;
            }
        }
        all.push(RoundArrivals(arrivals));
    }
    for reader in readers {
        reader.abort();
    }
    all
}
