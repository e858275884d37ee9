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
    // STOMP over WebSocket authenticates in its CONNECT frame, as STOMP on TCP does.
    let public = ["/healthz", "/readyz", "/metrics", "/v1/stomp"];
    // Generated clients name their methods by operationId: it must be unique.
    let mut operation_ids = std::collections::HashSet::new();
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for (method, op) in item.as_object().expect("item") {
            let id = op["operationId"].as_str().unwrap_or_default().to_owned();
            assert!(
                operation_ids.insert(id.clone()),
                "{method} {path}: operationId '{id}' twice"
            );
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
            // A task reference may be malformed (400) or name several of the caller's
            // tasks (409 CONFLICT): every operation that takes one says so.
            if path.contains("{task_id}") {
                for status in ["400", "409"] {
                    assert!(
                        op["responses"].get(status).is_some(),
                        "{method} {path} lacks {status} for its task reference"
                    );
                }
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

/// Every `$ref` names a schema the document has (validators reject the document
/// otherwise, and generators drop the parameter), and every limit of the constraint
/// table found its field.
#[test]
fn every_reference_resolves_and_every_limit_is_stated() {
    let mut doc = switchboard::server::openapi_document();
    let unmatched = switchboard::server::finish_document(&mut doc);
    assert!(unmatched.is_empty(), "{unmatched:#?}");
    let doc = serde_json::to_value(doc).expect("doc");
    let schemas = doc["components"]["schemas"].as_object().expect("schemas");
    let mut refs = Vec::new();
    collect_refs(&doc, &mut refs);
    assert!(refs.len() > 50, "{refs:?}");
    for reference in refs {
        let name = reference
            .strip_prefix("#/components/schemas/")
            .unwrap_or_else(|| panic!("unexpected reference {reference}"));
        assert!(schemas.contains_key(name), "dangling $ref {reference}");
    }
    // Results are any JSON value or null, not only objects.
    for schema in ["Task", "TaskResponse", "TaskResult", "CallbackNotification"] {
        let result = &schemas[schema]["properties"]["result_data"];
        assert!(result.get("type").is_none(), "{schema}: {result}");
    }
    for schema in ["UpdateTeam", "UpdateAgent"] {
        assert_eq!(schemas[schema]["minProperties"], 1, "{schema}");
    }
}

fn collect_refs(value: &serde_json::Value, out: &mut Vec<String>) {
    match value {
        serde_json::Value::Object(map) => {
            for (key, value) in map {
                match (key.as_str(), value) {
                    ("$ref", serde_json::Value::String(r)) => out.push(r.clone()),
                    _ => collect_refs(value, out),
                }
            }
        }
        serde_json::Value::Array(items) => items.iter().for_each(|v| collect_refs(v, out)),
        _ => {}
    }
}

/// The id pattern the document states accepts exactly what the id parser accepts, and
/// the comma-list patterns accept exactly what the query decoder accepts.
#[test]
fn stated_patterns_agree_with_the_validation() {
    use switchboard_types::ids::TeamId;
    let id = regex::Regex::new(switchboard_types::openapi::ID_PATTERN).expect("pattern");
    let long = "x".repeat(64);
    for candidate in [
        "a", "A-b_c.d", ".a", "..a", "...", "a.", ".", "..", "", "a b", "a/b", "é", "a\n", &long,
    ] {
        assert_eq!(
            id.is_match(candidate),
            TeamId::parse("id", candidate).is_ok(),
            "{candidate:?}"
        );
    }
    let doc = serde_json::to_value(switchboard::server::openapi_document()).expect("doc");
    let parameters = doc["paths"]["/v1/messages"]["get"]["parameters"]
        .as_array()
        .expect("parameters");
    let types = parameters
        .iter()
        .find(|p| p["name"] == "message_types")
        .and_then(|p| p["schema"]["pattern"].as_str())
        .expect("message_types pattern");
    let types = regex::Regex::new(types).expect("pattern");
    for (query, valid) in [
        ("request", true),
        ("request,coordination", true),
        (" request , ,information ", true),
        ("", true),
        ("requests", false),
        ("request;information", false),
        ("Request", false),
    ] {
        assert_eq!(types.is_match(query), valid, "{query:?}");
        let decoded: Result<
            switchboard_types::decode::CommaList<switchboard_types::messages::MessageType>,
            _,
        > = serde_json::from_value(serde_json::json!(query));
        assert_eq!(decoded.is_ok(), valid, "decoder disagrees on {query:?}");
    }
    the_text_and_base64_patterns_agree_with_the_validation();
}

/// A text the pattern calls non-blank is one the validation keeps (schemathesis found
/// `"\u0085"`), and a base64 string the pattern allows is one the decoder takes
/// (schemathesis found "invalid base64" the document allowed).
fn the_text_and_base64_patterns_agree_with_the_validation() {
    use base64::Engine;
    let not_blank = regex::Regex::new(switchboard_types::openapi::NOT_BLANK).expect("pattern");
    for text in [
        "a", " a ", "\u{85}", " \u{85} ", "\u{feff}", "\u{a0}", "\t\n", "\u{2028}", "é",
    ] {
        assert_eq!(
            not_blank.is_match(text),
            !text.trim().is_empty(),
            "{text:?}"
        );
    }
    let base64 = regex::Regex::new(switchboard_types::openapi::BASE64_PATTERN).expect("pattern");
    for text in [
        "", "QQ==", "QUI=", "QUJD", "AB==", "QR==", "QUJ=", "Q", "QQ", "QQ=", "QQ===", "Q===",
        "QUJD=", "QU=D", "Q\nQ=", "+/+/", "-_-_",
    ] {
        assert_eq!(
            base64.is_match(text),
            base64::engine::general_purpose::STANDARD
                .decode(text)
                .is_ok(),
            "{text:?}"
        );
    }
}

/// The rules a schema can state are stated (issue 61, item 11: generated clients sent 23
/// kinds of request the server refused): no string the document describes admits NUL —
/// each has a pattern that refuses it, an enum or a format — free-form JSON takes only
/// `JsonValue`, and the rules between fields are there.
#[test]
fn every_string_refuses_nul_and_the_rules_between_fields_are_stated() {
    let doc = serde_json::to_value(switchboard::server::openapi_document()).expect("doc");
    let mut open = Vec::new();
    strings_admitting_nul(&doc["components"]["schemas"], "schemas", &mut open);
    strings_admitting_nul(&doc["paths"], "paths", &mut open);
    assert!(open.is_empty(), "strings that admit NUL: {open:#?}");
    let schemas = &doc["components"]["schemas"];
    assert!(schemas["Attachment"]["oneOf"].is_array());
    assert!(schemas["SetWatch"]["anyOf"].is_array());
    assert!(schemas["SendMessage"]["anyOf"].is_array());
    assert!(schemas["LoopGuard"]["anyOf"].is_array());
    assert_eq!(
        schemas["Content"]["properties"]["data"]["additionalProperties"]["$ref"],
        "#/components/schemas/JsonValue"
    );
    let text = regex::Regex::new(switchboard_types::openapi::TEXT_PATTERN).expect("pattern");
    for (candidate, ok) in [
        ("a", true),
        (" a ", true),
        ("a\0", false),
        ("\0", false),
        (" ", false),
    ] {
        assert_eq!(text.is_match(candidate), ok, "{candidate:?}");
    }
    let no_nul = regex::Regex::new(switchboard_types::openapi::NO_NUL).expect("pattern");
    assert!(no_nul.is_match("") && no_nul.is_match("x y") && !no_nul.is_match("x\0"));
}

/// Where a string schema with neither a pattern that refuses NUL, an enum nor a format
/// is (in `path`).
fn strings_admitting_nul(value: &serde_json::Value, path: &str, out: &mut Vec<String>) {
    match value {
        serde_json::Value::Object(fields) => {
            let typed_string = match &fields.get("type") {
                Some(serde_json::Value::String(t)) => t == "string",
                Some(serde_json::Value::Array(types)) => types.iter().any(|t| t == "string"),
                _ => false,
            };
            let guarded = fields.contains_key("enum")
                || fields.contains_key("format")
                || fields.contains_key("const")
                || fields
                    .get("pattern")
                    .and_then(|p| p.as_str())
                    .and_then(|p| regex::Regex::new(p).ok())
                    .is_some_and(|p| !p.is_match("a\0") && !p.is_match("\0"));
            // Response-only strings are not what a client sends; the stated inputs are
            // what matters, but every schema is walked (shared ones are both).
            if typed_string && !guarded && !path.contains("/responses/") {
                out.push(path.to_owned());
            }
            for (key, inner) in fields {
                strings_admitting_nul(inner, &format!("{path}/{key}"), out);
            }
        }
        serde_json::Value::Array(items) => {
            for (i, inner) in items.iter().enumerate() {
                strings_admitting_nul(inner, &format!("{path}/{i}"), out);
            }
        }
        _ => {}
    }
}
