//! The `switchboard` binary's commands, run as subprocesses.

use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};

use crate::support::TestApp;

#[test]
fn the_openapi_command_prints_the_document() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_switchboard"))
        .arg("openapi")
        .output()
        .expect("runs");
    assert!(out.status.success());
    let printed: Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(
        printed,
        serde_json::to_value(switchboard::server::openapi_document()).expect("doc")
    );
}

#[tokio::test]
async fn the_healthcheck_command_reports_a_running_server() {
    let app = TestApp::start().await;
    let addr = app.base.trim_start_matches("http://").to_owned();
    let status = tokio::process::Command::new(env!("CARGO_BIN_EXE_switchboard"))
        .args(["healthcheck", "--listen", &addr])
        .status()
        .await
        .expect("runs");
    assert!(status.success());
    app.stop().await;

    // Nothing listens there any more.
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_switchboard"))
        .args(["healthcheck", "--listen", &addr, "--timeout", "1"])
        .output()
        .await
        .expect("runs");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("unhealthy"));
}

/// Runs `switchboard …` with the test server's URL.
fn cli(app: &TestApp, token: &str) -> tokio::process::Command {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_switchboard"));
    command
        .env("SWITCHBOARD_URL", &app.base)
        .env("SWITCHBOARD_TOKEN", token)
        .stdin(Stdio::null());
    command
}

/// Runs `switchboard ARGS` as the holder of `token` and expects success.
async fn cli_ok(app: &TestApp, token: &str, args: &[&str]) -> std::process::Output {
    let out = cli(app, token).args(args).output().await.expect("runs");
    assert!(out.status.success(), "switchboard {args:?}: {out:?}");
    out
}

/// A team set up from the shell, as the admin and then with its key: alice (planning)
/// and bob (code). Their tokens.
async fn shell_team(app: &TestApp) -> (String, String) {
    let out = cli_ok(
        app,
        crate::support::ADMIN,
        &[
            "admin",
            "team",
            "create",
            "Shell team",
            "--team-id",
            "shell",
            "--json",
        ],
    )
    .await;
    let team: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let key = team["team_key"].as_str().expect("key").to_owned();
    let mut tokens = Vec::new();
    for (id, caps) in [("alice", "planning"), ("bob", "code")] {
        let out = cli_ok(
            app,
            &key,
            &[
                "admin",
                "agent",
                "register",
                "--team",
                "shell",
                id,
                "--capabilities",
                caps,
                "--json",
            ],
        )
        .await;
        let agent: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
        tokens.push(agent["token"].as_str().expect("token").to_owned());
    }
    let bob = tokens.pop().expect("bob");
    let alice = tokens.pop().expect("alice");
    (alice, bob)
}

/// The next line a subprocess printed, as JSON.
async fn next_json_line(
    lines: &mut tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
) -> serde_json::Value {
    let line = tokio::time::timeout(Duration::from_secs(10), lines.next_line())
        .await
        .expect("in time")
        .expect("readable")
        .expect("a line");
    serde_json::from_str(&line).expect("JSON line")
}

/// Bob's `listen --count 2` printed the message, then the task request, and ended.
async fn bob_heard_both(
    mut listener: tokio::process::Child,
    mut lines: tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
) {
    let first = next_json_line(&mut lines).await;
    assert_eq!(first["type"], "message");
    assert_eq!(first["message"]["content"]["text"], "hello from the shell");
    let second = next_json_line(&mut lines).await;
    assert_eq!(second["type"], "TaskRequest");
    assert_eq!(second["task_id"], "cli-1");
    let status = tokio::time::timeout(Duration::from_secs(10), listener.wait())
        .await
        .expect("listen ends after --count")
        .expect("exit status");
    assert!(status.success());
}

/// Errors: the server's code on stderr and exit code 1; 3 when unreachable.
async fn errors_have_exit_codes(app: &TestApp, alice: &str) {
    let refused = cli(app, alice)
        .args(["agent", "send", "--to", "nobody", "hi"])
        .output()
        .await
        .expect("runs");
    assert_eq!(refused.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("INVALID_RECIPIENT"));
    let unreachable = cli(app, alice)
        .env("SWITCHBOARD_URL", "http://127.0.0.1:1")
        .args(["agent", "inbox"])
        .output()
        .await
        .expect("runs");
    assert_eq!(unreachable.status.code(), Some(3));
}

