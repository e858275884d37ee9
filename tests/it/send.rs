//! SEND_MESSAGE: every input rule of the contract, its answer, delivery status,
//! idempotent retries and communication switches.

use base64::Engine;
use serde_json::{Value, json};

use crate::support::{TestApp, ids_of};

fn b64(bytes: usize) -> String {
    base64::engine::general_purpose::STANDARD.encode(vec![7u8; bytes])
}

#[tokio::test]
async fn a_message_reaches_the_recipient_with_every_contract_field() {
    let app = TestApp::start().await;
    let team = app.team("t").await;
    let planner = app.agent(&team, "planner", &[]).await;
    let coder = app.agent(&team, "coder", &[]).await;

    let res = app
        .send_with(
            &planner,
            json!({
                "recipient_agent_ids": ["coder"],
                "message_type": "request",
                "content": {"text": "Please review PR 7", "data": {"pr": 7, "files": ["a.rs"]}},
                "priority": "high",
                "requires_response": true,
                "context_reference": "ctx-42",
            }),
        )
        .await
        .expect_status(201);
    assert_eq!(res.body["success"], true);
    assert_eq!(res.body["error"], Value::Null);
    let id = res.str("message_id");
    let timestamp = res.str("timestamp");
    assert!(
        chrono::DateTime::parse_from_rfc3339(&timestamp).is_ok() && timestamp.ends_with('Z'),
        "{timestamp}"
    );
    assert_eq!(
        res.body["delivery_status"],
        json!({"delivered_to": [], "failed_delivery": [], "pending_delivery": ["coder"]})
    );

    let inbox = app.inbox(&coder, "").await.expect_status(200);
    assert_eq!(inbox.body["total_count"], 1);
    assert_eq!(inbox.body["unread_count"], 1);
    let m = &inbox.body["messages"][0];
    assert_eq!(m["message_id"], id.as_str());
    assert_eq!(m["kind"], "message");
    assert_eq!(m["seq"], 1);
    assert_eq!(m["sender_agent_id"], "planner");
    assert_eq!(m["sender_role"], "role of planner");
    assert_eq!(m["message_type"], "request");
    assert_eq!(
        m["content"],
        json!({"text": "Please review PR 7", "data": {"pr": 7, "files": ["a.rs"]}, "attachments": []})
    );
    assert_eq!(m["priority"], "high");
    assert_eq!(m["timestamp"], timestamp.as_str());
    assert_eq!(m["read_status"], false);
    assert_eq!(m["requires_response"], true);
    assert_eq!(m["response_deadline"], Value::Null);
    assert_eq!(m["context_reference"], "ctx-42");
    // The sender's own inbox is untouched.
    assert_eq!(app.inbox(&planner, "").await.body["total_count"], 0);
    app.stop().await;
}

#[tokio::test]
async fn defaults_are_normal_priority_and_no_response_required() {
    let app = TestApp::start().await;
    let team = app.team("t").await;
    let a = app.agent(&team, "a", &[]).await;
    let b = app.agent(&team, "b", &[]).await;
    app.send(&a, &[&b], "hi").await;
    let m = &app.inbox(&b, "").await.body["messages"][0];
    assert_eq!(m["priority"], "normal");
    assert_eq!(m["requires_response"], false);
    assert_eq!(m["content"]["data"], json!({}));
    assert_eq!(m["content"]["attachments"], json!([]));
    app.stop().await;
}

#[tokio::test]
async fn the_sender_must_be_the_caller() {
    let app = TestApp::start().await;
    let team = app.team("t").await;
    let a = app.agent(&team, "a", &[]).await;
    let b = app.agent(&team, "b", &[]).await;
    let res = app
        .send_with(
            &a,
            json!({"sender_agent_id": "b", "recipient_agent_ids": ["b"]}),
        )
        .await
        .expect_error(403, "FORBIDDEN");
    assert_eq!(res.body["details"]["field"], "sender_agent_id");
    // A team key is not an agent.
    app.post("/v1/messages")
        .token(&team.key)
        .json(json!({"sender_agent_id": "a", "recipient_agent_ids": ["b"], "message_type": "information", "content": {"text": "x"}}))
        .send()
        .await
        .expect_error(403, "FORBIDDEN");
    assert_eq!(app.inbox(&b, "").await.body["total_count"], 0);
    app.stop().await;
}

