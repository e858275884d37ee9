//! The README's walkthroughs, run as written: every code block after a
//! `<!-- walkthrough: NAME -->` marker is executed with bash against a real server, with
//! only `http://localhost:8080` replaced by the test server's address.

use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

use crate::support::TestApp;
use crate::wsclient::Ws;

const README: &str = include_str!("../../README.md");

/// The admin token the README starts the server with.
pub const WALKTHROUGH_ADMIN: &str = "walkthrough-admin-token";

/// The shell code of a walkthrough (all its marked blocks, in order).
pub fn walkthrough(name: &str) -> String {
    let marker = format!("<!-- walkthrough: {name} -->");
    let mut script = String::new();
    for part in README.split(&marker).skip(1) {
        let block = part
            .split_once("```sh\n")
            .and_then(|(_, rest)| rest.split_once("\n```"))
            .map(|(code, _)| code)
            .unwrap_or_else(|| panic!("walkthrough '{name}' marker without a ```sh block"));
        script.push_str(block);
        script.push('\n');
    }
    assert!(!script.is_empty(), "README has no walkthrough '{name}'");
    script
}

/// Runs a script with bash (`-euo pipefail`) against `app`; returns stdout.
pub async fn run(app: &TestApp, script: &str) -> String {
    let script = script.replace("http://localhost:8080", &app.base);
    let out = tokio::process::Command::new("bash")
        .args(["-euo", "pipefail", "-c", &script])
        .output()
        .await
        .expect("bash runs");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "walkthrough failed ({}):\nstdout:\n{stdout}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// The JSON objects a script printed, one per line.
pub fn printed_json(stdout: &str) -> Vec<Value> {
    stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l.trim()).ok())
        .filter(Value::is_object)
        .collect()
}

#[tokio::test]
async fn the_foundation_walkthrough_works_as_written() {
    let app = TestApp::start_with(|c| c.admin_token = Some(WALKTHROUGH_ADMIN.to_owned())).await;
    let out = run(&app, &walkthrough("foundation")).await;
    let answers = printed_json(&out);
    assert_eq!(answers.len(), 6, "{out}");
    assert_eq!(answers[0]["team_id"], "research");
    assert_eq!(answers[1]["agent"]["agent_id"], "planner");
    assert_eq!(answers[2]["agent"]["agent_id"], "coder");
    let found: Vec<&str> = answers[3]["agents"]
        .as_array()
        .expect("agents")
        .iter()
        .filter_map(|a| a["agent_id"].as_str())
        .collect();
    assert_eq!(found, ["coder"]);
    assert_eq!(answers[4]["agent"]["status"], "busy");
    assert_eq!(answers[5]["error_code"], "AGENT_ALREADY_REGISTERED");
    app.stop().await;
}

#[tokio::test]
async fn the_messaging_walkthrough_works_as_written() {
    let app = TestApp::start_with(|c| c.admin_token = Some(WALKTHROUGH_ADMIN.to_owned())).await;
    let script = format!(
        "{}\n{}",
        walkthrough("foundation"),
        walkthrough("messaging")
    );
    let out = run(&app, &script).await;
    let answers = printed_json(&out);
    // Six answers of the foundation part, then the messaging ones.
    let answers = &answers[6..];
    assert_eq!(answers.len(), 9, "{out}");
    assert_eq!(
        answers[0]["delivery_status"]["pending_delivery"],
        serde_json::json!(["coder"])
    );
    assert_eq!(answers[1]["total_count"], 1);
    assert_eq!(answers[1]["messages"][0]["priority"], "high");
    assert_eq!(answers[2]["marked_read"].as_array().map(Vec::len), Some(1));
    assert_eq!(answers[3]["original_message_updated"], true);
    assert_eq!(answers[4]["recipients"], serde_json::json!(["coder"]));
    assert_eq!(answers[5]["potential_responders"][0]["agent_id"], "planner");
    assert_eq!(answers[6]["error_code"], "INVALID_RECIPIENT");
    assert_eq!(answers[7]["error_code"], "MESSAGE_TOO_LONG");
    assert_eq!(answers[8]["error_code"], "RESPONSE_NOT_REQUIRED");
    app.stop().await;
}

