//! The one error model: every failure has the contract's body and the right status,
//! whatever the client sends. Nothing a client sends causes a 5xx.

use std::time::Duration;

use serde_json::{Value, json};
use sqlx::Connection;

use crate::support::{ADMIN, TestApp};

#[tokio::test]
async fn missing_malformed_and_unknown_tokens_are_unauthorized() {
    let app = TestApp::start().await;
    app.team("research").await;
    app.get("/v1/teams/research")
        .send()
        .await
        .expect_error(401, "UNAUTHORIZED");
    for header in [
        "Basic dXNlcjpwYXNz",
        "Bearer",
        "Bearer ",
        "Bearer nonsense",
        "Bearer sb_team_0123456789abcdef_00",
        "Bearer sb_agent_0123456789abcdef_00",
        "Bearer sb_admin_wrong_wrong",
    ] {
        app.get("/v1/teams/research")
            .header("authorization", header)
            .send()
            .await
            .expect_error(401, "UNAUTHORIZED");
    }
    // A real key with a wrong secret is refused too.
    let team = app.team("other").await;
    // (Two other last digits: a key that ends in "ff" would be forged into itself.)
    let (kept, last) = team.key.split_at(team.key.len() - 2);
    let forged = format!("{kept}{}", if last == "ff" { "00" } else { "ff" });
    app.get("/v1/teams/other")
        .token(&forged)
        .send()
        .await
        .expect_error(401, "UNAUTHORIZED");
    app.stop().await;
}

#[tokio::test]
async fn unknown_routes_and_methods_use_the_error_body() {
    let app = TestApp::start().await;
    let res = app
        .get("/v1/nothing-here")
        .send()
        .await
        .expect_error(404, "NOT_FOUND");
    assert_eq!(res.body["details"]["path"], "/v1/nothing-here");
    // Every response carries a request id for correlating with the server's log.
    assert!(res.headers.get("x-request-id").is_some());
    app.delete("/healthz")
        .send()
        .await
        .expect_error(405, "METHOD_NOT_ALLOWED");
    app.stop().await;
}

