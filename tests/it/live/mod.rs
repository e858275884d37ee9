//! The WebSocket hub: connect, push after commit, replay and cursors, operations as
//! frames, keep-alive, backpressure, bad input, shutdown, presence and isolation.

use std::time::Duration;

use base64::Engine;
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;

use crate::support::{ADMIN, TestApp};

fn seqs(frames: &[Value]) -> Vec<i64> {
    frames.iter().filter_map(|f| f["seq"].as_i64()).collect()
}

#[tokio::test]
async fn the_token_is_checked_before_the_upgrade() {
    let app = TestApp::start().await;
    let team = app.team("t").await;
    let agent = app.agent(&team, "a", &[]).await;
    let (status, body) = app.ws_connect("/v1/ws", None).await.err().expect("refused");
    assert_eq!(
        (status, body["error_code"].clone()),
        (401, json!("UNAUTHORIZED"))
    );
    let (status, body) = app
        .ws_connect("/v1/ws", Some("sb_agent_0000000000000000_00"))
        .await
        .err()
        .expect("refused");
    assert_eq!(
        (status, body["error_code"].clone()),
        (401, json!("UNAUTHORIZED"))
    );
    let (status, body) = app
        .ws_connect("/v1/ws", Some(&team.key))
        .await
        .err()
        .expect("refused");
    assert_eq!(
        (status, body["error_code"].clone()),
        (403, json!("FORBIDDEN"))
    );
    let (status, body) = app
        .ws_connect("/v1/ws?since=-1", Some(&agent.token))
        .await
        .err()
        .expect("refused");
    assert_eq!(
        (status, body["details"]["field"].clone()),
        (400, json!("since"))
    );
    // Browsers pass the token as a query parameter.
    let mut ws = app
        .ws_connect(&format!("/v1/ws?access_token={}", agent.token), None)
        .await
        .expect("opens");
    assert_eq!(ws.next().await["type"], "hello");
    // A plain GET is not an upgrade.
    app.get("/v1/ws")
        .token(&agent.token)
        .send()
        .await
        .expect_invalid("upgrade");
    app.stop().await;
}

#[tokio::test]
async fn a_committed_message_is_pushed_to_every_connection_of_the_recipient() {
    let app = TestApp::start().await;
    let team = app.team("t").await;
    let a = app.agent(&team, "a", &[]).await;
    let b = app.agent(&team, "b", &[]).await;
    let (mut first, replayed, seq) = app.ws_caught_up(&b, "").await;
    assert_eq!((replayed.len(), seq), (0, 0));
    let (mut second, _, _) = app.ws_caught_up(&b, "").await;

    let sent = app
        .send_with(&a, json!({"recipient_agent_ids": ["b"], "content": {"text": "live!"}, "priority": "urgent"}))
        .await
        .expect_status(201);
    assert_eq!(sent.body["delivery_status"]["delivered_to"], json!(["b"]));
    assert_eq!(sent.body["delivery_status"]["pending_delivery"], json!([]));
    for ws in [&mut first, &mut second] {
        let frame = ws.next().await;
        assert_eq!(frame["type"], "message");
        assert_eq!(frame["seq"], 1);
        let m = &frame["message"];
        assert_eq!(m["seq"], 1);
        assert_eq!(m["message_id"], sent.body["message_id"]);
        assert_eq!(m["sender_agent_id"], "a");
        assert_eq!(m["content"]["text"], "live!");
        assert_eq!(m["priority"], "urgent");
        assert_eq!(m["read_status"], false);
        // The frame carries what GET_MESSAGES shows.
        let listed = app.inbox(&b, "").await.body["messages"][0].clone();
        assert_eq!(m, &listed);
    }
    // The sender is not pushed its own message.
    let (mut sender_ws, _, _) = app.ws_caught_up(&a, "").await;
    sender_ws.assert_quiet().await;
    app.stop().await;
}

