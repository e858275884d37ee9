//! The walkthroughs of the README and the docs, run as written: every code block after a
//! `<!-- walkthrough: NAME -->` marker is executed with bash against a real server, with
//! only `http://localhost:8080` replaced by the test server's address. The pages are read
//! when the tests run (not compiled in), so the tests judge the docs as committed.
//!
//! A reader runs the README's blocks, then each page's, in the order of the README's table
//! of docs, in one shell: [`the_whole_walkthrough_runs_in_reading_order_from_any_directory`]
//! does exactly that, from the repository and from another directory. The other tests
//! run the README's part and one page, and look closely at what that page promises.

use std::path::Path;

use serde_json::{Value, json};

use crate::support::TestApp;

/// The admin token the README starts the server with.
pub const WALKTHROUGH_ADMIN: &str = "walkthrough-admin-token";

/// The pages with walkthrough blocks, in the order of the README's table of docs.
pub const READING_ORDER: &[&str] = &[
    "README.md",
    "docs/tasks.md",
    "docs/publish.md",
    "docs/stomp.md",
    "docs/mcp.md",
    "docs/a2a.md",
    "docs/cli.md",
    "docs/operations.md",
    "docs/loop-guard.md",
    "docs/tracing.md",
];

/// The text of a page of the repository (`README.md`, `docs/tasks.md`).
pub fn doc(page: &str) -> String {
    let path = crate::python::root().join(page);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The shell code of the blocks of `page` marked `<!-- walkthrough: NAME -->` for a
/// name in `names` (every name when empty), in order.
fn blocks_of(page: &str, names: &[&str]) -> String {
    let text = doc(page);
    let mut script = String::new();
    for part in text.split("<!-- walkthrough: ").skip(1) {
        let (name, rest) = part.split_once(" -->").expect("a marker ends with -->");
        if !names.is_empty() && !names.contains(&name) {
            continue;
        }
        let block = rest
            .split_once("```sh\n")
            .and_then(|(_, rest)| rest.split_once("\n```"))
            .map(|(code, _)| code)
            .unwrap_or_else(|| panic!("{page}: walkthrough '{name}' marker without a ```sh block"));
        script.push_str(block);
        script.push('\n');
    }
    assert!(!script.is_empty(), "{page} has no walkthrough {names:?}");
    script
}

/// The walkthrough blocks named `name` on `page`.
pub fn walkthrough(page: &str, name: &str) -> String {
    blocks_of(page, &[name])
}

/// The README's walkthrough: what every page goes on from.
pub fn readme() -> String {
    blocks_of("README.md", &["readme"])
}

/// Every walkthrough block of every page up to and including `last`, in reading order,
/// each page's announced by a line `=== <page>` (see [`page_answers`]).
pub fn in_reading_order(last: &str) -> String {
    let mut script = String::new();
    for page in READING_ORDER {
        script.push_str(&format!("echo '=== {page}'\n{}", blocks_of(page, &[])));
        if *page == last {
            return script;
        }
    }
    panic!("{last} is not in the reading order");
}

/// Runs a script with bash (`-euo pipefail`) against `app`; returns stdout.
pub async fn run(app: &TestApp, script: &str) -> String {
    run_in(app, script, None).await
}

/// As [`run`], in `dir` when given, with the built `switchboard` first on `PATH` (as for
/// a reader who installed it) and `REPO` naming the repository.
pub async fn run_in(app: &TestApp, script: &str, dir: Option<&Path>) -> String {
    let script = script.replace("http://localhost:8080", &app.base);
    // A temporary folder of the run's own: what a page makes under `$TMPDIR` (the Python
    // example's virtualenv) is not shared with a walkthrough running beside it.
    let scratch = tempfile::tempdir().expect("a temporary folder");
    let mut command = tokio::process::Command::new("bash");
    command
        .args(["-euo", "pipefail", "-c", &script])
        .env("PATH", path_with_binary())
        .env("TMPDIR", scratch.path())
        .env("REPO", crate::python::root());
    if let Some(dir) = dir {
        command.current_dir(dir);
    }
    // What the script printed goes to a file, so a walkthrough that hangs (a reader's
    // shell would wait for ever) fails with what it got as far as.
    let printed = tempfile::NamedTempFile::new().expect("a file for the output");
    let stdout_file = printed.reopen().expect("reopened");
    command
        .stdout(std::process::Stdio::from(stdout_file))
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    let child = command.spawn().expect("bash runs");
    let out = match tokio::time::timeout(WALKTHROUGH_TIME, child.wait_with_output()).await {
        Ok(out) => out.expect("bash ran"),
        Err(_) => panic!(
            "the walkthrough did not end in {WALKTHROUGH_TIME:?}; it printed:\n{}",
            std::fs::read_to_string(printed.path()).unwrap_or_default()
        ),
    };
    let stdout = std::fs::read_to_string(printed.path()).expect("the output");
    assert!(
        out.status.success(),
        "walkthrough failed ({}):\nstdout:\n{stdout}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// The longest a walkthrough may take before its test gives up on it.
const WALKTHROUGH_TIME: std::time::Duration = std::time::Duration::from_secs(180);

/// The JSON objects a script printed, one per line.
pub fn printed_json(stdout: &str) -> Vec<Value> {
    stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l.trim()).ok())
        .filter(Value::is_object)
        .collect()
}

/// The JSON objects printed by `page`'s blocks in a run of [`in_reading_order`].
pub fn page_answers(stdout: &str, page: &str) -> Vec<Value> {
    let start = format!("=== {page}\n");
    let after = stdout
        .split_once(&start)
        .unwrap_or_else(|| panic!("{page} did not run:\n{stdout}"))
        .1;
    printed_json(after.split("\n=== ").next().unwrap_or(""))
}

/// The answers of the README's walkthrough: its part of `stdout`, before any page's.
fn readme_answers(stdout: &str) -> Vec<Value> {
    page_answers(stdout, "README.md")
}

/// A server as the README starts it (its admin token), for the walkthroughs.
pub(crate) async fn walkthrough_server() -> TestApp {
    TestApp::start_with(|c| c.admin_token = Some(WALKTHROUGH_ADMIN.to_owned())).await
}

/// The README's walkthrough as written: the team and its two agents, the six messaging
/// operations with their documented errors, the live listener and one task.
#[tokio::test]
async fn the_readme_walkthrough_works_as_written() {
    let app = walkthrough_server().await;
    let out = run(&app, &format!("echo '=== README.md'\n{}", readme())).await;
    let answers = readme_answers(&out);
    let find = |what: &dyn Fn(&Value) -> bool| {
        answers
            .iter()
            .find(|a| what(a))
            .unwrap_or_else(|| panic!("not printed:\n{out}"))
    };
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
    // The error the README shows verbatim.
    let shown = doc("README.md")
        .split("That last answer:\n\n```json\n")
        .nth(1)
        .and_then(|rest| rest.split("\n```").next())
        .map(|line| serde_json::from_str::<Value>(line).expect("the shown answer is JSON"))
        .expect("the README shows the error");
    assert_eq!(answers[4], shown);
    let sent = find(&|a| a["delivery_status"]["pending_delivery"] == json!(["coder"]));
    assert!(sent["message_id"].is_string());
    assert_eq!(
        find(&|a| a["messages"].is_array())["messages"][0]["priority"],
        "high"
    );
    find(&|a| a["marked_read"].as_array().map(Vec::len) == Some(1));
    find(&|a| a["original_message_updated"] == true);
    let helpers = find(&|a| a["potential_responders"].is_array());
    assert_eq!(helpers["potential_responders"][0]["agent_id"], "planner");
    find(&|a| a["error_code"] == "INVALID_RECIPIENT");
    find(&|a| a["error_code"] == "MESSAGE_TOO_LONG");
    // The listener printed three entries: two replayed, the broadcast.
    let frames: Vec<&Value> = answers.iter().filter(|a| a["seq"].is_number()).collect();
    let kinds: Vec<&str> = frames
        .iter()
        .filter_map(|f| f["message"]["kind"].as_str())
        .collect();
    assert_eq!(
        kinds,
        ["response", "assistance_request", "broadcast"],
        "{out}"
    );
    let task = find(&|a| a["events"].is_array());
    assert_eq!(task["task"]["status"], "success", "{out}");
    assert_eq!(task["task"]["assignee_agent_id"], "coder");
    assert_eq!(task["task"]["result_data"]["count"], 17);
    assert_eq!(task["task"]["context"][0]["answer"], "Yesterday");
    // What the team key sees: the newest two messages of the team (the task's last
    // notices), and the finished task on its board.
    let traffic = find(&|a| a["entries"].is_array());
    assert_eq!(
        traffic["entries"].as_array().map(Vec::len),
        Some(2),
        "{out}"
    );
    assert_eq!(
        traffic["entries"][1]["message"]["thread_id"],
        "task:count-errors"
    );
    let board = answers.last().expect("the board");
    assert_eq!(board["tasks"][0]["task_id"], "count-errors", "{out}");
    app.stop().await;
}

/// A reader's way through: the README's blocks, then every page's, in the order of the
/// README's table of docs, in one shell — once from the repository's directory and once
/// from another (the pages' commands must not depend on where they run; the one that
/// runs an example from the repository says to set `REPO`). Each page's blocks find
/// the shell as the pages before left it: a later block that overwrote an earlier
/// one's variable, or a page whose comment counts recipients the reader's team no
/// longer has, fails here.
#[tokio::test]
async fn the_whole_walkthrough_runs_in_reading_order_from_any_directory() {
    if !crate::python::available("the_whole_walkthrough_runs_in_reading_order_from_any_directory") {
        return;
    }
    crate::python::python();
    let elsewhere = tempfile::tempdir().expect("a directory outside the repository");
    for dir in [crate::python::root(), elsewhere.path()] {
        let app = TestApp::start_with(|c| {
            c.admin_token = Some(WALKTHROUGH_ADMIN.to_owned());
            c.callbacks.allow_private = true;
        })
        .await;
        let last = READING_ORDER.last().expect("pages");
        let out = run_in(&app, &in_reading_order(last), Some(dir)).await;
        let at = dir.display();
        let tasks = page_answers(&out, "docs/tasks.md");
        assert!(
            tasks
                .iter()
                .any(|a| a["task"]["assignee_agent_id"] == "tester"),
            "{at}: the handoff\n{out}"
        );
        let publish = page_answers(&out, "docs/publish.md");
        let code = publish
            .iter()
            .find(|a| a["news_for"] == json!(["reviewer"]))
            .unwrap_or_else(|| panic!("{at}: the publish\n{out}"));
        assert_eq!(
            code["recipients"],
            json!(["planner", "reviewer", "tester"]),
            "{at}"
        );
        let stomp = page_answers(&out, "docs/stomp.md");
        assert!(
            stomp.iter().any(|a| a["messages"][0]["route"] == "stomp"),
            "{at}\n{out}"
        );
        let mcp = page_answers(&out, "docs/mcp.md");
        assert!(
            mcp.iter().any(|a| a["result"]["isError"] == false),
            "{at}\n{out}"
        );
        let a2a = page_answers(&out, "docs/a2a.md");
        assert!(
            a2a.iter()
                .any(|a| a["result"]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"),
            "{at}: the A2A task\n{out}"
        );
        assert!(
            a2a.iter().any(|a| *a == json!({"echo": "bonjour"})),
            "{at}: the outside agent answered\n{out}"
        );
        assert!(
            out.contains("task logs-1 is success (assignee bob)"),
            "{at}\n{out}"
        );
        let operations = page_answers(&out, "docs/operations.md");
        assert_eq!(
            operations.last().expect("the retention answer")["retention"]["read_messages_seconds"],
            604_800,
            "{at}: the team key still works at the end\n{out}"
        );
        app.stop().await;
    }
}

/// `PATH` with the built `switchboard` binary first, as a user who installed it has.
pub fn path_with_binary() -> String {
    let bin = std::path::Path::new(env!("CARGO_BIN_EXE_switchboard"))
        .parent()
        .expect("bin dir")
        .display()
        .to_string();
    format!("{bin}:{}", std::env::var("PATH").unwrap_or_default())
}

mod pages;
