//! Publish and watch (#13): a publish to a 100-agent team against a broadcast to the same
//! team in the same run (target: publishes/s ≥ 0.9 × broadcasts/s), and live push of a
//! publish to 1,000 addressed agents of which 10 watch the tag (target p99 ≤ 50 ms).

use std::sync::Arc;
use std::time::Duration;

use hyper::StatusCode;
use serde_json::json;

use crate::Opts;
use crate::harness::{AgentCreds, LoadResult, Row, ServerProcess, Setup, http_load, quantile_ms};

/// Slices of each kind, alternating.
const SLICES: usize = 3;
const KINDS: [&str; 2] = ["broadcast", "publish"];
use crate::scenarios::post;

/// Makes every tenth agent watch `tag`.
async fn watchers(setup: &Setup, agents: &[AgentCreds], tag: &str) {
    for agent in agents.iter().step_by(agents.len() / 10) {
        setup
            .call(
                reqwest::Method::PUT,
                "/v1/watch",
                &agent.token,
                Some(json!({"watch": [tag]})),
            )
            .await;
    }
}

/// Broadcasts, then publishes, to a 100-agent team (99 recipients each, 10 watching).
pub async fn publish(opts: Opts) -> Vec<Row> {
    let server = ServerProcess::start(&[]);
    let setup = Setup::new(&server);
    let (_, agents) = setup.team("hundred", "m", 100, &[]).await;
    watchers(&setup, &agents, "step").await;
    let agents: Arc<Vec<(String, String)>> = Arc::new(
        agents
            .iter()
            .map(|a| (a.id.clone(), a.token.clone()))
            .collect(),
    );
    let host = server.addr.to_string();
    // Alternating slices, so that both see the same database sizes and the same moments
    // of a machine whose speed drifts.
    let mut results: [Option<LoadResult>; 2] = [None, None];
    for slice in 0..2 * SLICES {
        let kind = KINDS[slice % 2];
        let (host, agents) = (host.clone(), agents.clone());
        let make = Arc::new(move |conn: usize, i: u64| {
            let (id, token) = &agents[(conn + i as usize * 64) % agents.len()];
            if kind == "broadcast" {
                let body = format!(
                    r#"{{"sender_agent_id":"{id}","update_type":"progress","urgency":"info","content":{{"summary":"step {i} done","details":"all good"}}}}"#
                );
                post(&host, "/v1/broadcasts", token, body)
            } else {
                let body = format!(
                    r#"{{"sender_agent_id":"{id}","cause_by":"step","content":{{"text":"step {i} done","data":{{"details":"all good"}}}}}}"#
                );
                post(&host, "/v1/publish", token, body)
            }
        });
        let warmup = if slice < 2 {
            opts.warmup()
        } else {
            Duration::ZERO
        };
        let result = http_load(
            server.addr,
            opts.connections,
            warmup,
            opts.duration() / SLICES as u32,
            StatusCode::CREATED,
            make,
        )
        .await;
        match &mut results[slice % 2] {
            Some(total) => total.merge(result),
            none => *none = Some(result),
        }
    }
    let [Some(broadcast), Some(publish)] = results else {
        unreachable!("every kind ran")
    };
    let ratio = publish.per_second() / broadcast.per_second().max(f64::MIN_POSITIVE);
    let setting = format!("{} conns, 100-agent team", opts.connections);
    vec![
        Row::from_load(
            "broadcast",
            setting.clone(),
            broadcast,
            server.rss_kib(),
            format!("99 inbox entries each; {SLICES} slices alternating with publish"),
        ),
        Row::from_load(
            "publish",
            setting,
            publish,
            server.rss_kib(),
            format!(
                "99 inbox entries each, 10 of them news; publish/broadcast = {ratio:.2} (target ≥ 0.9)"
            ),
        ),
    ]
}

/// A publish to `<all>` in a 1,001-agent team, every member connected, 10 watching the
/// tag: request sent → the last addressed connection got it, and the last watcher.
pub async fn publish_fanout(_opts: Opts) -> Vec<Row> {
    const AGENTS: usize = 1001;
    const ROUNDS: usize = 20;
    let server = ServerProcess::start(&[]);
    let setup = Setup::new(&server);
    let (_, agents) = setup.team("fan", "f", AGENTS, &[]).await;
    let listeners = &agents[1..];
    watchers(&setup, listeners, "step").await;
    let sender = &agents[0];
    let arrivals = crate::fanout::time_fanout(&server, sender, listeners, ROUNDS, |round| {
        let body = json!({"cause_by": "step", "content": {"text": format!("round {round}")}});
        ("/v1/publish", body)
    })
    .await;
    let step = listeners.len() / 10;
    let mut all: Vec<u32> = arrivals.iter().map(|a| a.last_of(|_| true)).collect();
    let mut watching: Vec<u32> = arrivals
        .iter()
        .map(|a| a.last_of(|i| i % step == 0))
        .collect();
    let rss = server.rss_kib();
    let row = |setting: &str, spans: &mut Vec<u32>| Row {
        scenario: "ws_publish_fanout".into(),
        setting: setting.into(),
        rate: format!("{ROUNDS} rounds"),
        p50: format!("{:.2} ms", quantile_ms(&mut spans.clone(), 0.5)),
        p99: format!("{:.2} ms", quantile_ms(spans, 1.0)),
        rss: format!("{:.1} MiB", rss as f64 / 1024.0),
        note: "request sent → last frame arrived (p99 column: worst round); target ≤ 50 ms".into(),
    };
    vec![
        row("1 publish → 1,000 addressed", &mut all),
        row("… the 10 watchers among them", &mut watching),
    ]
}