#[tokio::test]
async fn recipients_must_be_other_members_of_the_team() {
    let app = TestApp::start().await;
    let team = app.team("t").await;
    let other_team = app.team("other").await;
    let a = app.agent(&team, "a", &[]).await;
    let b = app.agent(&team, "b", &[]).await;
    app.agent(&other_team, "foreigner", &[]).await;
    app.agent(&team, "gone", &[]).await;
    app.delete("/v1/teams/t/agents/gone")
        .token(&team.key)
        .send()
        .await
        .expect_status(200);

    app.send_with(&a, json!({"recipient_agent_ids": []}))
        .await
        .expect_invalid("recipient_agent_ids");
    let res = app
        .send_with(&a, json!({"recipient_agent_ids": ["b", "a"]}))
        .await
        .expect_error(400, "INVALID_RECIPIENT");
    assert_eq!(res.body["details"]["invalid_ids"], json!(["a"]));
    let res = app
        .send_with(
            &a,
            json!({"recipient_agent_ids": ["b", "ghost", "foreigner", "gone"]}),
        )
        .await
        .expect_error(400, "INVALID_RECIPIENT");
    assert_eq!(
        res.body["details"]["invalid_ids"],
        json!(["ghost", "foreigner", "gone"])
    );
    app.send_with(&a, json!({"recipient_agent_ids": "b"}))
        .await
        .expect_invalid("recipient_agent_ids");
    let crowd: Vec<String> = (0..1001).map(|i| format!("x{i}")).collect();
    app.send_with(&a, json!({"recipient_agent_ids": crowd}))
        .await
        .expect_invalid("recipient_agent_ids");
    // Nothing was delivered by the refused sends.
    assert_eq!(app.inbox(&b, "").await.body["total_count"], 0);
    // Duplicates collapse into one delivery.
    app.send_with(&a, json!({"recipient_agent_ids": ["b", "b"]}))
        .await
        .expect_status(201);
    assert_eq!(app.inbox(&b, "").await.body["total_count"], 1);
    app.stop().await;
}

#[tokio::test]
async fn all_means_every_member_but_the_sender() {
    let app = TestApp::start().await;
    let team = app.team("t").await;
    let a = app.agent(&team, "a", &[]).await;
    let b = app.agent(&team, "b", &[]).await;
    let c = app.agent(&team, "c", &[]).await;
    let res = app
        .send_with(&a, json!({"recipient_agent_ids": ["ALL"]}))
        .await
        .expect_status(201);
    assert_eq!(
        res.body["delivery_status"]["pending_delivery"],
        json!(["b", "c"])
    );
    for agent in [&b, &c] {
        assert_eq!(app.inbox(agent, "").await.body["total_count"], 1);
    }
    assert_eq!(app.inbox(&a, "").await.body["total_count"], 0);
    app.send_with(&a, json!({"recipient_agent_ids": ["ALL", "b"]}))
        .await
        .expect_invalid("recipient_agent_ids");
    app.stop().await;
}

