//! The official A2A JavaScript SDK (`@a2a-js/sdk`, pinned in `tests/interop/a2a-js/`),
//! unmodified: `ClientFactory.createFromUrl` on a member URL, as its users start.
//!
//! The SDK resolves `.well-known/agent-card.json` *relative* to the URL it is given
//! (`new URL(path, base)`): from `…/a2a/{team}/{agent}/` that is the member's card; from
//! `…/a2a/{team}/{agent}` (no trailing slash) it is `…/a2a/{team}/.well-known/…`, which
//! names no agent. So the member URL to hand it ends in `/` (docs/a2a.md), and the
//! slash-less one gets a 404 that says so.

use std::path::PathBuf;
use std::sync::OnceLock;

use serde_json::Value;

use crate::inspector::npm_package;

fn ready() -> &'static Result<PathBuf, String> {
    static READY: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    READY.get_or_init(|| npm_package("a2a-js", "node_modules/@a2a-js/sdk/package.json"))
}

/// Runs `card.mjs` (the SDK's calls) against `member_url` with `token`.
async fn card(member_url: &str, token: &str) -> Value {
    let dir = crate::python::root().join("target/a2a-js");
    let out = tokio::process::Command::new("node")
        .arg("card.mjs")
        .arg(member_url)
        .arg(token)
        .current_dir(&dir)
        .output()
        .await
        .expect("node runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(stdout.trim()).unwrap_or_else(|_| {
        panic!(
            "card.mjs printed no JSON:\n{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

#[tokio::test]
async fn the_js_sdk_finds_a_members_card_from_its_url_and_sends() {
    if !crate::python::gate(
        "the_js_sdk_finds_a_members_card_from_its_url_and_sends",
        "Node.js with npm and its registry",
        ready(),
    ) {
        return;
    }
    let app = crate::support::TestApp::start().await;
    let (team, client, _worker) = super::team(&app).await;
    let member = format!("{}/a2a/{}/worker/", app.base, team.id);
    let out = card(&member, &client.token).await;
    assert_eq!(out["card"], "worker", "{out}");
    assert_eq!(
        out["sent"]["metadata"]["switchboard"]["assigneeAgentId"], "worker",
        "{out}"
    );
    // Without the slash the SDK asks the team's path, which names no agent: a 404
    // whose body says what to give it instead.
    let out = card(member.trim_end_matches('/'), &client.token).await;
    let error = out["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("/a2a/a2a/.well-known/agent-card.json: 404"),
        "{out}"
    );
    let res = app
        .get("/a2a/a2a/.well-known/agent-card.json")
        .token(&client.token)
        .send()
        .await;
    let res = res.expect_error(404, "NOT_FOUND");
    let message = res.body["error_message"].as_str().unwrap_or_default();
    assert!(message.contains("trailing slash"), "{}", res.body);
}
