//! The scenarios, in the order they run. Each issue that names a figure adds one.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use http_body_util::Full;
use hyper::body::Bytes;
use hyper::{Request, StatusCode};

use crate::Opts;
use crate::harness::{
    MakeRequest, Row, ServerProcess, Setup, Side, http_count, http_load, interleaved,
};

type Scenario = fn(Opts) -> Pin<Box<dyn Future<Output = Vec<Row>>>>;

pub const ALL: &[(&str, Scenario)] = &[
    ("healthz", |o| Box::pin(healthz(o))),
    ("send_message", |o| Box::pin(send_message(o))),
    ("send_ab", |o| Box::pin(crate::ab::send_ab(o))),
    ("get_messages", |o| Box::pin(get_messages(o))),
    ("broadcast", |o| Box::pin(broadcast(o))),
    ("ws_idle", |o| Box::pin(crate::live::idle(o))),
    ("ws_push", |o| Box::pin(crate::live::push_latency(o))),
    ("ws_fanout", |o| Box::pin(crate::fanout::fanout(o))),
    ("publish", |o| Box::pin(crate::publish::publish(o))),
    ("ws_publish_fanout", |o| {
        Box::pin(crate::publish::publish_fanout(o))
    }),
    ("ws_replay", |o| Box::pin(crate::live::replay(o))),
    ("tasks", |o| Box::pin(crate::live::tasks(o))),
    ("hot_inbox", |o| Box::pin(crate::hot::hot_inbox(o))),
    ("send_at_scale", |o| Box::pin(send_at_scale(o))),
    ("postgres", |o| Box::pin(crate::postgres::postgres(o))),
    ("postgres_two_nodes", |o| {
        Box::pin(crate::postgres::two_nodes(o))
    }),
    ("ws_push_nodes", |o| {
        Box::pin(crate::live::push_across_nodes(o))
    }),
    ("stomp", |o| Box::pin(crate::stomp::stomp(o))),
    ("stomp_durable", |o| {
        Box::pin(crate::stomp_durable::stomp_durable(o))
    }),
    ("stomp_idle", |o| Box::pin(crate::stomp::idle(o))),
    ("mcp", |o| Box::pin(crate::mcp::mcp(o))),
    ("leases", |o| Box::pin(crate::leases::leases(o))),
    ("claims", |o| Box::pin(crate::claims::claims(o))),
    ("search", |o| Box::pin(crate::search::search(o))),
    ("search_postgres", |o| {
        Box::pin(crate::search::search_postgres(o))
    }),
    ("a2a", |o| Box::pin(crate::a2a::a2a(o))),
    ("soak", |o| Box::pin(crate::soak::soak(o))),
    ("ws_slow_readers", |o| {
        Box::pin(crate::slow::slow_readers(o))
    }),
    ("hostile", |o| Box::pin(crate::hostile::hostile(o))),
    ("hostile_caller", |o| {
        Box::pin(async move { crate::hostile_caller::rows(&o).await })
    }),
    ("console", |o| Box::pin(crate::console::console(o))),
    ("nodes_checker", |o| {
        Box::pin(crate::checker::nodes_checker(o))
    }),
];

pub fn get(host: &str, path: &str, token: Option<&str>) -> Request<Full<Bytes>> {
    let mut req = Request::get(path).header("host", host);
    if let Some(token) = token {
        req = req.header("authorization", format!("Bearer {token}"));
    }
    req.body(Full::new(Bytes::new())).expect("request")
}

pub fn post(host: &str, path: &str, token: &str, body: String) -> Request<Full<Bytes>> {
    Request::post(path)
        .header("host", host)
        .header("authorization", format!("Bearer {token}"))
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body)))
        .expect("request")
}

/// The HTTP ceiling: a constant answer, no storage.
async fn healthz(opts: Opts) -> Vec<Row> {
    let server = ServerProcess::start(&[]);
    let host = server.addr.to_string();
    let make = Arc::new(move |_: usize, _: u64| get(&host, "/healthz", None));
    let result = http_load(
        server.addr,
        opts.connections,
        opts.warmup(),
        opts.duration(),
        StatusCode::OK,
        make,
    )
    .await;
    vec![Row::from_load(
        "healthz",
        format!("{} conns", opts.connections),
        result,
        server.rss_kib(),
        "HTTP ceiling".to_owned(),
    )]
}

/// Slices the send_message comparisons are measured in (see [`interleaved`]).
const SLICES: u32 = 5;

