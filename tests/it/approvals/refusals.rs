//! Every refusal of the approvals: each field's rule, who may not decide, deciding twice,
//! and the bound on pending approvals per agent.

use serde_json::json;

use super::{approval_id, ask, decide, setup};
use crate::support::{ADMIN, TestApp};

#[tokio::test]
async fn each_field_of_a_request_is_checked() {
    let app = TestApp::start().await;
    let (team, asker, _, _) = setup(&app, "approve-fields").await;
    let long = |n: usize| "x".repeat(n);
    for (body, field) in [
        (json!({"summary": ""}), "summary"),
        (json!({"summary": "   "}), "summary"),
        (json!({"summary": long(501)}), "summary"),
        (json!({"summary": "s", "details": long(20_001)}), "details"),
        (json!({"summary": "s", "options": ["only"]}), "options"),
        (json!({"summary": "s", "options": ["a", "a"]}), "options"),
        (json!({"summary": "s", "options": ["a", "  "]}), "options"),
        (json!({"summary": "s", "options": ["a", ""]}), "options"),
        (
            json!({"summary": "s", "options": ["a", long(65)]}),
            "options",
        ),
        (
            json!({"summary": "s", "options": (0..11).map(|i| i.to_string()).collect::<Vec<_>>()}),
            "options",
        ),
        (
            json!({"summary": "s", "expires_in_seconds": 0}),
            "expires_in_seconds",
        ),
        (
            json!({"summary": "s", "expires_in_seconds": 604_801}),
            "expires_in_seconds",
        ),
        (json!({"summary": "s", "wait_seconds": 61}), "wait_seconds"),
    ] {
        let refused = ask(&app, &asker, body.clone())
            .await
            .expect_error(400, "VALIDATION_ERROR");
        assert_eq!(
            refused.body["details"]["field"], field,
            "{body}: {:#}",
            refused.body
        );
    }
    // At the bounds, accepted.
    ask(
        &app,
        &asker,
        json!({"summary": long(500), "details": long(20_000), "expires_in_seconds": 604_800,
               "options": (0..10).map(|i| i.to_string()).collect::<Vec<_>>()}),
    )
    .await
    .expect_status(201);
    // Unknown fields and wrong types are the contract's errors, not a crash.
    ask(&app, &asker, json!({"summary": "s", "color": "red"}))
        .await
        .expect_error(400, "VALIDATION_ERROR");
    ask(&app, &asker, json!({"summary": 7}))
        .await
        .expect_error(400, "VALIDATION_ERROR");
    // Only an agent asks.
    app.post("/v1/approvals")
        .token(&team.key)
        .json(json!({"summary": "s"}))
        .send()
        .await
        .expect_error(403, "FORBIDDEN");
    app.post("/v1/approvals")
        .json(json!({"summary": "s"}))
        .send()
        .await
        .expect_error(401, "UNAUTHORIZED");
}

#[tokio::test]
async fn only_the_team_key_or_an_approver_decides_and_never_the_asker() {
    let app = TestApp::start().await;
    let (team, asker, other, boss) = setup(&app, "approve-who").await;
    let id = approval_id(
        &ask(&app, &asker, json!({"summary": "Go?"}))
            .await
            .expect_status(201),
    );
    let go = json!({"decision": "approve"});
    decide(&app, &other.token, &id, go.clone())
        .await
        .expect_error(404, "APPROVAL_NOT_FOUND");
    decide(&app, &asker.token, &id, go.clone())
        .await
        .expect_error(403, "FORBIDDEN");
    decide(&app, ADMIN, &id, go.clone())
        .await
        .expect_error(403, "FORBIDDEN");
    decide(&app, "sb_not_a_token", &id, go.clone())
        .await
        .expect_error(401, "UNAUTHORIZED");
    // An approver asking: it may not approve itself either.
    let own = approval_id(
        &ask(&app, &boss, json!({"summary": "Mine?"}))
            .await
            .expect_status(201),
    );
    decide(&app, &boss.token, &own, go.clone())
        .await
        .expect_error(403, "FORBIDDEN");
    // A non-approver agent that can see an approval (its own) still cannot decide others'.
    app.patch(&format!("/v1/teams/{}", team.id))
        .token(&team.key)
        .json(json!({"approvers": []}))
        .send()
        .await
        .expect_status(200);
    decide(&app, &boss.token, &id, go.clone())
        .await
        .expect_error(404, "APPROVAL_NOT_FOUND");
    // A decision is one of the options; the comment has a bound.
    let wrong = decide(&app, &team.key, &id, json!({"decision": "maybe"}))
        .await
        .expect_error(400, "VALIDATION_ERROR");
    assert_eq!(wrong.body["details"]["options"], json!(["approve", "deny"]));
    decide(
        &app,
        &team.key,
        &id,
        json!({"decision": "approve", "comment": "c".repeat(2001)}),
    )
    .await
    .expect_error(400, "VALIDATION_ERROR");
    decide(&app, &team.key, "appr_unknown", go.clone())
        .await
        .expect_error(404, "APPROVAL_NOT_FOUND");
}

