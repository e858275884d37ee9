//! The pages' own walkthroughs: each runs after the README's, as written, and the
//! frames a page shows are checked against a real socket.

use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

use super::{doc, page_answers, path_with_binary, readme, run, walkthrough, walkthrough_server};
use crate::support::TestApp;
use crate::wsclient::Ws;

#[tokio::test]
async fn the_routes_walkthrough_works_as_written() {
    let app = walkthrough_server().await;
    let script = format!(
        "{}echo '=== docs/stomp.md'\n{}",
        readme(),
        walkthrough("docs/stomp.md", "routes")
    );
    let out = run(&app, &script).await;
    let answers = page_answers(&out, "docs/stomp.md");
    assert_eq!(answers.len(), 3, "{out}");
    assert_eq!(answers[0]["stomp_default_context"], "CLI.ctx", "{out}");
    assert_eq!(
        answers[1]["delivery_status"]["pending_delivery"],
        json!(["coder"]),
        "{out}"
    );
    assert_eq!(answers[2]["messages"][0]["route"], "stomp", "{out}");
    assert_eq!(
        answers[2]["messages"][0]["content"]["text"],
        "for your STOMP queue"
    );
    app.stop().await;
}

#[tokio::test]
async fn the_mcp_walkthrough_works_as_written() {
    let app = walkthrough_server().await;
    let script = format!(
        "{}echo '=== docs/mcp.md'\n{}",
        readme(),
        walkthrough("docs/mcp.md", "mcp")
    );
    let out = run(&app, &script).await;
    let answers = page_answers(&out, "docs/mcp.md");
    assert_eq!(answers.len(), 1, "{out}");
    let result = &answers[0]["result"];
    assert_eq!(result["isError"], false, "{out}");
    assert_eq!(
        result["structuredContent"]["delivery_status"]["pending_delivery"],
        json!(["coder"])
    );
    app.stop().await;
}

/// The coder gets a new token as `docs/operations.md` shows it: the new one is the
/// coder's, the old one is refused.
#[tokio::test]
async fn the_credentials_walkthrough_works_as_written() {
    let app = walkthrough_server().await;
    let script = format!(
        "{}echo '=== docs/operations.md'\n{}",
        readme(),
        walkthrough("docs/operations.md", "rotate")
    );
    let out = run(&app, &script).await;
    let answers = page_answers(&out, "docs/operations.md");
    assert_eq!(answers.len(), 1, "{out}");
    assert_eq!(answers[0]["agent_id"], "coder", "{out}");
    assert!(out.trim_end().ends_with("401"), "{out}");
    app.stop().await;
}