/// SEND_MESSAGE to one recipient, every 2xx committed; compared with `/healthz`, the two
/// in alternating slices against two servers running side by side ([`interleaved`]).
async fn send_message(opts: Opts) -> Vec<Row> {
    let ceiling = ServerProcess::start(&[]);
    let ceiling_host = ceiling.addr.to_string();
    let make_healthz: MakeRequest =
        Arc::new(move |_: usize, _: u64| get(&ceiling_host, "/healthz", None));
    let server = ServerProcess::start(&[]);
    let setup = Setup::new(&server);
    let (_, agents) = setup.team("bench", "a", opts.connections + 1, &[]).await;
    let agents: Vec<(String, String)> = agents.into_iter().map(|a| (a.id, a.token)).collect();
    let sides = [
        Side {
            addr: ceiling.addr,
            expect: StatusCode::OK,
            make: make_healthz,
        },
        Side {
            addr: server.addr,
            expect: StatusCode::CREATED,
            make: sends_to_first(&server, agents),
        },
    ];
    let cpu_before = crate::cpu::process_micros(server.pid());
    let [ceiling_result, result] = interleaved(&opts, SLICES, &sides).await;
    // The sending server's CPU per answer: what a send costs it, whatever the other
    // processes on these two cores (the generator, a collector) take from its rate.
    let cpu = crate::cpu::process_micros(server.pid()).saturating_sub(cpu_before);
    let ratio = format!(
        "{:.0}% of /healthz interleaved with it ({:.0} req/s; target ≥ 50%); server CPU {:.1} µs per send",
        100.0 * result.per_second() / ceiling_result.per_second(),
        ceiling_result.per_second(),
        cpu as f64 / result.answered.max(1) as f64
    );
    vec![Row::from_load(
        "send_message",
        format!("{} conns, 1 recipient", opts.connections),
        result,
        server.rss_kib(),
        ratio,
    )]
}

/// SEND_MESSAGE from agents `1..` (one per connection, in turn) to agent `0`. Bodies are
/// formatted from a template: the generator shares the CPU with the server, so it must
/// cost as little per request as it does for /healthz.
pub fn sends_to_first(server: &ServerProcess, agents: Vec<(String, String)>) -> MakeRequest {
    let host = server.addr.to_string();
    Arc::new(move |conn: usize, i: u64| {
        let (id, token) = &agents[1 + conn % (agents.len() - 1)];
        let sink = &agents[0].0;
        let body = format!(
            r#"{{"sender_agent_id":"{id}","recipient_agent_ids":["{sink}"],"message_type":"information","content":{{"text":"message {i} from {id}"}}}}"#
        );
        post(&host, "/v1/messages", token, body)
    })
}

/// GET_MESSAGES with filters on a large store: 1,000,000 messages across 1,000 agents
/// (seeded through SEND_MESSAGE), each query by a random agent with one of several filter
/// combinations; target p99 ≤ 10 ms.
async fn get_messages(opts: Opts) -> Vec<Row> {
    const AGENTS: usize = 1000;
    let (server, agents) = seeded_store(&opts, "get_messages", AGENTS, 1_000_000).await;
    let seeded_rss = server.rss_kib();
    let host = server.addr.to_string();
    let filters = [
        "?limit=50",
        "?limit=50&message_types=request,coordination",
        "?limit=50&unread_only=true&sort_order=oldest_first",
        "?limit=20&priority=high",
        "?limit=50&senders=a1,a2,a3,a500,a999",
        "?limit=50&since_timestamp=2000-01-01T00:00:00Z&message_types=information",
    ];
    let mut rows = Vec::new();
    for connections in [1, 8, opts.connections] {
        let agents = agents.clone();
        let host = host.clone();
        let make = Arc::new(move |conn: usize, i: u64| {
            let (_, token) = &agents[(conn * 7919 + i as usize * 104_729) % AGENTS];
            let path = format!(
                "/v1/messages{}",
                filters[(i as usize + conn) % filters.len()]
            );
            get(&host, &path, Some(token))
        });
        let result = http_load(
            server.addr,
            connections,
            opts.warmup(),
            opts.duration(),
            StatusCode::OK,
            make,
        )
        .await;
        rows.push(Row::from_load(
            "get_messages",
            format!("{connections} conns, 1M msgs / 1k agents"),
            result,
            seeded_rss.max(server.rss_kib()),
            format!(
                "filters rotate; target p99 ≤ 10 ms; {:.0} MiB of the file mapped",
                server.mapped_kib() as f64 / 1024.0
            ),
        ));
    }
    rows
}

/// A server on a store of `messages` messages among `agents` agents, seeded through
/// SEND_MESSAGE (types and priorities rotating) — or, with `--data-dir`, the one seeded
/// by an earlier run. Returns the server and the agents' `(id, token)`.
async fn seeded_store(
    opts: &Opts,
    name: &str,
    agents: usize,
    messages: u64,
) -> (ServerProcess, Arc<Vec<(String, String)>>) {
    // With --data-dir the seeded database and its tokens are kept and reused.
    let kept = opts.data_dir.as_ref().map(|d| {
        (
            d.join(format!("{name}.db")),
            d.join(format!("{name}.tokens.json")),
        )
    });
    let reuse = kept
        .as_ref()
        .is_some_and(|(db, tokens)| db.exists() && tokens.exists());
    let server = match &kept {
        Some((db, _)) => {
            std::fs::create_dir_all(db.parent().expect("dir")).expect("data dir");
            ServerProcess::start_on(db, &[])
        }
        None => ServerProcess::start(&[]),
    };
    let creds: Vec<crate::harness::AgentCreds> = match &kept {
        Some((_, tokens)) if reuse => {
            serde_json::from_slice(&std::fs::read(tokens).expect("tokens")).expect("tokens json")
        }
        _ => Setup::new(&server).team("big", "a", agents, &[]).await.1,
    };
    if let Some((_, tokens)) = &kept {
        std::fs::write(tokens, serde_json::to_vec(&creds).expect("json")).expect("write tokens");
    }
    let creds: Arc<Vec<(String, String)>> = Arc::new(
        creds
            .iter()
            .map(|a| (a.id.clone(), a.token.clone()))
            .collect(),
    );
    if reuse {
        eprintln!("  reusing the seeded database in --data-dir");
    } else {
        eprintln!("  seeding {messages} messages …");
        let seed = seed_messages(server.addr.to_string(), creds.clone());
        let (took, failed) = http_count(server.addr, 64, messages, StatusCode::CREATED, seed).await;
        eprintln!("  seeded in {:.1} s ({failed} failed)", took.as_secs_f64());
    }
    server.settle().await;
    (server, creds)
}

