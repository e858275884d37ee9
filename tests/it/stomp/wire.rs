//! What no stock client will do on purpose — stay silent after agreeing to heart-beats,
//! connect without credentials — written on a raw socket.

use std::time::{Duration, Instant};

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
    let team = app.team("t").await;
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
