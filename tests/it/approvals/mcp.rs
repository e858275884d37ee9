//! Approvals through the official MCP SDK, unmodified (`tests/interop/mcp_agents.py`,
//! scenario `approvals`): one agent asks and waits in a single `request_approval` call,
//! an approver agent lists and decides over its own session, and the waiting call
//! returns the decision.

use super::setup;
use crate::python;
use crate::support::TestApp;

#[tokio::test]
async fn an_mcp_agent_asks_and_its_one_tool_call_returns_the_decision() {
    if !python::available("an_mcp_agent_asks_and_its_one_tool_call_returns_the_decision") {
        return;
    }
    let app = TestApp::start().await;
    let (_, asker, _, boss) = setup(&app, "approve-mcp").await;
    let out = python::run(
        "mcp_agents.py",
        &["approvals", &app.base, &asker.token, &boss.token],
    )
    .await;
    assert_eq!(out["asked"]["error"], false, "{out:#}");
    let approval = &out["asked"]["data"]["approval"];
    assert_eq!(approval["status"], "decided", "{out:#}");
    assert_eq!(approval["decision"], "approve");
    assert_eq!(approval["comment"], "go ahead");
    assert_eq!(approval["decided_by"], "boss");
    assert_eq!(out["decided"]["error"], false, "{out:#}");
    assert_eq!(out["read"]["approval"], *approval);
    assert_eq!(out["own"]["error"], true);
    assert_eq!(out["own"]["data"]["error_code"], "FORBIDDEN");
    assert!(
        out["asked"]["text"]
            .as_str()
            .is_some_and(|t| t.contains("approve"))
    );
}
