//! Operations as frames: bad frames, every contract operation, team isolation.

use super::*;
use crate::support::Agent;
use crate::wsclient::Ws;

#[tokio::test]
async fn bad_frames_get_an_error_message_and_the_connection_stays_open() {
    let app = TestApp::start_with(|c| c.max_body_bytes = 4096).await;
    let team = app.team("t").await;
    let b = app.agent(&team, "b", &[]).await;
    let (mut ws, _, _) = app.ws_caught_up(&b, "").await;
    let expect_error = |frame: Value, field: &str, request_id: Option<&str>| {
        assert_eq!(frame["type"], "ErrorMessage", "{frame}");
        assert_eq!(frame["error_code"], "VALIDATION_ERROR");
        assert_eq!(frame["success"], false);
        assert_eq!(frame["details"]["field"], field, "{frame}");
        assert_eq!(frame["originating_agent_id"], "b");
        assert!(frame["suggested_action"].is_string());
        match request_id {
            Some(id) => assert_eq!(frame["request_id"], id),
            None => assert!(frame.get("request_id").is_none()),
        }
    };
    ws.send_raw(Message::Text("{not json".into())).await;
    expect_error(ws.next().await, "frame", None);
    ws.send(json!({"request_id": "r1"})).await;
    expect_error(ws.next().await, "type", Some("r1"));
    ws.send(json!({"type": "teleport", "request_id": "r2"}))
        .await;
    expect_error(ws.next().await, "type", Some("r2"));
    ws.send(json!({"type": "send_message", "request_id": "r3", "sender_agent_id": "b", "message_type": "information", "content": {"text": "x"}})).await;
    expect_error(ws.next().await, "recipient_agent_ids", Some("r3"));
    ws.send(json!({"type": "send_message", "sender_agent_id": "b"}))
        .await;
    expect_error(ws.next().await, "request_id", None);
    ws.send(json!({"type": "ack", "seq": "three"})).await;
    expect_error(ws.next().await, "seq", None);
    ws.send_raw(Message::Binary(vec![1, 2, 3].into())).await;
    expect_error(ws.next().await, "frame", None);
    ws.assert_quiet().await;
    // A frame over the limit closes the connection with 1009.
    ws.send_raw(Message::Text("x".repeat(5000).into())).await;
    let close = ws.closed().await.expect("close frame");
    assert_eq!(close.code, CloseCode::Size);
    // Other connections are unaffected.
    let (mut again, _, _) = app.ws_caught_up(&b, "").await;
    again.assert_quiet().await;
    app.stop().await;
}

/// SEND_MESSAGE over the socket, pushed to b; a refusal is REST's error body. The id.
async fn send_over_the_socket(app: &TestApp, a: &Agent, wa: &mut Ws, wb: &mut Ws) -> String {
    let sent = wa
        .call("send_message", json!({"sender_agent_id": "a", "recipient_agent_ids": ["b"], "message_type": "request", "content": {"text": "over the socket"}, "requires_response": true}))
        .await;
    assert_eq!(sent["ok"], true, "{sent}");
    let id = sent["result"]["message_id"]
        .as_str()
        .expect("id")
        .to_owned();
    assert_eq!(
        sent["result"]["delivery_status"]["delivered_to"],
        json!(["b"])
    );
    let push = wb.next_of("message").await;
    assert_eq!(push["message"]["message_id"], id.as_str());

    // Errors come back as the same error body as REST.
    let refused = wa
        .call("send_message", json!({"sender_agent_id": "a", "recipient_agent_ids": ["a"], "message_type": "request", "content": {"text": "me"}}))
        .await;
    assert_eq!(refused["ok"], false);
    assert_eq!(refused["error"]["error_code"], "INVALID_RECIPIENT");
    assert_eq!(refused["error"]["details"]["invalid_ids"], json!(["a"]));
    let rest = app
        .send_with(a, json!({"recipient_agent_ids": ["a"]}))
        .await;
    assert_eq!(refused["error"], rest.body);

    id
}

