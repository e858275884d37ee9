//! The storage contract, tested at the store itself: the same stories run against both
//! engines, with no server and no HTTP in between, so a difference between SQLite and
//! PostgreSQL shows up as the store's, not hidden behind the core's rules.
//!
//! What every engine promises (see `docs/architecture.md`, "Storage"): ids unique where
//! the contract says so (a conflict, never a second row); each recipient's inbox numbered
//! 1, 2, 3, … with no gap, in commit order, whatever the concurrency; a write whose
//! decision fails leaves nothing behind while the writes batched with it commit; an
//! idempotency key answers with the first answer and writes once; read marks set once
//! and kept in the order they were made; a final response decided inside the
//! transaction, so two racing ones cannot both pass.
//!
//! SQLite runs on a fresh file; PostgreSQL on a database of its own (skipped with a note
//! when none answers and `SWITCHBOARD_TEST_POSTGRES` is unset, as the other PostgreSQL
//! tests do).

mod abandoned;
mod stomp;

use std::collections::HashMap;

use switchboard::model::{
    AgentRecord, Decided, IdempotencyClaim, InboxFilter, InboxPageSpec, NewMessage, NewPost,
    PostContext, PostOutcome, PostResult, ResponseLink, TeamRecord,
};
use switchboard::store::{Store, StoreError, StoreOptions};
use switchboard_types::agents::AgentStatus;
use switchboard_types::ids::{AgentPk, MessageId, TeamPk};
use switchboard_types::messages::{Content, MessageKind, MessageType, ResponseStatus, SortOrder};
use switchboard_types::time::Timestamp;

/// A store on each engine this machine has, with what keeps it alive.
struct Engine {
    name: &'static str,
    store: Store,
    _dir: Option<tempfile::TempDir>,
    pg: Option<crate::pg::PgDatabase>,
}

impl Engine {
    async fn close(self) {
        self.store.close().await;
        if let Some(pg) = self.pg {
            pg.remove().await;
        }
    }
}

async fn engines(test: &str) -> Vec<Engine> {
    let dir = tempfile::tempdir().expect("dir");
    let sqlite = Store::open(&dir.path().join("contract.db"), StoreOptions::default())
        .await
        .expect("a SQLite store");
    let mut engines = vec![Engine {
        name: "sqlite",
        store: sqlite,
        _dir: Some(dir),
        pg: None,
    }];
    if let Some(pg) = crate::pg::database(test).await {
        let store = Store::open(std::path::Path::new(&pg.url), StoreOptions::default())
            .await
            .expect("a PostgreSQL store");
        engines.push(Engine {
            name: "postgres",
            store,
            _dir: None,
            pg: Some(pg),
        });
    }
    engines
}

fn team(id: &str) -> TeamRecord {
    let now = Timestamp::now();
    TeamRecord {
        pk: TeamPk::default(),
        team_id: id.into(),
        name: id.to_owned(),
        key_id: format!("key-{id}"),
        key_hash: [7; 32],
        communication_enabled: true,
        stomp_auto_register: false,
        stomp_default_context: None,
        retention: Default::default(),
        loop_guard: Default::default(),
        budgets: Default::default(),
        max_attempts: 3,
        approvers: Vec::new(),
        created_at: now,
        updated_at: now,
    }
}

fn agent(team: TeamPk, id: &str) -> AgentRecord {
    let now = Timestamp::now();
    AgentRecord {
        pk: AgentPk::default(),
        team_pk: team,
        agent_id: id.into(),
        role: "worker".to_owned(),
        capabilities: vec!["review".to_owned()],
        address: None,
        status: AgentStatus::Available,
        communication_enabled: true,
        token_id: Some(format!("tok-{id}-{}", uuid::Uuid::new_v4().simple())),
        token_hash: Some([9; 32]),
        registered_at: now,
        updated_at: now,
        removed_at: None,
        addresses: None,
        watch: Vec::new(),
        stomp_bridge: false,
    }
}

