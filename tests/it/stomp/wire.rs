//! What no stock client will do on purpose — stay silent after agreeing to heart-beats,
//! connect without credentials — written on a raw socket.

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::support::TestApp;

async fn app(heart_beat: Duration) -> TestApp {
    TestApp::start_with(|config| {
        config.stomp_listen = Some("127.0.0.1:0".parse().expect("addr"));
        config.stomp_heart_beat = heart_beat;
    })
    .await
}

/// Everything the server sends until it closes the connection (at most 10 s).
async fn read_to_close(stream: &mut TcpStream) -> String {
    let mut all = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut all)).await;
    String::from_utf8_lossy(&all).into_owned()
}

#[tokio::test]
async fn a_client_that_agreed_to_heart_beats_and_falls_silent_is_disconnected() {
    let app = app(Duration::from_millis(200)).await;
    let team = app.wise_team("t").await;
    let agent = app.agent(&team, "quiet", &[]).await;
    let addr = app.server().stomp_addr().expect("STOMP listener");
    let mut stream = TcpStream::connect(addr).await.expect("connects");
    let connect = format!(
        "CONNECT\naccept-version:1.2\nheart-beat:100,0\npasscode:{}\n\n\0",
        agent.token
    );
    stream.write_all(connect.as_bytes()).await.expect("writes");
    let started = Instant::now();
    let got = read_to_close(&mut stream).await;
    assert!(got.starts_with("CONNECTED\n"), "{got}");
    // The server asked for 200 ms; the client offered 100: every 200 ms is due.
    assert!(got.contains("heart-beat:0,200\n"), "{got}");
    assert!(got.contains("ERROR\nmessage:heart-beat timeout"), "{got}");
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(400) && waited < Duration::from_secs(5),
        "{waited:?}"
    );
}

#[tokio::test]
async fn no_credentials_no_connection() {
    let app = app(Duration::ZERO).await;
    let addr = app.server().stomp_addr().expect("STOMP listener");
    for connect in [
        "STOMP\naccept-version:1.1\n\n\0",
        "CONNECT\naccept-version:1.2\nlogin:t\npasscode:not-a-token\n\n\0",
        "CONNECT\naccept-version:2.0\n\n\0",
    ] {
        let mut stream = TcpStream::connect(addr).await.expect("connects");
        stream.write_all(connect.as_bytes()).await.expect("writes");
        let got = read_to_close(&mut stream).await;
        assert!(got.starts_with("ERROR\n"), "{connect:?}: {got}");
        assert!(!got.contains("CONNECTED"), "{got}");
    }
}

#[tokio::test]
async fn the_websocket_answers_one_stomp_subprotocol_the_client_offered() {
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    let app = app(Duration::ZERO).await;
    let url = app.base.replacen("http://", "ws://", 1) + "/v1/stomp";
    for (offered, answered) in [
        (Some("v10.stomp, v11.stomp"), Some("v11.stomp")),
        (Some("mqtt, v12.stomp"), Some("v12.stomp")),
        (Some("mqtt"), None),
        (None, None),
    ] {
        let mut request = url.as_str().into_client_request().expect("request");
        if let Some(offered) = offered {
            request
                .headers_mut()
                .insert("sec-websocket-protocol", offered.parse().expect("header"));
        }
        let result = tokio_tungstenite::connect_async(request).await;
        match (result, answered) {
            (Ok((_, response)), Some(answered)) => {
                let header = response.headers().get("sec-websocket-protocol");
                assert_eq!(header.and_then(|h| h.to_str().ok()), Some(answered));
            }
            (Ok((_, response)), None) => {
                assert!(response.headers().get("sec-websocket-protocol").is_none());
            }
            // A client that offered protocols and got none back may refuse the
            // connection itself; the server answered none of them either way.
            (Err(_), None) => {}
            (Err(err), Some(_)) => panic!("{offered:?}: {err}"),
        }
    }
    let plain = app.get("/v1/stomp").send().await;
    let plain = plain.expect_error(400, "VALIDATION_ERROR");
    assert_eq!(plain.body["details"]["field"], "upgrade");
}