/// GET_MESSAGES, the message detail, MARK_MESSAGE_READ and RESPOND_TO_MESSAGE as b.
async fn read_and_respond_over_the_socket(id: &str, wa: &mut Ws, wb: &mut Ws) {
    let inbox = wb
        .call(
            "get_messages",
            json!({"filters": {"unread_only": true}, "limit": 10}),
        )
        .await;
    assert_eq!(inbox["result"]["total_count"], 1);
    assert_eq!(inbox["result"]["messages"][0]["message_id"], id);
    let bad_limit = wb.call("get_messages", json!({"limit": 0})).await;
    assert_eq!(bad_limit["error"]["details"]["field"], "limit");
    let one = wb.call("get_message", json!({"message_id": id})).await;
    assert_eq!(one["result"]["message"]["message_id"], id);
    let missing = wb
        .call("get_message", json!({"message_id": "msg_nope"}))
        .await;
    assert_eq!(missing["error"]["error_code"], "MESSAGE_NOT_FOUND");

    let marked = wb
        .call(
            "mark_message_read",
            json!({"agent_id": "b", "message_ids": [id, "msg_nope"]}),
        )
        .await;
    assert_eq!(marked["result"]["marked_read"], json!([id]));
    assert_eq!(marked["result"]["not_found"], json!(["msg_nope"]));

    let responded = wb
        .call("respond_to_message", json!({"responder_agent_id": "b", "original_message_id": id, "response_content": {"text": "done", "status": "completed"}}))
        .await;
    assert_eq!(
        responded["result"]["original_message_updated"], true,
        "{responded}"
    );
    assert_eq!(wa.next_of("message").await["message"]["kind"], "response");
    let twice = wb
        .call("respond_to_message", json!({"responder_agent_id": "b", "original_message_id": id, "response_content": {"text": "again", "status": "completed"}}))
        .await;
    assert_eq!(twice["error"]["error_code"], "CONFLICT");
    let no_id = wb.call("respond_to_message", json!({"responder_agent_id": "b", "response_content": {"text": "?", "status": "completed"}})).await;
    assert_eq!(no_id["type"], "ErrorMessage");
    assert_eq!(no_id["details"]["field"], "original_message_id");
}

/// BROADCAST_UPDATE, REQUEST_ASSISTANCE, and an idempotency key over the socket.
async fn broadcast_assist_and_retry_over_the_socket(wa: &mut Ws, wb: &mut Ws) {
    let broadcast = wa
        .call("broadcast_update", json!({"sender_agent_id": "a", "update_type": "completion", "urgency": "info", "content": {"summary": "shipped"}}))
        .await;
    assert_eq!(broadcast["result"]["recipients"], json!(["b"]));
    assert_eq!(wb.next_of("message").await["message"]["kind"], "broadcast");

    let assist = wb
        .call("request_assistance", json!({"requester_agent_id": "b", "assistance_type": "expertise", "required_capabilities": ["planning"], "request_details": {"description": "help"}}))
        .await;
    assert_eq!(assist["result"]["potential_responders"][0]["agent_id"], "a");
    assert_eq!(
        assist["result"]["potential_responders"][0]["connected"],
        true
    );

    // An idempotency key works over the socket too.
    let body = json!({"sender_agent_id": "a", "recipient_agent_ids": ["b"], "message_type": "information", "content": {"text": "once"}, "idempotency_key": "ws-1"});
    let first = wa.call("send_message", body.clone()).await;
    let again = wa.call("send_message", body).await;
    assert_eq!(first["result"], again["result"]);
}

#[tokio::test]
async fn every_contract_operation_works_over_the_socket_with_the_same_answers() {
    let app = TestApp::start().await;
    let team = app.team("t").await;
    let a = app.agent(&team, "a", &["planning"]).await;
    let b = app.agent(&team, "b", &[]).await;
    let (mut wa, _, _) = app.ws_caught_up(&a, "").await;
    let (mut wb, _, _) = app.ws_caught_up(&b, "").await;
    let id = send_over_the_socket(&app, &a, &mut wa, &mut wb).await;
    read_and_respond_over_the_socket(&id, &mut wa, &mut wb).await;
    broadcast_assist_and_retry_over_the_socket(&mut wa, &mut wb).await;
    app.stop().await;
}

#[tokio::test]
async fn nothing_of_one_team_reaches_another() {
    let app = TestApp::start().await;
    let t1 = app.team("one").await;
    let t2 = app.team("two").await;
    let a = app.agent(&t1, "a", &[]).await;
    app.agent(&t1, "b", &[]).await;
    let twin = app.agent(&t2, "b", &[]).await;
    let (mut ws, _, _) = app.ws_caught_up(&twin, "").await;
    app.send_with(&a, json!({"recipient_agent_ids": ["ALL"]}))
        .await
        .expect_status(201);
    app.send_with(&a, json!({"recipient_agent_ids": ["b"]}))
        .await
        .expect_status(201);
    app.post("/v1/broadcasts")
        .token(&a.token)
        .json(json!({"sender_agent_id": "a", "update_type": "issue", "urgency": "critical", "content": {"summary": "team one only"}}))
        .send()
        .await
        .expect_status(201);
    ws.assert_quiet().await;
    // And over the socket, team two cannot address team one.
    let refused = ws
        .call("send_message", json!({"sender_agent_id": "b", "recipient_agent_ids": ["a"], "message_type": "information", "content": {"text": "hi"}}))
        .await;
    assert_eq!(refused["error"]["error_code"], "INVALID_RECIPIENT");
    app.stop().await;
}