/// A team with `n` agents, `a0`, `a1`, ….
async fn members(store: &Store, id: &str, n: usize) -> (TeamPk, Vec<AgentRecord>) {
    let team = store.insert_team(team(id), |t| t).await.expect("team");
    let mut agents = Vec::new();
    for i in 0..n {
        let a = store.insert_agent(agent(team.pk, &format!("a{i}")), |a| a);
        agents.push(a.await.expect("agent"));
    }
    (team.pk, agents)
}

fn message(sender: &AgentRecord, id: &str, kind: MessageKind) -> NewMessage {
    NewMessage::new(
        id.into(),
        sender,
        kind,
        MessageType::Information,
        Content::text(id),
    )
}

fn post_to(message: NewMessage, to: &[&AgentRecord]) -> NewPost {
    NewPost {
        message,
        recipient_ids: to.iter().map(|a| a.agent_id.clone()).collect(),
        deliver_to: to.iter().map(|a| a.pk).collect(),
        response: None,
        charges: Vec::new(),
    }
}

/// Writes `post`; its result, or the store's error.
async fn write(store: &Store, post: NewPost) -> Result<PostResult, StoreError> {
    let outcome = store
        .post(
            post,
            None,
            |_, _| {
                Ok::<_, StoreError>(Decided {
                    value: (),
                    answer: None,
                })
            },
            |(), written| written,
        )
        .await?;
    match outcome {
        PostOutcome::Written(result) => Ok(result),
        PostOutcome::Replayed(_) => panic!("a post without a key was replayed"),
    }
}

