//! What reaches the log: a line per request when asked for, a warning for a slow one,
//! nothing a peer wrote at length, and no alarm for a client's ordinary mistake.

use std::time::Duration;

use serde_json::{Value, json};

use crate::process::{Process, call, team_k};

/// Waits until the server logged a line `matches` accepts (5 s at most); all lines.
async fn logged_until(server: &Process, matches: impl Fn(&Value) -> bool) -> Vec<Value> {
    for _ in 0..100 {
        let lines = server.logged();
        if lines.iter().any(&matches) {
            return lines;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    server.logged()
}

/// Request lines are DEBUG, on their own target (`switchboard::access`): at the default
/// level a health checker and a polling console wrote two lines a second that said
/// nothing. A request that is slow without having asked to wait is a WARN at any level;
/// a claim that waited is not. The start names the console and the docs, and the
/// descriptor limit is a number.
#[tokio::test]
async fn request_lines_are_debug_and_a_slow_request_is_a_warning() {
    let dir = tempfile::tempdir().expect("tmp");
    let quiet = Process::start(&dir.path().join("quiet.db"));
    let http = reqwest::Client::new();
    let healthz = format!("{}/healthz?access_token=secret-in-query", quiet.base);
    let answer = http.get(&healthz).send().await.expect("answered");
    assert_eq!(answer.status(), 200);
    // The listening line names the console and the docs; the descriptor limit is a number.
    let base = &quiet.base;
    assert_eq!(
        quiet.listening["console"],
        format!("{base}/console").as_str()
    );
    assert_eq!(quiet.listening["docs"], format!("{base}/docs").as_str());
    let tokens = team_k(&http, &quiet).await;
    // A claim that waits its 2 s for work is not slow: nothing at WARN.
    let (status, _) = call(
        &http,
        &quiet,
        reqwest::Method::POST,
        "/v1/tasks/claim",
        &tokens[0],
        Some(json!({"wait_seconds": 2})),
    )
    .await;
    assert_eq!(status, 200);
    let slow = slow_body(&quiet, &tokens[0]).await;
    let lines = logged_until(&quiet, |l| l["message"] == "slow request").await;
    let budget = lines.iter().find(|l| l["message"] == "connection budget");
    assert!(
        budget.is_some_and(|l| l["descriptors"].is_u64()),
        "{lines:?}"
    );
    let warned: Vec<&Value> = lines.iter().filter(|l| l["level"] == "WARN").collect();
    let body = warned
        .iter()
        .find(|l| l["route"] == "/v1/messages" && l["method"] == "POST");
    assert!(
        body.is_some_and(|l| l["duration_ms"].as_f64() >= Some(1000.0)),
        "{slow} {warned:?}"
    );
    let claim = warned.iter().find(|l| l["route"] == "/v1/tasks/claim");
    assert!(
        claim.is_none(),
        "a claim that waited is not slow: {warned:?}"
    );
    let access = lines
        .iter()
        .filter(|l| l["target"] == "switchboard::access" && l["level"] != "WARN");
    assert_eq!(access.count(), 0, "no request line at INFO: {lines:?}");
    quiet.kill();
}

/// Turned on, each request is one DEBUG line on `switchboard::access`, its duration in ms
/// to the microsecond, never its query string.
#[tokio::test]
async fn a_request_line_turned_on_is_one_readable_line() {
    let dir = tempfile::tempdir().expect("tmp");
    let told = Process::start_logging(
        &dir.path().join("told.db"),
        "info,switchboard::access=debug",
    );
    let http = reqwest::Client::new();
    let healthz = format!("{}/healthz?access_token=secret-in-query", told.base);
    let answer = http
        .get(&healthz)
        .header("x-request-id", "look-for-me")
        .send()
        .await
        .expect("answered");
    assert_eq!(answer.status(), 200);
    logged_until(&told, |l| l["request_id"] == "look-for-me").await;
    let raw: Vec<String> = told.log.lock().expect("log").clone();
    let line = raw
        .iter()
        .find(|l| l.contains("look-for-me"))
        .expect("the request's line");
    let parsed: Value = serde_json::from_str(line).expect("json");
    assert_eq!(parsed["target"], "switchboard::access");
    assert_eq!(parsed["level"], "DEBUG");
    assert_eq!(parsed["method"], "GET");
    assert_eq!(parsed["route"], "/healthz");
    assert_eq!(parsed["status"], 200);
    assert!(!line.contains("secret-in-query"), "{line}");
    // `0.042`, not `0.041922999999999995`.
    let duration = line
        .split("\"duration_ms\":")
        .nth(1)
        .and_then(|rest| rest.split([',', '}']).next())
        .expect("a duration");
    let decimals = duration.split('.').nth(1).map_or(0, str::len);
    assert!(decimals <= 3, "duration_ms {duration}");
    told.kill();
}

/// A SEND_MESSAGE whose body arrives 1.2 s after its head: slow, and not by asking to
/// wait. Answers what the server said.
async fn slow_body(server: &Process, token: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let addr = server.base.trim_start_matches("http://");
    let mut socket = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let body = "{}";
    let head = format!(
        "POST /v1/messages HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Authorization: Bearer {token}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    socket.write_all(head.as_bytes()).await.expect("head");
    tokio::time::sleep(Duration::from_millis(1200)).await;
    socket.write_all(body.as_bytes()).await.expect("body");
    let mut answer = String::new();
    let _ = socket.read_to_string(&mut answer).await;
    answer
}

/// Peer-written text never reaches the log, or an answer, at length: an MCP client whose
/// name is 200 KB, an A2A method name of 200 KB. And a client reusing its own task id is
/// told 409 without the log calling it damage ("stored data is not what this version
/// expects" was logged as a WARN).
#[tokio::test]
async fn peers_cannot_write_long_lines_or_false_alarms_into_the_log() {
    let dir = tempfile::tempdir().expect("tmp");
    let server = Process::start(&dir.path().join("peer.db"));
    let http = reqwest::Client::new();
    let tokens = team_k(&http, &server).await;
    let huge = "n".repeat(200_000);
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": huge, "version": "1"}}});
    let answer = http
        .post(format!("{}/mcp", server.base))
        .bearer_auth(&tokens[0])
        .header("accept", "application/json, text/event-stream")
        .json(&initialize)
        .send()
        .await
        .expect("answered");
    assert!(answer.status().is_success(), "{}", answer.status());
    let unknown = json!({"jsonrpc": "2.0", "id": 2, "method": huge, "params": {}});
    let answer = http
        .post(format!("{}/a2a/k/b", server.base))
        .bearer_auth(&tokens[0])
        .json(&unknown)
        .send()
        .await
        .expect("answered")
        .text()
        .await
        .expect("a body");
    assert!(answer.len() < 4096, "the answer has {} bytes", answer.len());
    assert!(answer.contains("-32601"), "{answer}");

    let task = json!({"task_id": "again", "originating_agent_id": "a", "target_agent_id": "b",
                      "description": "once"});
    for expected in [201, 409] {
        let (status, _) = call(
            &http,
            &server,
            reqwest::Method::POST,
            "/v1/tasks",
            &tokens[0],
            Some(task.clone()),
        )
        .await;
        assert_eq!(status, expected);
    }
    let lines = logged_until(&server, |l| l["status"] == 409).await;
    let longest = server
        .log
        .lock()
        .expect("log")
        .iter()
        .map(String::len)
        .max();
    assert!(longest < Some(8 * 1024), "a log line of {longest:?} bytes");
    // (A slow request under a loaded test run is a WARN of its own, not an alarm here.)
    let alarms: Vec<&Value> = lines
        .iter()
        .filter(|l| l["level"] == "WARN" || l["level"] == "ERROR")
        .filter(|l| l["message"] != "slow request")
        .collect();
    assert!(alarms.is_empty(), "{alarms:?}");
    server.kill();
}
