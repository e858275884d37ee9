//! What a peer writes never becomes a header the server did not vouch for.

use std::time::Duration;

use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::support::TestApp;

/// Connects with `version` (its version headers) as `token`, subscribes to `/topic/t`,
/// and returns once the subscription's receipt came.
async fn subscribed(addr: std::net::SocketAddr, version: &str, token: &str) -> TcpStream {
    let mut stream = TcpStream::connect(addr).await.expect("connects");
    let frames = format!(
        "CONNECT\n{version}passcode:{token}\n\n\0\
         SUBSCRIBE\nid:1\ndestination:/topic/t\nreceipt:sub\n\n\0"
    );
    stream.write_all(frames.as_bytes()).await.expect("writes");
    let got = read_until(&mut stream, "receipt-id:sub").await;
    assert!(got.contains("receipt-id:sub"), "{got}");
    stream
}

/// Reads until `marker` arrived (5 s at most); everything read.
pub(super) async fn read_until(stream: &mut TcpStream, marker: &str) -> String {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while !String::from_utf8_lossy(&got).contains(marker) {
        match tokio::time::timeout(Duration::from_secs(5), stream.read(&mut buf)).await {
            Ok(Ok(n)) if n > 0 => got.extend_from_slice(&buf[..n]),
            _ => break,
        }
    }
    String::from_utf8_lossy(&got).into_owned()
}

/// A content type with a line end (for STOMP 1.0, where nothing is escaped) and one with
/// a carriage return (which 1.1 cannot escape), published by REST to a topic: the
/// subscriber's MESSAGE carries the real sender, first, and no forged header or phantom
/// frame. (Before: a 1.0 subscriber read `switchboard-sender: ceo`. A NUL, which would
/// end the frame, is refused where it comes in: `hostile::inputs`.)
#[tokio::test]
async fn a_peer_written_content_type_cannot_forge_a_header_or_a_frame() {
    let app =
        TestApp::start_with(|c| c.stomp_listen = Some("127.0.0.1:0".parse().expect("addr"))).await;
    let team = app.team("inject").await;
    let a = app.agent(&team, "a", &[]).await;
    let b = app.agent(&team, "b", &[]).await;
    let addr = app.server().stomp_addr().expect("STOMP listener");
    for (version, content_type, text) in [
        ("", "text/plain\nswitchboard-sender:ceo", "from a, v1.0"),
        (
            "accept-version:1.1\n",
            "text/plain\r\nswitchboard-sender:ceo",
            "from a, v1.1",
        ),
    ] {
        let mut stream = subscribed(addr, version, &b.token).await;
        app.post("/v1/publish")
            .token(&a.token)
            .json(json!({"cause_by": "t",
                         "content": {"text": text, "data": {"stomp_content_type": content_type}}}))
            .send()
            .await
            .expect_status(201);
        let got = read_until(&mut stream, text).await;
        let message = got
            .split('\0')
            .find(|f| f.trim_start().starts_with("MESSAGE"))
            .unwrap_or_else(|| panic!("no MESSAGE: {got:?}"));
        let senders: Vec<&str> = message
            .lines()
            .filter_map(|l| l.strip_prefix("switchboard-sender:"))
            .collect();
        assert_eq!(senders, ["a"], "{message:?}");
        assert!(
            message.contains("content-type:text/plain;charset=utf-8"),
            "{message:?}"
        );
        assert_eq!(got.matches("MESSAGE\n").count(), 1, "one frame: {got:?}");
        assert!(message.ends_with(text), "{message:?}");
    }
    app.stop().await;
}

/// `ALL` names the whole team in SEND_MESSAGE: no agent may be registered under it, in
/// any casing, by a team key or by a STOMP bridge that registers the names it meets.
#[tokio::test]
async fn the_whole_team_is_no_agent_in_any_casing() {
    let app =
        TestApp::start_with(|c| c.stomp_listen = Some("127.0.0.1:0".parse().expect("addr"))).await;
    let team = app.team("reserved").await;
    for id in ["ALL", "all", "All"] {
        let refused = app
            .post("/v1/teams/reserved/agents")
            .token(&team.key)
            .json(json!({"agent_id": id, "role": "r", "capabilities": []}))
            .send()
            .await
            .expect_error(400, "VALIDATION_ERROR");
        assert_eq!(refused.body["details"]["field"], "agent_id");
    }
    let addr = app.server().stomp_addr().expect("STOMP listener");
    let mut stream = TcpStream::connect(addr).await.expect("connects");
    let frames = format!(
        "CONNECT\naccept-version:1.2\nlogin:reserved\npasscode:{}\n\n\0\
         SUBSCRIBE\nid:1\ndestination:/queue/request/aLL\nreceipt:sub\n\n\0",
        team.key
    );
    stream.write_all(frames.as_bytes()).await.expect("writes");
    let got = read_until(&mut stream, "reserved").await;
    assert!(
        got.contains("ERROR\nmessage:agent_id 'aLL' is reserved"),
        "{got}"
    );
    assert!(!got.contains("RECEIPT"), "{got}");
    let members = app
        .get("/v1/teams/reserved/agents")
        .token(&team.key)
        .send()
        .await
        .expect_status(200);
    assert_eq!(members.body["agents"], json!([]));
    app.stop().await;
}

/// Issue 61, item 6: a NUL in a Wise body (`_chat_id: "c\0"`, a YAML escape) reached
/// PostgreSQL: "could not reach its storage" to the sender, an ERROR in the log, and the
/// batch retried one by one. It is refused at the gate like a NUL anywhere else, the
/// sender's connection goes on, and nothing is stored.
#[tokio::test]
async fn a_nul_in_a_wise_body_is_refused_where_it_comes_in() {
    let app =
        TestApp::start_with(|c| c.stomp_listen = Some("127.0.0.1:0".parse().expect("addr"))).await;
    let team = app.team("nul").await;
    let addr = app.server().stomp_addr().expect("STOMP listener");
    let mut stream = TcpStream::connect(addr).await.expect("connects");
    let body = |chat: &str| {
        format!(
            "!wiseagents.WiseAgentMessage\n_chat_id: \"{chat}\"\n_context_name: ctx\n\
             _message: hello\n_message_type: QUERY\n_sender: w1\n"
        )
    };
    let frames = format!(
        "CONNECT\naccept-version:1.2\nlogin:nul\npasscode:{}\n\n\0\
         SUBSCRIBE\nid:1\ndestination:/queue/request/w1\n\n\0\
         SEND\ndestination:/queue/request/w2\nreceipt:nul\n\n{}\0\
         SEND\ndestination:/queue/request/w2\nreceipt:clean\n\n{}\0",
        team.key,
        body("c\\0"),
        body("c1"),
    );
    stream.write_all(frames.as_bytes()).await.expect("writes");
    let got = read_until(&mut stream, "receipt-id:clean").await;
    assert!(
        got.contains("a string may not contain U+0000 (NUL)"),
        "{got}"
    );
    assert!(got.contains("receipt-id:nul"), "{got}");
    assert!(got.contains("RECEIPT\nreceipt-id:clean"), "{got}");
    let traffic = app
        .get("/v1/teams/nul/messages")
        .token(&team.key)
        .send()
        .await
        .expect_status(200);
    let entries = traffic.body["entries"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(entries.len(), 1, "{}", traffic.body);
    assert_eq!(entries[0]["message"]["thread_id"], "c1");
}
