//! Lease events (issue 65: "every grant, conflict and expiry is visible"): an agent that
//! watches `switchboard.lease` gets each grant, extension, conflict, release and end of
//! its team's leases as a publish in its inbox, pushed live; an agent that does not
//! watch gets none.

use std::time::Duration;

use serde_json::{Value, json};

use super::{acquire, lease_id};
use crate::support::{Agent, Team, TestApp};
use crate::wsclient::Ws;

/// The next lease event pushed to `ws`: its `instruct_content`, after checking that the
/// publish carries it the same way in `content.data`.
async fn next_event(ws: &mut Ws) -> Value {
    let frame = tokio::time::timeout(Duration::from_secs(10), ws.next_of("message"))
        .await
        .expect("a lease event within 10 s");
    let message = &frame["message"];
    assert_eq!(message["cause_by"], "switchboard.lease", "{frame}");
    assert_eq!(message["content"]["data"]["type"], "lease_event", "{frame}");
    let event = message["instruct_content"].clone();
    assert_eq!(message["content"]["data"]["event"], event["event"]);
    event
}

/// A team of `a`, `b` and a watcher of the lease tag, connected.
async fn watched_team(app: &TestApp) -> (Team, Agent, Agent, Ws) {
    let team = app.team("lease-events").await;
    let a = app.agent(&team, "a", &[]).await;
    let b = app.agent(&team, "b", &[]).await;
    let watcher = app.agent(&team, "w", &[]).await;
    app.put("/v1/watch")
        .token(&watcher.token)
        .json(json!({"watch": ["switchboard.lease"]}))
        .send()
        .await
        .expect_status(200);
    let ws = app.ws(&watcher, "").await;
    (team, a, b, ws)
}

#[tokio::test]
async fn watchers_of_the_lease_tag_see_every_grant_conflict_release_and_end() {
    let app = TestApp::start().await;
    let (team, a, b, mut ws) = watched_team(&app).await;

    let granted = acquire(
        &app,
        &team,
        &a,
        json!({"resource": "src/**", "reason": "refactor"}),
    )
    .await
    .expect_status(200);
    let id = lease_id(&granted);
    let event = next_event(&mut ws).await;
    assert_eq!(event["event"], "granted");
    assert_eq!(event["lease"]["lease_id"], id.as_str());
    assert_eq!(event["lease"]["holder"], "a");
    assert_eq!(event["lease"]["resource"], "src/**");

    acquire(&app, &team, &b, json!({"resource": "src/main.rs"}))
        .await
        .expect_error(409, "LEASE_CONFLICT");
    let event = next_event(&mut ws).await;
    assert_eq!(event["event"], "conflict");
    assert_eq!(event["lease"]["holder"], "b");
    assert_eq!(event["lease"]["resource"], "src/main.rs");
    assert_eq!(event["conflicts"][0]["lease_id"], id.as_str(), "{event}");
    assert_eq!(event["conflicts"][0]["holder"], "a");

    app.post(&format!("/v1/teams/{}/leases/{id}/extend", team.id))
        .token(&a.token)
        .json(json!({"ttl_seconds": 600}))
        .send()
        .await
        .expect_status(200);
    assert_eq!(next_event(&mut ws).await["event"], "extended");

    app.delete(&format!("/v1/teams/{}/leases/{id}", team.id))
        .token(&team.key)
        .send()
        .await
        .expect_status(200);
    let event = next_event(&mut ws).await;
    assert_eq!(event["event"], "released");
    assert_eq!(event["reason"], "released by the team key");
    ends_are_told(&app, &team, &a, &b, &mut ws).await;

    // Only the watcher was told: b's inbox has none of it.
    let inbox = app.inbox(&b, "").await.expect_status(200);
    assert_eq!(inbox.body["messages"], json!([]), "{inbox:?}");
    app.stop().await;
}

/// An end by time and by the holder's removal are told too.
async fn ends_are_told(app: &TestApp, team: &Team, a: &Agent, b: &Agent, ws: &mut Ws) {
    // A lease that runs out is told as it is swept (every second).
    acquire(
        app,
        team,
        b,
        json!({"resource": "docs/*.md", "ttl_seconds": 1}),
    )
    .await
    .expect_status(200);
    assert_eq!(next_event(ws).await["event"], "granted");
    let event = next_event(ws).await;
    assert_eq!(event["event"], "expired");
    assert_eq!(event["lease"]["resource"], "docs/*.md");

    // A removed holder's leases end with it, and that is told too.
    acquire(app, team, a, json!({"resource": "ticket-7"}))
        .await
        .expect_status(200);
    assert_eq!(next_event(ws).await["event"], "granted");
    app.delete(&format!("/v1/teams/{}/agents/a", team.id))
        .token(&team.key)
        .send()
        .await
        .expect_status(200);
    let event = next_event(ws).await;
    assert_eq!(event["event"], "released");
    assert_eq!(event["lease"]["resource"], "ticket-7");
    assert_eq!(event["reason"], "the holder was removed");
}
