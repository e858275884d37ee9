//! One hot inbox: GET_MESSAGES on an agent holding 1,000,000 entries (98 % of them read),
//! for every documented filter and both sort orders, at 1 and 8 clients, while another
//! agent keeps sending to it. The target is p99 ≤ 10 ms whatever the inbox size.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use hyper::StatusCode;
use sqlx::Connection;

use crate::Opts;
use crate::harness::{AgentCreds, MakeRequest, Row, ServerProcess, Setup, http_count, http_load};
use crate::scenarios::{get, post};

const ENTRIES: u64 = 1_000_000;
const SENDERS: usize = 16;

/// The queries measured, each one filter or sort order.
const QUERIES: &[&str] = &[
    "limit=50",
    "limit=50&sort_order=oldest_first",
    "limit=50&unread_only=true",
    "limit=50&unread_only=true&sort_order=oldest_first",
    "limit=50&message_types=request",
    "limit=50&priority=urgent",
    "limit=50&senders=s3",
    "limit=50&kinds=broadcast",
    "limit=50&thread_id=t-7",
    "limit=50&since_timestamp={since}",
    "limit=50&news_only=true",
    "limit=50&cause_by=review*",
];

pub async fn hot_inbox(opts: Opts) -> Vec<Row> {
    let (server, hot, senders) = seeded(&opts).await;
    let host = server.addr.to_string();
    let writing = Arc::new(AtomicBool::new(true));
    let written = Arc::new(AtomicU64::new(0));
    let writer = tokio::spawn(keep_writing(
        server.base(),
        senders[0].clone(),
        hot.id.clone(),
        writing.clone(),
        written.clone(),
    ));
    let since = switchboard_types::time::Timestamp::now().to_string();
    let mut rows = Vec::new();
    for query in QUERIES {
        let query = query.replace("{since}", &since);
        for connections in [1, 8] {
            let path = format!("/v1/messages?{query}");
            let (token, host) = (hot.token.clone(), host.clone());
            let make: MakeRequest = Arc::new(move |_, _| get(&host, &path, Some(&token)));
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
                "hot_inbox",
                format!("{connections} conns, {}", query.replace("limit=50&", "")),
                result,
                server.rss_kib(),
                "1M entries in one inbox, a sender writing to it".into(),
            ));
        }
    }
    writing.store(false, Ordering::Relaxed);
    let _ = writer.await;
    eprintln!(
        "  {} messages sent to the hot inbox while reading",
        written.load(Ordering::Relaxed)
    );
    rows
}

/// The server on a database where agent `hot` holds [`ENTRIES`] entries from
/// [`SENDERS`] senders (types, priorities and kinds rotating, one in ten in a thread of
/// about 100), all read but one in fifty; kept in `--data-dir` and reused.
async fn seeded(opts: &Opts) -> (ServerProcess, AgentCreds, Vec<AgentCreds>) {
    let kept = opts
        .data_dir
        .as_ref()
        .map(|d| (d.join("hot_inbox.db"), d.join("hot_inbox.tokens.json")));
    let reuse = kept
        .as_ref()
        .is_some_and(|(db, t)| db.exists() && t.exists());
    let (server, db) = match &kept {
        Some((db, _)) => {
            std::fs::create_dir_all(db.parent().expect("dir")).expect("data dir");
            (ServerProcess::start_on(db, &[]), Some(db.clone()))
        }
        None => (ServerProcess::start(&[]), None),
    };
    let mut agents: Vec<AgentCreds> = match &kept {
        Some((_, tokens)) if reuse => {
            serde_json::from_slice(&std::fs::read(tokens).expect("tokens")).expect("json")
        }
        _ => {
            Setup::new(&server)
                .team("hot", "s", SENDERS + 1, &[])
                .await
                .1
        }
    };
    if let Some((_, tokens)) = &kept {
        std::fs::write(tokens, serde_json::to_vec(&agents).expect("json")).expect("tokens");
    }
    let hot = agents.pop().expect("the hot agent");
    if reuse {
        eprintln!("  reusing the seeded hot inbox in --data-dir");
    } else {
        eprintln!("  seeding {ENTRIES} entries into one inbox …");
        let seed = seed(server.addr.to_string(), hot.id.clone(), agents.clone());
        let (took, failed) = http_count(server.addr, 64, ENTRIES, StatusCode::CREATED, seed).await;
        eprintln!("  seeded in {:.1} s ({failed} failed)", took.as_secs_f64());
        if let Some(db) = &db {
            mark_most_read(db, &hot.id).await;
        }
    }
    server.settle().await;
    (server, hot, agents)
}