#[tokio::test]
async fn the_command_line_acts_as_an_agent() {
    let app = TestApp::start().await;
    let (alice, bob) = shell_team(&app).await;

    // Bob listens; alice sends and submits a task.
    let mut listener = cli(&app, &bob)
        .args(["agent", "listen", "--count", "2", "--json"])
        .stdout(Stdio::piped())
        .spawn()
        .expect("listen starts");
    let lines = BufReader::new(listener.stdout.take().expect("stdout")).lines();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let sent = cli_ok(
        &app,
        &alice,
        &[
            "agent",
            "send",
            "--to",
            "bob",
            "--type",
            "request",
            "hello from the shell",
        ],
    )
    .await;
    let summary = String::from_utf8_lossy(&sent.stdout);
    assert!(summary.starts_with("sent msg_"), "{summary}");
    let submitted = cli_ok(
        &app,
        &alice,
        &[
            "agent",
            "task",
            "submit",
            "parse the logs",
            "--task-id",
            "cli-1",
            "--capabilities",
            "code",
            "--json",
        ],
    )
    .await;
    let answer: serde_json::Value = serde_json::from_slice(&submitted.stdout).expect("json");
    assert_eq!(answer["task_response"]["agent_id"], "bob");

    bob_heard_both(listener, lines).await;

    // Bob finishes the task; the summary says so.
    let done = cli_ok(
        &app,
        &bob,
        &[
            "agent",
            "task",
            "complete",
            "cli-1",
            "--data",
            r#"{"lines": 10}"#,
        ],
    )
    .await;
    assert!(String::from_utf8_lossy(&done.stdout).contains("is success"));

    errors_have_exit_codes(&app, &alice).await;
    app.stop().await;
}

/// Output to a reader that is already gone (`… | true`, `… | head -c 300` once it has
/// its bytes) ends the command quietly: exit 0, no panic. And `--json` output stays the
/// same JSON with everything a terminal would act on escaped: a peer's C1 control
/// (U+009B is CSI), DEL and a right-to-left override reach the terminal as `\uXXXX`.
#[tokio::test]
async fn output_is_quiet_on_a_closed_pipe_and_inert_on_a_terminal() {
    let app = TestApp::start().await;
    let (alice, bob) = shell_team(&app).await;
    let tricky = "a\u{9b}2Jb\u{85}c\u{7f}d\u{202e}e";
    cli_ok(&app, &alice, &["agent", "send", "--to", "bob", tricky]).await;
    let out = cli_ok(&app, &bob, &["agent", "inbox", "--json"]).await;
    let text = String::from_utf8(out.stdout).expect("UTF-8");
    for c in ['\u{9b}', '\u{85}', '\u{7f}', '\u{202e}'] {
        assert!(!text.contains(c), "{c:?} reached the terminal: {text:?}");
    }
    let inbox: serde_json::Value = serde_json::from_str(&text).expect("still JSON");
    assert_eq!(inbox["messages"][0]["content"]["text"], tricky);
    let human = cli_ok(&app, &bob, &["agent", "inbox"]).await;
    let human = String::from_utf8(human.stdout).expect("UTF-8");
    assert!(
        !human.contains('\u{9b}') && !human.contains('\u{202e}'),
        "{human:?}"
    );

    for args in ["agent inbox --json", "agent inbox", "openapi"] {
        let script = format!("\"$BIN\" {args} | true; echo \"exit=${{PIPESTATUS[0]}}\" >&2");
        let out = tokio::process::Command::new("bash")
            .args(["-c", &script])
            .env("BIN", env!("CARGO_BIN_EXE_switchboard"))
            .env("SWITCHBOARD_URL", &app.base)
            .env("SWITCHBOARD_TOKEN", &bob)
            .output()
            .await
            .expect("bash runs");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains("panicked"), "{args}: {stderr}");
        assert!(stderr.contains("exit=0"), "{args}: {stderr}");
    }
    app.stop().await;
}

/// Work offered to a role from the shell: alice offers (`--role`), bob claims, gives it
/// back and claims it again; a claim with nothing open says so and succeeds.
#[tokio::test]
async fn the_command_line_offers_claims_and_gives_back_work() {
    let app = TestApp::start().await;
    let (alice, bob) = shell_team(&app).await;
    let task = ["agent", "task"];
    let offered = cli_ok(
        &app,
        &alice,
        &[
            &task[..],
            &[
                "submit",
                "triage",
                "--task-id",
                "t-role",
                "--role",
                "agent",
                "--json",
            ],
        ]
        .concat(),
    )
    .await;
    let answer: serde_json::Value = serde_json::from_slice(&offered.stdout).expect("json");
    assert_eq!(answer["task"]["status"], "open", "{answer}");
    let first = cli_ok(
        &app,
        &bob,
        &[&task[..], &["claim", "--lease", "60"]].concat(),
    )
    .await;
    let line = String::from_utf8_lossy(&first.stdout);
    assert!(
        line.starts_with("claimed t-role (attempt 1, lease until "),
        "{line}"
    );
    let extended = cli_ok(
        &app,
        &bob,
        &[&task[..], &["extend", "t-role", "--lease", "600", "--json"]].concat(),
    )
    .await;
    let extended: serde_json::Value = serde_json::from_slice(&extended.stdout).expect("json");
    assert_eq!(extended["task"]["status"], "in-progress", "{extended}");
    cli_ok(
        &app,
        &bob,
        &[&task[..], &["release", "t-role", "--reason", "later"]].concat(),
    )
    .await;
    let again = cli_ok(&app, &bob, &[&task[..], &["claim", "--json"]].concat()).await;
    let claimed: serde_json::Value = serde_json::from_slice(&again.stdout).expect("json");
    assert_eq!(claimed["task"]["attempts"], 2, "{claimed}");
    let none = cli_ok(&app, &bob, &[&task[..], &["claim"]].concat()).await;
    assert!(String::from_utf8_lossy(&none.stdout).starts_with("nothing to do"));
    app.stop().await;
}