#[tokio::test]
async fn the_routes_walkthrough_works_as_written() {
    let app = TestApp::start_with(|c| c.admin_token = Some(WALKTHROUGH_ADMIN.to_owned())).await;
    let script = format!("{}\n{}", walkthrough("foundation"), walkthrough("routes"));
    let out = run(&app, &script).await;
    let answers = printed_json(&out);
    assert_eq!(answers.len(), 8, "{out}");
    assert_eq!(
        answers[6]["delivery_status"]["pending_delivery"],
        json!(["coder"]),
        "{out}"
    );
    assert_eq!(answers[7]["messages"][0]["route"], "stomp", "{out}");
    assert_eq!(
        answers[7]["messages"][0]["content"]["text"],
        "for your STOMP queue"
    );
    app.stop().await;
}

#[tokio::test]
async fn the_mcp_walkthrough_works_as_written() {
    let app = TestApp::start_with(|c| c.admin_token = Some(WALKTHROUGH_ADMIN.to_owned())).await;
    let script = format!("{}\n{}", walkthrough("foundation"), walkthrough("mcp"));
    let out = run(&app, &script).await;
    let answers = printed_json(&out);
    assert_eq!(answers.len(), 7, "{out}");
    let result = &answers[6]["result"];
    assert_eq!(result["isError"], false, "{out}");
    assert_eq!(
        result["structuredContent"]["delivery_status"]["pending_delivery"],
        json!(["coder"])
    );
    app.stop().await;
}

#[tokio::test]
async fn the_retention_walkthrough_works_as_written() {
    let app = TestApp::start_with(|c| c.admin_token = Some(WALKTHROUGH_ADMIN.to_owned())).await;
    let script = format!(
        "{}\n{}",
        walkthrough("foundation"),
        walkthrough("retention")
    );
    let out = run(&app, &script).await;
    let answers = printed_json(&out);
    assert_eq!(answers.len(), 7, "{out}");
    let team = &answers[6];
    assert_eq!(team["retention"]["read_messages_seconds"], 604800, "{team}");
    assert_eq!(
        team["effective_retention"]["finished_tasks_seconds"],
        2592000
    );
    assert_eq!(
        team["effective_retention"]["unread_messages_seconds"],
        Value::Null
    );
    app.stop().await;
}

/// A `## ` section of the README (the text after `heading`, up to the next section).
fn section(heading: &str) -> &'static str {
    README
        .split(heading)
        .nth(1)
        .unwrap_or_else(|| panic!("README has no section {heading:?}"))
        .split("\n## ")
        .next()
        .unwrap_or_default()
}

/// The ```json blocks of a section, in order.
fn json_blocks(section: &str) -> Vec<&str> {
    section
        .split("```json\n")
        .skip(1)
        .map(|b| b.split("\n```").next().unwrap_or(""))
        .collect()
}

/// What the script printed after `prefix` on a line of its own (`TOKEN=…`).
fn printed_after<'a>(out: &'a str, prefix: &str) -> &'a str {
    out.lines()
        .find_map(|l| l.strip_prefix(prefix))
        .unwrap_or_else(|| panic!("nothing printed after {prefix}: {out}"))
}