/// Connects as `token` and subscribes to `destination`; returns once the subscription's
/// receipt arrived.
async fn subscribed(addr: std::net::SocketAddr, token: &str, destination: &str) -> TcpStream {
    subscribed_reading(addr, token, destination).await.0
}

/// Like [`subscribed`], with what arrived up to the receipt (messages may come first).
async fn subscribed_reading(
    addr: std::net::SocketAddr,
    token: &str,
    destination: &str,
) -> (TcpStream, String) {
    subscribed_acking(addr, token, destination, "auto").await
}

/// The agent's `stomp_queues` and `deaf`, as the registry shows them.
pub(super) async fn presence(
    app: &TestApp,
    team: &crate::support::Team,
    agent: &str,
) -> (Value, Value) {
    let res = app
        .get(&format!("/v1/teams/{}/agents", team.id))
        .token(&team.key)
        .send()
        .await
        .expect_status(200);
    let view = res.body["agents"]
        .as_array()
        .and_then(|list| list.iter().find(|a| a["agent_id"] == agent))
        .cloned()
        .expect("listed");
    (view["stomp_queues"].clone(), view["deaf"].clone())
}

#[tokio::test]
async fn an_agent_that_lost_a_subscription_shows_as_deaf_until_it_subscribes_again() {
    let app = app(Duration::ZERO).await;
    let team = app.wise_team("t").await;
    let agent = app.agent(&team, "wise", &[]).await;
    let addr = app.server().stomp_addr().expect("STOMP listener");
    let requests = subscribed(addr, &agent.token, "/queue/request/wise").await;
    let mut responses = subscribed(addr, &agent.token, "/queue/response/wise").await;
    assert_eq!(
        presence(&app, &team, "wise").await,
        (json!(["request", "response"]), json!(false))
    );
    // The request connection drops without DISCONNECT: the agent no longer hears it.
    drop(requests);
    let deadline = Instant::now() + Duration::from_secs(5);
    while presence(&app, &team, "wise").await != (json!(["response"]), json!(true)) {
        assert!(
            Instant::now() < deadline,
            "{:?}",
            presence(&app, &team, "wise").await
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let metrics = app.get("/metrics").send().await.expect_status(200);
    let text = metrics.body.as_str().unwrap_or_default().to_owned();
    // (The gauge is process-wide and other tests' servers set it too: only its
    // presence is checked here; the registry above is this server's truth.)
    assert!(text.contains("switchboard_stomp_deaf_agents"), "{text}");
    // A clean DISCONNECT of the other is not deafness; the lost one still is.
    responses
        .write_all(b"DISCONNECT\nreceipt:bye\n\n\0")
        .await
        .expect("writes");
    let _ = read_to_close(&mut responses).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(
        presence(&app, &team, "wise").await,
        (json!([]), json!(true))
    );
    // Restarted, it subscribes again and hears everything.
    let _requests = subscribed(addr, &agent.token, "/queue/request/wise").await;
    assert_eq!(
        presence(&app, &team, "wise").await,
        (json!(["request"]), json!(false))
    );
}

/// Item 4 of issue 62: a Wise Agents process never subscribes again, so one that lost
/// its subscription — dropped, or cut by a server restart — stays deaf until it is
/// restarted itself. The server showed `deaf: false` after its own restart; it keeps
/// what it knew, and learns it of the connections its restart cut.
#[tokio::test]
async fn deafness_is_remembered_across_a_server_restart() {
    let mut app = app(Duration::ZERO).await;
    let team = app.wise_team("t").await;
    let dropped = app.agent(&team, "dropped", &[]).await;
    let cut = app.agent(&team, "cut", &[]).await;
    let quiet = app.agent(&team, "quiet", &[]).await;
    let addr = app.server().stomp_addr().expect("STOMP listener");
    let requests = subscribed(addr, &dropped.token, "/queue/request/dropped").await;
    let _cut = subscribed(addr, &cut.token, "/queue/response/cut").await;
    let mut unsubscribed = subscribed(addr, &quiet.token, "/queue/request/quiet").await;
    unsubscribed
        .write_all(b"DISCONNECT\nreceipt:bye\n\n\0")
        .await
        .expect("writes");
    let _ = read_to_close(&mut unsubscribed).await;
    drop(requests);
    let deadline = Instant::now() + Duration::from_secs(5);
    while presence(&app, &team, "dropped").await.1 != json!(true) {
        assert!(Instant::now() < deadline, "never deaf");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    app.restart().await;
    assert_eq!(
        presence(&app, &team, "dropped").await,
        (json!([]), json!(true))
    );
    assert_eq!(
        presence(&app, &team, "cut").await,
        (json!([]), json!(true)),
        "its connection was cut by the restart"
    );
    assert_eq!(
        presence(&app, &team, "quiet").await,
        (json!([]), json!(false)),
        "it left on purpose"
    );
    // Restarted, the process subscribes again and hears: no longer deaf, and that is
    // kept too.
    let addr = app.server().stomp_addr().expect("STOMP listener");
    let mut again = subscribed(addr, &dropped.token, "/queue/request/dropped").await;
    assert_eq!(
        presence(&app, &team, "dropped").await,
        (json!(["request"]), json!(false))
    );
    again
        .write_all(b"DISCONNECT\nreceipt:bye\n\n\0")
        .await
        .expect("writes");
    let _ = read_to_close(&mut again).await;
    app.restart().await;
    assert_eq!(
        presence(&app, &team, "dropped").await,
        (json!([]), json!(false))
    );
}

/// Sends `frames` on a new connection and returns all the server sent until it closed
/// (or the frames' DISCONNECT was answered).
async fn exchange(addr: std::net::SocketAddr, frames: &str) -> String {
    let mut stream = TcpStream::connect(addr).await.expect("connects");
    stream.write_all(frames.as_bytes()).await.expect("writes");
    read_to_close(&mut stream).await
}

#[tokio::test]
async fn a_team_can_stop_its_bridge_from_registering_agents() {
    let app = app(Duration::ZERO).await;
    let team = app.wise_team("t").await;
    let res = app.get("/v1/teams/t").token(&team.key).send().await;
    assert_eq!(res.expect_status(200).body["stomp_auto_register"], true);
    let res = app
        .patch("/v1/teams/t")
        .token(&team.key)
        .json(json!({"stomp_auto_register": false}))
        .send()
        .await
        .expect_status(200);
    assert_eq!(res.body["stomp_auto_register"], false);
    let addr = app.server().stomp_addr().expect("STOMP listener");
    let frames = format!(
        "STOMP\naccept-version:1.1\nlogin:t\npasscode:{}\n\n\0\
         SUBSCRIBE\nid:1\ndestination:/queue/request/newcomer\n\n\0",
        team.key
    );
    let got = exchange(addr, &frames).await;
    assert!(got.contains("ERROR\nmessage:"), "{got}");
    assert!(got.contains("AGENT_NOT_FOUND"), "{got}");
    let agents = app.get("/v1/teams/t/agents").token(&team.key).send().await;
    assert_eq!(agents.expect_status(200).body["total_count"], 0);
    // A patch must still say something.
    app.patch("/v1/teams/t")
        .token(&team.key)
        .json(json!({}))
        .send()
        .await
        .expect_invalid("body");
}

#[tokio::test]
async fn an_anonymous_team_lets_clients_without_credentials_bridge_into_it() {
    let app = TestApp::start_with(|config| {
        config.stomp_listen = Some("127.0.0.1:0".parse().expect("addr"));
        config.stomp_anonymous_team = Some("laptop".into());
    })
    .await;
    let team = app.team("laptop").await;
    let addr = app.server().stomp_addr().expect("STOMP listener");
    let frames = "STOMP\naccept-version:1.1\n\n\0\
         SUBSCRIBE\nid:1\ndestination:/queue/request/solo\n\n\0\
         DISCONNECT\nreceipt:bye\n\n\0";
    let got = exchange(addr, frames).await;
    assert!(got.starts_with("CONNECTED\n"), "{got}");
    assert!(got.contains("RECEIPT\nreceipt-id:bye"), "{got}");
    let agents = app
        .get("/v1/teams/laptop/agents")
        .token(&team.key)
        .send()
        .await;
    assert_eq!(
        agents.expect_status(200).body["agents"][0]["agent_id"],
        "solo"
    );
}

/// Reads from `stream` until `count` MESSAGE frames arrived (or 5 s passed); their
/// `switchboard-seq` headers.
async fn message_seqs(stream: &mut TcpStream, already: &str, count: usize) -> Vec<String> {
    let mut got = already.to_owned();
    let mut buf = [0u8; 4096];
    let deadline = Instant::now() + Duration::from_secs(5);
    while got.matches("MESSAGE\n").count() < count && Instant::now() < deadline {
        match tokio::time::timeout(Duration::from_millis(300), stream.read(&mut buf)).await {
            Ok(Ok(n)) if n > 0 => got.push_str(&String::from_utf8_lossy(&buf[..n])),
            Ok(_) => break,
            Err(_) => {}
        }
    }
    got.lines()
        .filter_map(|l| l.strip_prefix("switchboard-seq:"))
        .map(str::to_owned)
        .collect()
}

#[tokio::test]
async fn a_queue_cursor_survives_a_restart() {
    let mut app = app(Duration::ZERO).await;
    let team = app.wise_team("t").await;
    let sender = app.agent(&team, "sender", &[]).await;
    let wise = app.agent(&team, "wise", &[]).await;
    for text in ["one", "two"] {
        app.send(&sender, &[&wise], text).await;
    }
    let addr = app.server().stomp_addr().expect("STOMP listener");
    let (mut stream, early) = subscribed_reading(addr, &wise.token, "/queue/request/wise").await;
    assert_eq!(message_seqs(&mut stream, &early, 2).await, ["1", "2"]);
    drop(stream);
    // A graceful restart saves the cursors it holds in memory.
    app.restart().await;
    app.send(&sender, &[&wise], "three").await;
    let addr = app.server().stomp_addr().expect("STOMP listener");
    let (mut stream, early) = subscribed_reading(addr, &wise.token, "/queue/request/wise").await;
    assert_eq!(message_seqs(&mut stream, &early, 1).await, ["3"]);
    // Nothing else comes.
    assert!(message_seqs(&mut stream, "", 1).await.is_empty());
}

#[tokio::test]
async fn accepted_sockets_have_tcp_keep_alive() {
    let app = app(Duration::ZERO).await;
    let stomp = app.server().stomp_addr().expect("STOMP listener");
    let http = app.server().local_addr();
    for addr in [stomp, http] {
        let stream = TcpStream::connect(addr).await.expect("connects");
        let client_port = stream.local_addr().expect("local addr").port();
        tokio::time::sleep(Duration::from_millis(100)).await;
        // /proc/net/tcp: the server's end of this connection (local = the server's port,
        // remote = ours) runs the keep-alive timer (`tr` 02) when SO_KEEPALIVE is on.
        let table = std::fs::read_to_string("/proc/net/tcp").expect("Linux /proc/net/tcp");
        let hex = |port: u16| format!(":{port:04X}");
        let line = table
            .lines()
            .find(|l| {
                let cols: Vec<&str> = l.split_whitespace().collect();
                cols.len() > 5
                    && cols[1].ends_with(&hex(addr.port()))
                    && cols[2].ends_with(&hex(client_port))
            })
            .unwrap_or_else(|| panic!("no server socket for our connection in:\n{table}"));
        let timer = line.split_whitespace().nth(5).unwrap_or_default();
        assert!(
            timer.starts_with("02:"),
            "{addr}: keep-alive timer not running: {line}"
        );
        drop(stream);
    }
}

/// An `ACK` sent in the same write as the `UNSUBSCRIBE` or `DISCONNECT` after it takes
/// effect first: frames of a connection take effect in the order they were sent. Before,
/// the ACK travelled to the subscription's task, which could see the end first and drop
/// it (4 of 4, 8 of 8 with DISCONNECT even when it asked for a receipt): the acknowledged
/// message came again on the next subscription.
#[tokio::test]
async fn an_ack_just_before_the_end_is_never_lost() {
    let app = app(Duration::ZERO).await;
    let team = app.wise_team("t").await;
    let sender = app.agent(&team, "sender", &[]).await;
    let addr = app.server().stomp_addr().expect("STOMP listener");
    let mut round = 0;
    for mode in ["client", "client-individual"] {
        for end in ["UNSUBSCRIBE\nid:1\n\n\0", "DISCONNECT\nreceipt:bye\n\n\0"] {
            for _ in 0..5 {
                round += 1;
                let wise = app.agent(&team, &format!("wise{round}"), &[]).await;
                for text in ["one", "two"] {
                    app.send(&sender, &[&wise], text).await;
                }
                let destination = format!("/queue/request/wise{round}");
                let (mut stream, early) =
                    subscribed_acking(addr, &wise.token, &destination, mode).await;
                assert_eq!(message_seqs(&mut stream, &early, 2).await, ["1", "2"]);
                // The ACK of the first and the end, in one write.
                let frames = format!("ACK\nsubscription:1\nmessage-id:1:1\n\n\0{end}");
                let frames = if end.starts_with("UNSUBSCRIBE") {
                    format!("{frames}DISCONNECT\nreceipt:bye\n\n\0")
                } else {
                    frames
                };
                stream.write_all(frames.as_bytes()).await.expect("writes");
                let rest = read_to_close(&mut stream).await;
                assert!(rest.contains("receipt-id:bye"), "{mode} {end:?}: {rest}");
                let (mut again, early) =
                    subscribed_acking(addr, &wise.token, &destination, mode).await;
                // In inbox order: a lost ACK shows as "1" coming first.
                assert_eq!(
                    message_seqs(&mut again, &early, 1).await,
                    ["2"],
                    "{mode}, then {end:?}: the acknowledged message came again"
                );
            }
        }
    }
}

/// Connects as `token` and subscribes to `destination` with ack `mode`; the stream and
/// what arrived up to the subscription's receipt (messages may come first).
async fn subscribed_acking(
    addr: std::net::SocketAddr,
    token: &str,
    destination: &str,
    mode: &str,
) -> (TcpStream, String) {
    let mut stream = TcpStream::connect(addr).await.expect("connects");
    let frames = format!(
        "STOMP\naccept-version:1.1\npasscode:{token}\n\n\0\
         SUBSCRIBE\nid:1\ndestination:{destination}\nack:{mode}\nreceipt:sub\n\n\0"
    );
    stream.write_all(frames.as_bytes()).await.expect("writes");
    let mut got = Vec::new();
    let mut buf = [0u8; 1024];
    while !String::from_utf8_lossy(&got).contains("receipt-id:sub") {
        let n = tokio::time::timeout(Duration::from_secs(5), stream.read(&mut buf))
            .await
            .expect("the receipt comes")
            .expect("reads");
        assert!(n > 0, "closed: {}", String::from_utf8_lossy(&got));
        got.extend_from_slice(&buf[..n]);
    }
    (stream, String::from_utf8_lossy(&got).into_owned())
}
