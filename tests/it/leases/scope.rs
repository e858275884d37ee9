//! A grant reads only the leases whose literal prefix encloses or extends its own
//! (`LeaseScope::Around`), and the live-leases gauge counts from the store: both checked
//! through the API, on each engine.

use std::time::{Duration, Instant};

use serde_json::json;

use super::{acquire, setup};
use crate::support::TestApp;

/// Each way a held lease can overlap a request: its prefix extends the request's, equals
/// it, encloses it, or is empty (a leading wildcard); and leases that share no prefix
/// path are not read as conflicts.
#[tokio::test]
async fn a_grant_finds_every_overlap_whatever_the_prefixes_say() {
    let app = TestApp::start().await;
    let (team, a, b) = setup(&app, "lease-scope").await;
    for resource in ["a/b/c/d.rs", "a/**", "*.md", "x/y/**", "a/bc/e", "a/b"] {
        acquire(&app, &team, &a, json!({"resource": resource}))
            .await
            .expect_status(200);
    }
    let conflicts = |res: &crate::support::Res| -> Vec<String> {
        let mut held: Vec<String> = res.body["details"]["conflicts"]
            .as_array()
            .expect("conflicts")
            .iter()
            .map(|c| c["resource"].as_str().expect("resource").to_owned())
            .collect();
        held.sort();
        held
    };
    for (asked, expected) in [
        ("a/b/**", vec!["a/**", "a/b", "a/b/c/d.rs"]),
        ("a/b/c/*.rs", vec!["a/**", "a/b/c/d.rs"]),
        ("README.md", vec!["*.md"]),
        ("x/y", vec!["x/y/**"]),
        ("*/y/z", vec!["a/**", "x/y/**"]),
        (
            "**",
            vec!["*.md", "a/**", "a/b", "a/b/c/d.rs", "a/bc/e", "x/y/**"],
        ),
    ] {
        let res = acquire(&app, &team, &b, json!({"resource": asked}))
            .await
            .expect_error(409, "LEASE_CONFLICT");
        assert_eq!(conflicts(&res), expected, "asking for {asked}");
    }
    // Beside the held prefixes, not under them: granted.
    for free in ["x/z", "ab/c", "b/a/b", "a.txt"] {
        acquire(&app, &team, &b, json!({"resource": free}))
            .await
            .expect_status(200);
    }
    app.stop().await;
}

#[tokio::test]
async fn the_live_leases_gauge_follows_grants_and_ends() {
    let app = TestApp::start().await;
    let (team, a, b) = setup(&app, "lease-gauge").await;
    acquire(
        &app,
        &team,
        &a,
        json!({"resource": "long", "ttl_seconds": 600}),
    )
    .await
    .expect_status(200);
    acquire(
        &app,
        &team,
        &b,
        json!({"resource": "brief", "ttl_seconds": 3}),
    )
    .await
    .expect_status(200);
    let gauge = || async {
        let text = app.get("/metrics").send().await.body;
        let text = text.as_str().unwrap_or_default().to_owned();
        text.lines()
            .find(|l| l.starts_with("switchboard_leases_live"))
            .and_then(|l| l.split_whitespace().last())
            .and_then(|v| v.parse::<f64>().ok())
    };
    // Two while both live (the sweep sets it every second), then one.
    let mut seen = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(15);
    for want in [2.0, 1.0] {
        loop {
            let now = gauge().await;
            if seen.last() != Some(&now) {
                seen.push(now);
            }
            if now == Some(want) {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "waiting for {want}, gauge went {seen:?}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    app.stop().await;
}
