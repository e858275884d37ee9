//! A consistency checker for several nodes, in the spirit of Jepsen (issue 42): client
//! workers run random operations against three node processes on one PostgreSQL
//! database and record a history — each operation with its real-time invocation and
//! completion and what it was answered — while a fault schedule kills a node (`kill -9`,
//! then restarts it), cuts every node's `LISTEN` connection, pauses a node (SIGSTOP
//! past the heartbeat expiry, then SIGCONT) and, in a long run given
//! `CHECKER_PG_RESTART`, restarts PostgreSQL (never in `cargo test`: it would cut every
//! test running beside this one; `nodes::journeys::postgresql_restarts_under_two_nodes`
//! covers it there, alone).
//! A checker then reads the history:
//!
//! * **no false "does not exist"**: a read that began after a write's answer sees it — a
//!   sent message, a broadcast, a publish or a response read back by id through another
//!   node, a read mark set through one node
//!   seen through another, a submitted task finished by its assignee through another node, a registered agent's token used
//!   through another node, a registered agent sent to;
//! * **no stale "yes"**: a removed agent's token is refused through every node from the
//!   removal's answer on;
//! * **nothing acknowledged lost, one order everywhere**: after the faults, every
//!   acknowledged message is in its recipient's inbox read through every node, with seqs
//!   `1..=n`, gap-free and the same on every node;
//! * **callbacks once each** (`callbacks.rs`): one delivery id per callback however often
//!   it was sent, and every acknowledged result's callback delivered in the end;
//! * **live connections exactly once per cursor** (`listen.rs`): a WebSocket listener per
//!   agent, moving between nodes from its cursor, gets each entry after the cursor once
//!   and in order on every connection, and reaches the newest entry in the end.
//!
//! A request that gets no answer (a dead or paused node, a timeout) or `503` is
//! indeterminate and proves nothing either way. `CHECKER_SECONDS` (default 24) sets the
//! length of the run; the fault schedule repeats every 24 s. The long run of
//! `docs/benchmarks.md` is `cargo bench --bench load -- nodes_checker --minutes 10`, which
//! runs this test with `CHECKER_SECONDS` and `CHECKER_PG_RESTART` set.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use reqwest::Method;
use serde_json::json;

use crate::process::{Process, call};
use crate::support::ADMIN;

mod callbacks;
mod checks;
mod history;
mod listen;
mod marks;
mod writes;

use checks::{check_history, check_inboxes};
use history::{Event, Req, What};

const NODES: usize = 3;
const WORKERS: usize = 4;

/// The nodes as the workers reach them: a node restarted gets a new address.
struct Cluster {
    bases: RwLock<Vec<String>>,
    http: reqwest::Client,
    history: Mutex<Vec<Event>>,
    /// The faults as they were done, for a violation's report.
    faults: Mutex<Vec<(Instant, String)>>,
    start: Instant,
    /// The callback receiver's URL.
    hook: String,
}

impl Cluster {
    fn fault(&self, what: String) {
        self.faults
            .lock()
            .expect("faults")
            .push((Instant::now(), what));
    }

    /// Seconds since the start, for reports.
    fn at(&self, t: Instant) -> f64 {
        t.saturating_duration_since(self.start).as_secs_f64()
    }

