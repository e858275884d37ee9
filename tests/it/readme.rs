//! The README's walkthroughs, run as written: every code block after a
//! `<!-- walkthrough: NAME -->` marker is executed with bash against a real server, with
//! only `http://localhost:8080` replaced by the test server's address.

use serde_json::Value;

use crate::support::TestApp;

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
