//! The `switchboard` binary's commands, run as subprocesses.

use serde_json::Value;

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