    /// Everything the history holds about `agent`, and the faults, in time.
    fn story(&self, history: &[Event], agent: &str) -> String {
        let mut lines: Vec<(Instant, String)> = self.faults.lock().expect("faults").clone();
        for e in history {
            let named = match &e.what {
                What::Register { agent: a }
                | What::UseToken { agent: a }
                | What::Remove { agent: a } => a == agent,
                _ => false,
            };
            if named {
                lines.push((
                    e.invoked,
                    format!(
                        "{:?} on node {} → {:?} (answered at {:.3})",
                        e.what,
                        e.node,
                        e.status,
                        self.at(e.completed)
                    ),
                ));
            }
        }
        lines.sort_by_key(|(t, _)| *t);
        let mine: Vec<Instant> = lines
            .iter()
            .filter(|(_, l)| l.contains(agent))
            .map(|(t, _)| *t)
            .collect();
        if let (Some(first), Some(last)) = (mine.first(), mine.last()) {
            let (from, to) = (
                *first - Duration::from_secs(15),
                *last + Duration::from_secs(5),
            );
            lines.retain(|(t, _)| *t >= from && *t <= to);
        }
        lines
            .iter()
            .map(|(t, l)| format!("  {:.3} {l}", self.at(*t)))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn three_nodes_under_faults_keep_every_promise() {
    let Some(db) = crate::pg::database("checker").await else {
        return;
    };
    let seconds: u64 = std::env::var("CHECKER_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(24);
    let url = PathBuf::from(&db.url);
    let mut nodes: Vec<Process> = (0..NODES)
        .map(|i| Process::start_with(&url, &node_flags(i)))
        .collect();
    let http = reqwest::Client::new();
    let (key, tokens) = team(&http, &nodes[0]).await;
    let receiver = crate::tasks::Receiver::default();
    let cluster = Arc::new(Cluster {
        bases: RwLock::new(nodes.iter().map(|n| n.base.clone()).collect()),
        http: http.clone(),
        history: Mutex::default(),
        faults: Mutex::default(),
        start: Instant::now(),
        hook: receiver.start().await,
    });
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let listeners = listen::Listeners::spawn(&cluster, &tokens);
    let workers: Vec<_> = (0..WORKERS)
        .map(|w| {
            let (cluster, key, tokens) = (cluster.clone(), key.clone(), tokens.clone());
            tokio::spawn(async move { worker(w, &cluster, &key, &tokens, deadline).await })
        })
        .collect();
    let mut faults = 0;
    while Instant::now() < deadline {
        faults += fault_round(&url, &mut nodes, &cluster, deadline).await;
    }
    for w in workers {
        w.await.expect("a worker");
    }
    let history = cluster.history.lock().expect("history").clone();
    let mut violations = check_history(&history);
    for v in violations.clone() {
        if let Some(agent) = v.split('"').nth(1) {
            violations.push(cluster.story(&history, agent));
        }
    }
    violations.extend(check_inboxes(&http, &nodes, &history, &tokens).await);
    let (wrong, connections, pushed) = listeners.finish(&http, &nodes[0], &tokens).await;
    violations.extend(wrong);
    callbacks::settle(&receiver, &history).await;
    let (wrong, callbacks) = callbacks::check_callbacks(&receiver, &history);
    violations.extend(wrong);
    let answered = history.iter().filter(|e| e.status.is_some()).count();
    let acknowledged = |what: &str| {
        let kind =
            |e: &&Event| matches!(&e.what, What::Write { kind, id: Some(_) } if *kind == what);
        history.iter().filter(kind).count()
    };
    eprintln!(
        "checker: {} operations ({answered} answered; {} broadcasts, {} publishes, {} \
         responses), {faults} faults, {connections} live connections handed out {pushed} \
         entries, {callbacks} callbacks, {} violations",
        history.len(),
        acknowledged("broadcast"),
        acknowledged("publish"),
        acknowledged("respond"),
        violations.len()
    );
    assert!(answered > 50, "the workers ran: {answered} answered");
    assert!(violations.is_empty(), "{}", violations.join("\n"));
    for node in nodes {
        node.kill();
    }
}

/// Team `chk` with one agent per worker: the team key and the workers' tokens.
async fn team(http: &reqwest::Client, node: &Process) -> (String, Vec<(String, String)>) {
    let body = json!({"name": "Checker", "team_id": "chk"});
    let (status, team) = call(http, node, Method::POST, "/v1/teams", ADMIN, Some(body)).await;
    assert_eq!(status, 201, "{team}");
    let key = team["team_key"].as_str().expect("key").to_owned();
    let mut tokens = Vec::new();
    for w in 0..WORKERS {
        let id = format!("w{w}");
        let body = json!({"agent_id": id, "role": "worker", "capabilities": []});
        let path = "/v1/teams/chk/agents";
        let (status, agent) = call(http, node, Method::POST, path, &key, Some(body)).await;
        assert_eq!(status, 201, "{agent}");
        tokens.push((id, agent["token"].as_str().expect("token").to_owned()));
    }
    (key, tokens)
}

/// One fault round of at most 24 s: kill a node and restart it, then pause another past
/// the heartbeat expiry; the count of faults.
async fn fault_round(
    url: &std::path::Path,
    nodes: &mut [Process],
    cluster: &Cluster,
    deadline: Instant,
) -> usize {
    tokio::time::sleep(Duration::from_secs(2)).await;
    let victim = 2;
    cluster.fault(format!("kill -9 node {victim}"));
    nodes[victim].child.kill().expect("SIGKILL");
    let _ = nodes[victim].child.wait();
    let at = url.to_owned();
    let restarted =
        tokio::task::spawn_blocking(move || Process::start_with(&at, &node_flags(victim)))
            .await
            .expect("the node restarts");
    nodes[victim] = restarted;
    cluster.fault(format!("node {victim} restarted"));
    cluster.bases.write().expect("bases")[victim] = nodes[victim].base.clone();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let cut = cut_listening(url).await;
    cluster.fault("LISTEN cut".into());
    tokio::time::sleep(Duration::from_secs(1)).await;
    if Instant::now() + Duration::from_secs(14) > deadline {
        return 1 + cut;
    }
    cluster.fault("SIGSTOP node 1".into());
    nodes[1].signal("-STOP");
    tokio::time::sleep(Duration::from_secs(11)).await;
    nodes[1].signal("-CONT");
    cluster.fault("SIGCONT node 1".into());
    tokio::time::sleep(Duration::from_secs(2)).await;
    2 + cut + restart_postgresql().await
}

/// In a long run only (`CHECKER_PG_RESTART` names the command, e.g. `pg_ctlcluster 15
/// main restart`; never in `cargo test`, where it would cut every other test): restarts
/// PostgreSQL under the nodes. 1 if it did.
async fn restart_postgresql() -> usize {
    let Ok(command) = std::env::var("CHECKER_PG_RESTART") else {
        return 0;
    };
    let done = tokio::process::Command::new("sh")
        .args(["-c", &command])
        .status()
        .await
        .is_ok_and(|s| s.success());
    tokio::time::sleep(Duration::from_secs(3)).await;
    usize::from(done)
}

/// Cuts every node's `LISTEN` connection (as a network blip or an administrator would):
/// each reconnects and catches up from storage. 1 if any was cut.
async fn cut_listening(url: &std::path::Path) -> usize {
    use sqlx::Connection;
    let Ok(mut conn) = sqlx::PgConnection::connect(&url.to_string_lossy()).await else {
        return 0;
    };
    let cut: Vec<bool> = sqlx::query_scalar(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
         WHERE datname = current_database() AND query LIKE 'LISTEN%'",
    )
    .fetch_all(&mut conn)
    .await
    .unwrap_or_default();
    usize::from(cut.iter().any(|c| *c))
}

/// One worker: random operations through random nodes until the deadline, each write
/// followed by a read through another node.
async fn worker(
    w: usize,
    cluster: &Cluster,
    key: &str,
    tokens: &[(String, String)],
    deadline: Instant,
) {
    let mut rng = StdRng::seed_from_u64(w as u64);
    let me = Me {
        w,
        token: &tokens[w].1,
        id: &tokens[w].0,
        key,
    };
    // Agents this worker registered and has not removed: (id, token).
    let mut extras: Vec<(String, String)> = Vec::new();
    let mut n = 0;
    while Instant::now() < deadline {
        n += 1;
        let nodes = two_nodes(&mut rng);
        match rng.random_range(0..14) {
            0..=5 => {
                let to = if !extras.is_empty() && rng.random_bool(0.3) {
                    extras[rng.random_range(0..extras.len())].0.clone()
                } else {
                    tokens[(w + 1 + rng.random_range(0..WORKERS - 1)) % WORKERS]
                        .0
                        .clone()
                };
                let recipient = tokens
                    .iter()
                    .chain(&extras)
                    .find(|(id, _)| *id == to)
                    .cloned();
                if let Some(id) = send_then_read(cluster, &me, nodes, to, n).await
                    && let Some((agent, token)) = recipient
                {
                    marks::mark_then_read(cluster, w, nodes, (&agent, &token), &id).await;
                }
            }
            12..=13 => {
                let to = &tokens[(w + 1 + rng.random_range(0..WORKERS - 1)) % WORKERS];
                let which = rng.random_range(0..3);
                writes::write_then_read(cluster, &me, nodes, (&to.0, &to.1), (n, which)).await;
            }
            10..=11 => {
                let to = &tokens[(w + 1 + rng.random_range(0..WORKERS - 1)) % WORKERS];
                let hook = &cluster.hook;
                callbacks::task_then_finish(cluster, &me, nodes, (&to.0, &to.1), n, hook).await;
            }
            6..=7 => {
                if let Some(extra) = register_then_use(cluster, &me, nodes, n).await {
                    extras.push(extra);
                }
            }
            _ if !extras.is_empty() => {
                let extra = extras.swap_remove(rng.random_range(0..extras.len()));
                remove_then_use(cluster, &me, nodes, extra).await;
            }
            _ => {}
        }
    }
}

/// Who a worker is.
struct Me<'a> {
    w: usize,
    token: &'a str,
    id: &'a str,
    key: &'a str,
}

/// Sends through one node; reads the message back by id through the other. The id of
/// an acknowledged message.
async fn send_then_read(
    cluster: &Cluster,
    me: &Me<'_>,
    (x, y): (usize, usize),
    to: String,
    n: u32,
) -> Option<String> {
    let body = json!({"sender_agent_id": me.id, "recipient_agent_ids": [to],
                      "message_type": "information", "content": {"text": format!("{}/{n}", me.w)}});
    let req = Req {
        method: Method::POST,
        path: "/v1/messages".into(),
        token: me.token,
        body: Some(body),
    };
    let (status, answer) = cluster.op(me.w, x, What::Send { to, id: None }, req).await;
    if status == Some(201)
        && let Some(id) = answer["message_id"].as_str()
    {
        read_back(cluster, me, y, id).await;
        return Some(id.to_owned());
    }
    None
}

/// Reads message `id` by id as the worker, through `node`.
async fn read_back(cluster: &Cluster, me: &Me<'_>, node: usize, id: &str) {
    let req = Req {
        method: Method::GET,
        path: format!("/v1/messages/{id}"),
        token: me.token,
        body: None,
    };
    let what = What::ReadMessage { id: id.to_owned() };
    cluster.op(me.w, node, what, req).await;
}

/// Registers an agent through one node; uses its token through the other.
async fn register_then_use(
    cluster: &Cluster,
    me: &Me<'_>,
    (x, y): (usize, usize),
    n: u32,
) -> Option<(String, String)> {
    let agent = format!("x{}-{n}", me.w);
    let body = json!({"agent_id": agent, "role": "extra", "capabilities": []});
    let req = Req {
        method: Method::POST,
        path: "/v1/teams/chk/agents".into(),
        token: me.key,
        body: Some(body),
    };
    let (status, answer) = cluster
        .op(
            me.w,
            x,
            What::Register {
                agent: agent.clone(),
            },
            req,
        )
        .await;
    let fresh = answer["token"].as_str().filter(|_| status == Some(201))?;
    let req = Req {
        method: Method::GET,
        path: "/v1/whoami".into(),
        token: fresh,
        body: None,
    };
    cluster
        .op(
            me.w,
            y,
            What::UseToken {
                agent: agent.clone(),
            },
            req,
        )
        .await;
    Some((agent, fresh.to_owned()))
}

/// Removes an agent through one node; uses its token through the other. An agent whose
/// removal was not answered is never used or sent to again.
async fn remove_then_use(
    cluster: &Cluster,
    me: &Me<'_>,
    (x, y): (usize, usize),
    (agent, gone): (String, String),
) {
    let req = Req {
        method: Method::DELETE,
        path: format!("/v1/teams/chk/agents/{agent}"),
        token: me.key,
        body: None,
    };
    let (status, _) = cluster
        .op(
            me.w,
            x,
            What::Remove {
                agent: agent.clone(),
            },
            req,
        )
        .await;
    if status == Some(200) {
        let req = Req {
            method: Method::GET,
            path: "/v1/whoami".into(),
            token: &gone,
            body: None,
        };
        cluster.op(me.w, y, What::UseToken { agent }, req).await;
    }
}

/// Two different nodes, at random.
/// A node's flags: its id, and callbacks to the test's loopback receiver with a short
/// claim (`--callback-timeout` + 5 s), so a dead node's callback is taken over in time.
fn node_flags(i: usize) -> [&'static str; 5] {
    const IDS: [&str; NODES] = ["n0", "n1", "n2"];
    let id = IDS[i];
    [
        "--node-id",
        id,
        "--allow-private-callbacks",
        "--callback-timeout",
        "3",
    ]
}

fn two_nodes(rng: &mut StdRng) -> (usize, usize) {
    let x = rng.random_range(0..NODES);
    (x, (x + 1 + rng.random_range(0..NODES - 1)) % NODES)
}
