//! Callbacks under the faults: a worker submits a task through one node with a callback
//! to the test's receiver and finishes it, as its assignee, through another. The check:
//! each callback (a task's history entry) has one delivery id, however often it was sent
//! (by one node, or again by another once a dead node's claim ran out), and every task
//! whose result was acknowledged has its `complete` callback delivered in the end.

use std::collections::{BTreeSet, HashMap};
use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::{Value, json};

use super::{Cluster, Event, Me, Req, What};
use crate::tasks::Receiver;

/// Submits task `t-<worker>-<n>` to `to` through one node, with a callback to `hook`;
/// finishes it as `to` through the other.
pub(super) async fn task_then_finish(
    cluster: &Cluster,
    me: &Me<'_>,
    (x, y): (usize, usize),
    (to, to_token): (&str, &str),
    n: u32,
    hook: &str,
) {
    let task = format!("t-{}-{n}", me.w);
    let body = json!({"description": "checked", "originating_agent_id": me.id,
                      "task_id": task, "target_agent_id": to, "callback_url": hook});
    let req = Req {
        method: Method::POST,
        path: "/v1/tasks".into(),
        token: me.token,
        body: Some(body),
    };
    let submitted = What::SubmitTask { task: task.clone() };
    if cluster.op(me.w, x, submitted, req).await.0 != Some(201) {
        return;
    }
    let req = Req {
        method: Method::POST,
        path: format!("/v1/tasks/{task}/result"),
        token: to_token,
        body: Some(json!({"status": "success", "result_data": {"n": n}})),
    };
    cluster.op(me.w, y, What::FinishTask { task }, req).await;
}

/// Waits (at most 40 s: a dead node's claim runs out after `--callback-timeout` + 5 s)
/// until every task finished with an acknowledgment had its `complete` callback.
pub(super) async fn settle(receiver: &Receiver, history: &[Event]) {
    let finished = finished(history);
    let deadline = Instant::now() + Duration::from_secs(40);
    while Instant::now() < deadline {
        let completed = completed(&receiver.delivered());
        if finished.iter().all(|t| completed.contains(t)) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn finished(history: &[Event]) -> BTreeSet<String> {
    history
        .iter()
        .filter_map(|e| match (&e.what, e.status) {
            (What::FinishTask { task }, Some(200)) => Some(task.clone()),
            _ => None,
        })
        .collect()
}

fn completed(delivered: &[Value]) -> BTreeSet<String> {
    delivered
        .iter()
        .filter(|b| b["status"] == "complete")
        .filter_map(|b| b["task_id"].as_str().map(str::to_owned))
        .collect()
}

/// One delivery id per callback and one callback per delivery id; every acknowledged
/// result's callback delivered. The number of callbacks received, too.
pub(super) fn check_callbacks(receiver: &Receiver, history: &[Event]) -> (Vec<String>, usize) {
    let mut violations = Vec::new();
    let mut by_delivery: HashMap<String, BTreeSet<(String, i64)>> = HashMap::new();
    let mut by_entry: HashMap<(String, i64), BTreeSet<String>> = HashMap::new();
    let calls = receiver.calls();
    for (headers, body, _) in &calls {
        let delivery = headers
            .get("switchboard-delivery")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        let body: Value = serde_json::from_str(body).unwrap_or(Value::Null);
        let entry = (
            body["task_id"].as_str().unwrap_or_default().to_owned(),
            body["event_seq"].as_i64().unwrap_or(-1),
        );
        by_delivery
            .entry(delivery.clone())
            .or_default()
            .insert(entry.clone());
        by_entry.entry(entry).or_default().insert(delivery);
    }
    for (delivery, entries) in &by_delivery {
        if entries.len() != 1 {
            violations.push(format!("delivery {delivery} carried {entries:?}"));
        }
    }
    for (entry, deliveries) in &by_entry {
        if deliveries.len() != 1 {
            violations.push(format!("callback {entry:?} sent as {deliveries:?}"));
        }
    }
    let completed = completed(&receiver.delivered());
    for task in finished(history) {
        if !completed.contains(&task) {
            violations.push(format!("{task}: result acknowledged, no complete callback"));
        }
    }
    (violations, calls.len())
}
