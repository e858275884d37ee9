//! Inputs that once got different answers from the two engines, or a 503.

use serde_json::json;

use crate::support::TestApp;

/// A NUL (U+0000) in any string — a thread id, a context reference, a role, a task's
/// description, a publish's tag, a key of `content.data`, a query parameter, a path —
/// is `VALIDATION_ERROR` naming the field, on SQLite as on PostgreSQL (this test runs on
/// both). Before: PostgreSQL answered 503 and logged an ERROR; SQLite stored it.
#[tokio::test]
async fn a_nul_anywhere_is_refused_alike_on_both_engines() {
    let app = TestApp::start().await;
    let team = app.team("nul").await;
    let a = app.agent(&team, "a", &[]).await;
    app.agent(&team, "b", &[]).await;
    let nul = "x\u{0}y";
    for (fields, field) in [
        (
            json!({"recipient_agent_ids": ["b"], "thread_id": nul}),
            "thread_id",
        ),
        (
            json!({"recipient_agent_ids": ["b"], "context_reference": nul}),
            "context_reference",
        ),
        (
            json!({"recipient_agent_ids": ["b"], "content": {"text": nul}}),
            "content.text",
        ),
        (
            json!({"recipient_agent_ids": ["b"], "content": {"text": "t", "data": {nul: 1}}}),
            "content.data",
        ),
    ] {
        let refused = app
            .send_with(&a, fields)
            .await
            .expect_error(400, "VALIDATION_ERROR");
        let named = refused.body["details"]["field"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        assert!(named.starts_with(field), "{field}: {}", refused.body);
    }
    let role = app
        .post("/v1/teams/nul/agents")
        .token(&team.key)
        .json(json!({"agent_id": "c", "role": nul, "capabilities": []}))
        .send()
        .await
        .expect_error(400, "VALIDATION_ERROR");
    assert_eq!(role.body["details"]["field"], "role");
    app.post("/v1/tasks")
        .token(&a.token)
        .json(json!({"originating_agent_id": "a", "target_agent_id": "b", "description": nul}))
        .send()
        .await
        .expect_error(400, "VALIDATION_ERROR");
    app.post("/v1/publish")
        .token(&a.token)
        .json(json!({"cause_by": nul, "content": {"text": "t"}}))
        .send()
        .await
        .expect_error(400, "VALIDATION_ERROR");
    elsewhere_than_bodies(&app, &a).await;
    // Nothing of it was stored.
    let inbox = app
        .get("/v1/messages")
        .token(&a.token)
        .send()
        .await
        .expect_status(200);
    assert_eq!(inbox.body["total_count"], 0);
    app.stop().await;
}

/// The same rule in a query string, a path, and an A2A request (whose SDK types do not
/// go through the strict decoder).
async fn elsewhere_than_bodies(app: &TestApp, a: &crate::support::Agent) {
    let nul = "x\u{0}y";
    let query = app
        .get("/v1/messages?thread_id=x%00y")
        .token(&a.token)
        .send()
        .await
        .expect_error(400, "VALIDATION_ERROR");
    assert_eq!(query.body["details"]["field"], "thread_id");
    app.get("/v1/messages/msg%00x")
        .token(&a.token)
        .send()
        .await
        .expect_error(400, "VALIDATION_ERROR");
    let a2a = app
        .post("/a2a/nul/b")
        .token(&a.token)
        .json(
            json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {
            "message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": nul}]}}}),
        )
        .send()
        .await
        .expect_status(200);
    assert_eq!(a2a.body["error"]["code"], -32602, "{}", a2a.body);
}
