//! RESPOND_TO_MESSAGE: who may respond, to what, until when, how often; where the
//! response goes and how the original records it.

use serde_json::{Value, json};

use crate::support::{Agent, Res, TestApp};

async fn respond(app: &TestApp, by: &Agent, message: &str, body: Value) -> Res {
    let mut full = json!({"responder_agent_id": by.id, "response_content": {"text": "done", "status": "completed"}});
    crate::support::merge(&mut full, body);
    app.post(&format!("/v1/messages/{message}/responses"))
        .token(&by.token)
        .json(full)
        .send()
        .await
}

async fn request(app: &TestApp, from: &Agent, to: &[&str]) -> String {
    app.send_with(
        from,
        json!({"recipient_agent_ids": to, "message_type": "request", "requires_response": true}),
    )
    .await
    .expect_status(201)
    .str("message_id")
}

#[tokio::test]
async fn a_response_reaches_the_sender_and_extra_recipients_and_is_recorded() {
    let app = TestApp::start().await;
    let team = app.team("t").await;
    let boss = app.agent(&team, "boss", &[]).await;
    let worker = app.agent(&team, "worker", &[]).await;
    let observer = app.agent(&team, "observer", &[]).await;
    let original = request(&app, &boss, &["worker"]).await;

    let res = respond(
        &app,
        &worker,
        &original,
        json!({"original_message_id": original, "response_content": {"text": "Reviewed: two nits", "data": {"nits": 2}, "status": "completed"}, "additional_recipients": ["observer"]}),
    )
    .await
    .expect_status(201);
    assert_eq!(res.body["success"], true);
    assert_eq!(res.body["original_message_updated"], true);
    assert_eq!(res.body["error"], Value::Null);
    let response_id = res.str("response_message_id");
    assert!(res.str("timestamp").ends_with('Z'));
    assert_eq!(
        res.body["delivery_status"]["pending_delivery"],
        json!(["boss", "observer"])
    );

    for agent in [&boss, &observer] {
        let inbox = app.inbox(agent, "?kinds=response").await;
        let m = &inbox.body["messages"][0];
        assert_eq!(m["message_id"], response_id.as_str());
        assert_eq!(m["kind"], "response");
        assert_eq!(m["message_type"], "response");
        assert_eq!(m["response_status"], "completed");
        assert_eq!(m["in_reply_to"], original.as_str());
        assert_eq!(m["thread_id"], original.as_str());
        assert_eq!(m["content"]["data"], json!({"nits": 2}));
    }
    let read = app
        .get(&format!("/v1/messages/{original}"))
        .token(&boss.token)
        .send()
        .await
        .expect_status(200);
    let responses = read.body["responses"].as_array().expect("responses");
    assert_eq!(responses.len(), 1);
    assert_eq!(responses[0]["response_message_id"], response_id.as_str());
    assert_eq!(responses[0]["responder_agent_id"], "worker");
    assert_eq!(responses[0]["status"], "completed");
    app.stop().await;
}

#[tokio::test]
async fn only_recipients_respond_to_messages_that_need_it() {
    let app = TestApp::start().await;
    let team = app.team("t").await;
    let other_team = app.team("o").await;
    let boss = app.agent(&team, "boss", &[]).await;
    let worker = app.agent(&team, "worker", &[]).await;
    let bystander = app.agent(&team, "bystander", &[]).await;
    let foreign = app.agent(&other_team, "worker", &[]).await;
    let original = request(&app, &boss, &["worker"]).await;
    let fyi = app.send(&boss, &[&worker], "just so you know").await;

    // A teammate who is no party to the message is told what it would be told of a
    // message that does not exist: whether the id exists is not its to learn.
    let unknown = respond(&app, &bystander, "msg_doesnotexist", json!({}))
        .await
        .expect_error(404, "MESSAGE_NOT_FOUND");
    let res = respond(&app, &bystander, &original, json!({}))
        .await
        .expect_error(404, "MESSAGE_NOT_FOUND");
    assert_eq!(
        res.body["error_message"]
            .as_str()
            .map(|m| m.replace(original.as_str(), "msg_doesnotexist")),
        unknown.body["error_message"].as_str().map(str::to_owned)
    );
    // The original's own sender, who can read it, is told it is no recipient.
    respond(&app, &boss, &original, json!({}))
        .await
        .expect_error(400, "INVALID_RECIPIENT");
    respond(&app, &worker, &fyi, json!({}))
        .await
        .expect_error(409, "RESPONSE_NOT_REQUIRED");
    respond(&app, &worker, "msg_doesnotexist", json!({}))
        .await
        .expect_error(404, "MESSAGE_NOT_FOUND");
    // Another team's agent cannot even see it.
    respond(&app, &foreign, &original, json!({}))
        .await
        .expect_error(404, "MESSAGE_NOT_FOUND");
    // The token decides the responder.
    respond(
        &app,
        &worker,
        &original,
        json!({"responder_agent_id": "bystander"}),
    )
    .await
    .expect_error(403, "FORBIDDEN");
    assert_eq!(
        app.inbox(&boss, "").await.body["total_count"],
        0,
        "nothing was delivered"
    );
    app.stop().await;
}

