//! The stateless revision (2026-07-28): one POST per call, answered as one JSON body,
//! and a plain call answered without the SDK's per-request service exactly as the SDK
//! answers it.

use serde_json::{Value, json};

use super::team;
use crate::support::TestApp;

/// One `tools/call` of the stateless revision (2026-07-28), as the benchmark and the
/// docs' curl send it.
fn stateless_call(tool: &str, arguments: Value, meta: Value) -> Value {
    let mut meta = meta;
    meta["io.modelcontextprotocol/protocolVersion"] = json!("2026-07-28");
    meta["io.modelcontextprotocol/clientInfo"] = json!({"name": "test", "version": "1"});
    meta["io.modelcontextprotocol/clientCapabilities"] = json!({});
    json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
           "params": {"name": tool, "arguments": arguments, "_meta": meta}})
}

/// A stateless call whose first answer is its result comes back as one JSON body (not an
/// SSE stream of one event); a call that reports progress while it waits streams, so the
/// notification reaches the client before the result.
#[tokio::test]
async fn a_stateless_call_is_one_json_body_unless_it_reports_progress_first() {
    let app = TestApp::start().await;
    let (_, a, _) = team(&app).await;
    let call = |tool: &'static str, arguments: Value, meta: Value| {
        app.post("/mcp")
            .header("Accept", "application/json, text/event-stream")
            .header("MCP-Protocol-Version", "2026-07-28")
            .header("Mcp-Method", "tools/call")
            .header("Mcp-Name", tool)
            .token(&a.token)
            .json(stateless_call(tool, arguments, meta))
            .send()
    };
    let res = call(
        "send_message",
        json!({"recipient_agent_ids": ["b"],
        "message_type": "information", "content": {"text": "hi"}}),
        json!({}),
    )
    .await
    .expect_status(200);
    let kind = res.headers.get("content-type").expect("content type");
    assert_eq!(kind, "application/json", "{:#}", res.body);
    assert_eq!(res.body["id"], 7, "{:#}", res.body);
    assert_eq!(res.body["result"]["isError"], false, "{:#}", res.body);
    assert_eq!(res.body["result"]["structuredContent"]["success"], true);

    // Progress comes every 5 s of waiting: a 6 s wait says something first.
    let res = call(
        "wait_for_messages",
        json!({"after_seq": 1, "timeout_ms": 6000}),
        json!({"progressToken": "p1"}),
    )
    .await
    .expect_status(200);
    let kind = res.headers.get("content-type").expect("content type");
    assert_eq!(kind, "text/event-stream", "{:#}", res.body);
    let text = res.body.as_str().expect("an SSE body");
    let progress = text
        .find("notifications/progress")
        .expect("a progress event");
    let result = text.find("\"timed_out\":true").expect("the result");
    assert!(progress < result, "{text}");
}

/// A plain stateless `tools/call` is answered without the SDK's per-request service
/// (`transport::mcp::direct`): the answer is the one the SDK gives the same call when it
/// carries a progress token (which sends it to the SDK; a tool that does not wait never
/// reports progress), a refusal and an undecodable argument included; a request that is
/// not of the plain shape (here, an `Mcp-Name` that is not the body's tool) gets the SDK's
/// own answer.
#[tokio::test]
async fn a_stateless_call_answered_directly_is_the_answer_the_sdk_gives() {
    let app = TestApp::start().await;
    let (_, a, _) = team(&app).await;
    let stateless = |tool: &'static str, named: &'static str, arguments: Value, meta: Value| {
        app.post("/mcp")
            .header("Accept", "application/json, text/event-stream")
            .header("MCP-Protocol-Version", "2026-07-28")
            .header("Mcp-Method", "tools/call")
            .header("Mcp-Name", named)
            .token(&a.token)
            .json(stateless_call(tool, arguments, meta))
            .send()
    };
    let calls = [
        ("whoami", json!({})),
        // A refusal: the error body as a tool error.
        (
            "send_message",
            json!({"recipient_agent_ids": ["nobody"],
            "message_type": "information", "content": {"text": "hi"}}),
        ),
        // Arguments the tool's decoder refuses.
        ("get_messages", json!({"limit": "many"})),
    ];
    for (tool, arguments) in calls {
        let direct = stateless(tool, tool, arguments.clone(), json!({}))
            .await
            .expect_status(200);
        let sdk = stateless(tool, tool, arguments, json!({"progressToken": "t"}))
            .await
            .expect_status(200);
        assert_eq!(
            direct.headers.get("content-type"),
            sdk.headers.get("content-type")
        );
        assert_eq!(direct.body, sdk.body, "{tool}");
    }
    // Not the plain shape: the SDK answers (a header that does not match the body).
    let res = stateless("whoami", "get_messages", json!({}), json!({})).await;
    assert_eq!(res.status, 400, "{:#}", res.body);
    assert!(res.body["error"]["message"].is_string(), "{:#}", res.body);
}
