//! The team console (`/console`): served by the binary under a strict policy, and used in
//! a real browser — Debian's Chromium driven by Playwright — against a real server with
//! real agents beside it (`tests/interop/console_browser.py`).

use serde_json::json;

use crate::python::{self, BROWSER};
use crate::support::TestApp;

/// What the page may load and run: its own origin's files and API, nothing inline.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
     connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; \
     frame-ancestors 'none'";

#[tokio::test]
async fn the_console_is_served_with_a_strict_policy_and_no_inline_code() {
    let app = TestApp::start().await;
    let http = reqwest::Client::new();
    for (path, content_type) in [
        ("/console", "text/html; charset=utf-8"),
        ("/console/console.js", "text/javascript; charset=utf-8"),
        ("/console/console.css", "text/css; charset=utf-8"),
    ] {
        let res = http.get(app.url(path)).send().await.expect("served");
        assert_eq!(res.status(), 200, "{path}");
        let header = |name: &str| {
            res.headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_owned()
        };
        assert_eq!(header("content-type"), content_type, "{path}");
        assert_eq!(header("content-security-policy"), CSP, "{path}");
        assert_eq!(header("x-content-type-options"), "nosniff", "{path}");
        assert_eq!(header("x-frame-options"), "DENY", "{path}");
    }
    // The files as built in: no inline script or handler, no HTML from strings.
    let page = include_str!("../../console/index.html");
    let script = include_str!("../../console/console.js");
    assert_eq!(page.matches("<script").count(), 1, "one script, by src");
    assert!(page.contains(r#"<script src="/console/console.js" defer></script>"#));
    assert!(!has_inline_handler(page), "no inline handlers");
    for sink in [
        "innerHTML",
        "outerHTML",
        "insertAdjacentHTML",
        "document.write",
        "eval(",
    ] {
        assert!(!script.contains(sink), "console.js uses {sink}");
    }
    assert!(
        !script.contains("localStorage"),
        "the credential stays in the tab (sessionStorage)"
    );
    app.stop().await;
}

/// Whether an HTML text has an `on…=` attribute (an inline event handler).
fn has_inline_handler(html: &str) -> bool {
    html.split('<').skip(1).any(|tag| {
        let tag = tag.split('>').next().unwrap_or_default();
        tag.split_whitespace()
            .skip(1)
            .any(|attr| attr.starts_with("on") && attr.contains('='))
    })
}

#[tokio::test]
async fn a_person_watches_the_team_and_steps_in_from_a_real_browser() {
    let chromium =
        std::env::var("SWITCHBOARD_CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".to_owned());
    let browser = if std::path::Path::new(&chromium).exists() {
        Ok(std::path::PathBuf::from(&chromium))
    } else {
        Err(format!(
            "no Chromium at {chromium} (apt-get install chromium, or set SWITCHBOARD_CHROMIUM)"
        ))
    };
    let test = "console::a_person_watches_the_team_and_steps_in_from_a_real_browser";
    if !python::gate(test, "Debian's chromium", &browser) || !python::available_in(&BROWSER, test) {
        return;
    }
    let app = TestApp::start().await;
    let team = app.team("console").await;
    let mut tokens = serde_json::Map::new();
    for (id, caps) in [
        ("planner", &["plan"][..]),
        ("worker", &["count"][..]),
        ("operator", &[][..]),
        ("bystander", &[][..]),
    ] {
        tokens.insert(id.to_owned(), json!(app.agent(&team, id, caps).await.token));
    }
    let shots = python::root().join("target/console-screenshots");
    let result = python::run_in(
        &BROWSER,
        "console_browser.py",
        &[
            &app.url(""),
            &team.id,
            &team.key,
            &serde_json::Value::Object(tokens).to_string(),
            &shots.to_string_lossy(),
        ],
    )
    .await;
    assert_eq!(result["ok"], true, "{result}");
    // A figure, not a pass mark (docs/console.md): printed for the run's log.
    eprintln!(
        "console: REST send to timeline entry, ms: {}",
        result["timeline_latency_ms"]
    );
    for shot in [
        "console-approvals.png",
        "console-team.png",
        "console-tasks.png",
        "console-traffic.png",
    ] {
        assert!(shots.join(shot).exists(), "{shot} taken");
    }
    app.stop().await;
}
