//! Two originators, one task id: ids are unique per originator, so the same id can name
//! two tasks an agent takes part in. Nothing is ever guessed: the id alone is refused as
//! ambiguous (naming only the originators, parties the caller already knows), and
//! `id@originator` names the one meant. (Before: bob's result for alice landed on carol's
//! newer task, alice's stayed in progress, and bob's retry was 409.)

use serde_json::{Value, json};

use crate::support::TestApp;

/// alice and carol each give bob a task `payroll`.
#[tokio::test]
async fn an_id_two_tasks_share_is_refused_until_its_originator_is_named() {
    let app = TestApp::start().await;
    let team = app.team("payroll").await;
    let alice = app.agent(&team, "alice", &[]).await;
    let carol = app.agent(&team, "carol", &[]).await;
    let bob = app.agent(&team, "bob", &[]).await;
    let dave = app.agent(&team, "dave", &[]).await;
    for (from, data) in [(&alice, "alice's numbers"), (&carol, "carol's numbers")] {
        app.submit(
            from,
            json!({"task_id": "payroll", "target_agent_id": "bob", "data": {"of": data}}),
        )
        .await
        .expect_status(201);
    }

    let ambiguous = app
        .task(&bob, "payroll")
        .await
        .expect_error(409, "CONFLICT");
    assert_eq!(
        ambiguous.body["details"]["originators"],
        json!(["alice", "carol"])
    );
    assert!(
        ambiguous.body["suggested_action"]
            .as_str()
            .is_some_and(|s| s.contains("payroll@alice")),
        "{}",
        ambiguous.body
    );
    let result = json!({"status": "success", "result_data": {"paid": true}});
    app.task_action(&bob, "payroll", "result", result.clone())
        .await
        .expect_error(409, "CONFLICT");
    for (who, reference) in [(&alice, "payroll"), (&carol, "payroll")] {
        let own = app.task(who, reference).await.expect_status(200);
        assert_eq!(own.body["task"]["status"], "in-progress", "nothing changed");
    }

    app.task_action(&bob, "payroll@alice", "result", result)
        .await
        .expect_status(200);
    let alices = app.task(&alice, "payroll").await.expect_status(200);
    assert_eq!(alices.body["task"]["status"], "success");
    assert_eq!(alices.body["task"]["data"]["of"], "alice's numbers");
    let carols = app.task(&carol, "payroll").await.expect_status(200);
    assert_eq!(carols.body["task"]["status"], "in-progress");
    let read = app.task(&bob, "payroll@carol").await.expect_status(200);
    assert_eq!(read.body["task"]["data"]["of"], "carol's numbers");

    // Nobody reaches a task they take no part in, however they name it.
    app.task(&carol, "payroll@alice")
        .await
        .expect_error(404, "TASK_NOT_FOUND");
    for reference in ["payroll", "payroll@alice", "payroll@nobody"] {
        app.task(&dave, reference)
            .await
            .expect_error(404, "TASK_NOT_FOUND");
    }
    app.task(&bob, "payroll@bad@ref")
        .await
        .expect_error(400, "VALIDATION_ERROR");
    app.stop().await;
}

/// Over A2A a task's id is `a2a-` and the message id, so two callers choosing the same
/// message id make two tasks of one id: each caller's A2A requests mean its own (the
/// interface names them with the caller as originator), and the worker names either by
/// its originator.
#[tokio::test]
async fn a2a_callers_with_one_message_id_each_reach_their_own_task() {
    let app = TestApp::start().await;
    let team = app.team("a2a-names").await;
    let alice = app.agent(&team, "alice", &[]).await;
    let carol = app.agent(&team, "carol", &[]).await;
    let bob = app.agent(&team, "bob", &[]).await;
    let send = |words: &str| {
        json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {
            "message": {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": words}]},
            "configuration": {"returnImmediately": true}}})
    };
    for (who, words) in [(&alice, "for alice"), (&carol, "for carol")] {
        let made = app
            .post("/a2a/a2a-names/bob")
            .token(&who.token)
            .json(send(words))
            .send()
            .await
            .expect_status(200);
        assert_eq!(made.body["result"]["task"]["id"], "a2a-m1", "{}", made.body);
    }
    app.task_action(
        &bob,
        "a2a-m1@carol",
        "result",
        json!({"status": "success", "result_data": {"done": "carol's"}}),
    )
    .await
    .expect_status(200);
    let get = |who_token: String| {
        let app = &app;
        async move {
            app.post("/a2a/a2a-names/bob")
                .token(&who_token)
                .json(json!({"jsonrpc": "2.0", "id": 2, "method": "GetTask", "params": {"id": "a2a-m1"}}))
                .send()
                .await
                .expect_status(200)
                .body
        }
    };
    let alices: Value = get(alice.token.clone()).await;
    assert_eq!(
        alices["result"]["status"]["state"], "TASK_STATE_SUBMITTED",
        "{alices}"
    );
    let carols: Value = get(carol.token.clone()).await;
    assert_eq!(
        carols["result"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{carols}"
    );
    app.stop().await;
}
