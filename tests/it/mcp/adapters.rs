//! MCP as other programs read it: the frameworks' own adapters (what a model is handed),
//! and what is not one JSON-RPC message.

use serde_json::{Value, json};

use super::{initialize, open_session, team};
use crate::support::TestApp;

/// What a model reads through the frameworks' own MCP adapters (LangChain's
/// `langchain-mcp-adapters`, Agno's `MCPTools`; `tests/interop/mcp_frameworks.py`): they
/// pass on only a tool result's text blocks, so the text must hold the answer — the
/// message, its id and delivery status, the inbox, a refusal's code and details.
#[tokio::test]
async fn the_frameworks_adapters_hand_the_model_the_whole_answer() {
    use crate::python::{FRAMEWORKS, STOCK};
    adapters_hand_the_model_the_whole_answer(
        "the_frameworks_adapters_hand_the_model_the_whole_answer",
        &[("langchain", &FRAMEWORKS), ("agno", &STOCK)],
    )
    .await;
}

/// As above, through CrewAI's `MCPServerAdapter` (crewai-tools, through mcpadapt: a tool's
/// `run` answers the first text block) and Google ADK's `McpToolset` (which hands the
/// model the whole result; its text block is checked), each in its own virtualenv.
#[tokio::test]
async fn crewai_and_adk_adapters_hand_the_model_the_whole_answer() {
    use crate::python::{ADK, CREWAI};
    adapters_hand_the_model_the_whole_answer(
        "crewai_and_adk_adapters_hand_the_model_the_whole_answer",
        &[("crewai", &CREWAI), ("adk", &ADK)],
    )
    .await;
}

async fn adapters_hand_the_model_the_whole_answer(
    test: &str,
    frameworks: &[(&str, &crate::python::Venv)],
) {
    if !frameworks
        .iter()
        .all(|(_, venv)| crate::python::available_in(venv, test))
    {
        return;
    }
    let app = TestApp::start().await;
    let (_, a, b) = team(&app).await;
    for (framework, venv) in frameworks {
        let out = crate::python::run_in(
            venv,
            "mcp_frameworks.py",
            &[framework, &app.base, &a.token, &b.token],
        )
        .await;
        assert_eq!(out["tools"], 35, "{framework}: {out:#}");
        let text = |key: &str| out[key].as_str().unwrap_or_default().to_owned();
        let sent: Value = serde_json::from_str(&text("sent")).unwrap_or_else(|e| {
            panic!("{framework}: the send's text is its answer ({e}): {out:#}")
        });
        let id = sent["message_id"]
            .as_str()
            .expect("a message id")
            .to_owned();
        assert_eq!(sent["delivery_status"]["pending_delivery"], json!(["b"]));
        let inbox: Value = serde_json::from_str(&text("inbox"))
            .unwrap_or_else(|e| panic!("{framework}: the inbox's text is the inbox ({e})"));
        // Newest first: this framework's question is on top.
        assert_eq!(inbox["messages"][0]["message_id"], id.as_str());
        assert_eq!(
            inbox["messages"][0]["content"]["text"],
            format!("{framework} question")
        );
        // A refusal reaches the model with its code and details (Agno wraps the
        // blocks in its own words; the JSON inside is escaped once).
        let refused = text("refused");
        assert!(
            refused.contains("INVALID_RECIPIENT: "),
            "{framework}: {refused}"
        );
        assert!(
            refused.contains(r#""invalid_ids":["nobody"]"#),
            "{framework}: the details reach the model: {refused}"
        );
    }
    app.stop().await;
}

/// What the SDK cannot decode gets a JSON-RPC error in a JSON body (HTTP 400, `id` null),
/// never its 415 with a text body: a batch, a duplicate `id`, a non-object, nesting past
/// the parser's depth, bad JSON.
#[tokio::test]
async fn what_is_not_one_json_rpc_message_gets_a_json_rpc_error() {
    let app = TestApp::start().await;
    let (_, a, _) = team(&app).await;
    let deep = format!(
        r#"{{"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {{"x": {}1{}}}}}"#,
        "[".repeat(300),
        "]".repeat(300)
    );
    for (body, code, says) in [
        (format!("[{}]", initialize()), -32600, "batch"),
        (
            r#"{"jsonrpc": "2.0", "id": 1, "id": 2, "method": "ping"}"#.to_owned(),
            -32600,
            "duplicate key `id`",
        ),
        ("42".to_owned(), -32600, "object"),
        (deep, -32700, "recursion"),
        ("{not json".to_owned(), -32700, "not JSON"),
    ] {
        let res = app
            .post("/mcp")
            .header("Accept", "application/json, text/event-stream")
            .header("Content-Type", "application/json")
            .token(&a.token)
            .raw_untyped(body.clone())
            .send()
            .await
            .expect_status(400);
        assert_eq!(res.body["jsonrpc"], "2.0", "{body:.80}: {:#}", res.body);
        assert_eq!(res.body["id"], Value::Null);
        assert_eq!(
            res.body["error"]["code"], code,
            "{body:.80}: {:#}",
            res.body
        );
        let message = res.body["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(says), "{body:.80}: {message}");
    }
    // One message still opens a session.
    open_session(&app, &a).await.expect("a session");
}
