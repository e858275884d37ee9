//! Eight agents racing for 1,000 tasks offered to their role — on one node, and on
//! PostgreSQL across two — while a ninth claims a few and dies with them: each task is
//! done exactly once, none is lost (the dead claimer's come back when their lease runs
//! out), and the attempts say so.

use futures_util::future::join_all;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::Arc;
use tokio::sync::Mutex;

use super::claims::{claim, claimed, member, offer};
use crate::support::{Agent, TestApp};

const TASKS: usize = 1_000;
const WORKERS: usize = 8;
/// Tasks the claimer that dies holds when it dies.
const ABANDONED: usize = 3;

/// What the workers did: each claim's task, in the order the claims were answered.
type Claims = Arc<Mutex<Vec<(String, String)>>>;

async fn race(nodes: &[&TestApp], name: &str) {
    let one = nodes[0];
    let team = one.team(name).await;
    let planner = member(one, &team, "planner", "planner", &[]).await;
    let mut workers = Vec::new();
    for w in 0..WORKERS {
        workers.push(member(one, &team, &format!("w{w}"), "worker", &[]).await);
    }
    let doomed = member(one, &team, "doomed", "worker", &[]).await;
    // Submitted by eight at once, to be quick.
    join_all((0..8).map(|s| {
        let (app, planner) = (nodes[s % nodes.len()], &planner);
        async move {
            for i in (s..TASKS).step_by(8) {
                offer(app, planner, &format!("job-{i}"), "worker", json!({}))
                    .await
                    .expect_status(201);
            }
        }
    }))
    .await;
    // The doomed claimer takes a few with a short lease and is never heard of again.
    let mut lost = Vec::new();
    for _ in 0..ABANDONED {
        let res = claim(one, &doomed, json!({"lease_seconds": 1}))
            .await
            .expect_status(200);
        lost.push(claimed(&res).expect("a task for the doomed claimer"));
    }
    let claims: Claims = Arc::default();
    join_all(
        workers
            .iter()
            .enumerate()
            .map(|(w, agent)| work(nodes[w % nodes.len()], agent, claims.clone())),
    )
    .await;
    let claims = claims.lock().await.clone();
    let mut per_task: HashMap<&str, usize> = HashMap::new();
    for (task, _) in &claims {
        *per_task.entry(task.as_str()).or_default() += 1;
    }
    assert_eq!(per_task.len(), TASKS, "every task was claimed by a worker");
    assert!(
        per_task.values().all(|n| *n == 1),
        "no task claimed twice by the workers"
    );
    // Every task finished, once; the doomed claimer's on their second attempt.
    for i in (0..TASKS)
        .step_by(97)
        .chain(lost.iter().filter_map(|t| t[4..].parse().ok()))
    {
        let id = format!("job-{i}");
        let res = one
            .get(&format!("/v1/tasks/{id}"))
            .token(&planner.token)
            .send()
            .await;
        let task = &res.body["task"];
        assert_eq!(task["status"], "success", "{id}: {task}");
        let expected = if lost.contains(&id) { 2 } else { 1 };
        assert_eq!(task["attempts"], expected, "{id}");
        let succeeded = res.body["events"]
            .as_array()
            .expect("events")
            .iter()
            .filter(|e| e["kind"] == "succeeded")
            .count();
        assert_eq!(succeeded, 1, "{id}");
    }
}

/// Claims and finishes tasks until a claim that waited three seconds finds none.
async fn work(app: &TestApp, me: &Agent, claims: Claims) {
    loop {
        let res = claim(app, me, json!({"wait_seconds": 3}))
            .await
            .expect_status(200);
        let Some(task) = claimed(&res) else {
            return;
        };
        claims.lock().await.push((task.clone(), me.id.clone()));
        app.post(&format!("/v1/tasks/{task}/result"))
            .token(&me.token)
            .json(json!({"status": "success", "result_data": Value::Null}))
            .send()
            .await
            .expect_status(200);
    }
}

#[tokio::test]
async fn eight_agents_race_for_a_thousand_tasks_and_each_is_done_once() {
    let app = TestApp::start().await;
    race(&[&app], "claims-race").await;
    app.stop().await;
}

#[tokio::test]
async fn two_nodes_share_the_race_and_each_task_is_done_once() {
    let Some(one) = TestApp::start_on_postgres().await else {
        return;
    };
    let two = one.another_node().await;
    race(&[&one, &two], "claims-race-nodes").await;
    two.stop().await;
    one.stop().await;
}