/// The CLI in plain words (issue 68, point 5): the top-level help names every way in,
/// `agent send --thread` puts a message in a conversation, and a task stored as failed
/// is said once (on stderr, with the task's id), not on stdout and again on stderr.
#[tokio::test]
async fn the_cli_names_every_way_in_threads_and_says_a_failure_once() {
    let app = TestApp::start().await;
    let (alice, bob) = shell_team(&app).await;
    let help = cli_ok(&app, &alice, &["--help"]).await;
    let help = String::from_utf8_lossy(&help.stdout);
    for way in ["REST", "WebSocket", "STOMP", "MCP", "A2A", "/console"] {
        assert!(help.contains(way), "{way}: {help}");
    }
    let args = [
        "agent",
        "send",
        "--to",
        "bob",
        "in a thread",
        "--thread",
        "t-7",
    ];
    cli_ok(&app, &alice, &args).await;
    let inbox = app.get("/v1/messages").token(&bob).send().await;
    let inbox = inbox.expect_status(200);
    assert_eq!(
        inbox.body["messages"][0]["thread_id"], "t-7",
        "{}",
        inbox.body
    );
    // `listen` prints a line for a person; `--json` the frame itself.
    let heard = cli_ok(&app, &bob, &["agent", "listen", "--count", "1"]).await;
    let heard = String::from_utf8_lossy(&heard.stdout);
    assert_eq!(heard.trim(), "#1 information from alice: in a thread");
    let args = ["agent", "listen", "--count", "1", "--since", "0", "--json"];
    let heard = cli_ok(&app, &bob, &args).await;
    let frame: serde_json::Value = serde_json::from_slice(&heard.stdout).expect("json");
    assert_eq!(frame["message"]["thread_id"], "t-7");
    let args = [
        "agent",
        "task",
        "submit",
        "needs nobody",
        "--task-id",
        "lonely",
        "--capabilities",
        "juggling",
    ];
    let out = cli(&app, &alice).args(args).output().await.expect("runs");
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(out.stdout.is_empty(), "said on stdout too: {out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.matches("NO_SUITABLE_AGENT").count(), 1, "{stderr}");
    assert!(stderr.contains("task lonely failed"), "{stderr}");
}

/// `switchboard agent ws`: the hub by hand, as the WebSocket page types it — frames in
/// are lines out, lines in are frames out, and the answers to the last lines arrive
/// before it closes.
#[tokio::test]
async fn the_ws_command_types_frames_and_prints_the_answers() {
    use tokio::io::AsyncWriteExt;
    let app = TestApp::start().await;
    let (alice, bob) = shell_team(&app).await;
    cli_ok(
        &app,
        &alice,
        &["agent", "send", "--to", "bob", "waiting for you"],
    )
    .await;
    let mut child = cli(&app, &bob)
        .args(["agent", "ws", "--since", "0", "--linger", "2"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("starts");
    let mut stdin = child.stdin.take().expect("stdin");
    stdin
        .write_all(
            b"{\"type\":\"ping\"}\n{\"type\":\"get_messages\",\"request_id\":\"r1\",\"limit\":5}\n",
        )
        .await
        .expect("typed");
    drop(stdin);
    let out = tokio::time::timeout(Duration::from_secs(20), child.wait_with_output())
        .await
        .expect("ends after --linger")
        .expect("runs");
    assert!(out.status.success());
    let frames: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    let kinds: Vec<&str> = frames.iter().filter_map(|f| f["type"].as_str()).collect();
    assert_eq!(&kinds[..3], ["hello", "message", "caught_up"], "{frames:?}");
    assert!(kinds.contains(&"pong"), "{frames:?}");
    let reply = frames
        .iter()
        .find(|f| f["type"] == "reply")
        .expect("the reply to r1");
    assert_eq!(reply["request_id"], "r1");
    assert_eq!(
        reply["result"]["messages"][0]["content"]["text"],
        "waiting for you"
    );
    app.stop().await;
}
