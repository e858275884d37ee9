//! The OpenAPI document and the docs UI.

use crate::support::TestApp;

const COMMITTED: &str = include_str!("../../openapi/openapi.json");

/// The committed `openapi/openapi.json` must be what the code generates. Regenerate it
/// with `cargo run -- openapi > openapi/openapi.json`.
#[test]
fn committed_openapi_matches_the_code() {
    let generated = switchboard::server::openapi_document()
        .to_pretty_json()
        .expect("renders");
    assert!(
        generated.trim() == COMMITTED.trim(),
        "openapi/openapi.json is stale: run `cargo run -- openapi > openapi/openapi.json`"
    );
}

#[test]
fn every_operation_is_documented_with_security_and_error_bodies() {
    let doc = serde_json::to_value(switchboard::server::openapi_document()).expect("doc");
    assert_eq!(
        doc["components"]["securitySchemes"]["bearer"]["scheme"],
        "bearer"
    );
    let public = ["/healthz", "/readyz", "/metrics"];
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for (method, op) in item.as_object().expect("item") {
            let secured = op["security"].as_array().is_some_and(|s| !s.is_empty());
            assert_eq!(
                secured,
                !public.contains(&path.as_str()),
                "{method} {path} security"
            );
            assert!(
                op["summary"].is_string() || op["description"].is_string(),
                "{method} {path} undocumented"
            );
            for (status, response) in op["responses"].as_object().expect("responses") {
                if status.starts_with('4') || status.starts_with('5') {
                    let schema = &response["content"]["application/json"]["schema"]["$ref"];
                    assert_eq!(
                        schema, "#/components/schemas/CoreError",
                        "{method} {path} {status}"
                    );
                }
            }
            if secured {
                assert!(
                    op["responses"].get("401").is_some(),
                    "{method} {path} lacks 401"
                );
            }
        }
    }
}

/// The task protocol's seven types are WebSocket frames as well as REST bodies; each is
/// a schema of the document, with the document's fields.
#[test]
fn the_seven_task_protocol_types_are_documented() {
    let doc = serde_json::to_value(switchboard::server::openapi_document()).expect("doc");
    let schemas = &doc["components"]["schemas"];
    for (name, fields) in [
        (
            "TaskRequest",
            &[
                "task_id",
                "description",
                "data",
                "originating_agent_id",
                "callback_url",
                "priority",
            ][..],
        ),
        (
            "TaskResponse",
            &["task_id", "result_data", "status", "agent_id"],
        ),
        (
            "HandoffNotification",
            &["task_id", "current_agent_id", "new_agent_id", "reason"],
        ),
        (
            "ClarificationRequest",
            &["task_id", "question", "requested_by"],
        ),
        (
            "ClarificationResponse",
            &["task_id", "answer", "response_provided_by"],
        ),
        (
            "CallbackNotification",
            &["task_id", "result_data", "status", "sent_to"],
        ),
        (
            "ErrorMessage",
            &["task_id", "error_message", "originating_agent_id"],
        ),
    ] {
        for field in fields {
            assert!(
                schemas[name]["properties"].get(*field).is_some(),
                "{name}.{field} is not documented"
            );
        }
    }
}

#[tokio::test]
async fn the_server_serves_the_document_and_an_offline_swagger_ui() {
    let app = TestApp::start().await;
    let served = app.get("/openapi.json").send().await.expect_status(200);
    let generated = serde_json::to_value(switchboard::server::openapi_document()).expect("doc");
    assert_eq!(served.body, generated);

    let page = app.http.get(app.url("/docs/")).send().await.expect("docs");
    assert_eq!(page.status(), 200);
    let html = page.text().await.expect("html");
    assert!(html.contains("swagger-ui"), "not the Swagger UI page");
    // Every script and stylesheet comes from this server, not a CDN.
    for attr in ["src=\"", "href=\""] {
        for url in html.split(attr).skip(1).filter_map(|s| s.split('"').next()) {
            assert!(!url.starts_with("http"), "external asset {url}");
            let asset = app
                .http
                .get(app.url(&format!("/docs/{}", url.trim_start_matches("./"))))
                .send()
                .await
                .expect("asset");
            assert_eq!(asset.status(), 200, "asset {url}");
        }
    }
    let init = app
        .get("/docs/swagger-initializer.js")
        .send()
        .await
        .expect_status(200);
    let init = init.body.as_str().unwrap_or_default().to_owned();
    assert!(init.contains("/openapi.json"), "{init}");
    assert!(
        init.contains("\"validatorUrl\": \"none\"") || init.contains("validatorUrl"),
        "{init}"
    );
    app.stop().await;
}
