//! How the MCP endpoint refuses what is not a request it can take (issue 61, item 11).

use serde_json::{Value, json};

use crate::support::TestApp;

const ACCEPT: &str = "application/json, text/event-stream";

/// Every refusal the SDK answered in plain text with no content type — a body that is
/// not JSON by its `Content-Type`, a missing `Accept`, an unknown session — is a
/// JSON-RPC error in a JSON body, with its HTTP status, as A2A answers the same cases.
#[tokio::test]
async fn every_refusal_of_the_mcp_endpoint_is_a_json_rpc_error() {
    let app = TestApp::start().await;
    let team = app.team("mcp-errors").await;
    let agent = app.agent(&team, "a", &[]).await;
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "errors", "version": "1"}}});
    let cases = [
        (
            "text/plain",
            Some(ACCEPT),
            None,
            415,
            -32000,
            "Content-Type must be application/json",
        ),
        ("application/json", None, None, 406, -32000, "accept"),
        (
            "application/json",
            Some(ACCEPT),
            Some("no-such-session"),
            404,
            -32001,
            "Session not found",
        ),
    ];
    for (content_type, accept, session, status, code, says) in cases {
        let mut req = app
            .post("/mcp")
            .token(&agent.token)
            .header("content-type", content_type)
            .raw_untyped(initialize.to_string());
        if let Some(accept) = accept {
            req = req.header("accept", accept);
        }
        if let Some(session) = session {
            req = req.header("mcp-session-id", session);
        }
        let res = req.send().await;
        assert_eq!(
            res.status, status,
            "{content_type} {accept:?}: {}",
            res.body
        );
        let typed = res
            .headers
            .get("content-type")
            .and_then(|v| v.to_str().ok());
        assert_eq!(typed, Some("application/json"), "{}", res.body);
        assert_eq!(res.body["jsonrpc"], "2.0");
        assert_eq!(res.body["id"], Value::Null);
        assert_eq!(res.body["error"]["code"], code, "{}", res.body);
        let message = res.body["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(says), "{message}");
    }
    app.stop().await;
}

/// A `tools/call` with params it cannot take was `-32601` (no such method); it is
/// `-32602` (invalid params), with the request's id, in a session and without one.
#[tokio::test]
async fn a_tool_call_with_malformed_params_is_invalid_params() {
    let app = TestApp::start().await;
    let team = app.team("mcp-params").await;
    let agent = app.agent(&team, "a", &[]).await;
    let session = super::held_calls::open_session(&app, &agent.token).await;
    for (n, params) in [
        json!({"name": "get_messages", "arguments": [1]}),
        json!({"arguments": {}}),
        json!({"name": 5}),
        json!([1, 2]),
    ]
    .into_iter()
    .enumerate()
    {
        for session in [Some(session.as_str()), None] {
            let mut req = app
                .post("/mcp")
                .token(&agent.token)
                .header("accept", ACCEPT)
                .json(
                    json!({"jsonrpc": "2.0", "id": 10 + n, "method": "tools/call",
                             "params": params}),
                );
            if let Some(session) = session {
                req = req.header("mcp-session-id", session);
            }
            let res = req.send().await.expect_status(200);
            assert_eq!(res.body["error"]["code"], -32602, "{params}: {}", res.body);
            assert_eq!(res.body["id"], 10 + n, "{}", res.body);
        }
    }
    app.stop().await;
}