/// Request `i` of the seeding: from agent `i mod n` to another, never itself, spread
/// evenly; types and priorities rotate.
fn seed_messages(host: String, agents: Arc<Vec<(String, String)>>) -> MakeRequest {
    let types = ["information", "request", "response", "coordination"];
    let priorities = ["low", "normal", "high", "urgent"];
    let n = agents.len();
    Arc::new(move |_: usize, i: u64| {
        let from = (i % n as u64) as usize;
        let to = (from + 1 + ((i / n as u64) % (n as u64 - 1)) as usize) % n;
        let (id, token) = &agents[from];
        let body = format!(
            r#"{{"sender_agent_id":"{id}","recipient_agent_ids":["{}"],"message_type":"{}","priority":"{}","content":{{"text":"seed message {i}"}}}}"#,
            agents[to].0,
            types[(i % 4) as usize],
            priorities[((i / 4) % 4) as usize],
        );
        post(&host, "/v1/messages", token, body)
    })
}

/// Messages stored before `send_at_scale` measures.
const AT_SCALE: u64 = 10_000_000;

/// SEND_MESSAGE throughput on an empty database and on one holding [`AT_SCALE`] messages
/// (1,000 agents, seeded through SEND_MESSAGE; keep it with `--data-dir`, seeding takes
/// minutes), the same agents and requests, in alternating slices against the two servers
/// running side by side; target: the large one ≥ 80 % of the empty one.
async fn send_at_scale(opts: Opts) -> Vec<Row> {
    const AGENTS: usize = 1000;
    let (large, agents) = seeded_store(&opts, "send_at_scale", AGENTS, AT_SCALE).await;
    let empty = ServerProcess::start(&[]);
    let fresh = Setup::new(&empty).team("big", "a", AGENTS, &[]).await.1;
    let fresh: Vec<(String, String)> = fresh.into_iter().map(|a| (a.id, a.token)).collect();
    let sides = [
        Side {
            addr: empty.addr,
            expect: StatusCode::CREATED,
            make: sends_to_first(&empty, fresh),
        },
        Side {
            addr: large.addr,
            expect: StatusCode::CREATED,
            make: sends_to_first(&large, agents.to_vec()),
        },
    ];
    let [small_total, large_total] = interleaved(&opts, SLICES, &sides).await;
    let ratio = 100.0 * large_total.per_second() / small_total.per_second();
    let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
    vec![
        Row::from_load(
            "send_at_scale",
            format!("{} conns, empty database", opts.connections),
            small_total,
            empty.rss_kib(),
            format!("database {:.0} MiB", mib(empty.database_bytes())),
        ),
        Row::from_load(
            "send_at_scale",
            format!("{} conns, {AT_SCALE} messages stored", opts.connections),
            large_total,
            large.rss_kib(),
            format!(
                "{ratio:.0}% of the empty database's rate (target ≥ 80%); database {:.0} MiB",
                mib(large.database_bytes())
            ),
        ),
    ]
}

/// BROADCAST_UPDATE to a 100-agent team (99 recipients each); target ≥ 2,000/s.
async fn broadcast(opts: Opts) -> Vec<Row> {
    let server = ServerProcess::start(&[]);
    let setup = Setup::new(&server);
    let (_, agents) = setup.team("hundred", "m", 100, &[]).await;
    let agents: Vec<(String, String)> = agents
        .iter()
        .map(|a| (a.id.clone(), a.token.clone()))
        .collect();
    let host = server.addr.to_string();
    let make = Arc::new(move |conn: usize, i: u64| {
        let (id, token) = &agents[(conn + i as usize * 64) % agents.len()];
        let body = format!(
            r#"{{"sender_agent_id":"{id}","update_type":"progress","urgency":"info","content":{{"summary":"step {i} done","details":"all good"}}}}"#
        );
        post(&host, "/v1/broadcasts", token, body)
    });
    let result = http_load(
        server.addr,
        opts.connections,
        opts.warmup(),
        opts.duration(),
        StatusCode::CREATED,
        make,
    )
    .await;
    vec![Row::from_load(
        "broadcast",
        format!("{} conns, 100-agent team", opts.connections),
        result,
        server.rss_kib(),
        "99 inbox entries each; target ≥ 2,000/s".to_owned(),
    )]
}
