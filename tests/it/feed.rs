//! The core's one live feed, driven directly: commits race subscriptions, and every feed
//! hands out each entry after its cursor exactly once, in sequence order, whatever it is
//! woken by (a live connection's pushes, with an outbox small enough to overflow, or a
//! watch), whatever its page size, and across a drop and a resume from its cursor.
//!
//! A property test over seeded schedules: each seed draws the senders, the number of
//! followers, when each starts, from which cursor, how it is woken, how large its pages
//! are, how slowly it reads and whether it resumes half way. A failure names its seed.

use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::json;
use switchboard::core::feed::{Feed, FeedItem, Form, Ready};
use switchboard::core::retention::RetentionSettings;
use switchboard::core::{Caller, Core, CoreSettings};
use switchboard::hub::HubSettings;
use switchboard::store::{Store, StoreOptions};
use switchboard_types::routing::Via;
use switchboard_types::{AgentOp, ErrorCode, MessageOp, Operation, Reply, TeamOp};

use crate::support::ADMIN;

const SEEDS: u64 = 12;
const SENDERS: usize = 3;
const PER_SENDER: usize = 60;

/// A core on a fresh database with one team: a recipient and `SENDERS` senders.
async fn team(dir: &std::path::Path) -> (Core, Caller, Vec<Caller>) {
    let store = Store::open(&dir.join("feed.db"), StoreOptions::default())
        .await
        .expect("store");
    let settings = CoreSettings {
        admin_token: Some(ADMIN.to_owned()),
        rate_limit: None,
        // An outbox this small overflows under the senders: the lag path runs too.
        hub: HubSettings {
            outbox: 4,
            max_per_agent: 64,
            max_total: 256,
        },
        tasks: Default::default(),
        retention: RetentionSettings::default(),
        node_id: switchboard::core::node::NodeId::generate(),
        budgets: Default::default(),
        spans: None,
    };
    let (core, _) = Core::open(store, settings).await.expect("core");
    let created = core
        .dispatch(
            &Caller::Admin,
            Operation::Teams(TeamOp::CreateTeam(
                serde_json::from_value(json!({"name": "feed", "team_id": "feed"})).expect("team"),
            )),
        )
        .await
        .expect("team created");
    let Reply::TeamCreated(created) = created else {
        panic!("not a team")
    };
    let key = core
        .identity()
        .authenticate(&created.team_key)
        .await
        .expect("key");
    let mut agents = Vec::new();
    for name in std::iter::once("reader".to_owned()).chain((0..SENDERS).map(|i| format!("s{i}"))) {
        let reply = core
            .dispatch(
                &key,
                Operation::Agents(AgentOp::RegisterAgent {
                    team_id: "feed".to_owned().into(),
                    agent: serde_json::from_value(
                        json!({"agent_id": name, "role": "worker", "capabilities": []}),
                    )
                    .expect("agent"),
                }),
            )
            .await;
        let Ok(Reply::AgentRegistered(agent)) = reply else {
            panic!("not registered: {:?}", reply.err())
        };
        agents.push(
            core.identity()
                .authenticate(&agent.token)
                .await
                .expect("token"),
        );
    }
    let reader = agents.remove(0);
    (core, reader, agents)
}

/// How a follower is woken.
#[derive(Debug, Clone, Copy)]
enum Kind {
    /// A WebSocket connection's feed (frames).
    Socket,
    /// A STOMP connection's feed (views; entries routed to the WebSocket are skipped).
    Queue,
    /// A watch's feed (views, woken by commits).
    Watch,
}

/// One follower's plan.
#[derive(Debug, Clone, Copy)]
struct Plan {
    kind: Kind,
    start_after_ms: u64,
    page: i64,
    slow_every: usize,
    resume_at: Option<i64>,
}

async fn open(core: &Core, reader: Caller, kind: Kind, after: i64) -> Feed {
    match kind {
        Kind::Socket => {
            let conn = core
                .live()
                .connect(&reader.by(Via::Websocket))
                .expect("connect");
            core.live().feed_live(conn, after, Form::Frames)
        }
        Kind::Queue => {
            let conn = core
                .live()
                .connect(&reader.by(Via::Stomp))
                .expect("connect");
            core.live().feed_live(conn, after, Form::Views)
        }
        Kind::Watch => core
            .live()
            .feed_watch(&reader, Some(after))
            .await
            .expect("watch"),
    }
}

