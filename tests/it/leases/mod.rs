//! Leases on named resources (`docs/leases.md`): grants, conflicts as paths overlap,
//! renewals, releases, ends, every rule's refusal, and agents racing for overlapping
//! resources with never two exclusive holders at once. Every test here runs on SQLite and
//! again on PostgreSQL (`engines.rs`).

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::{ADMIN, Agent, Res, Team, TestApp};

mod events;
mod race;
mod scope;

async fn acquire(app: &TestApp, team: &Team, who: &Agent, body: Value) -> Res {
    app.put(&format!("/v1/teams/{}/leases", team.id))
        .token(&who.token)
        .json(body)
        .send()
        .await
}

async fn list(app: &TestApp, team: &Team, token: &str, query: &str) -> Vec<Value> {
    let res = app
        .get(&format!("/v1/teams/{}/leases{query}", team.id))
        .token(token)
        .send()
        .await
        .expect_status(200);
    res.body["leases"].as_array().expect("leases").clone()
}

fn lease_id(res: &Res) -> String {
    res.body["lease"]["lease_id"]
        .as_str()
        .expect("lease_id")
        .to_owned()
}

async fn setup(app: &TestApp, name: &str) -> (Team, Agent, Agent) {
    let team = app.team(name).await;
    let a = app.agent(&team, "a", &["code"]).await;
    let b = app.agent(&team, "b", &["code"]).await;
    (team, a, b)
}

#[tokio::test]
async fn an_exclusive_lease_keeps_others_off_what_overlaps_and_names_its_holder() {
    let app = TestApp::start().await;
    let (team, a, b) = setup(&app, "lease-grant").await;
    let granted = acquire(
        &app,
        &team,
        &a,
        json!({"resource": "src/**", "ttl_seconds": 60, "reason": "moving the store"}),
    )
    .await
    .expect_status(200);
    let lease = &granted.body["lease"];
    assert_eq!(lease["holder"], "a");
    assert_eq!(lease["team_id"], team.id);
    assert_eq!(lease["resource"], "src/**");
    assert_eq!(lease["exclusive"], true);
    assert_eq!(lease["reason"], "moving the store");
    let id = lease_id(&granted);

    for overlapping in ["src/main.rs", "src/store/*", "**", "src"] {
        let refused = acquire(&app, &team, &b, json!({"resource": overlapping}))
            .await
            .expect_error(409, "LEASE_CONFLICT");
        let conflicts = refused.body["details"]["conflicts"]
            .as_array()
            .expect("conflicts");
        assert_eq!(conflicts.len(), 1, "{overlapping}: {:#}", refused.body);
        assert_eq!(conflicts[0]["holder"], "a");
        assert_eq!(conflicts[0]["lease_id"], id.as_str());
        assert_eq!(conflicts[0]["resource"], "src/**");
        assert_eq!(conflicts[0]["expires_at"], lease["expires_at"]);
    }
    // A shared lease conflicts with an exclusive one too.
    acquire(
        &app,
        &team,
        &b,
        json!({"resource": "src/lib.rs", "exclusive": false}),
    )
    .await
    .expect_error(409, "LEASE_CONFLICT");
    // What does not overlap is free; the holder's own leases never conflict.
    acquire(&app, &team, &b, json!({"resource": "docs/*.md"}))
        .await
        .expect_status(200);
    acquire(&app, &team, &a, json!({"resource": "src/main.rs"}))
        .await
        .expect_status(200);
    let all = list(&app, &team, &team.key, "").await;
    assert_eq!(all.len(), 3);
    app.stop().await;
}

#[tokio::test]
async fn shared_leases_coexist_and_keep_an_exclusive_one_off() {
    let app = TestApp::start().await;
    let (team, a, b) = setup(&app, "lease-shared").await;
    let c = app.agent(&team, "c", &[]).await;
    for who in [&a, &b] {
        acquire(
            &app,
            &team,
            who,
            json!({"resource": "db/users", "exclusive": false}),
        )
        .await
        .expect_status(200);
    }
    let refused = acquire(&app, &team, &c, json!({"resource": "db/*"}))
        .await
        .expect_error(409, "LEASE_CONFLICT");
    let holders: Vec<&str> = refused.body["details"]["conflicts"]
        .as_array()
        .expect("conflicts")
        .iter()
        .filter_map(|c| c["holder"].as_str())
        .collect();
    assert_eq!(holders, ["a", "b"]);
    app.stop().await;
}