#[tokio::test]
async fn enums_are_checked() {
    let app = TestApp::start().await;
    let team = app.team("t").await;
    let a = app.agent(&team, "a", &[]).await;
    app.agent(&team, "b", &[]).await;
    let to_b = |mut extra: Value| {
        extra["recipient_agent_ids"] = json!(["b"]);
        extra
    };
    app.send_with(&a, to_b(json!({"message_type": "gossip"})))
        .await
        .expect_invalid("message_type");
    app.send_with(&a, to_b(json!({"message_type": null})))
        .await
        .expect_invalid("message_type");
    app.send_with(&a, to_b(json!({"priority": "extreme"})))
        .await
        .expect_invalid("priority");
    app.send_with(&a, to_b(json!({"requires_response": "yes"})))
        .await
        .expect_invalid("requires_response");
    for t in ["information", "request", "response", "coordination"] {
        app.send_with(&a, to_b(json!({"message_type": t})))
            .await
            .expect_status(201);
    }
    for p in ["low", "normal", "high", "urgent"] {
        app.send_with(&a, to_b(json!({"priority": p})))
            .await
            .expect_status(201);
    }
    app.stop().await;
}

#[tokio::test]
async fn text_is_one_to_two_thousand_characters() {
    let app = TestApp::start().await;
    let team = app.team("t").await;
    let a = app.agent(&team, "a", &[]).await;
    app.agent(&team, "b", &[]).await;
    let text = |t: Value| json!({"recipient_agent_ids": ["b"], "content": {"text": t}});
    app.send_with(&a, text(json!("")))
        .await
        .expect_invalid("content.text");
    app.send_with(&a, text(json!("   ")))
        .await
        .expect_invalid("content.text");
    app.send_with(
        &a,
        json!({"recipient_agent_ids": ["b"], "content": {"text": null, "data": {}}}),
    )
    .await
    .expect_invalid("content.text");
    let res = app
        .send_with(&a, text(json!("x".repeat(2001))))
        .await
        .expect_error(400, "MESSAGE_TOO_LONG");
    assert_eq!(res.body["details"]["max"], 2000);
    assert_eq!(res.body["details"]["field"], "content.text");
    // Characters, not bytes: 2000 two-byte characters are fine.
    app.send_with(&a, text(json!("é".repeat(2000))))
        .await
        .expect_status(201);
    app.send_with(&a, text(json!("x"))).await.expect_status(201);
    app.stop().await;
}

#[tokio::test]
async fn data_is_any_object() {
    let app = TestApp::start().await;
    let team = app.team("t").await;
    let a = app.agent(&team, "a", &[]).await;
    let b = app.agent(&team, "b", &[]).await;
    let with =
        |data: Value| json!({"recipient_agent_ids": ["b"], "content": {"text": "x", "data": data}});
    app.send_with(&a, with(json!([1, 2])))
        .await
        .expect_invalid("content.data");
    app.send_with(&a, with(json!("text")))
        .await
        .expect_invalid("content.data");
    let nested = json!({"deep": {"list": [1, {"x": null}], "n": 1.5, "flag": true}});
    app.send_with(&a, with(nested.clone()))
        .await
        .expect_status(201);
    assert_eq!(
        app.inbox(&b, "").await.body["messages"][0]["content"]["data"],
        nested
    );
    app.stop().await;
}