#[tokio::test]
async fn malformed_bodies_are_validation_errors_naming_the_body() {
    let app = TestApp::start().await;
    for raw in [
        "",
        "   ",
        "{",
        "{\"name\": }",
        "not json",
        "{\"name\": \"a\"} trailing",
    ] {
        app.post("/v1/teams")
            .token(ADMIN)
            .raw(raw)
            .send()
            .await
            .expect_invalid("body");
    }
    // Valid JSON of the wrong shape names what is wrong with it.
    app.post("/v1/teams")
        .token(ADMIN)
        .raw("[]")
        .send()
        .await
        .expect_error(400, "VALIDATION_ERROR");
    app.post("/v1/teams")
        .token(ADMIN)
        .raw("null")
        .send()
        .await
        .expect_error(400, "VALIDATION_ERROR");
    // Deep nesting is refused by the parser, not by a stack overflow.
    let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    app.post("/v1/teams")
        .token(ADMIN)
        .raw(deep)
        .send()
        .await
        .expect_error(400, "VALIDATION_ERROR");
    // No Content-Type at all (curl -d sends form encoding) still parses as JSON.
    let res = app
        .post("/v1/teams")
        .token(ADMIN)
        .header("content-type", "application/x-www-form-urlencoded")
        .raw_untyped(r#"{"name": "curl style"}"#)
        .send()
        .await;
    res.expect_status(201);
    app.stop().await;
}

#[tokio::test]
async fn bodies_over_the_limit_are_payload_too_large() {
    let app = TestApp::start().await;
    let big = json!({"name": "x".repeat(1024 * 1024 + 1)}).to_string();
    let res = app
        .post("/v1/teams")
        .token(ADMIN)
        .raw(big)
        .send()
        .await
        .expect_error(413, "PAYLOAD_TOO_LARGE");
    assert_eq!(res.body["details"]["limit_bytes"], 1024 * 1024);
    app.stop().await;

    // The limit is configurable.
    let app = TestApp::start_with(|c| c.max_body_bytes = 64).await;
    let body = json!({"name": "y".repeat(100)}).to_string();
    app.post("/v1/teams")
        .token(ADMIN)
        .raw(body)
        .send()
        .await
        .expect_error(413, "PAYLOAD_TOO_LARGE");
    app.post("/v1/teams")
        .token(ADMIN)
        .json(json!({"name": "small"}))
        .send()
        .await
        .expect_status(201);
    app.stop().await;
}

#[tokio::test]
async fn storage_failure_is_unavailable_and_leaves_nothing_half_written() {
    let app = TestApp::start_on_sqlite_with(|c| c.busy_timeout = Duration::from_millis(100)).await;
    let team = app.team("research").await;

    // Another process holds the database's write lock (a backup tool, say).
    let mut intruder =
        sqlx::SqliteConnection::connect(&format!("sqlite://{}", app.database().display()))
            .await
            .expect("second connection");
    sqlx::raw_sql("BEGIN IMMEDIATE")
        .execute(&mut intruder)
        .await
        .expect("lock");

    app.post("/v1/teams")
        .token(ADMIN)
        .json(json!({"name": "blocked", "team_id": "blocked"}))
        .send()
        .await
        .expect_error(503, "UNAVAILABLE");
    app.post("/v1/teams/research/agents")
        .token(&team.key)
        .json(json!({"agent_id": "blocked", "role": "r", "capabilities": []}))
        .send()
        .await
        .expect_error(503, "UNAVAILABLE");
    // Reads keep working meanwhile (WAL), and readiness says storage answers reads.
    app.get("/v1/teams/research")
        .token(&team.key)
        .send()
        .await
        .expect_status(200);

    sqlx::raw_sql("ROLLBACK")
        .execute(&mut intruder)
        .await
        .expect("unlock");
    drop(intruder);

    // Nothing of the failed requests exists, in storage or in memory…
    app.get("/v1/teams/blocked")
        .token(ADMIN)
        .send()
        .await
        .expect_error(404, "NOT_FOUND");
    app.get("/v1/teams/research/agents/blocked")
        .token(&team.key)
        .send()
        .await
        .expect_error(404, "AGENT_NOT_FOUND");
    // …and the same requests succeed now.
    app.post("/v1/teams")
        .token(ADMIN)
        .json(json!({"name": "blocked", "team_id": "blocked"}))
        .send()
        .await
        .expect_status(201);
    app.agent(&team, "blocked", &[]).await;
    app.stop().await;
}

/// Sends hostile input to every operation in the OpenAPI document and checks that the
/// server never answers 5xx and always answers errors with the contract's body.
#[tokio::test]
async fn no_input_makes_any_operation_fail_with_a_server_error() {
    let app = TestApp::start().await;
    let team = app.team("t").await;
    let agent = app.agent(&team, "a", &[]).await;
    let doc = serde_json::to_value(switchboard::server::openapi_document()).expect("doc");
    let bodies = [
        "",
        "{",
        "[]",
        "null",
        "{\"a\":1}",
        "{\"name\":1e999}",
        "\"\u{0}\"",
        "{\"agent_id\":\"a\",\"role\":\"r\",\"capabilities\":[],\"status\":null}",
    ];
    let tokens = [
        None,
        Some("garbage"),
        Some(ADMIN),
        Some(team.key.as_str()),
        Some(agent.token.as_str()),
    ];
    let mut checked = 0;
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for method in ["get", "post", "patch", "delete"] {
            if item.get(method).is_none() {
                continue;
            }
            for concrete in [
                path.replace("{team_id}", "t").replace("{agent_id}", "a"),
                path.replace("{team_id}", "%FF%FE")
                    .replace("{agent_id}", "..%2F"),
                format!(
                    "{}?limit=-1&since=%%&status=zzz",
                    path.replace("{team_id}", "t").replace("{agent_id}", "zz")
                ),
            ] {
                for token in tokens {
                    for body in bodies {
                        let mut req =
                            app.req(method.to_uppercase().parse().expect("method"), &concrete);
                        if let Some(token) = token {
                            req = req.token(token);
                        }
                        let res = req.raw(body).send().await;
                        assert!(
                            res.status < 500,
                            "{method} {concrete} with {body:?}: {} {:#}",
                            res.status,
                            res.body
                        );
                        if res.status >= 400 && concrete != "/metrics" {
                            assert_eq!(
                                res.body["success"],
                                Value::Bool(false),
                                "{method} {concrete}: {:#}",
                                res.body
                            );
                            assert!(
                                res.body["error_code"].is_string(),
                                "{method} {concrete}: {:#}",
                                res.body
                            );
                        }
                        checked += 1;
                    }
                }
            }
        }
    }
    assert!(checked > 500, "only {checked} requests were checked");
    app.stop().await;
}