#[tokio::test]
async fn broadcasts_responses_and_assistance_requests_are_pushed_too() {
    let app = TestApp::start().await;
    let team = app.team("t").await;
    let a = app.agent(&team, "a", &["x"]).await;
    let b = app.agent(&team, "b", &["x"]).await;
    let (mut wa, _, _) = app.ws_caught_up(&a, "").await;
    let (mut wb, _, _) = app.ws_caught_up(&b, "").await;
    app.post("/v1/broadcasts")
        .token(&a.token)
        .json(json!({"sender_agent_id": "a", "update_type": "discovery", "urgency": "critical", "content": {"summary": "found it"}}))
        .send()
        .await
        .expect_status(201);
    let frame = wb.next().await;
    assert_eq!(frame["message"]["kind"], "broadcast");
    assert_eq!(frame["message"]["priority"], "urgent");
    let request = app
        .post("/v1/assistance-requests")
        .token(&b.token)
        .json(json!({"requester_agent_id": "b", "assistance_type": "review", "required_capabilities": ["x"], "request_details": {"description": "look"}}))
        .send()
        .await
        .expect_status(201);
    let frame = wa.next().await;
    assert_eq!(frame["message"]["kind"], "assistance_request");
    let id = request.str("request_id");
    app.post(&format!("/v1/messages/{id}/responses"))
        .token(&a.token)
        .json(json!({"responder_agent_id": "a", "response_content": {"text": "lgtm", "status": "completed"}}))
        .send()
        .await
        .expect_status(201);
    let frame = wb.next().await;
    assert_eq!(frame["message"]["kind"], "response");
    assert_eq!(frame["message"]["in_reply_to"], id.as_str());
    assert_eq!(seqs(&[frame]), [2]);
    app.stop().await;
}

#[tokio::test]
async fn since_replays_what_was_missed_in_order_then_goes_live() {
    let app = TestApp::start().await;
    let team = app.team("t").await;
    let a = app.agent(&team, "a", &[]).await;
    let b = app.agent(&team, "b", &[]).await;
    for i in 1..=5 {
        app.send(&a, &[&b], &format!("offline {i}")).await;
    }
    let (mut ws, replayed, caught_up) = app.ws_caught_up(&b, "?since=2").await;
    assert_eq!(seqs(&replayed), [3, 4, 5]);
    assert_eq!(caught_up, 5);
    assert_eq!(replayed[0]["message"]["content"]["text"], "offline 3");
    app.send(&a, &[&b], "live 6").await;
    assert_eq!(ws.next().await["seq"], 6);
    // since beyond the end replays nothing, and the connection resumes from the newest
    // entry: what is committed later still arrives (a cursor ahead of the inbox must
    // not make the agent deaf).
    drop(ws);
    let (mut ws, replayed, caught_up) = app.ws_caught_up(&b, "?since=100").await;
    assert_eq!((replayed.len(), caught_up), (0, 6));
    app.send(&a, &[&b], "live 7").await;
    assert_eq!(ws.next().await["seq"], 7);
    app.stop().await;
}

/// An ack of an entry the connection never sent is refused with an `ErrorMessage`
/// and changes nothing: pushes keep coming, and a reconnect without `since` replays.
#[tokio::test]
async fn an_ack_beyond_what_was_sent_is_refused_and_changes_nothing() {
    let app = TestApp::start().await;
    let team = app.team("t").await;
    let a = app.agent(&team, "a", &[]).await;
    let b = app.agent(&team, "b", &[]).await;
    app.send(&a, &[&b], "m1").await;
    let (mut ws, _, caught_up) = app.ws_caught_up(&b, "").await;
    assert_eq!(caught_up, 1);
    ws.send(json!({"type": "ack", "seq": 1000})).await;
    let refused = ws.next_of("ErrorMessage").await;
    assert_eq!(refused["error_code"], "VALIDATION_ERROR", "{refused}");
    assert_eq!(refused["details"]["field"], "seq", "{refused}");
    assert_eq!(refused["details"]["last_sent"], 1, "{refused}");
    app.send(&a, &[&b], "m2").await;
    assert_eq!(ws.next().await["seq"], 2, "still receiving live pushes");
    ws.send(json!({"type": "ack", "seq": 1})).await;
    ws.assert_quiet().await;
    drop(ws);
    let (_, replayed, caught_up) = app.ws_caught_up(&b, "").await;
    assert_eq!(
        (seqs(&replayed), caught_up),
        (vec![2], 2),
        "resumes after the valid ack"
    );
    app.stop().await;
}