#[tokio::test]
async fn attachments_are_a_url_or_a_small_inline_payload() {
    let app = TestApp::start().await;
    let team = app.team("t").await;
    let a = app.agent(&team, "a", &[]).await;
    let b = app.agent(&team, "b", &[]).await;
    let with = |attachments: Value| json!({"recipient_agent_ids": ["b"], "content": {"text": "see attached", "attachments": attachments}});
    let url = json!({"name": "spec.pdf", "media_type": "application/pdf", "url": "https://example.com/spec.pdf"});
    let inline = json!({"name": "notes.txt", "media_type": "text/plain", "data": b64(10)});
    app.send_with(&a, with(json!([url, inline])))
        .await
        .expect_status(201);
    let got = &app.inbox(&b, "").await.body["messages"][0]["content"]["attachments"];
    assert_eq!(got, &json!([url, inline]));

    let one = |a: Value| with(json!([a]));
    let f = |i: &str| format!("content.attachments[0].{i}");
    app.send_with(&a, one(json!({"name": "x", "media_type": "text/plain"})))
        .await
        .expect_invalid(&f("url"));
    app.send_with(&a, one(json!({"name": "x", "media_type": "text/plain", "url": "https://e.com", "data": b64(1)})))
        .await
        .expect_invalid(&f("url"));
    app.send_with(
        &a,
        one(json!({"name": "x", "media_type": "text/plain", "url": "ftp://e.com/x"})),
    )
    .await
    .expect_invalid(&f("url"));
    app.send_with(
        &a,
        one(json!({"name": "", "media_type": "text/plain", "url": "https://e.com"})),
    )
    .await
    .expect_invalid(&f("name"));
    app.send_with(
        &a,
        one(json!({"name": "x", "media_type": "plain", "url": "https://e.com"})),
    )
    .await
    .expect_invalid(&f("media_type"));
    app.send_with(
        &a,
        one(json!({"name": "x", "media_type": "text/plain", "data": "%%%not base64"})),
    )
    .await
    .expect_invalid(&f("data"));
    app.send_with(
        &a,
        one(json!({"name": "x", "media_type": "text/plain", "url": "https://e.com", "size": 1})),
    )
    .await
    .expect_invalid("content.attachments[0].size");
    // Size caps are "message too long".
    app.send_with(
        &a,
        one(json!({"name": "x", "media_type": "text/plain", "data": b64(64 * 1024 + 1)})),
    )
    .await
    .expect_error(400, "MESSAGE_TOO_LONG");
    let eleven: Vec<Value> = (0..11).map(|_| url.clone()).collect();
    app.send_with(&a, with(json!(eleven)))
        .await
        .expect_error(400, "MESSAGE_TOO_LONG");
    let big: Vec<Value> = (0..5)
        .map(|i| json!({"name": format!("p{i}"), "media_type": "application/octet-stream", "data": b64(60 * 1024)}))
        .collect();
    app.send_with(&a, with(json!(big)))
        .await
        .expect_error(400, "MESSAGE_TOO_LONG");
    app.stop().await;
}

#[tokio::test]
async fn response_deadlines_need_a_required_response_in_the_future() {
    let app = TestApp::start().await;
    let team = app.team("t").await;
    let a = app.agent(&team, "a", &[]).await;
    let b = app.agent(&team, "b", &[]).await;
    let future = (chrono::Utc::now() + chrono::Duration::hours(1)).to_rfc3339();
    let past = (chrono::Utc::now() - chrono::Duration::hours(1)).to_rfc3339();
    app.send_with(
        &a,
        json!({"recipient_agent_ids": ["b"], "response_deadline": future}),
    )
    .await
    .expect_invalid("response_deadline");
    app.send_with(
        &a,
        json!({"recipient_agent_ids": ["b"], "requires_response": true, "response_deadline": past}),
    )
    .await
    .expect_invalid("response_deadline");
    app.send_with(&a, json!({"recipient_agent_ids": ["b"], "requires_response": true, "response_deadline": "tomorrow"}))
        .await
        .expect_invalid("response_deadline");
    app.send_with(&a, json!({"recipient_agent_ids": ["b"], "requires_response": true, "response_deadline": future}))
        .await
        .expect_status(201);
    let deadline = app.inbox(&b, "").await.body["messages"][0]["response_deadline"].clone();
    let parsed = chrono::DateTime::parse_from_rfc3339(deadline.as_str().expect("deadline"))
        .expect("rfc3339");
    assert_eq!(
        parsed.timestamp(),
        chrono::DateTime::parse_from_rfc3339(&future)
            .expect("future")
            .timestamp()
    );
    app.stop().await;
}

