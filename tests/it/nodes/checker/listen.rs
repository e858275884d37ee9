//! Live connections under the faults: one listener per worker agent holds a WebSocket to
//! a node, records the seq of every entry pushed or replayed on it, and moves to another
//! node from its cursor when the connection breaks (a node killed or paused) or every few
//! seconds on its own. The check: each connection hands out the entries after its
//! cursor exactly once and in order (`since + 1, since + 2, …`, no gap, no repeat), and
//! the last connection reaches the inbox's newest entry — at-least-once across
//! reconnects, nothing missing.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::Value;
use tokio::sync::watch;
use tokio_tungstenite::tungstenite::Message;

use super::Cluster;
use crate::wsclient::Ws;

/// What one connection handed out: where it started and the seqs that came.
#[derive(Debug, Clone)]
pub(super) struct Segment {
    node: usize,
    since: i64,
    seqs: Vec<i64>,
}

/// A listener's whole record, and where it ended.
pub(super) struct Listened {
    agent: String,
    segments: Vec<Segment>,
    cursor: i64,
}

/// Listens as `agent` until `until` says the inbox holds `n` entries and the cursor got
/// there (or a minute after the workers stopped).
async fn listener(
    cluster: Arc<Cluster>,
    agent: String,
    token: String,
    seed: u64,
    mut until: watch::Receiver<Option<i64>>,
) -> Listened {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut listened = Listened {
        agent,
        segments: Vec::new(),
        cursor: 0,
    };
    let mut give_up: Option<Instant> = None;
    loop {
        let target = *until.borrow_and_update();
        if let Some(n) = target {
            if listened.cursor >= n {
                return listened;
            }
            let at = *give_up.get_or_insert_with(|| Instant::now() + Duration::from_secs(60));
            if Instant::now() > at {
                return listened;
            }
        }
        let node = rng.random_range(0..super::NODES);
        let base = cluster.bases.read().expect("bases")[node].clone();
        let path = format!("/v1/ws?since={}", listened.cursor);
        let Ok(Ok(mut ws)) = tokio::time::timeout(
            Duration::from_secs(2),
            Ws::connect_quiet(&base, &path, &token),
        )
        .await
        else {
            tokio::time::sleep(Duration::from_millis(200)).await;
            continue;
        };
        let stay = Duration::from_millis(rng.random_range(1_000..4_000));
        let segment = hold(&mut ws, node, listened.cursor, stay, &mut until).await;
        if let Some(last) = segment.seqs.last() {
            listened.cursor = *last;
        }
        listened.segments.push(segment);
    }
}

/// Holds one connection for `stay` (less when it breaks or stalls); what it handed out.
async fn hold(
    ws: &mut Ws,
    node: usize,
    since: i64,
    stay: Duration,
    until: &mut watch::Receiver<Option<i64>>,
) -> Segment {
    let mut segment = Segment {
        node,
        since,
        seqs: Vec::new(),
    };
    let leave = tokio::time::Instant::now() + stay;
    loop {
        let next = tokio::select! {
            next = tokio::time::timeout(Duration::from_secs(3), ws.stream.next()) => next,
            () = tokio::time::sleep_until(leave) => return segment,
            _ = until.changed() => return segment,
        };
        let text = match next {
            Ok(Some(Ok(Message::Text(text)))) => text,
            Ok(Some(Ok(Message::Ping(_) | Message::Pong(_)))) => continue,
            // Closed, broken, or silent past the heartbeat (a paused node): move on.
            _ => return segment,
        };
        let Ok(frame) = serde_json::from_str::<Value>(text.as_str()) else {
            return segment;
        };
        let kind = frame["type"].as_str().unwrap_or_default();
        if matches!(kind, "hello" | "caught_up" | "pong" | "reply" | "error") {
            continue;
        }
        if let Some(seq) = frame["seq"].as_i64() {
            segment.seqs.push(seq);
        }
    }
}

/// Each connection gave the entries after its cursor once and in order; the last one
/// reached the inbox's newest entry, `n` of each agent.
fn check_listened(listened: &[Listened], newest: &[(String, i64)]) -> Vec<String> {
    let mut violations = Vec::new();
    for l in listened {
        for s in &l.segments {
            let expected: Vec<i64> = (s.since + 1..).take(s.seqs.len()).collect();
            if s.seqs != expected {
                violations.push(format!(
                    "{} on node {} from {}: seqs {:?}, not each once in order",
                    l.agent, s.node, s.since, s.seqs
                ));
            }
        }
        let n = newest
            .iter()
            .find(|(a, _)| *a == l.agent)
            .map_or(0, |(_, n)| *n);
        if l.cursor != n {
            violations.push(format!(
                "{}: listening ended at {} of {n} entries ({} connections)",
                l.agent,
                l.cursor,
                l.segments.len()
            ));
        }
    }
    violations
}

/// The running listeners, one per agent, and what tells each where to stop.
pub(super) struct Listeners {
    running: Vec<(
        tokio::task::JoinHandle<Listened>,
        watch::Sender<Option<i64>>,
    )>,
}

impl Listeners {
    /// A listener for each of `tokens`' agents (`(id, token)`).
    pub(super) fn spawn(cluster: &Arc<Cluster>, tokens: &[(String, String)]) -> Listeners {
        let running = tokens
            .iter()
            .enumerate()
            .map(|(w, (id, token))| {
                let (end, until) = watch::channel(None);
                let seed = 100 + w as u64;
                let run = listener(cluster.clone(), id.clone(), token.clone(), seed, until);
                (tokio::spawn(run), end)
            })
            .collect();
        Listeners { running }
    }

    /// After the faults: each listener catches up to its inbox's newest entry (read
    /// through `node`), then all are checked. The violations, the connections made and
    /// the entries handed out.
    pub(super) async fn finish(
        self,
        http: &reqwest::Client,
        node: &crate::process::Process,
        tokens: &[(String, String)],
    ) -> (Vec<String>, usize, usize) {
        let mut newest = Vec::new();
        for ((id, token), (_, end)) in tokens.iter().zip(&self.running) {
            let n = crate::process::every_inbox_entry(http, node, token)
                .await
                .last()
                .map_or(0, |(seq, _)| *seq);
            newest.push((id.clone(), n));
            let _ = end.send(Some(n));
        }
        let mut listened = Vec::new();
        for (run, _) in self.running {
            listened.push(run.await.expect("a listener"));
        }
        let (connections, entries) = summary(&listened);
        (check_listened(&listened, &newest), connections, entries)
    }
}

/// Connections and entries the listeners got, for the summary line.
fn summary(listened: &[Listened]) -> (usize, usize) {
    let connections = listened.iter().map(|l| l.segments.len()).sum();
    let entries = listened
        .iter()
        .flat_map(|l| &l.segments)
        .map(|s| s.seqs.len())
        .sum();
    (connections, entries)
}
