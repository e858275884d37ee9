//! Search (issue 66): a search's latency at 8 connections over a team that said
//! `BENCH_SEARCH_MESSAGES` messages (default 1,000,000), and what the index costs a send:
//! SEND_MESSAGE's rate on that database with the index's trigger, then again after the
//! trigger is dropped (the same binary, the same data: only the index differs).

use std::sync::Arc;

use hyper::StatusCode;
use rand::{Rng, SeedableRng};

use crate::Opts;
use crate::harness::{MakeRequest, Row, ServerProcess, Setup, http_count, http_load};
use crate::scenarios::{get, post};

/// Words a message is made of; a message is eight of them, the first few far more often
/// (a message's words are drawn by `word`), so some queries match a tenth of the corpus and
/// most match a few hundred messages.
const VOCABULARY: usize = 20_000;
const WORDS_PER_MESSAGE: usize = 8;
const SEARCHERS: usize = 8;
const SENDERS: usize = 16;

/// A word by rank: `w<rank>`, ranks drawn roughly by Zipf's law (the square of a uniform
/// draw puts most weight on the first ranks).
fn word(rng: &mut impl Rng) -> String {
    let u: f64 = rng.random();
    format!("w{}", (u * u * VOCABULARY as f64) as usize)
}

fn text(rng: &mut impl Rng) -> String {
    (0..WORDS_PER_MESSAGE)
        .map(|_| word(rng))
        .collect::<Vec<_>>()
        .join(" ")
}

pub async fn search(opts: Opts) -> Vec<Row> {
    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join("search.db");
    let (mut rows, server, agents) = seeded_search(&opts, &db, "SQLite").await;
    rows.extend(send_cost(&opts, server, &db, agents, None).await);
    rows
}

/// The same on PostgreSQL (`SWITCHBOARD_BENCH_POSTGRES`), its index a generated column
/// (target p99 ≤ 100 ms); without it: the column dropped.
pub async fn search_postgres(opts: Opts) -> Vec<Row> {
    let Some((url, admin)) = crate::postgres::database().await else {
        return Vec::new();
    };
    let db = std::path::PathBuf::from(&url);
    let (mut rows, server, agents) = seeded_search(&opts, &db, "PostgreSQL").await;
    rows.extend(send_cost(&opts, server, &db, agents, Some(&url)).await);
    crate::postgres::drop_database(&admin, &url).await;
    rows
}

/// A server on `db` whose team said `BENCH_SEARCH_MESSAGES` messages, and the searches'
/// row.
async fn seeded_search(
    opts: &Opts,
    db: &std::path::Path,
    engine: &str,
) -> (Vec<Row>, ServerProcess, Vec<(String, String)>) {
    let total: u64 = std::env::var("BENCH_SEARCH_MESSAGES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(1_000_000);
    let server = ServerProcess::start_on(db, &[]);
    let setup = Setup::new(&server);
    let (key, agents) = setup.team("search", "s", SENDERS, &[]).await;
    let agents: Vec<(String, String)> = agents.into_iter().map(|a| (a.id, a.token)).collect();
    let (took, failed) = http_count(
        server.addr,
        64,
        total,
        StatusCode::CREATED,
        sends(&server, agents.clone(), 7),
    )
    .await;
    eprintln!("search on {engine}: {total} messages seeded in {took:?} ({failed} failed)");
    let host = server.addr.to_string();
    let searches: MakeRequest = Arc::new(move |conn: usize, n: u64| {
        let mut rng = rand::rngs::StdRng::seed_from_u64(conn as u64 * 1_000_003 + n);
        // One word in two, two words in the others (a narrower question).
        let q = if rng.random_bool(0.5) {
            word(&mut rng)
        } else {
            format!("{}%20{}", word(&mut rng), word(&mut rng))
        };
        get(&host, &format!("/v1/search?q={q}&limit=20"), Some(&key))
    });
    let result = http_load(
        server.addr,
        SEARCHERS,
        opts.warmup(),
        opts.duration(),
        StatusCode::OK,
        searches,
    )
    .await;
    let row = Row::from_load(
        "search",
        format!("{engine}, {SEARCHERS} conns, team key, {total} messages"),
        result,
        server.rss_kib(),
        "best 20 by relevance, one or two words (target p99 ≤ 50 ms on SQLite, 100 on PostgreSQL)"
            .into(),
    );
    (vec![row], server, agents)
}

/// SEND_MESSAGE's rate on the seeded database with the index, then without it (SQLite:
/// its trigger dropped; PostgreSQL at `postgres`: its column).
async fn send_cost(
    opts: &Opts,
    server: ServerProcess,
    db: &std::path::Path,
    agents: Vec<(String, String)>,
    postgres: Option<&str>,
) -> Vec<Row> {
    let with = http_load(
        server.addr,
        opts.connections,
        opts.warmup(),
        opts.duration(),
        StatusCode::CREATED,
        sends(&server, agents.clone(), 11),
    )
    .await;
    drop(server);
    match postgres {
        None => {
            let conn = rusqlite::Connection::open(db).expect("the database");
            conn.execute_batch("DROP TRIGGER messages_fts_add")
                .expect("drop the index's trigger");
        }
        Some(url) => {
            use sqlx::{Connection, Executor};
            let mut conn = sqlx::PgConnection::connect(url).await.expect("connect");
            conn.execute("ALTER TABLE messages DROP COLUMN search")
                .await
                .expect("drop the index's column");
        }
    }
    let bare = ServerProcess::start_on(db, &[]);
    let without = http_load(
        bare.addr,
        opts.connections,
        opts.warmup(),
        opts.duration(),
        StatusCode::CREATED,
        sends(&bare, agents, 13),
    )
    .await;
    let ratio = 100.0 * with.per_second() / without.per_second().max(1.0);
    let note = format!(
        "with the index: {:.0}% of the rate without it ({:.0} req/s; target ≥ 85%)",
        ratio,
        without.per_second()
    );
    vec![
        Row::from_load(
            "search",
            format!("send_message with the index, {} conns", opts.connections),
            with,
            bare.rss_kib(),
            note,
        ),
        Row::from_load(
            "search",
            format!("send_message without it, {} conns", opts.connections),
            without,
            bare.rss_kib(),
            "the same database, the index dropped".into(),
        ),
    ]
}

/// Sends of eight vocabulary words from agent `conn % n` to the next agent.
fn sends(server: &ServerProcess, agents: Vec<(String, String)>, seed: u64) -> MakeRequest {
    let host = server.addr.to_string();
    let agents = Arc::new(agents);
    Arc::new(move |conn: usize, n: u64| {
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed ^ (conn as u64) << 32 ^ n);
        let from = conn % agents.len();
        let to = (from + 1) % agents.len();
        let body = format!(
            r#"{{"sender_agent_id":"{}","recipient_agent_ids":["{}"],"message_type":"information","content":{{"text":"{}"}}}}"#,
            agents[from].0,
            agents[to].0,
            text(&mut rng)
        );
        post(&host, "/v1/messages", &agents[from].1, body)
    })
}