#[tokio::test]
async fn asking_again_renews_extend_moves_the_end_and_release_frees_the_resource() {
    let app = TestApp::start().await;
    let (team, a, b) = setup(&app, "lease-life").await;
    let first = acquire(
        &app,
        &team,
        &a,
        json!({"resource": "T-42", "ttl_seconds": 10}),
    )
    .await
    .expect_status(200);
    let id = lease_id(&first);
    // The same resource and kind again: the same lease, renewed.
    let again = acquire(
        &app,
        &team,
        &a,
        json!({"resource": "T-42", "ttl_seconds": 600}),
    )
    .await
    .expect_status(200);
    assert_eq!(lease_id(&again), id);
    assert!(
        again.body["lease"]["expires_at"].as_str() > first.body["lease"]["expires_at"].as_str()
    );
    assert_eq!(list(&app, &team, &a.token, "").await.len(), 1);

    let extend = |token: String, body: Value| {
        let path = format!("/v1/teams/{}/leases/{id}/extend", team.id);
        let app = &app;
        async move { app.post(&path).token(&token).json(body).send().await }
    };
    let extended = extend(a.token.clone(), json!({"ttl_seconds": 3600}))
        .await
        .expect_status(200);
    assert!(
        extended.body["lease"]["expires_at"].as_str() > again.body["lease"]["expires_at"].as_str()
    );
    // Only the holder extends.
    extend(b.token.clone(), json!({}))
        .await
        .expect_error(403, "FORBIDDEN");
    extend(team.key.clone(), json!({}))
        .await
        .expect_error(403, "FORBIDDEN");
    extend(a.token.clone(), json!({"ttl_seconds": 0}))
        .await
        .expect_invalid("ttl_seconds");

    // Only the holder (or the team key) releases.
    let path = format!("/v1/teams/{}/leases/{id}", team.id);
    app.delete(&path)
        .token(&b.token)
        .send()
        .await
        .expect_error(403, "FORBIDDEN");
    let released = app
        .delete(&path)
        .token(&a.token)
        .send()
        .await
        .expect_status(200);
    assert_eq!(lease_id(&released), id);
    app.delete(&path)
        .token(&a.token)
        .send()
        .await
        .expect_error(404, "LEASE_NOT_FOUND");
    extend(a.token.clone(), json!({}))
        .await
        .expect_error(404, "LEASE_NOT_FOUND");
    acquire(&app, &team, &b, json!({"resource": "T-42"}))
        .await
        .expect_status(200);
    app.stop().await;
}

#[tokio::test]
async fn the_team_key_releases_anyones_lease() {
    let app = TestApp::start().await;
    let (team, _, b) = setup(&app, "lease-key").await;
    acquire(&app, &team, &b, json!({"resource": "T-42"}))
        .await
        .expect_status(200);
    let held = list(&app, &team, &team.key, "?holder=b").await;
    let theirs = held[0]["lease_id"].as_str().expect("id");
    app.delete(&format!("/v1/teams/{}/leases/{theirs}", team.id))
        .token(&team.key)
        .send()
        .await
        .expect_status(200);
    assert!(list(&app, &team, &team.key, "").await.is_empty());
    app.stop().await;
}

#[tokio::test]
async fn the_list_filters_by_holder_and_by_overlapping_resource() {
    let app = TestApp::start().await;
    let (team, a, b) = setup(&app, "lease-list").await;
    for (who, resource) in [(&a, "src/**"), (&b, "docs/a.md"), (&b, "T-1")] {
        acquire(&app, &team, who, json!({"resource": resource}))
            .await
            .expect_status(200);
    }
    let resources = |leases: Vec<Value>| -> Vec<String> {
        leases
            .iter()
            .filter_map(|l| l["resource"].as_str().map(str::to_owned))
            .collect()
    };
    assert_eq!(
        resources(list(&app, &team, &a.token, "?holder=b").await),
        ["docs/a.md", "T-1"]
    );
    assert_eq!(
        resources(list(&app, &team, &a.token, "?resource=docs/*.md").await),
        ["docs/a.md"]
    );
    assert_eq!(
        resources(list(&app, &team, &a.token, "?resource=src/main.rs&holder=a").await),
        ["src/**"]
    );
    app.get(&format!("/v1/teams/{}/leases?holder=nobody", team.id))
        .token(&a.token)
        .send()
        .await
        .expect_error(404, "AGENT_NOT_FOUND");
    app.get(&format!("/v1/teams/{}/leases?resource=a//b", team.id))
        .token(&a.token)
        .send()
        .await
        .expect_invalid("resource");
    app.get(&format!("/v1/teams/{}/leases?colour=red", team.id))
        .token(&a.token)
        .send()
        .await
        .expect_error(400, "VALIDATION_ERROR");
    app.stop().await;
}

