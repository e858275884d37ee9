//! Approvals from a terminal (`docs/cli.md`): an agent asks with `switchboard agent
//! approval request`, a person lists and decides with the team key under `switchboard
//! admin approval`, the agent reads the outcome; a second decision exits 1.

use std::process::Stdio;

use serde_json::Value;

use super::setup;
use crate::support::TestApp;

async fn switchboard(app: &TestApp, token: &str, args: &[&str]) -> std::process::Output {
    tokio::process::Command::new(env!("CARGO_BIN_EXE_switchboard"))
        .env("SWITCHBOARD_URL", &app.base)
        .env("SWITCHBOARD_TOKEN", token)
        .stdin(Stdio::null())
        .args(args)
        .output()
        .await
        .expect("runs")
}

fn json_of(out: &std::process::Output) -> Value {
    assert!(out.status.success(), "{out:?}");
    serde_json::from_slice(&out.stdout).expect("json")
}

#[tokio::test]
async fn an_agent_asks_and_a_person_decides_from_the_command_line() {
    let app = TestApp::start().await;
    let (team, asker, _, _) = setup(&app, "approve-cli").await;
    let request = [
        "agent",
        "approval",
        "request",
        "Deploy 4.2?",
        "--options",
        "deploy,wait",
    ];
    let asked =
        json_of(&switchboard(&app, &asker.token, &[&request[..], &["--json"]].concat()).await);
    let id = asked["approval"]["approval_id"]
        .as_str()
        .expect("id")
        .to_owned();
    assert_eq!(
        asked["approval"]["options"],
        serde_json::json!(["deploy", "wait"])
    );

    let listed = switchboard(
        &app,
        &team.key,
        &["admin", "approval", "list", "--status", "pending"],
    )
    .await;
    assert!(listed.status.success(), "{listed:?}");
    let line = String::from_utf8_lossy(&listed.stdout);
    assert!(line.starts_with(&format!("{id} pending until ")), "{line}");
    assert!(line.contains("asker asks: Deploy 4.2?"), "{line}");

    let decided = switchboard(
        &app,
        &team.key,
        &[
            "admin",
            "approval",
            "decide",
            &id,
            "deploy",
            "--comment",
            "after 18:00",
        ],
    )
    .await;
    assert!(decided.status.success(), "{decided:?}");
    assert!(
        String::from_utf8_lossy(&decided.stdout).contains("decided: deploy (after 18:00)"),
        "{decided:?}"
    );
    let read = json_of(
        &switchboard(
            &app,
            &asker.token,
            &["agent", "approval", "show", &id, "--wait", "5", "--json"],
        )
        .await,
    );
    assert_eq!(read["approval"]["decision"], "deploy");

    let again = switchboard(
        &app,
        &team.key,
        &["admin", "approval", "decide", &id, "wait"],
    )
    .await;
    assert_eq!(again.status.code(), Some(1), "{again:?}");
    assert!(
        String::from_utf8_lossy(&again.stderr).contains("APPROVAL_CLOSED"),
        "{again:?}"
    );
    app.stop().await;
}