#[tokio::test]
async fn a_reconnect_resumes_after_the_last_ack() {
    let app = TestApp::start().await;
    let team = app.team("t").await;
    let a = app.agent(&team, "a", &[]).await;
    let b = app.agent(&team, "b", &[]).await;
    let (mut ws, _, _) = app.ws_caught_up(&b, "").await;
    for i in 1..=3 {
        app.send(&a, &[&b], &format!("m{i}")).await;
    }
    for expected in 1..=3 {
        assert_eq!(ws.next().await["seq"], expected);
    }
    ws.send(json!({"type": "ack", "seq": 2})).await;
    ws.assert_quiet().await; // the ack has been processed once the pong is back
    drop(ws);
    app.send(&a, &[&b], "m4").await;
    let (_, replayed, caught_up) = app.ws_caught_up(&b, "").await;
    assert_eq!(
        seqs(&replayed),
        [3, 4],
        "resumes after the ack, unacked 3 comes again"
    );
    assert_eq!(caught_up, 4);
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_gap_and_no_duplicate_at_the_seam_between_replay_and_live() {
    let app = TestApp::start().await;
    let team = app.team("t").await;
    let a = app.agent(&team, "a", &[]).await;
    let b = app.agent(&team, "b", &[]).await;
    for i in 0..300 {
        app.send(&a, &[&b], &format!("before {i}")).await;
    }
    // Sends keep arriving while the connection replays.
    let base = app.base.clone();
    let http = app.http.clone();
    let a_token = a.token.clone();
    let writer = tokio::spawn(async move {
        for i in 0..300 {
            let res = http
                .post(format!("{base}/v1/messages"))
                .bearer_auth(&a_token)
                .json(&json!({"sender_agent_id": "a", "recipient_agent_ids": ["b"], "message_type": "information", "content": {"text": format!("during {i}")}}))
                .send()
                .await
                .expect("sent");
            assert_eq!(res.status(), 201);
        }
    });
    let mut ws = app.ws(&b, "?since=0").await;
    let mut got = Vec::new();
    while got.len() < 600 {
        let frame = ws.next().await;
        if frame["type"] == "message" {
            got.push(frame["seq"].as_i64().expect("seq"));
        }
    }
    writer.await.expect("writer");
    assert_eq!(got, (1..=600).collect::<Vec<i64>>());
    ws.assert_quiet().await;
    app.stop().await;
}

#[tokio::test]
async fn a_restart_between_send_and_reconnect_loses_nothing() {
    let mut app = TestApp::start().await;
    let team = app.team("t").await;
    let a = app.agent(&team, "a", &[]).await;
    let b = app.agent(&team, "b", &[]).await;
    let (mut ws, _, _) = app.ws_caught_up(&b, "").await;
    app.send(&a, &[&b], "seen").await;
    assert_eq!(ws.next().await["seq"], 1);
    ws.send(json!({"type": "ack", "seq": 1})).await;
    ws.assert_quiet().await;
    app.send(&a, &[&b], "not yet seen").await;
    app.send(&a, &[&b], "nor this").await;
    // The server stops: the connection gets 1001.
    let stopping = tokio::spawn(async move {
        let frame = ws.closed().await;
        frame.map(|f| u16::from(f.code))
    });
    app.restart().await;
    assert_eq!(stopping.await.expect("reader"), Some(1001));
    let (_, replayed, caught_up) = app.ws_caught_up(&b, "").await;
    assert_eq!(seqs(&replayed), [2, 3], "the ack survived the restart");
    assert_eq!(caught_up, 3);
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_consumer_is_closed_and_others_keep_receiving() {
    let app = TestApp::start_with(|c| c.ws_outbox = 4).await;
    let team = app.team("t").await;
    let a = app.agent(&team, "a", &[]).await;
    let slow = app.agent(&team, "slow", &[]).await;
    let fast = app.agent(&team, "fast", &[]).await;
    let (mut slow_ws, _, _) = app.ws_caught_up(&slow, "").await;
    let (mut fast_ws, _, _) = app.ws_caught_up(&fast, "").await;
    // Big frames, so the kernel's socket buffers fill and the slow session's outbox
    // backs up while its client reads nothing.
    let attachment = base64::engine::general_purpose::STANDARD.encode(vec![b'z'; 60 * 1024]);
    let attachments: Vec<Value> = (0..4)
        .map(|i| json!({"name": format!("f{i}"), "media_type": "application/octet-stream", "data": attachment}))
        .collect();
    let reader = tokio::spawn(async move {
        let mut seen = Vec::new();
        while seen.len() < 60 {
            seen.push(fast_ws.next().await["seq"].as_i64().expect("seq"));
        }
        seen
    });
    for _ in 0..60 {
        app.send_with(&a, json!({"recipient_agent_ids": ["slow", "fast"], "content": {"text": "bulk", "attachments": attachments}}))
            .await
            .expect_status(201);
    }
    assert_eq!(
        reader.await.expect("reader"),
        (1..=60).collect::<Vec<i64>>(),
        "the fast reader got everything"
    );
    let close = slow_ws.closed().await.expect("a close frame");
    assert_eq!(close.code, CloseCode::from(4008));
    // `delivered_to` named "slow" for entries its closed connection never wrote: what it
    // promises is the outbox and the replay, and the document says exactly that.
    let doc = serde_json::to_value(switchboard::server::openapi_document()).expect("doc");
    let promise =
        doc["components"]["schemas"]["DeliveryStatus"]["properties"]["delivered_to"]["description"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
    assert!(
        promise.contains("outbox")
            && promise.contains("replay")
            && promise.contains("Not a receipt"),
        "{promise}"
    );
    // It resumes from its cursor and gets everything.
    let (_, replayed, caught_up) = app.ws_caught_up(&slow, "?since=0").await;
    assert_eq!(seqs(&replayed), (1..=60).collect::<Vec<i64>>());
    assert_eq!(caught_up, 60);
    app.stop().await;
}

#[tokio::test]
async fn a_connection_that_stops_answering_pings_is_closed() {
    let app = TestApp::start_with(|c| c.ws_ping_interval = Duration::from_secs(30)).await;
    let team = app.team("t").await;
    let b = app.agent(&team, "b", &[]).await;
    let (mut ws, _, _) = app.ws_caught_up(&b, "").await;
    // Paused time: the server's heartbeat ticks when told to, not after 60 real seconds.
    // The client reads nothing meanwhile, so it answers no ping. After each tick the
    // session gets to run (yielding; the runtime is this test's own thread) before the
    // clock moves again.
    tokio::time::pause();
    for _ in 0..2 {
        tokio::time::advance(Duration::from_secs(31)).await;
        for _ in 0..100 {
            tokio::task::yield_now().await;
        }
    }
    tokio::time::resume();
    let mut pings = 0;
    let close = loop {
        match ws.next_raw().await {
            Message::Ping(_) => pings += 1,
            Message::Close(frame) => break frame,
            other => panic!("unexpected {other:?}"),
        }
    };
    assert_eq!(pings, 1);
    assert_eq!(close.expect("close frame").code, CloseCode::from(4001));
    app.stop().await;
}

#[tokio::test]
async fn a_connection_that_answers_pings_stays_open() {
    let app = TestApp::start_with(|c| c.ws_ping_interval = Duration::from_millis(50)).await;
    let team = app.team("t").await;
    let a = app.agent(&team, "a", &[]).await;
    let b = app.agent(&team, "b", &[]).await;
    let (mut ws, _, _) = app.ws_caught_up(&b, "").await;
    // The client library answers each ping as it reads; after several rounds the
    // connection still delivers.
    let mut pings = 0;
    while pings < 4 {
        if let Message::Ping(_) = ws.next_raw().await {
            pings += 1;
        }
    }
    // Reading while the send is on its way: pings come every 50 ms, and a client that
    // stops reading for two of them (a slow send on a busy machine) is rightly closed.
    let to = [&b];
    let (_, frame) = tokio::join!(app.send(&a, &to, "still here?"), ws.next());
    assert_eq!(frame["message"]["content"]["text"], "still here?");
    // Application-level pings work too.
    ws.send(json!({"type": "ping"})).await;
    assert_eq!(ws.next_of("pong").await["type"], "pong");
    app.stop().await;
}

#[tokio::test]
async fn presence_shows_who_is_connected_and_ranks_them_first() {
    let app = TestApp::start().await;
    let team = app.team("t").await;
    let asker = app.agent(&team, "asker", &[]).await;
    app.agent(&team, "away", &["rust"]).await;
    let here = app.agent(&team, "here", &["rust"]).await;
    let read = |id: &str| {
        app.get(&format!("/v1/teams/t/agents/{id}"))
            .token(&team.key)
            .send()
    };
    let before = read("here").await.body["agent"].clone();
    assert_eq!(before["connected"], false);
    assert_eq!(before["connected_since"], Value::Null);

    let (ws, _, _) = app.ws_caught_up(&here, "").await;
    let during = read("here").await.body["agent"].clone();
    assert_eq!(during["connected"], true);
    assert!(during["connected_since"].is_string());
    let ranked = app
        .post("/v1/assistance-requests")
        .token(&asker.token)
        .json(json!({"requester_agent_id": "asker", "assistance_type": "review", "required_capabilities": ["rust"], "request_details": {"description": "?"}}))
        .send()
        .await
        .expect_status(201);
    let order: Vec<&str> = ranked.body["potential_responders"]
        .as_array()
        .expect("list")
        .iter()
        .filter_map(|r| r["agent_id"].as_str())
        .collect();
    assert_eq!(
        order,
        ["here", "away"],
        "connected before disconnected, same match and status"
    );

    drop(ws);
    // The server notices the disconnect when its session reads the end of the stream.
    let mut after = read("here").await.body["agent"].clone();
    for _ in 0..200 {
        if after["connected"] == false {
            break;
        }
        tokio::task::yield_now().await;
        after = read("here").await.body["agent"].clone();
    }
    assert_eq!(after["connected"], false);
    assert!(after["last_seen_at"].is_string());
    app.stop().await;
}

#[tokio::test]
async fn removing_an_agent_ends_its_connections() {
    let app = TestApp::start().await;
    let team = app.team("t").await;
    let gone = app.agent(&team, "gone", &[]).await;
    let (mut ws, _, _) = app.ws_caught_up(&gone, "").await;
    app.delete("/v1/teams/t/agents/gone")
        .token(&team.key)
        .send()
        .await
        .expect_status(200);
    assert_eq!(
        ws.closed().await.expect("close").code,
        CloseCode::from(4003)
    );
    let (status, _) = app
        .ws_connect("/v1/ws", Some(&gone.token))
        .await
        .err()
        .expect("refused");
    assert_eq!(status, 401);
    app.stop().await;
}

#[tokio::test]
async fn shutdown_closes_every_session_with_1001_and_waits_for_them() {
    let app = TestApp::start().await;
    let team = app.team("t").await;
    let b = app.agent(&team, "b", &[]).await;
    let (mut first, _, _) = app.ws_caught_up(&b, "").await;
    let (mut second, _, _) = app.ws_caught_up(&b, "").await;
    let readers = tokio::spawn(async move {
        let one = first.closed().await.map(|f| u16::from(f.code));
        let two = second.closed().await.map(|f| u16::from(f.code));
        (one, two)
    });
    app.stop().await;
    assert_eq!(readers.await.expect("readers"), (Some(1001), Some(1001)));
    let _ = ADMIN;
}

mod operations;

/// A client's close frame is answered with a close frame (1000), so a clean goodbye is
/// clean on both sides instead of an abnormal end (1006).
#[tokio::test]
async fn a_client_close_is_answered_with_1000() {
    use tokio_tungstenite::tungstenite::protocol::CloseFrame;
    let app = TestApp::start().await;
    let team = app.team("t").await;
    let b = app.agent(&team, "b", &[]).await;
    let (mut ws, _, _) = app.ws_caught_up(&b, "").await;
    ws.send_raw(Message::Close(Some(CloseFrame {
        code: CloseCode::Normal,
        reason: "bye".into(),
    })))
    .await;
    let answer = ws
        .closed()
        .await
        .expect("the server answers the close frame");
    assert_eq!(answer.code, CloseCode::Normal);
    app.stop().await;
}

/// Live connections are bounded per agent (4029) and in total (1013): one more than the
/// limit is closed with its code and a reason, and a place that frees up can be taken.
#[tokio::test]
async fn connections_are_bounded_per_agent_and_in_total() {
    let app = TestApp::start_with(|c| {
        c.ws_max_per_agent = 2;
        c.ws_max_connections = 3;
    })
    .await;
    let team = app.team("t").await;
    let a = app.agent(&team, "a", &[]).await;
    let b = app.agent(&team, "b", &[]).await;
    let (first, _, _) = app.ws_caught_up(&a, "").await;
    let (_second, _, _) = app.ws_caught_up(&a, "").await;
    let close = refused(&app, &a)
        .await
        .expect("a third connection is refused");
    assert_eq!(u16::from(close.code), 4029);
    assert!(
        close.reason.contains("too many connections"),
        "{}",
        close.reason
    );
    let (_b1, _, _) = app.ws_caught_up(&b, "").await;
    let close = refused(&app, &b)
        .await
        .expect("a fourth in total is refused");
    assert_eq!(u16::from(close.code), 1013);
    assert!(close.reason.contains("limit"), "{}", close.reason);
    drop(first);
    // The freed place is given again once the server noticed the close.
    let mut taken = false;
    for _ in 0..50 {
        if refused(&app, &a).await.is_none() {
            taken = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert!(taken, "the freed place was never given again");
    app.stop().await;
}

/// Connects as `agent`: the close frame when the server refuses the connection, `None`
/// when it says hello.
async fn refused(
    app: &TestApp,
    agent: &crate::support::Agent,
) -> Option<tokio_tungstenite::tungstenite::protocol::CloseFrame> {
    let mut ws = app
        .ws_connect("/v1/ws", Some(&agent.token))
        .await
        .expect("the upgrade succeeds");
    match ws.next_raw().await {
        Message::Close(frame) => Some(frame.expect("a close frame with a code")),
        Message::Text(text) => {
            assert!(text.contains("hello"), "{text}");
            None
        }
        other => panic!("unexpected {other:?}"),
    }
}