#[tokio::test]
async fn every_rule_of_a_request_is_refused_naming_its_field() {
    let app = TestApp::start().await;
    let (team, a, _) = setup(&app, "lease-rules").await;
    let long = "a".repeat(513);
    let deep = vec!["d"; 33].join("/");
    for bad in [
        "",
        "/abs",
        "trailing/",
        "a//b",
        "src/x**",
        "tab\there",
        &long,
        &deep,
    ] {
        acquire(&app, &team, &a, json!({"resource": bad}))
            .await
            .expect_invalid("resource");
    }
    for ttl in [json!(0), json!(86_401), json!(-5), json!("60")] {
        let res = acquire(
            &app,
            &team,
            &a,
            json!({"resource": "x", "ttl_seconds": ttl}),
        )
        .await;
        res.expect_invalid("ttl_seconds");
    }
    acquire(
        &app,
        &team,
        &a,
        json!({"resource": "x", "reason": "r".repeat(501)}),
    )
    .await
    .expect_invalid("reason");
    acquire(
        &app,
        &team,
        &a,
        json!({"resource": "x", "exclusive": "yes"}),
    )
    .await
    .expect_invalid("exclusive");
    acquire(&app, &team, &a, json!({"resource": "x", "colour": "red"}))
        .await
        .expect_error(400, "VALIDATION_ERROR");
    acquire(&app, &team, &a, json!({}))
        .await
        .expect_invalid("resource");
    // The bounds themselves are accepted.
    acquire(
        &app,
        &team,
        &a,
        json!({"resource": "a".repeat(512), "ttl_seconds": 86_400, "reason": "r".repeat(500)}),
    )
    .await
    .expect_status(200);
    // Only agents hold leases: the keys are refused.
    for key in [team.key.as_str(), ADMIN] {
        app.put(&format!("/v1/teams/{}/leases", team.id))
            .token(key)
            .json(json!({"resource": "y"}))
            .send()
            .await
            .expect_error(403, "FORBIDDEN");
    }
    app.stop().await;
}

#[tokio::test]
async fn an_agent_holds_at_most_a_hundred_leases() {
    let app = TestApp::start().await;
    let (team, a, b) = setup(&app, "lease-limit").await;
    for i in 0..100 {
        acquire(&app, &team, &a, json!({"resource": format!("r/{i}")}))
            .await
            .expect_status(200);
    }
    let refused = acquire(&app, &team, &a, json!({"resource": "r/100"}))
        .await
        .expect_error(409, "CONFLICT");
    assert_eq!(refused.body["details"]["limit"], "leases_per_agent");
    assert_eq!(refused.body["details"]["max"], 100);
    // Another agent is not limited by it.
    acquire(&app, &team, &b, json!({"resource": "s/1"}))
        .await
        .expect_status(200);
    app.stop().await;
}

#[tokio::test]
async fn a_lease_ends_with_its_ttl_and_its_holders_removal_and_is_gone_for_good() {
    let app = TestApp::start().await;
    let (team, a, b) = setup(&app, "lease-end").await;
    acquire(
        &app,
        &team,
        &a,
        json!({"resource": "short", "ttl_seconds": 1}),
    )
    .await
    .expect_status(200);
    acquire(&app, &team, &b, json!({"resource": "short"}))
        .await
        .expect_error(409, "LEASE_CONFLICT");
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    // Ended at its expiry, whether or not the sweep has run.
    acquire(&app, &team, &b, json!({"resource": "short"}))
        .await
        .expect_status(200);

    // The sweep removes what ended and counts it.
    acquire(
        &app,
        &team,
        &a,
        json!({"resource": "gone", "ttl_seconds": 1}),
    )
    .await
    .expect_status(200);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let metrics = app.get("/metrics").send().await.body;
        let text = metrics.as_str().unwrap_or_default().to_owned();
        let expiries = text
            .lines()
            .find(|l| l.starts_with("switchboard_lease_expiries_total"))
            .and_then(|l| l.split_whitespace().last())
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0);
        if expiries >= 1.0 {
            break;
        }
        assert!(Instant::now() < deadline, "no expiry counted:\n{text}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // A removed holder's leases end at once; its id registered again holds none.
    acquire(
        &app,
        &team,
        &a,
        json!({"resource": "mine/**", "ttl_seconds": 600}),
    )
    .await
    .expect_status(200);
    app.delete(&format!("/v1/teams/{}/agents/a", team.id))
        .token(&team.key)
        .send()
        .await
        .expect_status(200);
    assert!(
        list(&app, &team, &team.key, "?resource=mine/x")
            .await
            .is_empty()
    );
    let again = app.agent(&team, "a", &[]).await;
    assert!(
        list(&app, &team, &again.token, "?holder=a")
            .await
            .is_empty()
    );
    acquire(&app, &team, &b, json!({"resource": "mine/x"}))
        .await
        .expect_status(200);
    app.stop().await;
}