#[tokio::test]
async fn response_content_is_validated() {
    let app = TestApp::start().await;
    let team = app.team("t").await;
    let boss = app.agent(&team, "boss", &[]).await;
    let worker = app.agent(&team, "worker", &[]).await;
    let original = request(&app, &boss, &["worker"]).await;
    let text = |t: Value| json!({"response_content": {"text": t}});
    respond(&app, &worker, &original, text(json!("")))
        .await
        .expect_invalid("response_content.text");
    respond(&app, &worker, &original, text(json!("y".repeat(2001))))
        .await
        .expect_error(400, "MESSAGE_TOO_LONG");
    respond(
        &app,
        &worker,
        &original,
        json!({"response_content": {"status": "maybe"}}),
    )
    .await
    .expect_invalid("response_content.status");
    respond(
        &app,
        &worker,
        &original,
        json!({"response_content": {"status": null}}),
    )
    .await
    .expect_invalid("response_content.status");
    respond(
        &app,
        &worker,
        &original,
        json!({"original_message_id": "msg_other"}),
    )
    .await
    .expect_invalid("original_message_id");
    let res = respond(
        &app,
        &worker,
        &original,
        json!({"additional_recipients": ["ghost"]}),
    )
    .await
    .expect_error(400, "INVALID_RECIPIENT");
    assert_eq!(res.body["details"]["field"], "additional_recipients");
    let crowd: Vec<String> = (0..1001).map(|i| format!("a{i}")).collect();
    respond(
        &app,
        &worker,
        &original,
        json!({"additional_recipients": crowd}),
    )
    .await
    .expect_invalid("additional_recipients");
    for status in ["partial", "completed"] {
        respond(
            &app,
            &worker,
            &original,
            json!({"response_content": {"status": status}}),
        )
        .await
        .expect_status(201);
    }
    app.stop().await;
}

#[tokio::test]
async fn a_final_response_cannot_be_followed_by_another() {
    let app = TestApp::start().await;
    let team = app.team("t").await;
    let boss = app.agent(&team, "boss", &[]).await;
    let w1 = app.agent(&team, "w1", &[]).await;
    let w2 = app.agent(&team, "w2", &[]).await;
    let original = request(&app, &boss, &["w1", "w2"]).await;
    let partial = json!({"response_content": {"text": "halfway", "status": "partial"}});
    respond(&app, &w1, &original, partial.clone())
        .await
        .expect_status(201);
    respond(&app, &w1, &original, partial)
        .await
        .expect_status(201);
    respond(&app, &w1, &original, json!({}))
        .await
        .expect_status(201);
    respond(&app, &w1, &original, json!({}))
        .await
        .expect_error(409, "CONFLICT");
    // Each responder has its own turn.
    respond(
        &app,
        &w2,
        &original,
        json!({"response_content": {"text": "can't", "status": "unable"}}),
    )
    .await
    .expect_status(201);
    let read = app
        .get(&format!("/v1/messages/{original}"))
        .token(&boss.token)
        .send()
        .await;
    let statuses: Vec<&str> = read.body["responses"]
        .as_array()
        .expect("responses")
        .iter()
        .filter_map(|r| r["status"].as_str())
        .collect();
    assert_eq!(statuses, ["partial", "partial", "completed", "unable"]);
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_final_responses_admit_one() {
    let app = TestApp::start().await;
    let team = app.team("t").await;
    let boss = app.agent(&team, "boss", &[]).await;
    let worker = app.agent(&team, "worker", &[]).await;
    let original = request(&app, &boss, &["worker"]).await;
    let answers = futures_util::future::join_all(
        (0..10).map(|_| respond(&app, &worker, &original, json!({}))),
    )
    .await;
    assert_eq!(answers.iter().filter(|r| r.status == 201).count(), 1);
    assert_eq!(
        answers
            .iter()
            .filter(|r| r.body["error_code"] == "CONFLICT")
            .count(),
        9
    );
    assert_eq!(
        app.inbox(&boss, "?kinds=response").await.body["total_count"],
        1
    );
    app.stop().await;
}

#[tokio::test]
async fn responses_after_the_deadline_are_refused() {
    let app = TestApp::start().await;
    let team = app.team("t").await;
    let boss = app.agent(&team, "boss", &[]).await;
    let worker = app.agent(&team, "worker", &[]).await;
    let deadline = chrono::Utc::now() + chrono::Duration::milliseconds(300);
    let original = app
        .send_with(
            &boss,
            json!({"recipient_agent_ids": ["worker"], "requires_response": true, "response_deadline": deadline.to_rfc3339()}),
        )
        .await
        .expect_status(201)
        .str("message_id");
    // Time has to pass for a deadline to pass: wait until just after it.
    let wait = (deadline - chrono::Utc::now()).to_std().unwrap_or_default()
        + std::time::Duration::from_millis(20);
    tokio::time::sleep(wait).await;
    let res = respond(&app, &worker, &original, json!({}))
        .await
        .expect_error(409, "RESPONSE_DEADLINE_PASSED");
    assert_eq!(res.body["details"]["message_id"], original.as_str());
    app.stop().await;
}

/// A reply by SEND_MESSAGE (`in_reply_to`) stays in its original's context unless it
/// names its own, as RESPOND_TO_MESSAGE's response does: a Wise Agents receiver needs a
/// context to take a message at all (docs/stomp.md).
#[tokio::test]
async fn a_reply_keeps_its_originals_context_unless_it_names_one() {
    let app = TestApp::start().await;
    let team = app.team("ctx").await;
    let a = app.agent(&team, "a", &[]).await;
    let b = app.agent(&team, "b", &[]).await;
    let framed = app
        .send_with(
            &a,
            json!({"recipient_agent_ids": ["b"], "context_reference": "CLI.ctx"}),
        )
        .await
        .expect_status(201)
        .str("message_id");
    for (own, expected) in [(None, "CLI.ctx"), (Some("other"), "other")] {
        let mut body = json!({"recipient_agent_ids": ["a"], "in_reply_to": framed});
        if let Some(own) = own {
            body["context_reference"] = json!(own);
        }
        app.send_with(&b, body).await.expect_status(201);
        let reply = &app.inbox(&a, "").await.body["messages"][0];
        assert_eq!(reply["context_reference"], expected);
    }

    app.stop().await;
}