/// Follows the reader's inbox from a random cursor up to `total`; the seqs handed out.
async fn follow(
    core: Core,
    reader: Caller,
    plan: Plan,
    total: i64,
    rng_seed: u64,
) -> (i64, Vec<i64>) {
    let mut rng = StdRng::seed_from_u64(rng_seed);
    tokio::time::sleep(Duration::from_millis(plan.start_after_ms)).await;
    let newest = newest(&core, &reader).await;
    let start = rng.random_range(0..=newest);
    let mut feed = open(&core, reader, plan.kind, start).await;
    let mut seen = Vec::new();
    let mut resumed = false;
    let mut retries = 0;
    while feed.cursor() < total {
        // Generous: a stuck feed waits for ever; a slow box takes seconds, never a minute.
        match tokio::time::timeout(Duration::from_secs(60), feed.ready()).await {
            Ok(Ready::Entries) => {}
            Ok(Ready::Lagged) => feed.recover(),
            Ok(Ready::Closed) => panic!("{plan:?}: the hub dropped the connection"),
            Err(_) => panic!(
                "{plan:?}: stuck at {} of {total}, {} seen",
                feed.cursor(),
                seen.len()
            ),
        }
        let batch = match feed.next_batch(plan.page).await {
            Ok(batch) => batch,
            // Storage too busy to answer in time (a loaded CI box: the read pool's wait
            // is bounded): what a transport does — end the feed, resume from its cursor.
            Err(e) if e.code() == ErrorCode::Unavailable && retries < 5 => {
                retries += 1;
                eprintln!("{plan:?}: resumes after a busy read: {e}");
                let cursor = feed.cursor();
                drop(feed);
                feed = open(&core, reader, plan.kind, cursor).await;
                continue;
            }
            Err(e) => panic!("{plan:?}: a read failed at {}: {e}", feed.cursor()),
        };
        for entry in batch {
            check_item(plan.kind, &entry.item, entry.seq);
            seen.push(entry.seq);
        }
        if plan.slow_every > 0 && seen.len() % plan.slow_every == 0 {
            tokio::time::sleep(Duration::from_millis(3)).await;
        }
        if !resumed && plan.resume_at.is_some_and(|at| feed.cursor() >= at) {
            // A reconnect: a new feed from the cursor the old one reached.
            resumed = true;
            let cursor = feed.cursor();
            drop(feed);
            feed = open(&core, reader, plan.kind, cursor).await;
        }
    }
    (start, seen)
}

/// The entry is in the follower's form, and carries its own seq.
fn check_item(kind: Kind, item: &FeedItem, seq: i64) {
    match (kind, item) {
        (Kind::Socket, FeedItem::Frame(text)) => {
            let frame: serde_json::Value = serde_json::from_str(text).expect("frame json");
            assert_eq!(frame["seq"], seq, "{text}");
        }
        (Kind::Queue | Kind::Watch, FeedItem::View(view)) => {
            assert!(
                view.seq.is_none_or(|s| s == seq),
                "view of {seq}: {:?}",
                view.seq
            );
        }
        (Kind::Queue | Kind::Socket, FeedItem::Skipped) => {}
        (kind, _) => panic!("{kind:?}: an entry in the wrong form at {seq}"),
    }
}

async fn newest(core: &Core, reader: &Caller) -> i64 {
    let wait = core
        .live()
        .wait_for_inbox(reader, None, Some(1), Duration::ZERO, |_| {})
        .await
        .expect("newest");
    wait.next_after_seq
}

async fn send_one(core: &Core, sender: Caller, name: &str, text: &str, route: Option<&str>) {
    let message = serde_json::from_value(json!({
        "sender_agent_id": name,
        "recipient_agent_ids": ["reader"],
        "message_type": "information",
        "content": {"text": text},
        "route": route,
    }))
    .expect("message");
    let op = Operation::Messages(MessageOp::SendMessage {
        message,
        idempotency_key: None,
    });
    core.dispatch(&sender, op).await.expect("sent");
}