#[tokio::test]
async fn a_decided_approval_is_not_decided_again_even_by_two_at_once() {
    let app = TestApp::start().await;
    let (team, asker, _, boss) = setup(&app, "approve-twice").await;
    let id = approval_id(
        &ask(&app, &asker, json!({"summary": "Go?"}))
            .await
            .expect_status(201),
    );
    let (one, two) = tokio::join!(
        decide(&app, &team.key, &id, json!({"decision": "approve"})),
        decide(&app, &boss.token, &id, json!({"decision": "deny"})),
    );
    let mut statuses = [one.status, two.status];
    statuses.sort_unstable();
    assert_eq!(statuses, [200, 409], "{:#} {:#}", one.body, two.body);
    let winner = if one.status == 200 { &one } else { &two };
    let decision = winner.body["approval"]["decision"].clone();
    let again = decide(&app, &team.key, &id, json!({"decision": "deny"}))
        .await
        .expect_error(409, "APPROVAL_CLOSED");
    assert_eq!(again.body["details"]["status"], "decided");
    assert_eq!(again.body["details"]["decision"], decision);
}

#[tokio::test]
async fn reads_check_their_wait_limit_and_cursor() {
    let app = TestApp::start().await;
    let (team, asker, _, _) = setup(&app, "approve-reads").await;
    let id = approval_id(
        &ask(&app, &asker, json!({"summary": "Go?"}))
            .await
            .expect_status(201),
    );
    for path in [
        format!("/v1/approvals/{id}?wait_seconds=61"),
        "/v1/approvals?limit=0".to_owned(),
        "/v1/approvals?limit=101".to_owned(),
        "/v1/approvals?cursor=abc".to_owned(),
        "/v1/approvals?status=maybe".to_owned(),
    ] {
        app.get(&path)
            .token(&team.key)
            .send()
            .await
            .expect_error(400, "VALIDATION_ERROR");
    }
    app.get("/v1/approvals?asked_by=ghost")
        .token(&team.key)
        .send()
        .await
        .expect_error(404, "AGENT_NOT_FOUND");
    app.get("/v1/approvals")
        .token(ADMIN)
        .send()
        .await
        .expect_error(403, "FORBIDDEN");
}

#[tokio::test]
async fn an_agent_has_at_most_a_hundred_approvals_pending() {
    let app = TestApp::start().await;
    let (team, asker, _, _) = setup(&app, "approve-bound").await;
    let mut last = String::new();
    for i in 0..100 {
        last = approval_id(
            &ask(&app, &asker, json!({"summary": format!("n{i}")}))
                .await
                .expect_status(201),
        );
    }
    let refused = ask(&app, &asker, json!({"summary": "one more"}))
        .await
        .expect_error(429, "RATE_LIMITED");
    assert_eq!(refused.body["details"]["max"], 100);
    // A decision makes room.
    decide(&app, &team.key, &last, json!({"decision": "deny"}))
        .await
        .expect_status(200);
    ask(&app, &asker, json!({"summary": "one more"}))
        .await
        .expect_status(201);
}

/// A request that would wait past the credential's cap of waiting calls is refused before
/// anything is written: no approval is left behind for a retry to double.
#[tokio::test]
async fn a_waiting_request_over_the_cap_leaves_no_approval_behind() {
    let app = TestApp::start_with(|c| c.ws_max_per_agent = 1).await;
    let (team, asker, _, _) = setup(&app, "approve-cap").await;
    let id = approval_id(
        &ask(&app, &asker, json!({"summary": "First?"}))
            .await
            .expect_status(201),
    );
    let held = {
        let read = app
            .get(&format!("/v1/approvals/{id}?wait_seconds=3"))
            .token(&asker.token);
        tokio::spawn(async move { read.send().await.status })
    };
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    ask(
        &app,
        &asker,
        json!({"summary": "Second?", "wait_seconds": 5}),
    )
    .await
    .expect_error(429, "RATE_LIMITED");
    let listed = app
        .get("/v1/approvals")
        .token(&team.key)
        .send()
        .await
        .expect_status(200);
    assert_eq!(
        listed.body["approvals"].as_array().map(Vec::len),
        Some(1),
        "{:#}",
        listed.body
    );
    assert_eq!(held.await.expect("joined"), 200);
    app.stop().await;
}