/// Request `i` of the seeding: sender `i mod 16` to the hot agent; every 50th is a
/// broadcast instead (which reaches every member).
fn seed(host: String, hot: String, senders: Vec<AgentCreds>) -> MakeRequest {
    let types = ["information", "request", "response", "coordination"];
    let priorities = ["low", "normal", "high", "urgent"];
    Arc::new(move |_, i| {
        let from = &senders[(i % SENDERS as u64) as usize];
        if i % 50 == 49 {
            let body = format!(
                r#"{{"sender_agent_id":"{}","update_type":"progress","urgency":"info","content":{{"summary":"b{i}"}}}}"#,
                from.id
            );
            return post(&host, "/v1/broadcasts", &from.token, body);
        }
        let thread = if i % 10 == 0 {
            format!(r#","thread_id":"t-{}""#, (i / 10) % 1000)
        } else {
            String::new()
        };
        let body = format!(
            r#"{{"sender_agent_id":"{}","recipient_agent_ids":["{hot}"],"message_type":"{}","priority":"{}","content":{{"text":"hot {i}"}}{thread}}}"#,
            from.id,
            types[(i % 4) as usize],
            priorities[((i / 4) % 4) as usize],
        );
        post(&host, "/v1/messages", &from.token, body)
    })
}

/// Marks all but one in fifty of the hot inbox read, straight in the database (through
/// the API it would take a million ids): an agent that keeps up leaves little unread.
async fn mark_most_read(db: &std::path::Path, hot: &str) {
    let url = format!("sqlite://{}", db.display());
    let mut conn = sqlx::SqliteConnection::connect(&url).await.expect("open");
    sqlx::query("PRAGMA busy_timeout = 30000")
        .execute(&mut conn)
        .await
        .expect("pragma");
    let marked = sqlx::query(
        "UPDATE inbox SET read_at = created_at
         WHERE agent_pk = (SELECT pk FROM agents WHERE agent_id = ?) AND seq % 50 <> 0",
    )
    .bind(hot)
    .execute(&mut conn)
    .await
    .expect("mark read");
    eprintln!("  marked {} entries read", marked.rows_affected());
}

/// One sender writing to the hot inbox, one message after another, until told to stop.
async fn keep_writing(
    base: String,
    from: AgentCreds,
    to: String,
    writing: Arc<AtomicBool>,
    written: Arc<AtomicU64>,
) {
    let http = reqwest::Client::new();
    // Types and priorities rotate like the seeded ones, so that a filtered page finds
    // its matches among the newest entries and returns a full page, as it would for a
    // real agent (with one type only, a type filter found nothing in its window and
    // answered an empty page, cheaper than any real one).
    let types = ["information", "request", "response", "coordination"];
    let priorities = ["low", "normal", "high", "urgent"];
    let mut i = 0usize;
    while writing.load(Ordering::Relaxed) {
        let body = serde_json::json!({
            "sender_agent_id": from.id, "recipient_agent_ids": [to],
            "message_type": types[i % 4], "priority": priorities[(i / 4) % 4],
            "content": {"text": "while reading"}
        });
        i += 1;
        let sent = http
            .post(format!("{base}/v1/messages"))
            .bearer_auth(&from.token)
            .json(&body)
            .send()
            .await;
        match sent {
            Ok(res) if res.status().is_success() => {
                written.fetch_add(1, Ordering::Relaxed);
            }
            _ => tokio::time::sleep(Duration::from_millis(10)).await,
        }
    }
}