#[tokio::test]
async fn references_and_threads_follow_a_conversation() {
    let app = TestApp::start().await;
    let team = app.team("t").await;
    let a = app.agent(&team, "a", &[]).await;
    let b = app.agent(&team, "b", &[]).await;
    let c = app.agent(&team, "c", &[]).await;
    app.send_with(
        &a,
        json!({"recipient_agent_ids": ["b"], "context_reference": "x".repeat(257)}),
    )
    .await
    .expect_invalid("context_reference");
    app.send_with(&a, json!({"recipient_agent_ids": ["b"], "thread_id": ""}))
        .await
        .expect_invalid("thread_id");

    let first = app.send(&a, &[&b], "first").await;
    // B follows up: the thread is the first message's id.
    app.send_with(
        &b,
        json!({"recipient_agent_ids": ["a"], "in_reply_to": first}),
    )
    .await
    .expect_status(201);
    let reply = &app.inbox(&a, "").await.body["messages"][0];
    assert_eq!(reply["in_reply_to"], first.as_str());
    assert_eq!(reply["thread_id"], first.as_str());
    let threaded = app.inbox(&a, &format!("?thread_id={first}")).await;
    assert_eq!(threaded.body["total_count"], 1);

    // C never saw the first message and cannot refer to it.
    app.send_with(
        &c,
        json!({"recipient_agent_ids": ["a"], "in_reply_to": first}),
    )
    .await
    .expect_error(404, "MESSAGE_NOT_FOUND");
    app.send_with(
        &c,
        json!({"recipient_agent_ids": ["a"], "in_reply_to": "msg_nope"}),
    )
    .await
    .expect_error(404, "MESSAGE_NOT_FOUND");
    app.stop().await;
}

#[tokio::test]
async fn switched_off_communication_stops_senders_and_fails_recipients() {
    let app = TestApp::start().await;
    let team = app.team("t").await;
    let a = app.agent(&team, "a", &[]).await;
    let b = app.agent(&team, "b", &[]).await;
    let c = app.agent(&team, "c", &[]).await;

    // A recipient whose communication is off cannot receive: failed, and nothing stored.
    app.patch("/v1/teams/t/agents/c")
        .token(&team.key)
        .json(json!({"communication_enabled": false}))
        .send()
        .await
        .expect_status(200);
    let res = app
        .send_with(&a, json!({"recipient_agent_ids": ["b", "c"]}))
        .await
        .expect_status(201);
    assert_eq!(
        res.body["delivery_status"],
        json!({"delivered_to": [], "failed_delivery": ["c"], "pending_delivery": ["b"]})
    );
    assert_eq!(app.inbox(&c, "").await.body["total_count"], 0);
    // …and it cannot send.
    app.send_with(&c, json!({"recipient_agent_ids": ["a"]}))
        .await
        .expect_error(403, "COMMUNICATION_DISABLED");

    // With the team switched off, nobody sends anything.
    app.patch("/v1/teams/t")
        .token(&team.key)
        .json(json!({"communication_enabled": false}))
        .send()
        .await
        .expect_status(200);
    let res = app
        .send_with(&a, json!({"recipient_agent_ids": ["b"]}))
        .await
        .expect_error(403, "COMMUNICATION_DISABLED");
    assert_eq!(res.body["details"]["team_id"], "t");
    app.post("/v1/broadcasts")
        .token(&a.token)
        .json(json!({"sender_agent_id": "a", "update_type": "progress", "urgency": "info", "content": {"summary": "s"}}))
        .send()
        .await
        .expect_error(403, "COMMUNICATION_DISABLED");
    app.post("/v1/assistance-requests")
        .token(&a.token)
        .json(json!({"requester_agent_id": "a", "assistance_type": "review", "required_capabilities": [], "request_details": {"description": "d"}}))
        .send()
        .await
        .expect_error(403, "COMMUNICATION_DISABLED");
    // Reading still works.
    assert_eq!(app.inbox(&b, "").await.body["total_count"], 1);
    let _ = c;
    app.stop().await;
}

