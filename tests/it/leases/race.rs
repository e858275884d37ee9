//! Agents racing for overlapping leases, on one node and across two: never two
//! exclusive holders of overlapping resources at any moment.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;

use super::{acquire, lease_id, list};
use crate::support::{Agent, Res, Team, TestApp};

/// One lease held, as the racer saw it: from the grant's answer to the release's
/// request, the lease was certainly held.
struct Held {
    holder: usize,
    resource: &'static str,
    exclusive: bool,
    from: Instant,
    to: Instant,
}

const RESOURCES: [&str; 6] = ["r/**", "r/a", "r/a/x", "r/*", "r/b", "q"];

/// One racer: 25 rounds of take, hold a moment, release; what it held, and how many
/// times it was refused.
async fn race(app: Arc<TestApp>, team: Arc<Team>, i: usize, agent: Agent) -> (Vec<Held>, usize) {
    let mut held = Vec::new();
    let mut refused = 0;
    for round in 0..25 {
        let resource = RESOURCES[(i * 7 + round * 3) % RESOURCES.len()];
        let exclusive = !(i + round).is_multiple_of(3);
        let body = json!({"resource": resource, "exclusive": exclusive, "ttl_seconds": 60});
        let res = acquire(&app, &team, &agent, body).await;
        if res.status == 409 {
            assert_eq!(res.body["error_code"], "LEASE_CONFLICT", "{:#}", res.body);
            refused += 1;
            continue;
        }
        let res = res.expect_status(200);
        let from = Instant::now();
        let id = lease_id(&res);
        tokio::time::sleep(Duration::from_millis(2)).await;
        let to = Instant::now();
        app.delete(&format!("/v1/teams/{}/leases/{id}", team.id))
            .token(&agent.token)
            .send()
            .await
            .expect_status(200);
        held.push(Held {
            holder: i,
            resource,
            exclusive,
            from,
            to,
        });
    }
    (held, refused)
}

/// The pairs of [`RESOURCES`] that overlap as paths do.
fn overlap(a: &str, b: &str) -> bool {
    a == b
        || matches!(
            (a, b),
            ("r/**", "r/a" | "r/a/x" | "r/*" | "r/b")
                | ("r/a" | "r/a/x" | "r/*" | "r/b", "r/**")
                | ("r/*", "r/a" | "r/b")
                | ("r/a" | "r/b", "r/*")
        )
}

/// No two holders of overlapping resources, one of them exclusive, held at once.
fn check(history: &[Held]) {
    for (n, x) in history.iter().enumerate() {
        for y in &history[n + 1..] {
            let conflicting = x.holder != y.holder
                && (x.exclusive || y.exclusive)
                && overlap(x.resource, y.resource);
            let at_once = x.from < y.to && y.from < x.to;
            assert!(
                !(conflicting && at_once),
                "racer-{} held {} and racer-{} held {} at once",
                x.holder,
                x.resource,
                y.holder,
                y.resource
            );
        }
    }
}

/// 16 agents take, hold and release leases on overlapping resources as fast as they can;
/// from the recorded history, no two holders of overlapping resources, one of them
/// exclusive, ever held at the same moment.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_agents_never_hold_overlapping_exclusive_leases_at_once() {
    let app = Arc::new(TestApp::start().await);
    let team = app.team("lease-race").await;
    let mut agents = Vec::new();
    for i in 0..16 {
        agents.push(app.agent(&team, &format!("racer-{i}"), &[]).await);
    }
    let team = Arc::new(team);
    let racers: Vec<_> = agents
        .into_iter()
        .enumerate()
        .map(|(i, agent)| tokio::spawn(race(app.clone(), team.clone(), i, agent)))
        .collect();
    let mut history = Vec::new();
    let mut refusals = 0;
    for racer in racers {
        let (held, refused) = racer.await.expect("racer");
        history.extend(held);
        refusals += refused;
    }
    check(&history);
    assert!(history.len() > 16, "too few grants to prove anything");
    assert!(refusals > 0, "the race never met a conflict");
    assert!(list(&app, &team, &team.key, "").await.is_empty());
    if let Ok(app) = Arc::try_unwrap(app) {
        app.stop().await;
    }
}

/// On two nodes of one PostgreSQL database, 16 agents ask at the same moment for the
/// same resource, round after round: exactly one gets it each time (grants are decided in
/// batches that hold the writers' advisory lock exclusively, across the nodes). Without
/// PostgreSQL: skipped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_nodes_grant_one_exclusive_lease_to_racers() {
    let Some(one) = TestApp::start_on_postgres().await else {
        return;
    };
    let team = one.team("lease-nodes").await;
    let mut agents = Vec::new();
    for i in 0..16 {
        agents.push(one.agent(&team, &format!("n{i}"), &[]).await);
    }
    let two = one.another_node().await;
    let nodes = [&one, &two];
    for round in 0..10 {
        let resource = if round % 2 == 0 { "t/**" } else { "t/file" };
        let asks = agents.iter().enumerate().map(|(i, agent)| {
            nodes[i % 2]
                .put(&format!("/v1/teams/{}/leases", team.id))
                .token(&agent.token)
                .json(json!({"resource": resource}))
                .send()
        });
        let answers = futures_util::future::join_all(asks).await;
        let granted: Vec<&Res> = answers.iter().filter(|r| r.status == 200).collect();
        assert_eq!(granted.len(), 1, "round {round}: {answers:?}");
        let id = lease_id(granted[0]);
        let holder = granted[0].body["lease"]["holder"].as_str().expect("holder");
        for res in answers.iter().filter(|r| r.status != 200) {
            assert_eq!(res.status, 409, "{:#}", res.body);
            assert_eq!(res.body["error_code"], "LEASE_CONFLICT");
            assert_eq!(res.body["details"]["conflicts"][0]["holder"], holder);
        }
        nodes[round % 2]
            .delete(&format!("/v1/teams/{}/leases/{id}", team.id))
            .token(&team.key)
            .send()
            .await
            .expect_status(200);
    }
    two.stop().await;
    one.stop().await;
}
