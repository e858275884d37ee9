//! A claimer that goes away gives its claims back after `--claim-grace` (issue 65):
//! every live connection ended, none came back, and it renewed nothing since it left.
//! A claimer that comes back within the grace, one that renews over REST after its
//! connection ended, and one that never connected keep theirs.

use std::time::Duration;

use serde_json::{Value, json};

use super::claims::{claim, claimed, member, offer};
use crate::support::{Agent, TestApp};

async fn status(app: &TestApp, who: &Agent, task: &str) -> Value {
    app.get(&format!("/v1/tasks/{task}"))
        .token(&who.token)
        .send()
        .await
        .expect_status(200)
        .body
}

/// Offers `task` to coders as `from` and has `who` claim it, with a long lease.
async fn offer_and_claim(app: &TestApp, from: &Agent, who: &Agent, task: &str) {
    offer(app, from, task, "coder", json!({}))
        .await
        .expect_status(201);
    let res = claim(app, who, json!({"lease_seconds": 3600}))
        .await
        .expect_status(200);
    assert_eq!(claimed(&res).as_deref(), Some(task), "{res:?}");
}

#[tokio::test]
async fn a_claimer_gone_past_the_grace_gives_back_what_it_did_not_renew_since() {
    let app = TestApp::start_with(|c| c.claim_grace = Duration::from_secs(1)).await;
    let team = app.team("claims-gone").await;
    let planner = member(&app, &team, "planner", "planner", &[]).await;
    let gone = member(&app, &team, "gone", "coder", &[]).await;
    let back = member(&app, &team, "back", "coder", &[]).await;
    let rest = member(&app, &team, "rest", "coder", &[]).await;

    // `gone` claims while connected, then its only connection ends; it claims another
    // task over REST after that, which it renewed since it left.
    let mut ws = app.ws(&gone, "").await;
    offer_and_claim(&app, &planner, &gone, "left-behind").await;
    ws.stream.close(None).await.expect("close");
    drop(ws);
    tokio::time::sleep(Duration::from_millis(200)).await;
    offer_and_claim(&app, &planner, &gone, "claimed-after").await;
    // `back` loses its connection and opens another within the grace.
    let first = app.ws(&back, "").await;
    offer_and_claim(&app, &planner, &back, "came-back").await;
    drop(first);
    let _again = app.ws(&back, "").await;
    // `rest` never connects.
    offer_and_claim(&app, &planner, &rest, "never-connected").await;

    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let detail = loop {
        let detail = status(&app, &planner, "left-behind").await;
        if detail["task"]["status"] == "open" {
            break detail;
        }
        assert!(std::time::Instant::now() < deadline, "{detail}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(detail["task"]["assignee_agent_id"], Value::Null);
    assert_eq!(detail["task"]["attempts"], 1);
    let released = detail["events"]
        .as_array()
        .expect("events")
        .iter()
        .rfind(|e| e["kind"] == "released")
        .cloned()
        .expect("a released entry");
    assert_eq!(released["agent_id"], "gone");
    assert_eq!(
        released["data"]["reason"],
        "every connection of the agent ended and it did not come back"
    );

    // Two more sweeps: the others are still held.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    for (task, holder) in [
        ("claimed-after", "gone"),
        ("came-back", "back"),
        ("never-connected", "rest"),
    ] {
        let detail = status(&app, &planner, task).await;
        assert_eq!(detail["task"]["status"], "in-progress", "{task}: {detail}");
        assert_eq!(detail["task"]["assignee_agent_id"], holder, "{task}");
    }
    // The task given back is the next claimer's.
    let res = claim(&app, &rest, json!({})).await.expect_status(200);
    assert_eq!(claimed(&res).as_deref(), Some("left-behind"));
    assert_eq!(res.body["task"]["attempts"], 2);
    app.stop().await;
}

/// `POST /v1/tasks/{task_id}/extend`: the claimer renews its lease without a progress
/// report, for the claim's own lease or a new one (which stays the claim's); the history
/// says so. Out-of-range leases are refused naming the field, and a task given to an
/// agent by name has no lease to extend.
#[tokio::test]
async fn a_claimer_extends_its_lease_without_reporting_progress() {
    let app = TestApp::start().await;
    let team = app.team("claims-extend").await;
    let planner = member(&app, &team, "planner", "planner", &[]).await;
    let coder = member(&app, &team, "coder", "coder", &[]).await;
    offer(&app, &planner, "long", "coder", json!({}))
        .await
        .expect_status(201);
    let claimed = claim(&app, &coder, json!({"lease_seconds": 60}))
        .await
        .expect_status(200);
    let first_end = claimed.body["task"]["lease_expires_at"].clone();
    let extend = |body: Value| {
        app.post("/v1/tasks/long/extend")
            .token(&coder.token)
            .json(body)
            .send()
    };
    for bad in [0, 3601] {
        let res = extend(json!({"lease_seconds": bad}))
            .await
            .expect_error(400, "VALIDATION_ERROR");
        assert_eq!(res.body["details"]["field"], "lease_seconds");
    }
    tokio::time::sleep(Duration::from_millis(20)).await;
    let same = extend(json!({})).await.expect_status(200);
    assert!(same.body["task"]["lease_expires_at"].as_str() > first_end.as_str());
    let longer = extend(json!({"lease_seconds": 1800}))
        .await
        .expect_status(200);
    assert_eq!(longer.body["task"]["status"], "in-progress");
    let end = longer.body["task"]["lease_expires_at"]
        .as_str()
        .expect("end");
    let detail = status(&app, &planner, "long").await;
    let last = detail["events"].as_array().expect("events").last().cloned();
    let last = last.expect("an event");
    assert_eq!(last["kind"], "lease_extended", "{detail}");
    assert_eq!(last["data"]["lease_seconds"], 1800);
    assert_eq!(last["data"]["lease_expires_at"], end);

    // A task given by name is in progress too, but it was never claimed.
    app.post("/v1/tasks")
        .token(&planner.token)
        .json(json!({"task_id": "named", "description": "d",
                     "originating_agent_id": "planner", "target_agent_id": "coder"}))
        .send()
        .await
        .expect_status(201);
    app.post("/v1/tasks/named/extend")
        .token(&coder.token)
        .json(json!({}))
        .send()
        .await
        .expect_error(409, "INVALID_TASK_TRANSITION");
    app.stop().await;
}