/// Opens the section's documented `websocat` line against `app`: its URL as written
/// (host replaced) and its Authorization header, which must name `$variable`.
async fn open_documented_line(app: &TestApp, section: &str, variable: &str, token: &str) -> Ws {
    let line = section
        .lines()
        .find(|l| l.starts_with("websocat "))
        .expect("a websocat line");
    assert!(
        line.contains(&format!(r#"-H "Authorization: Bearer ${variable}""#)),
        "{line}"
    );
    let url = line
        .split_whitespace()
        .nth(1)
        .expect("url")
        .trim_matches('"');
    let path = url
        .strip_prefix("ws://localhost:8080")
        .unwrap_or_else(|| panic!("the documented URL is on localhost:8080: {url}"));
    app.ws_connect(path, Some(token))
        .await
        .unwrap_or_else(|(status, body)| panic!("the documented line is refused: {status} {body}"))
}

/// The next text frame, raw and parsed.
async fn next_text(ws: &mut Ws) -> (String, Value) {
    loop {
        if let Message::Text(text) = ws.next_raw().await {
            let frame = serde_json::from_str(text.as_str()).expect("frames are JSON");
            return (text.to_string(), frame);
        }
    }
}

/// Sends each line of a documented block as one text frame.
async fn type_lines(ws: &mut Ws, block: &str) {
    for frame in block.lines() {
        ws.send_raw(Message::Text(frame.into())).await;
    }
}

/// The README's WebSocket section: the documented `websocat` line (its URL and header)
/// opened with the test client, the documented client frames typed into it, and the
/// documented server frames coming back. (The line itself was checked with websocat by
/// hand; the tests do not need it installed.)
#[tokio::test]
async fn the_websocket_section_works_as_written() {
    let app = TestApp::start_with(|c| c.admin_token = Some(WALKTHROUGH_ADMIN.to_owned())).await;
    let script = format!(
        "{}\n{}\necho \"TOKEN=$CODER_TOKEN\"",
        walkthrough("foundation"),
        walkthrough("messaging")
    );
    let out = run(&app, &script).await;
    let section = section("## Live push over WebSocket");
    let mut socket =
        open_documented_line(&app, section, "CODER_TOKEN", printed_after(&out, "TOKEN=")).await;

    // The json blocks of the section: server frames first, then the frames to type.
    let blocks = json_blocks(section);
    let documented_types: Vec<String> = blocks[0]
        .lines()
        .map(|l| {
            l.split(r#""type":""#)
                .nth(1)
                .and_then(|t| t.split('"').next())
                .unwrap_or("")
                .to_owned()
        })
        .collect();
    type_lines(&mut socket, blocks[1]).await;
    let expected_replies = blocks[1]
        .lines()
        .filter(|f| f.contains("request_id"))
        .count();
    let mut seen_types = Vec::new();
    let mut replies = Vec::new();
    while replies.len() < expected_replies {
        let (text, frame) = next_text(&mut socket).await;
        assert!(text.starts_with(r#"{"type":""#), "type comes first: {text}");
        seen_types.push(frame["type"].as_str().unwrap_or_default().to_owned());
        if frame["type"] == "reply" {
            assert_eq!(frame["ok"], true, "{frame}");
            replies.push(frame);
        }
    }
    assert_eq!(
        seen_types[..4],
        documented_types[..],
        "hello, the replayed messages, caught_up"
    );
    // Operations of one connection run side by side: replies are matched by request_id.
    let reply_to = |id: &str| {
        replies
            .iter()
            .find(|r| r["request_id"] == id)
            .unwrap_or_else(|| panic!("no reply to {id}"))
    };
    assert_eq!(
        reply_to("r1")["result"]["delivery_status"]["pending_delivery"],
        serde_json::json!(["planner"])
    );
    assert!(reply_to("r2")["result"]["messages"].is_array());
    app.stop().await;
}

/// Every documented field of a frame is there with the documented value (ids and times
/// are elided in the README: an empty value or one ending in `_` or `…` only says
/// "present").
fn assert_documented(got: &Value, documented: &Value) {
    for (key, value) in documented.as_object().expect("object") {
        if value
            .as_str()
            .is_some_and(|v| v.is_empty() || v.ends_with('_') || v.ends_with('…'))
        {
            assert!(got.get(key).is_some(), "{key} missing in {got}");
        } else if key == "context" {
            assert_eq!(got[key][0]["answer"], value[0]["answer"]);
        } else {
            assert_eq!(&got[key], value, "{key} in {got}");
        }
    }
}

/// The tester's documented socket: the replayed frames match the README, then the
/// documented `TaskResponse` frames typed into it are both answered ok.
async fn tester_socket_works_as_written(app: &TestApp, section: &str, tester: &str) {
    let mut socket = open_documented_line(app, section, "TESTER_TOKEN", tester).await;
    let blocks = json_blocks(section);
    let documented: Vec<Value> = blocks[0]
        .lines()
        .map(|l| serde_json::from_str(&l.replace('…', "")).unwrap_or(Value::Null))
        .collect();
    let mut frames = Vec::new();
    while frames
        .last()
        .is_none_or(|f: &Value| f["type"] != "caught_up")
    {
        let (_, frame) = next_text(&mut socket).await;
        if frame["type"] != "hello" {
            frames.push(frame);
        }
    }
    assert_eq!(frames.len(), documented.len(), "{frames:?}");
    for (got, doc) in frames.iter().zip(&documented) {
        assert_documented(got, doc);
    }
    type_lines(&mut socket, blocks[1]).await;
    let mut replies = 0;
    while replies < 2 {
        let (_, frame) = next_text(&mut socket).await;
        if frame["type"] == "reply" {
            assert_eq!(frame["ok"], true, "{frame}");
            replies += 1;
        }
    }
}

/// The Tasks section: the curl walkthrough as written, then the tester's documented
/// `websocat` line, the documented replayed frames, and the documented `TaskResponse`
/// frames typed into it.
#[tokio::test]
async fn the_tasks_walkthrough_works_as_written() {
    let app = TestApp::start_with(|c| c.admin_token = Some(WALKTHROUGH_ADMIN.to_owned())).await;
    let script = format!(
        "{}\n{}\n{}\necho \"TOKENS=$TESTER_TOKEN $PLANNER_TOKEN\"",
        walkthrough("foundation"),
        walkthrough("messaging"),
        walkthrough("tasks")
    );
    let out = run(&app, &script).await;
    let answers = printed_json(&out);
    let answers = &answers[15..];
    assert_eq!(answers.len(), 5, "{out}");
    assert_eq!(answers[0]["task_response"]["status"], "in-progress");
    assert_eq!(answers[0]["task"]["assignee_agent_id"], "coder");
    assert_eq!(answers[1]["task"]["status"], "input-required");
    assert_eq!(answers[2]["task"]["context"][0]["answer"], "UTC");
    assert_eq!(answers[3]["task"]["assignee_agent_id"], "tester");
    assert_eq!(answers[4]["error_code"], "FORBIDDEN");
    let (tester, planner) = printed_after(&out, "TOKENS=")
        .split_once(' ')
        .expect("two tokens");

    tester_socket_works_as_written(&app, section("\n## Tasks\n"), tester).await;
    let detail = app
        .get("/v1/tasks/parse-logs")
        .token(planner)
        .send()
        .await
        .expect_status(200);
    assert_eq!(detail.body["task"]["status"], "success");
    assert_eq!(detail.body["task"]["result_data"]["5xx_by_hour"]["13"], 4);
    let kinds: Vec<&str> = detail.body["events"]
        .as_array()
        .expect("events")
        .iter()
        .filter_map(|e| e["kind"].as_str())
        .collect();
    assert_eq!(
        kinds,
        [
            "submitted",
            "clarification_requested",
            "clarification_answered",
            "handed_off",
            "progress",
            "succeeded"
        ]
    );
    app.stop().await;
}

/// `PATH` with the built `switchboard` binary first, as a user who installed it has.
fn path_with_binary() -> String {
    let bin = std::path::Path::new(env!("CARGO_BIN_EXE_switchboard"))
        .parent()
        .expect("bin dir")
        .display()
        .to_string();
    format!("{bin}:{}", std::env::var("PATH").unwrap_or_default())
}

/// Terminal 1 of the demo: the README's `listen` line, run as written as Bob, once
/// Bob shows as connected (so that a send reports him delivered). Its stdout lines.
async fn bob_listens(
    app: &TestApp,
    path: &str,
    bob: &str,
) -> (
    tokio::process::Child,
    tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>,
) {
    use tokio::io::{AsyncBufReadExt, BufReader};

    let listen = README
        .lines()
        .find(|l| l.ends_with("switchboard agent listen"))
        .expect("the listen line");
    let mut terminal = tokio::process::Command::new("bash")
        .args(["-c", &format!("export PATH='{path}'; {listen}")])
        .env("SWITCHBOARD_URL", &app.base)
        .env("BOB_TOKEN", bob)
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("listen starts");
    let lines = BufReader::new(terminal.stdout.take().expect("stdout")).lines();
    for _ in 0..100 {
        let me = app
            .get("/v1/teams/shell/agents/bob")
            .token(bob)
            .send()
            .await
            .expect_status(200);
        if me.body["agent"]["connected"] == true {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    (terminal, lines)
}

/// "Agents from the terminal": the set-up block, Bob's documented `listen` line as a
/// real subprocess, Alice's block, then Bob's; with the built binary on `PATH`.
#[tokio::test]
async fn the_two_terminal_demo_works_as_written() {
    let app = TestApp::start_with(|c| c.admin_token = Some(WALKTHROUGH_ADMIN.to_owned())).await;
    let path = path_with_binary();
    let with_path = |script: &str| format!("export PATH='{path}'\n{script}");
    let setup = walkthrough("cli-setup");
    let out = run(
        &app,
        &with_path(&format!("{setup}\necho \"TOKENS=$ALICE_TOKEN $BOB_TOKEN\"")),
    )
    .await;
    let tokens = printed_after(&out, "TOKENS=");
    let (alice, bob) = tokens.split_once(' ').expect("two tokens");
    assert!(
        alice.starts_with("sb_agent_") && bob.starts_with("sb_agent_"),
        "{tokens}"
    );
    let (mut terminal_1, mut lines) = bob_listens(&app, &path, bob).await;

    // Terminal 2.
    let vars = format!(
        "export SWITCHBOARD_URL={}\nALICE_TOKEN={alice}\nBOB_TOKEN={bob}\n",
        app.base
    );
    let out = run(
        &app,
        &with_path(&format!("{vars}{}", walkthrough("cli-alice"))),
    )
    .await;
    let printed: Vec<&str> = out.lines().collect();
    assert_eq!(printed.len(), 2, "{out}");
    assert!(
        printed[0].starts_with("sent msg_")
            && printed[0].ends_with("delivered: [bob] pending: [] failed: []"),
        "{out}"
    );
    assert!(
        printed[1].starts_with("task logs-1 is in-progress (agent bob)"),
        "{out}"
    );

    let mut frames = Vec::new();
    for _ in 0..2 {
        let line = tokio::time::timeout(std::time::Duration::from_secs(10), lines.next_line())
            .await
            .expect("a frame in time")
            .expect("readable")
            .expect("a line");
        frames.push(serde_json::from_str::<Value>(&line).expect("one JSON object per line"));
    }
    assert_eq!(frames[0]["type"], "message");
    assert_eq!(
        frames[0]["message"]["content"]["text"],
        "Can you look at the error spike?"
    );
    assert_eq!(frames[1]["type"], "TaskRequest");
    assert_eq!(frames[1]["task_id"], "logs-1");

    let out = run(
        &app,
        &with_path(&format!("{vars}{}", walkthrough("cli-bob"))),
    )
    .await;
    assert!(
        out.contains("task logs-1 is success (assignee bob)"),
        "{out}"
    );
    assert!(out.contains("2 succeeded by bob → success"), "{out}");
    let _ = terminal_1.kill().await;
    app.stop().await;
}

/// The publish section: the curl walkthrough as written, then its documented `websocat`
/// line (news only, with activity) and frames.
#[tokio::test]
async fn the_publish_walkthrough_works_as_written() {
    let app = TestApp::start_with(|c| c.admin_token = Some(WALKTHROUGH_ADMIN.to_owned())).await;
    let script = format!(
        "{}\n{}\n{}\necho \"TOKEN=$REVIEWER_TOKEN\"",
        walkthrough("foundation"),
        walkthrough("messaging"),
        walkthrough("publish")
    );
    let out = run(&app, &script).await;
    let answers = printed_json(&out);
    let [reviewer, watch, code, news, activity, verdict] = &answers[answers.len() - 6..] else {
        panic!("six answers: {out}");
    };
    assert_eq!(reviewer["agent"]["watch"], json!(["code.*"]), "{reviewer}");
    assert_eq!(
        watch["agent"]["watch"],
        json!(["review.verdict"]),
        "{watch}"
    );
    assert_eq!(code["recipients"], json!(["planner", "reviewer"]), "{code}");
    assert_eq!(code["news_for"], json!(["reviewer"]));
    assert_eq!(news["messages"].as_array().map(Vec::len), Some(1), "{news}");
    assert_eq!(news["messages"][0]["cause_by"], "code.parser");
    assert_eq!(activity["idle"], false, "{activity}");
    assert_eq!(verdict["recipients"], json!(["planner"]), "{verdict}");
    assert_eq!(verdict["news_for"], json!(["planner"]));

    let section = section("## Publish and watch (MetaGPT-style)");
    let mut socket = open_documented_line(
        &app,
        section,
        "REVIEWER_TOKEN",
        printed_after(&out, "TOKEN="),
    )
    .await;
    let blocks = json_blocks(section);
    let documented: Vec<Value> = blocks[1]
        .lines()
        .map(|l| serde_json::from_str(&l.replace(",…", "")).expect("documented frame"))
        .collect();
    let mut frames = Vec::new();
    while !frames.iter().any(|f: &Value| f["type"] == "team_activity") {
        frames.push(next_text(&mut socket).await.1);
    }
    let kinds: Vec<&str> = frames.iter().filter_map(|f| f["type"].as_str()).collect();
    assert_eq!(
        kinds,
        ["hello", "message", "caught_up", "team_activity"],
        "news only"
    );
    assert_documented(&frames[1]["message"], &documented[0]["message"]);
    assert_eq!(frames[3]["activity"]["team_id"], "research");
    assert_eq!(frames[3]["activity"]["idle"], false);
    type_lines(&mut socket, blocks[0]).await;
    let mut replies = 0;
    while replies < 3 {
        let frame = next_text(&mut socket).await.1;
        if frame["type"] == "reply" {
            assert_eq!(frame["ok"], true, "{frame}");
            replies += 1;
        }
    }
    app.stop().await;
}
