//! The defects a hostile review found, one test each: every one fails without its fix.

use std::io::Read;
use std::process::{Command, Stdio};

use serde_json::{Value, json};
use switchboard::core::ratelimit::RateLimit;

use crate::support::{ADMIN, TestApp};

/// Top-level bodies, nested objects and frames are objects: an array is never matched to
/// fields by position, duplicate keys are refused, and errors speak of fields, never of
/// Rust types.
#[tokio::test]
async fn arrays_are_not_objects_and_keys_are_not_repeated() {
    let app = TestApp::start().await;
    let res = app
        .post("/v1/teams")
        .token(ADMIN)
        .raw(r#"["name", "id"]"#)
        .send()
        .await
        .expect_invalid("body");
    let message = res.body["error_message"].as_str().unwrap_or_default();
    assert!(message.contains("expected an object"), "{message}");
    assert!(
        !message.contains("struct") && !message.contains("CreateTeam"),
        "{message}"
    );
    let team = app.team("t").await;
    let a = app.agent(&team, "a", &[]).await;
    let b = app.agent(&team, "b", &[]).await;
    app.send_with(
        &a,
        json!({"recipient_agent_ids": ["b"], "content": ["hello"]}),
    )
    .await
    .expect_invalid("content");
    app.post("/v1/messages")
        .token(&a.token)
        .raw(r#"{"sender_agent_id":"a","sender_agent_id":"a","recipient_agent_ids":["b"],"message_type":"information","content":{"text":"x"}}"#)
        .send()
        .await
        .expect_error(400, "VALIDATION_ERROR");
    app.post("/v1/messages")
        .token(&a.token)
        .raw(r#"{"sender_agent_id":"a","recipient_agent_ids":["b"],"message_type":"information","content":{"text":"x","data":{"k":1,"k":2}}}"#)
        .send()
        .await
        .expect_invalid("content.data.k");
    app.post("/v1/tasks/anything/cancel")
        .token(&a.token)
        .raw("[]")
        .send()
        .await
        .expect_invalid("body");
    let (mut ws, _, _) = app.ws_caught_up(&b, "").await;
    ws.send(
        json!({"type": "send_message", "request_id": 1, "sender_agent_id": "b",
        "recipient_agent_ids": ["a"], "message_type": "information", "content": ["x"]}),
    )
    .await;
    let refused = ws.next_of("ErrorMessage").await;
    assert_eq!(refused["details"]["field"], "content", "{refused}");
    ws.send_raw(tokio_tungstenite::tungstenite::Message::Text(
        r#"{"type":"ping","type":"ack","seq":1}"#.into(),
    ))
    .await;
    let refused = ws.next_of("ErrorMessage").await;
    assert!(
        refused["error_message"]
            .as_str()
            .unwrap_or_default()
            .contains("duplicate key"),
        "{refused}"
    );
    app.stop().await;
}

/// A 401 names the scheme that would be accepted.
#[tokio::test]
async fn an_unauthorized_answer_says_which_scheme_to_use() {
    let app = TestApp::start().await;
    let res = app
        .get("/v1/whoami")
        .send()
        .await
        .expect_error(401, "UNAUTHORIZED");
    let challenge = res
        .headers
        .get("www-authenticate")
        .expect("WWW-Authenticate");
    assert!(challenge.to_str().unwrap_or_default().starts_with("Bearer"));
    app.stop().await;
}

/// `.` and `..` are path segments URL clients resolve away: refused as ids.
#[tokio::test]
async fn dot_ids_are_refused() {
    let app = TestApp::start().await;
    let team = app.team("t").await;
    for id in [".", ".."] {
        app.post("/v1/teams/t/agents")
            .token(&team.key)
            .json(json!({"agent_id": id, "role": "r", "capabilities": []}))
            .send()
            .await
            .expect_invalid("agent_id");
        app.post("/v1/teams")
            .token(ADMIN)
            .json(json!({"name": "n", "team_id": id}))
            .send()
            .await
            .expect_invalid("team_id");
    }
    app.stop().await;
}

/// An error never echoes a huge input back whole.
#[tokio::test]
async fn errors_echo_at_most_a_bounded_part_of_the_input() {
    let app = TestApp::start().await;
    let team = app.team("t").await;
    let huge = "x".repeat(200_000);
    let res = app
        .post("/v1/teams/t/agents")
        .token(&team.key)
        .json(json!({"agent_id": huge, "role": "r", "capabilities": []}))
        .send()
        .await
        .expect_invalid("agent_id");
    let size = res.body.to_string().len();
    assert!(size < 4096, "the error body has {size} bytes");
    let a = app.agent(&team, "a", &[]).await;
    let many: Vec<String> = (0..1000).map(|i| format!("nobody-{i:0>50}")).collect();
    let res = app
        .send_with(&a, json!({"recipient_agent_ids": many}))
        .await
        .expect_error(400, "INVALID_RECIPIENT");
    let size = res.body.to_string().len();
    assert!(size < 16 * 1024, "the error body has {size} bytes");
    app.stop().await;
}

/// A client's `X-Request-Id` goes into every log line: only a short, plain one is kept.
#[tokio::test]
async fn only_plain_request_ids_are_kept() {
    let app = TestApp::start().await;
    let id_of = |res: &crate::support::Res| {
        res.headers
            .get("x-request-id")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned()
    };
    let res = app
        .get("/healthz")
        .header("x-request-id", "trace-42.a_b:c")
        .send()
        .await;
    assert_eq!(id_of(&res), "trace-42.a_b:c");
    for forged in ["x".repeat(65), "a b".to_owned(), "id\"} fake=1".to_owned()] {
        let res = app
            .get("/healthz")
            .header("x-request-id", &forged)
            .send()
            .await;
        let id = id_of(&res);
        assert_ne!(id, forged);
        assert_eq!(id.len(), 36, "a fresh UUID, got {id}");
    }
    app.stop().await;
}

/// Heads that are too large are refused with the error body, not an empty one.
#[tokio::test]
async fn oversized_uris_and_headers_get_the_error_body() {
    let app = TestApp::start().await;
    let long = format!("/v1/messages?thread_id={}", "a".repeat(20_000));
    let res = app
        .get(&long)
        .send()
        .await
        .expect_error(414, "URI_TOO_LONG");
    assert_eq!(res.body["details"]["limit_bytes"], 8192);
    // 80 headers of 1 KiB: within hyper's count, over the 64 KiB of header bytes.
    let mut req = app.get("/healthz");
    for i in 0..80 {
        req = req.header(&format!("x-extra-{i}"), &"h".repeat(1024));
    }
    let res = req.send().await.expect_error(431, "HEADERS_TOO_LARGE");
    assert_eq!(res.body["details"]["limit_bytes"], 64 * 1024);
    // More than 100 headers: hyper's own 431 (no body), documented.
    let mut req = app.get("/healthz");
    for i in 0..120 {
        req = req.header(&format!("x-extra-{i}"), "1");
    }
    assert_eq!(req.send().await.status, 431);
    app.get("/healthz")
        .header("x-big", &"b".repeat(100_000))
        .send()
        .await
        .expect_error(431, "HEADERS_TOO_LARGE");
    app.stop().await;
}

/// Sending over the rate limit is a 429 that says when to retry, in the body and in
/// `Retry-After`.
#[tokio::test]
async fn a_rate_limited_answer_carries_retry_after() {
    let app = TestApp::start_with(|c| {
        c.rate_limit = Some(RateLimit {
            per_second: 0.5,
            burst: 1.0,
        })
    })
    .await;
    let team = app.team("t").await;
    let a = app.agent(&team, "a", &[]).await;
    let b = app.agent(&team, "b", &[]).await;
    app.send(&a, &[&b], "first").await;
    let res = app
        .send_with(&a, json!({"recipient_agent_ids": ["b"]}))
        .await
        .expect_error(429, "RATE_LIMITED");
    let wait = res.headers.get("retry-after").expect("Retry-After");
    let seconds: u64 = wait.to_str().unwrap_or("").parse().expect("whole seconds");
    assert!((1..=2).contains(&seconds), "{seconds}");
    app.stop().await;
}

/// The overflow counter is exported from the start, at 0.
#[tokio::test]
async fn the_overflow_metric_exists_before_the_first_overflow() {
    let app = TestApp::start().await;
    let res = app.get("/metrics").send().await.expect_status(200);
    let text = res.body.as_str().unwrap_or_default();
    assert!(
        text.contains("switchboard_ws_outbox_overflows_total"),
        "missing in:\n{text}"
    );
    app.stop().await;
}

/// `switchboard openapi | head` ends quietly when the reader stops early.
#[test]
fn printing_into_a_closed_pipe_is_not_a_panic() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_switchboard"))
        .arg("openapi")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("runs");
    let mut first = [0u8; 16];
    let mut stdout = child.stdout.take().expect("stdout");
    stdout.read_exact(&mut first).expect("some output");
    drop(stdout);
    let out = child.wait_with_output().expect("ends");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(out.status.success(), "{:?}: {stderr}", out.status);
}

/// Log lines written to a file (not a terminal) carry no colour codes.
#[test]
fn logs_in_a_file_have_no_colour_codes() {
    let dir = tempfile::tempdir().expect("dir");
    let log = std::fs::File::create(dir.path().join("log")).expect("file");
    let mut child = Command::new(env!("CARGO_BIN_EXE_switchboard"))
        .args(["serve", "--listen", "127.0.0.1:0", "--admin-token", ADMIN])
        .arg("--database")
        .arg(dir.path().join("db"))
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("starts");
    let path = dir.path().join("log");
    let mut text = String::new();
    for _ in 0..100 {
        text = std::fs::read_to_string(&path).unwrap_or_default();
        if text.contains("listening") {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
    assert!(text.contains("listening"), "{text}");
    assert!(!text.contains('\u{1b}'), "colour codes in:\n{text}");
}

/// What a message's content does on a terminal: shown escaped by the command line.
#[tokio::test]
async fn the_command_line_shows_peer_text_inert() {
    let app = TestApp::start().await;
    let team = app.team("t").await;
    let a = app.agent(&team, "a", &[]).await;
    let b = app.agent(&team, "b", &[]).await;
    let evil = "\u{1b}]0;pwned\u{7}\u{1b}[2Jfake line\r\nroot# ";
    app.send(&a, &[&b], evil).await;
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_switchboard"))
        .args(["agent", "inbox", "--url", &app.base, "--token", &b.token])
        .output()
        .await
        .expect("runs");
    assert!(out.status.success(), "{out:?}");
    let printed = String::from_utf8(out.stdout).expect("utf-8");
    assert!(
        !printed.contains('\u{1b}') && !printed.contains('\u{7}'),
        "{printed:?}"
    );
    assert!(printed.contains("\\u{1b}]0;pwned"), "{printed}");
    assert_eq!(printed.lines().count(), 2, "no fake lines: {printed}");
    // --json stays exact: the text round-trips.
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_switchboard"))
        .args([
            "agent", "inbox", "--json", "--url", &app.base, "--token", &b.token,
        ])
        .output()
        .await
        .expect("runs");
    let page: Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(page["messages"][0]["content"]["text"], evil);
    app.stop().await;
}

/// Even at debug level, the log never carries a token given in the query string (the
/// WebSocket's `access_token`): request lines name the path, not the query.
#[tokio::test]
async fn tokens_in_query_strings_stay_out_of_the_log() {
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("log");
    let log = std::fs::File::create(&path).expect("file");
    let mut child = Command::new(env!("CARGO_BIN_EXE_switchboard"))
        .args(["serve", "--listen", "127.0.0.1:0", "--admin-token", ADMIN])
        .arg("--database")
        .arg(dir.path().join("db"))
        .env("RUST_LOG", "debug")
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("starts");
    let mut addr = None;
    for _ in 0..200 {
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        addr = text
            .split("addr=")
            .nth(1)
            .and_then(|rest| rest.split_whitespace().next())
            .map(str::to_owned);
        if addr.is_some() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let addr = addr.expect("the server logs its address");
    let secret = "sb_agent_0000000000000000_secretsecretsecret";
    for route in ["/v1/ws", "/v1/messages"] {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut stream = tokio::net::TcpStream::connect(&addr)
            .await
            .expect("connects");
        let request = format!(
            "GET {route}?access_token={secret} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        );
        stream.write_all(request.as_bytes()).await.expect("sends");
        let mut answer = String::new();
        stream.read_to_string(&mut answer).await.expect("answer");
        assert!(answer.starts_with("HTTP/1.1 4"), "{route}: {answer}");
    }
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    let _ = child.kill();
    let _ = child.wait();
    let text = std::fs::read_to_string(&path).expect("log");
    assert!(
        text.contains("/v1/ws"),
        "the requests were not logged:\n{text}"
    );
    assert!(
        !text.contains("secretsecret"),
        "a token in the log:\n{text}"
    );
}