/// `PER_SENDER` messages to the reader; the sender back when done.
async fn send(core: Core, sender: Caller, name: String, seed: u64) -> (String, Caller) {
    let mut rng = StdRng::seed_from_u64(seed);
    for i in 0..PER_SENDER {
        // Some entries go to the WebSocket only: a STOMP follower skips them.
        let route = rng.random_bool(0.2).then_some("websocket");
        send_one(&core, sender, &name, &format!("{name} {i}"), route).await;
        if rng.random_bool(0.3) {
            tokio::time::sleep(Duration::from_millis(rng.random_range(0..3))).await;
        }
    }
    (name, sender)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_feed_hands_out_each_entry_once_in_order_while_commits_race_it() {
    for seed in 0..SEEDS {
        let dir = tempfile::tempdir().expect("dir");
        let (core, reader, senders) = team(dir.path()).await;
        let total = (SENDERS * PER_SENDER) as i64 + 1;
        let mut rng = StdRng::seed_from_u64(seed);
        let mut work = tokio::task::JoinSet::new();
        for (i, sender) in senders.into_iter().enumerate() {
            work.spawn(send(
                core.clone(),
                sender,
                format!("s{i}"),
                seed * 100 + i as u64,
            ));
        }
        let mut followers = tokio::task::JoinSet::new();
        for f in 0..rng.random_range(3..8) {
            let plan = Plan {
                kind: [Kind::Socket, Kind::Queue, Kind::Watch][rng.random_range(0..3)],
                start_after_ms: rng.random_range(0..60),
                page: [1, 3, 50, 1000][rng.random_range(0..4)],
                slow_every: [0, 1, 7][rng.random_range(0..3)],
                resume_at: rng.random_bool(0.4).then(|| rng.random_range(1..total)),
            };
            let run = follow(core.clone(), reader, plan, total, seed * 1000 + f);
            followers.spawn(async move { (plan, run.await) });
        }
        let senders = work.join_all().await;
        // The last entry goes to every transport: a follower that skips routed entries
        // learns of the ones before it when it comes.
        let (name, sender) = senders.into_iter().next().expect("a sender");
        send_one(&core, sender, &name, "the end", None).await;
        for (plan, (start, seen)) in followers.join_all().await {
            let expected: Vec<i64> = (start + 1..=total).collect();
            assert_eq!(
                seen, expected,
                "seed {seed}, {plan:?}: from {start}, each entry once and in order"
            );
        }
    }
}

/// The race behind a waiter that hangs: one commit lands while a fresh feed reads
/// storage for the first time. Run many times; each follower must get its entry at once
/// (a feed that listened only after reading would wait for a commit that never comes).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_during_the_first_read_is_never_missed() {
    let dir = tempfile::tempdir().expect("dir");
    let (core, reader, senders) = team(dir.path()).await;
    let sender = senders[0];
    for round in 0..300 {
        let cursor = newest(&core, &reader).await;
        let commit = tokio::spawn({
            let core = core.clone();
            async move { send_one(&core, sender, "s0", "now", None).await }
        });
        let mut feed = open(&core, reader, Kind::Watch, cursor).await;
        let mut got = Vec::new();
        while got.is_empty() {
            let woken = tokio::time::timeout(Duration::from_secs(2), feed.ready()).await;
            assert!(
                woken.is_ok(),
                "round {round}: the commit after {cursor} never woke the feed"
            );
            got = feed.next_batch(10).await.expect("batch");
        }
        assert_eq!(got.len(), 1, "round {round}");
        assert_eq!(got[0].seq, cursor + 1, "round {round}");
        commit.await.expect("sent");
    }
}

/// The race the property test above found on a loaded machine: a watch's feed reads the
/// next page ahead; a commit lands after that read and before the follower asks for the
/// page. The wake-up must be the one armed before the read ahead began — one armed when
/// the page is taken comes after the commit and waits for nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_after_a_page_read_ahead_wakes_the_feed() {
    let dir = tempfile::tempdir().expect("dir");
    let (core, reader, senders) = team(dir.path()).await;
    let sender = senders[0];
    let cursor = newest(&core, &reader).await;
    for text in ["one", "two"] {
        send_one(&core, sender, "s0", text, None).await;
    }
    let mut feed = open(&core, reader, Kind::Watch, cursor).await;
    assert_eq!(feed.ready().await, Ready::Entries);
    // A page of one: more follows, so the next page is read ahead now.
    let first = feed.next_batch(1).await.expect("first page");
    assert_eq!(
        first.iter().map(|e| e.seq).collect::<Vec<_>>(),
        [cursor + 1]
    );
    // Let the read ahead finish, then commit what it cannot have seen.
    tokio::time::sleep(Duration::from_millis(200)).await;
    send_one(&core, sender, "s0", "three", None).await;
    let mut seen = Vec::new();
    while seen.len() < 2 {
        let woken = tokio::time::timeout(Duration::from_secs(5), feed.ready()).await;
        assert!(
            woken.is_ok(),
            "the commit after the read ahead never woke the feed: {seen:?}"
        );
        seen.extend(
            feed.next_batch(1)
                .await
                .expect("page")
                .iter()
                .map(|e| e.seq),
        );
    }
    assert_eq!(seen, [cursor + 2, cursor + 3]);
}