fn oldest_first(limit: i64) -> InboxPageSpec {
    InboxPageSpec {
        order: SortOrder::OldestFirst,
        after: None,
        limit,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ids_are_unique_where_the_contract_says_and_records_come_back_whole() {
    for engine in engines("contract_ids").await {
        let store = &engine.store;
        let name = engine.name;
        let (team_pk, agents) = members(store, "alpha", 2).await;
        assert!(team_pk.0 > 0, "{name}: the store gives the key");
        let again = store.insert_team(team("alpha"), |t| t).await;
        assert!(
            matches!(again, Err(StoreError::Conflict)),
            "{name}: {again:?}"
        );
        let twin = store.insert_agent(agent(team_pk, "a0"), |a| a).await;
        assert!(
            matches!(twin, Err(StoreError::Conflict)),
            "{name}: {twin:?}"
        );
        // The same agent id in another team is another agent.
        let (other, _) = members(store, "beta", 1).await;
        assert_ne!(other, team_pk);

        let teams = store.load_teams().await.expect("teams");
        assert_eq!(teams.len(), 2, "{name}");
        let loaded = store.load_agents().await.expect("agents");
        let a0 = loaded.iter().find(|a| a.pk == agents[0].pk).expect("a0");
        assert_eq!(
            (a0.agent_id.as_str(), a0.capabilities.clone(), a0.token_hash),
            ("a0", vec!["review".to_owned()], Some([9; 32])),
            "{name}"
        );

        // A removal keeps the row (messages point at it) and frees the id; registering
        // the id again takes the same row up again, with the new registration's fields.
        let removed = store
            .update_agent(
                agents[0].pk,
                |a| {
                    a.removed_at = Some(Timestamp::now());
                    a.token_id = None;
                    a.token_hash = None;
                    Ok::<_, StoreError>(())
                },
                |a| a,
            )
            .await
            .expect("removed");
        assert!(!removed.is_member(), "{name}");
        let back = store.insert_agent(agent(team_pk, "a0"), |a| a).await;
        let back = back.unwrap_or_else(|e| panic!("{name}: the id is free again: {e}"));
        assert_eq!(back.pk, agents[0].pk, "{name}: the same row");
        let loaded = store.load_agents().await.expect("agents");
        let a0 = loaded.iter().find(|a| a.pk == agents[0].pk).expect("a0");
        assert!(a0.is_member() && a0.token_hash.is_some(), "{name}: {a0:?}");
        assert_eq!(loaded.iter().filter(|a| a.agent_id == "a0").count(), 2);
        engine.close().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_inbox_is_numbered_without_gaps_in_commit_order_under_concurrency() {
    for engine in engines("contract_seq").await {
        let (name, store) = (engine.name, engine.store.clone());
        let (_, agents) = members(&store, "seq", 4).await;
        let mut writes = tokio::task::JoinSet::new();
        for i in 0..200usize {
            let sender = agents[i % 4].clone();
            // Each post to two or three of the others, by a pattern that varies.
            let to: Vec<AgentRecord> = agents
                .iter()
                .filter(|a| a.pk != sender.pk && !(i + a.pk.0 as usize).is_multiple_of(4))
                .cloned()
                .collect();
            let store = store.clone();
            writes.spawn(async move {
                let refs: Vec<&AgentRecord> = to.iter().collect();
                let post = post_to(
                    message(&sender, &format!("m{i}"), MessageKind::Message),
                    &refs,
                );
                (
                    MessageId::from(format!("m{i}")),
                    write(&store, post).await.expect("written"),
                )
            });
        }
        let mut got: HashMap<AgentPk, Vec<(i64, MessageId)>> = HashMap::new();
        for (id, result) in writes.join_all().await {
            for (agent, seq) in result.entries {
                got.entry(agent).or_default().push((seq, id.clone()));
            }
        }
        for agent in &agents {
            let mut entries = got.remove(&agent.pk).unwrap_or_default();
            entries.sort();
            let seqs: Vec<i64> = entries.iter().map(|(s, _)| *s).collect();
            let n = seqs.len() as i64;
            assert_eq!(
                seqs,
                (1..=n).collect::<Vec<_>>(),
                "{name}: {}",
                agent.agent_id
            );
            assert_eq!(
                store.newest_seq(agent.pk).await.expect("newest"),
                n,
                "{name}"
            );
            // The inbox reads back in seq order, each entry its message.
            let page = store
                .list_inbox(agent.pk, &InboxFilter::default(), oldest_first(1000))
                .await
                .expect("inbox");
            let read: Vec<(i64, MessageId)> = page
                .items
                .iter()
                .map(|i| (i.entry.seq, i.message.message_id.clone()))
                .collect();
            assert_eq!(read, entries, "{name}: {}", agent.agent_id);
        }
        engine.close().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_write_leaves_nothing_and_the_writes_beside_it_commit() {
    for engine in engines("contract_refused").await {
        let (name, store) = (engine.name, engine.store.clone());
        let (team_pk, agents) = members(&store, "refused", 2).await;
        let mut writes = tokio::task::JoinSet::new();
        for i in 0..60usize {
            let (sender, to) = (agents[0].clone(), agents[1].clone());
            let store = store.clone();
            writes.spawn(async move {
                let post = post_to(
                    message(&sender, &format!("r{i}"), MessageKind::Message),
                    &[&to],
                );
                let refuse = i.is_multiple_of(5);
                let decide = move |_: &NewMessage, _: PostContext| {
                    if refuse {
                        Err(StoreError::Stale)
                    } else {
                        Ok(Decided {
                            value: (),
                            answer: None,
                        })
                    }
                };
                let outcome = store.post(post, None, decide, |(), w| w).await;
                (i, outcome.map(|_| ()))
            });
        }
        for (i, outcome) in writes.join_all().await {
            let found = store
                .find_message(team_pk, &format!("r{i}"))
                .await
                .expect("find");
            if i.is_multiple_of(5) {
                assert!(matches!(outcome, Err(StoreError::Stale)), "{name} r{i}");
                assert!(found.is_none(), "{name}: refused r{i} was written");
            } else {
                assert!(outcome.is_ok(), "{name} r{i}: {outcome:?}");
                assert!(found.is_some(), "{name}: r{i} is missing");
            }
        }
        // No number was spent on a refused write.
        assert_eq!(
            store.newest_seq(agents[1].pk).await.expect("newest"),
            48,
            "{name}"
        );
        engine.close().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idempotency_key_writes_once_and_answers_the_first_answer() {
    for engine in engines("contract_idem").await {
        let (name, store) = (engine.name, engine.store.clone());
        let (_, agents) = members(&store, "idem", 2).await;
        let claim = IdempotencyClaim {
            agent: agents[0].pk,
            key: "retry-1".to_owned(),
            operation: "SEND_MESSAGE",
            request_hash: [1; 32],
        };
        let mut answers = Vec::new();
        for (attempt, id) in ["first", "second"].into_iter().enumerate() {
            let post = post_to(message(&agents[0], id, MessageKind::Message), &[&agents[1]]);
            let answer = format!("{{\"attempt\":{attempt}}}");
            let decide = move |_: &NewMessage, _: PostContext| {
                Ok::<_, StoreError>(Decided {
                    value: (),
                    answer: Some(answer),
                })
            };
            let outcome = store
                .post(post, Some(claim.clone()), decide, |(), w| w)
                .await;
            answers.push(outcome.expect("posted"));
        }
        assert!(matches!(answers[0], PostOutcome::Written(_)), "{name}");
        let PostOutcome::Replayed(stored) = &answers[1] else {
            panic!("{name}: the retry was written again")
        };
        assert_eq!(stored.answer, "{\"attempt\":0}", "{name}");
        assert_eq!(stored.request_hash, vec![1; 32], "{name}");
        let found = store
            .find_answer(agents[0].pk, "retry-1")
            .await
            .expect("find");
        assert_eq!(found.map(|a| a.operation), Some("SEND_MESSAGE".to_owned()));
        assert_eq!(
            store.newest_seq(agents[1].pk).await.expect("newest"),
            1,
            "{name}"
        );
        engine.close().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_marks_are_set_once_and_kept_in_the_order_they_were_made() {
    for engine in engines("contract_marks").await {
        let (name, store) = (engine.name, engine.store.clone());
        let (_, agents) = members(&store, "marks", 3).await;
        let post = post_to(
            message(&agents[0], "hello", MessageKind::Broadcast),
            &[&agents[1], &agents[2]],
        );
        let written = write(&store, post).await.expect("written");
        let ids = |list: &[&str]| list.iter().map(|s| MessageId::from(*s)).collect::<Vec<_>>();
        let first = store
            .mark_read(agents[2].pk, ids(&["hello", "nope"]), Timestamp::now())
            .await
            .expect("mark");
        assert_eq!(
            (first.marked, first.not_found),
            (ids(&["hello"]), ids(&["nope"]))
        );
        let again = store
            .mark_read(agents[2].pk, ids(&["hello"]), Timestamp::now())
            .await
            .expect("mark again");
        assert_eq!(again.already_read, ids(&["hello"]), "{name}");
        // Not addressed to the sender: not found, and nothing changed.
        let sender = store
            .mark_read(agents[0].pk, ids(&["hello"]), Timestamp::now())
            .await
            .expect("mark by the sender");
        assert_eq!(sender.not_found, ids(&["hello"]), "{name}");
        store
            .mark_read(agents[1].pk, ids(&["hello"]), Timestamp::now())
            .await
            .expect("mark");
        assert_eq!(
            store.read_by(written.pk).await.expect("read by"),
            vec![agents[2].pk, agents[1].pk],
            "{name}: in the order the marks were made"
        );
        let (counts, _) = store
            .read_inbox(agents[1].pk, &InboxFilter::default(), oldest_first(10))
            .await
            .expect("inbox");
        assert_eq!((counts.total, counts.unread), (1, 0), "{name}");
        engine.close().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn of_two_racing_final_responses_the_transaction_lets_one_pass() {
    for engine in engines("contract_respond").await {
        let (name, store) = (engine.name, engine.store.clone());
        let (_, agents) = members(&store, "respond", 2).await;
        let original = post_to(
            message(&agents[0], "q", MessageKind::Message),
            &[&agents[1]],
        );
        let original = write(&store, original).await.expect("question");
        let mut racing = tokio::task::JoinSet::new();
        for i in 0..2 {
            let (me, asker, store) = (agents[1].clone(), agents[0].clone(), store.clone());
            racing.spawn(async move {
                let mut post = post_to(
                    message(&me, &format!("answer{i}"), MessageKind::Response),
                    &[&asker],
                );
                post.response = Some(ResponseLink {
                    original: original.pk,
                    responder: me.pk,
                    status: ResponseStatus::Completed,
                });
                let decide = |_: &NewMessage, context: PostContext| {
                    if context.final_response_given {
                        Err(StoreError::Conflict)
                    } else {
                        Ok(Decided {
                            value: (),
                            answer: None,
                        })
                    }
                };
                store.post(post, None, decide, |(), w| w).await.is_ok()
            });
        }
        let passed = racing.join_all().await.into_iter().filter(|ok| *ok).count();
        assert_eq!(passed, 1, "{name}: exactly one final response");
        let rows = store.responses_to(original.pk).await.expect("responses");
        assert_eq!(rows.len(), 1, "{name}");
        assert_eq!(rows[0].responder, agents[1].pk, "{name}");
        engine.close().await;
    }
}

/// Budget counts are spent in the send's transaction: of concurrent posts, exactly the
/// limit commits, each refused one names the first count it would pass and leaves
/// nothing behind — not its message, not a count it spent before the refusing one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_budget_lets_its_limit_through_and_a_refusal_spends_nothing() {
    for engine in engines("contract_budgets").await {
        let (name, store) = (engine.name, engine.store.clone());
        let (team_pk, agents) = members(&store, "budgets", 2).await;
        let charge = |key: &str, limit: u32| switchboard::model::Charge {
            team: team_pk,
            key: key.to_owned(),
            window_start: 1_800_000_000,
            limit,
        };
        let mut writes = tokio::task::JoinSet::new();
        for i in 0..40usize {
            let (sender, to) = (agents[0].clone(), agents[1].clone());
            let store = store.clone();
            let mut post = post_to(
                message(&sender, &format!("b{i}"), MessageKind::Message),
                &[&to],
            );
            // The agent's count first: a refusal by the team's must undo it.
            post.charges = vec![charge("agent:1", 1000), charge("team", 25)];
            writes.spawn(async move { (i, write(&store, post).await) });
        }
        let mut written = 0;
        for (i, outcome) in writes.join_all().await {
            match outcome {
                Ok(_) => written += 1,
                Err(StoreError::OverBudget(1)) => {
                    let found = store.find_message(team_pk, &format!("b{i}")).await;
                    assert!(
                        found.expect("find").is_none(),
                        "{name}: refused b{i} was written"
                    );
                }
                Err(other) => panic!("{name} b{i}: {other:?}"),
            }
        }
        assert_eq!(written, 25, "{name}: the limit, no more and no less");
        assert_eq!(
            store.newest_seq(agents[1].pk).await.expect("newest"),
            25,
            "{name}"
        );
        // The agent's count is 25 (the refused posts spent nothing): one more fits 26.
        let mut post = post_to(
            message(&agents[0], "c1", MessageKind::Message),
            &[&agents[1]],
        );
        post.charges = vec![charge("agent:1", 26)];
        assert!(write(&store, post).await.is_ok(), "{name}: the 26th of 26");
        let mut post = post_to(
            message(&agents[0], "c2", MessageKind::Message),
            &[&agents[1]],
        );
        post.charges = vec![charge("agent:1", 26)];
        assert!(
            matches!(write(&store, post).await, Err(StoreError::OverBudget(0))),
            "{name}: the 27th of 26"
        );
        // Another window is another count.
        let mut post = post_to(
            message(&agents[0], "c3", MessageKind::Message),
            &[&agents[1]],
        );
        post.charges = vec![switchboard::model::Charge {
            window_start: 1_800_000_060,
            ..charge("agent:1", 1)
        }];
        assert!(write(&store, post).await.is_ok(), "{name}: a new window");
        engine.close().await;
    }
}