#[tokio::test]
async fn an_idempotency_key_makes_a_retry_return_the_first_answer() {
    let app = TestApp::start().await;
    let team = app.team("t").await;
    let a = app.agent(&team, "a", &[]).await;
    let b = app.agent(&team, "b", &[]).await;
    let body = json!({"sender_agent_id": "a", "recipient_agent_ids": ["b"], "message_type": "information", "content": {"text": "once"}});
    let send = |key: &str, body: Value| {
        app.post("/v1/messages")
            .token(&a.token)
            .header("idempotency-key", key)
            .json(body)
            .send()
    };
    let first = send("retry-1", body.clone()).await.expect_status(201);
    let again = send("retry-1", body.clone()).await.expect_status(201);
    assert_eq!(first.body, again.body);
    assert_eq!(app.inbox(&b, "").await.body["total_count"], 1);

    // The same key for a different request is refused.
    let mut other = body.clone();
    other["content"]["text"] = json!("twice?");
    send("retry-1", other).await.expect_error(409, "CONFLICT");
    // Keys are per sender and shaped.
    send(&"k".repeat(256), body.clone())
        .await
        .expect_invalid("Idempotency-Key");
    send("has space", body.clone())
        .await
        .expect_invalid("Idempotency-Key");
    send("retry-2", body).await.expect_status(201);
    assert_eq!(app.inbox(&b, "").await.body["total_count"], 2);
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_retries_with_one_key_send_exactly_once() {
    let app = TestApp::start().await;
    let team = app.team("t").await;
    let a = app.agent(&team, "a", &[]).await;
    let b = app.agent(&team, "b", &[]).await;
    let body = json!({"sender_agent_id": "a", "recipient_agent_ids": ["b"], "message_type": "information", "content": {"text": "storm"}});
    let retries = (0..20).map(|_| {
        app.post("/v1/messages")
            .token(&a.token)
            .header("idempotency-key", "storm-1")
            .json(body.clone())
            .send()
    });
    let answers = futures_util::future::join_all(retries).await;
    let ids: std::collections::HashSet<String> =
        answers.iter().map(|r| r.str("message_id")).collect();
    assert_eq!(ids.len(), 1, "every retry got the first answer");
    assert!(answers.iter().all(|r| r.status == 201));
    assert_eq!(app.inbox(&b, "").await.body["total_count"], 1);
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_sends_get_gap_free_increasing_sequence_numbers() {
    let app = TestApp::start().await;
    let team = app.team("t").await;
    let names: Vec<String> = (0..8).map(|i| format!("s{i}")).collect();
    let senders: Vec<_> =
        futures_util::future::join_all(names.iter().map(|n| app.agent(&team, n, &[]))).await;
    let sink = app.agent(&team, "sink", &[]).await;
    let recipients = [&sink];
    let texts: Vec<String> = (0..200).map(|i| format!("m{i}")).collect();
    let sends = texts
        .iter()
        .enumerate()
        .map(|(i, text)| app.send(&senders[i % senders.len()], &recipients, text));
    let sent: std::collections::HashSet<String> = futures_util::future::join_all(sends)
        .await
        .into_iter()
        .collect();
    assert_eq!(sent.len(), 200);

    let mut seqs = Vec::new();
    let mut cursor = String::new();
    loop {
        let page = app
            .inbox(
                &sink,
                &format!("?limit=100&sort_order=oldest_first{cursor}"),
            )
            .await
            .expect_status(200);
        for m in page.body["messages"].as_array().expect("messages") {
            seqs.push(m["seq"].as_i64().expect("seq"));
        }
        match page.body["next_cursor"].as_str() {
            Some(next) => cursor = format!("&cursor={next}"),
            None => break,
        }
    }
    assert_eq!(seqs, (1..=200).collect::<Vec<i64>>());
    let received: std::collections::HashSet<String> = ids_of(&app.inbox(&sink, "?limit=100").await)
        .into_iter()
        .collect();
    assert!(received.is_subset(&sent));
    app.stop().await;
}