#[tokio::test]
async fn another_teams_leases_are_out_of_reach() {
    let app = TestApp::start().await;
    let (team, a, _) = setup(&app, "lease-own").await;
    let other = app.team("lease-other").await;
    let z = app.agent(&other, "z", &[]).await;
    let id = lease_id(
        &acquire(&app, &team, &a, json!({"resource": "x"}))
            .await
            .expect_status(200),
    );
    app.put(&format!("/v1/teams/{}/leases", team.id))
        .token(&z.token)
        .json(json!({"resource": "y"}))
        .send()
        .await
        .expect_error(403, "FORBIDDEN");
    // In its own team, the id names nothing.
    app.delete(&format!("/v1/teams/{}/leases/{id}", other.id))
        .token(&other.key)
        .send()
        .await
        .expect_error(404, "LEASE_NOT_FOUND");
    assert!(list(&app, &other, &z.token, "").await.is_empty());
    app.stop().await;
}

/// A coding agent's day with leases through the official Python MCP SDK, unmodified:
/// take, meet a conflict (a tool error carrying `LEASE_CONFLICT` and the holder), list,
/// release, take, extend; a bad resource is the REST refusal.
#[tokio::test]
async fn mcp_agents_take_meet_and_release_leases_through_the_stock_sdk() {
    if !crate::python::available("mcp_agents_take_meet_and_release_leases_through_the_stock_sdk") {
        return;
    }
    let app = TestApp::start().await;
    let (team, a, b) = setup(&app, "lease-mcp").await;
    let out = crate::python::run("mcp_agents.py", &["leases", &app.base, &a.token, &b.token]).await;
    assert_eq!(out["taken"]["lease"]["holder"], "a");
    assert_eq!(out["taken"]["lease"]["resource"], "src/**");
    assert_eq!(out["conflict"]["error"], true, "{out:#}");
    assert_eq!(out["conflict"]["data"]["error_code"], "LEASE_CONFLICT");
    assert_eq!(
        out["conflict"]["data"]["details"]["conflicts"][0]["holder"],
        "a"
    );
    assert_eq!(out["held"]["leases"][0]["holder"], "a");
    assert_eq!(
        out["released"]["lease"]["lease_id"],
        out["taken"]["lease"]["lease_id"]
    );
    assert_eq!(out["mine"]["lease"]["holder"], "b");
    assert!(
        out["extended"]["lease"]["expires_at"].as_str()
            > out["mine"]["lease"]["expires_at"].as_str()
    );
    assert_eq!(out["bad"]["data"]["error_code"], "VALIDATION_ERROR");
    assert_eq!(out["bad"]["data"]["details"]["field"], "resource");
    // What the SDK did is what REST sees.
    let held = list(&app, &team, &team.key, "").await;
    assert_eq!(held.len(), 1);
    assert_eq!(held[0]["holder"], "b");
    app.stop().await;
}

/// The pattern the OpenAPI document states for a resource and the server's parser agree:
/// a generated client never builds a resource the server refuses, nor the other way.
#[test]
fn the_documented_resource_pattern_is_the_parsers_rule() {
    use switchboard_types::leases::{MAX_RESOURCE_CHARS, Pattern, RESOURCE_PATTERN};
    let stated = regex::Regex::new(RESOURCE_PATTERN).expect("the pattern compiles");
    let long = "a".repeat(MAX_RESOURCE_CHARS);
    let deep = vec!["d"; 32].join("/");
    let deeper = vec!["d"; 33].join("/");
    for sample in [
        "src/**",
        "**",
        "*",
        "a",
        "T-42",
        "docs/*.md",
        "a*b*c",
        "*a*",
        "a/**/**/z",
        "é/ü",
        &long,
        &deep,
        "",
        "/a",
        "a/",
        "a//b",
        "a**",
        "src/x**",
        "***",
        "a\u{0}b",
        "a\u{7f}",
        "a\u{87}",
        "tab\there",
        &deeper,
    ] {
        let fits_length = sample.chars().count() <= MAX_RESOURCE_CHARS;
        assert_eq!(
            stated.is_match(sample) && fits_length,
            Pattern::parse("resource", sample).is_ok(),
            "{sample:?}"
        );
    }
}