#[tokio::test]
async fn the_retention_walkthrough_works_as_written() {
    let app = walkthrough_server().await;
    let script = format!(
        "{}echo '=== docs/operations.md'\n{}",
        readme(),
        walkthrough("docs/operations.md", "retention")
    );
    let out = run(&app, &script).await;
    let answers = page_answers(&out, "docs/operations.md");
    assert_eq!(answers.len(), 1, "{out}");
    let team = &answers[0];
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

#[tokio::test]
async fn the_loop_guard_walkthrough_works_as_written() {
    let app = walkthrough_server().await;
    let script = format!(
        "{}echo '=== docs/loop-guard.md'\n{}",
        readme(),
        walkthrough("docs/loop-guard.md", "loops")
    );
    let out = run(&app, &script).await;
    let answers = page_answers(&out, "docs/loop-guard.md");
    assert_eq!(answers.len(), 4, "{out}");
    assert_eq!(answers[0]["loop_guard"]["max_hops"], 3, "{out}");
    let refused = &answers[1];
    assert_eq!(refused["error_code"], "LOOP_DETECTED", "{out}");
    assert_eq!(refused["details"]["chain_length"], 4);
    assert_eq!(refused["details"]["agent_id"], "coder");
    let notice = &answers[2]["messages"][0];
    assert_eq!(notice["content"]["data"]["type"], "loop_detected", "{out}");
    assert_eq!(notice["sender_agent_id"], "coder");
    assert_eq!(answers[3]["loop_guard"]["max_hops"], 64, "{out}");
    app.stop().await;
}

#[tokio::test]
async fn the_budgets_walkthrough_works_as_written() {
    let app = walkthrough_server().await;
    let script = format!(
        "{}echo '=== docs/loop-guard.md'\n{}",
        readme(),
        walkthrough("docs/loop-guard.md", "budgets")
    );
    let out = run(&app, &script).await;
    let answers = page_answers(&out, "docs/loop-guard.md");
    assert_eq!(answers.len(), 5, "{out}");
    assert_eq!(
        answers[0]["budgets_in_force"]["thread_messages_per_day"], 2,
        "{out}"
    );
    assert_eq!(answers[1]["success"], true, "{out}");
    assert_eq!(answers[2]["success"], true, "{out}");
    let refused = &answers[3];
    assert_eq!(refused["error_code"], "RATE_LIMITED", "{out}");
    assert_eq!(refused["details"]["budget"], "thread_messages_per_day");
    assert_eq!(refused["details"]["thread_id"], "standup");
    let page = out
        .split("=== docs/loop-guard.md")
        .nth(1)
        .unwrap_or_default();
    let waits: Vec<&str> = page
        .lines()
        .filter_map(|l| l.strip_prefix("Retry-After: "))
        .filter(|v| !v.is_empty())
        .collect();
    assert_eq!(waits.len(), 1, "{out}");
    assert!(waits[0].parse::<u64>().is_ok_and(|s| s >= 1), "{out}");
    assert_eq!(
        answers[4]["budgets"]["thread_messages_per_day"],
        Value::Null
    );
    app.stop().await;
}

#[tokio::test]
async fn the_tracing_walkthrough_works_as_written() {
    let app = walkthrough_server().await;
    let script = format!(
        "{}echo '=== docs/tracing.md'\n{}",
        readme(),
        walkthrough("docs/tracing.md", "traces")
    );
    let out = run(&app, &script).await;
    let answers = page_answers(&out, "docs/tracing.md");
    assert_eq!(answers.len(), 1, "{out}");
    let hops = answers[0]["hops"].as_array().cloned().unwrap_or_default();
    assert_eq!(hops.len(), 2, "{out}");
    assert_eq!(hops[0]["sender_agent_id"], "planner");
    assert_eq!(hops[0]["parent_span_id"], "00f067aa0ba902b7");
    assert_eq!(hops[1]["sender_agent_id"], "coder");
    assert_eq!(hops[1]["parent_span_id"], hops[0]["span_id"], "{out}");
    app.stop().await;
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

/// Opens the section's documented `switchboard agent ws` line against `app`: the URL that
/// command opens for the flags as written (`--since N`, `--news-only`, `--activity`),
/// with the token it names, which must be `$variable`. (`cli::the_ws_command_…` runs the
/// command itself; here the test types the page's frames through its own client.)
async fn open_documented_line(app: &TestApp, section: &str, variable: &str, token: &str) -> Ws {
    let line = section
        .lines()
        .find(|l| l.starts_with("switchboard agent ws "))
        .expect("a `switchboard agent ws` line");
    assert!(
        line.contains(&format!(r#"--token "${variable}""#)) && line.contains("--url $SB"),
        "{line}"
    );
    let words: Vec<&str> = line.split_whitespace().collect();
    let mut query = Vec::new();
    for (i, word) in words.iter().enumerate() {
        match *word {
            "--since" => query.push(format!("since={}", words.get(i + 1).expect("a number"))),
            "--news-only" => query.push("news_only=true".to_owned()),
            "--activity" => query.push("activity=true".to_owned()),
            _ => {}
        }
    }
    let path = if query.is_empty() {
        "/v1/ws".to_owned()
    } else {
        format!("/v1/ws?{}", query.join("&"))
    };
    app.ws_connect(&path, Some(token))
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

/// docs/websocket.md: the documented `switchboard agent ws` line opened with the test
/// client after the README's walkthrough, the documented client frames typed into it,
/// and the documented server frames coming back.
#[tokio::test]
async fn the_websocket_page_works_as_written() {
    let app = walkthrough_server().await;
    let script = format!("{}\necho \"TOKEN=$CODER_TOKEN\"", readme());
    let out = run(&app, &script).await;
    let section = doc("docs/websocket.md");
    let mut socket =
        open_documented_line(&app, &section, "CODER_TOKEN", printed_after(&out, "TOKEN=")).await;

    // The json blocks of the page: server frames first, then the frames to type.
    let blocks = json_blocks(&section);
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
        seen_types[..documented_types.len()],
        documented_types[..],
        "hello, the replayed entries, caught_up"
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
        json!(["planner"])
    );
    assert!(reply_to("r2")["result"]["messages"].is_array());
    app.stop().await;
}

/// Every documented field of a frame is there with the documented value (ids and times
/// are elided in the docs: an empty value or one ending in `_` or `…` only says
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

/// The tester's documented socket: the replayed frames match the page, then the
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

/// docs/tasks.md: the curl walkthrough as written, then the tester's documented
/// `websocat` line, the documented replayed frames, and the documented `TaskResponse`
/// frames typed into it.
#[tokio::test]
async fn the_tasks_walkthrough_works_as_written() {
    let app = walkthrough_server().await;
    let script = format!(
        "{}echo '=== docs/tasks.md'\n{}\necho \"TOKENS=$TESTER_TOKEN $PLANNER_TOKEN\"",
        readme(),
        walkthrough("docs/tasks.md", "tasks")
    );
    let out = run(&app, &script).await;
    let answers = page_answers(&out, "docs/tasks.md");
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

    tester_socket_works_as_written(&app, &doc("docs/tasks.md"), tester).await;
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

/// Terminal 1 of the demo: the page's `listen` line, run as written as Bob, once Bob
/// shows as connected (so that a send reports him delivered). Its stdout lines.
async fn bob_listens(
    app: &TestApp,
    bob: &str,
) -> (
    tokio::process::Child,
    tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>,
) {
    use tokio::io::{AsyncBufReadExt, BufReader};

    let page = doc("docs/cli.md");
    let listen = page
        .lines()
        .find(|l| l.ends_with("switchboard agent listen"))
        .expect("the listen line");
    let mut terminal = tokio::process::Command::new("bash")
        .args(["-c", listen])
        .env("PATH", path_with_binary())
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

/// docs/cli.md: the set-up block, Bob's documented `listen` line as a real subprocess,
/// Alice's block, then Bob's; with the built binary on `PATH`.
#[tokio::test]
async fn the_two_terminal_demo_works_as_written() {
    let app = walkthrough_server().await;
    let setup = walkthrough("docs/cli.md", "cli-setup");
    let out = run(
        &app,
        &format!("{setup}\necho \"TOKENS=$ALICE_TOKEN $BOB_TOKEN\""),
    )
    .await;
    let tokens = printed_after(&out, "TOKENS=");
    let (alice, bob) = tokens.split_once(' ').expect("two tokens");
    assert!(
        alice.starts_with("sb_agent_") && bob.starts_with("sb_agent_"),
        "{tokens}"
    );
    let (mut terminal_1, mut lines) = bob_listens(&app, bob).await;

    // Terminal 2.
    let vars = format!(
        "export SWITCHBOARD_URL={}\nALICE_TOKEN={alice}\nBOB_TOKEN={bob}\n",
        app.base
    );
    let out = run(
        &app,
        &format!("{vars}{}", walkthrough("docs/cli.md", "cli-alice")),
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
        frames.push(line);
    }
    // One line per frame for a person, as the page shows it.
    assert_eq!(
        frames,
        [
            "#1 request from alice: Can you look at the error spike?",
            "#2 TaskRequest logs-1: Count the 5xx responses per hour",
        ]
    );

    let out = run(
        &app,
        &format!("{vars}{}", walkthrough("docs/cli.md", "cli-bob")),
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

/// docs/publish.md: the curl walkthrough as written, then its documented `websocat`
/// line (news only, with activity) and frames.
#[tokio::test]
async fn the_publish_walkthrough_works_as_written() {
    let app = walkthrough_server().await;
    let script = format!(
        "{}echo '=== docs/publish.md'\n{}\necho \"TOKEN=$REVIEWER_TOKEN\"",
        readme(),
        walkthrough("docs/publish.md", "publish")
    );
    let out = run(&app, &script).await;
    let answers = page_answers(&out, "docs/publish.md");
    let [reviewer, watch, code, news, activity, verdict] = &answers[..] else {
        panic!("six answers: {out}");
    };
    assert_eq!(reviewer["agent"]["watch"], json!(["code.*"]), "{reviewer}");
    assert_eq!(
        watch["agent"]["watch"],
        json!(["review.verdict"]),
        "{watch}"
    );
    // The README's team alone (the whole reading order adds the tester: see
    // the_whole_walkthrough_runs_in_reading_order_from_any_directory).
    assert_eq!(code["recipients"], json!(["planner", "reviewer"]), "{code}");
    assert_eq!(code["news_for"], json!(["reviewer"]));
    assert_eq!(news["messages"].as_array().map(Vec::len), Some(1), "{news}");
    assert_eq!(news["messages"][0]["cause_by"], "code.parser");
    assert_eq!(activity["idle"], false, "{activity}");
    assert_eq!(verdict["recipients"], json!(["planner"]), "{verdict}");
    assert_eq!(verdict["news_for"], json!(["planner"]));

    let page = doc("docs/publish.md");
    let mut socket =
        open_documented_line(&app, &page, "REVIEWER_TOKEN", printed_after(&out, "TOKEN=")).await;
    let blocks = json_blocks(&page);
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
