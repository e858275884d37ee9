//! `switchboard search` (`docs/cli.md`): a line per message found, the page with
//! `--json`, and a refused query exits 1 with its code.

use std::process::Stdio;

use super::corpus;
use crate::support::TestApp;

async fn search(app: &TestApp, token: &str, args: &[&str]) -> std::process::Output {
    tokio::process::Command::new(env!("CARGO_BIN_EXE_switchboard"))
        .env("SWITCHBOARD_URL", &app.base)
        .env("SWITCHBOARD_TOKEN", token)
        .stdin(Stdio::null())
        .arg("search")
        .args(args)
        .output()
        .await
        .expect("runs")
}

#[tokio::test]
async fn the_command_line_finds_what_the_token_may_read() {
    let app = TestApp::start().await;
    let (team, a, _, c, _) = corpus(&app).await;
    let out = search(&app, &a.token, &["parser", "--newest"]).await;
    assert!(out.status.success(), "{out:?}");
    let lines: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_owned)
        .collect();
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert!(
        lines[0].ends_with(" b → a: Reviewing the parser now"),
        "{lines:?}"
    );
    assert!(
        lines[1].ends_with(" a → b: The parser change is ready for review"),
        "{lines:?}"
    );
    let none = search(&app, &c.token, &["parser"]).await;
    assert_eq!(
        String::from_utf8_lossy(&none.stdout).trim(),
        "nothing found"
    );
    let json = search(&app, &team.key, &["lunch", "--json"]).await;
    let page: serde_json::Value = serde_json::from_slice(&json.stdout).expect("json");
    assert_eq!(
        page["results"][0]["message"]["content"]["text"],
        "Lunch menu: soup and bread"
    );
    let refused = search(&app, &team.key, &["--", "--"]).await;
    assert_eq!(refused.status.code(), Some(1), "{refused:?}");
    assert!(String::from_utf8_lossy(&refused.stderr).contains("VALIDATION_ERROR"));
    app.stop().await;
}
