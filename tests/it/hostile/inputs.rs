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

/// What one answer may weigh: a page of the inbox stops at 4 MiB of messages and says
/// so with `next_cursor` (100 messages of 1 MB made one answer of 100 MB, and eight such
/// reads took 1.8 GB), following it reaches every entry once, a replay over the
/// WebSocket carries them all, and a message's data weighs at most 2 MiB whatever the
/// body limit allows.
#[tokio::test]
async fn pages_and_messages_have_a_weight_bound() {
    let app = TestApp::start_with(|c| c.max_body_bytes = 4 * 1024 * 1024).await;
    let team = app.team("heavy").await;
    let a = app.agent(&team, "a", &[]).await;
    let b = app.agent(&team, "b", &[]).await;
    let blob = "w".repeat(900 * 1000);
    for i in 0..10 {
        app.send_with(
            &a,
            json!({"recipient_agent_ids": ["b"], "content": {"text": format!("heavy {i}"), "data": {"blob": blob}}}),
        )
        .await
        .expect_status(201);
    }
    let mut seen = Vec::new();
    let mut query = "?limit=100&sort_order=oldest_first".to_owned();
    loop {
        let page = app
            .get(&format!("/v1/messages{query}"))
            .token(&b.token)
            .send()
            .await
            .expect_status(200);
        let size = page.body.to_string().len();
        assert!(size < 5 * 1024 * 1024, "a page of {size} bytes");
        let messages = page.body["messages"].as_array().expect("messages").clone();
        assert!(
            !messages.is_empty() && messages.len() < 10,
            "{} on a page",
            messages.len()
        );
        seen.extend(
            messages
                .iter()
                .map(|m| m["content"]["text"].as_str().unwrap_or_default().to_owned()),
        );
        match page.body["next_cursor"].as_str() {
            Some(cursor) => query = format!("?limit=100&sort_order=oldest_first&cursor={cursor}"),
            None => break,
        }
    }
    let expected: Vec<String> = (0..10).map(|i| format!("heavy {i}")).collect();
    assert_eq!(seen, expected);

    let (_, replayed, seq) = app.ws_caught_up(&b, "?since=0").await;
    assert_eq!(
        replayed.len(),
        10,
        "the replay crosses the byte bound's pages"
    );
    assert_eq!(seq, 10);

    let too_much = "z".repeat(2 * 1024 * 1024 + 1);
    let refused = app
        .send_with(&a, json!({"recipient_agent_ids": ["b"], "content": {"text": "t", "data": {"blob": too_much}}}))
        .await
        .expect_error(400, "MESSAGE_TOO_LONG");
    assert_eq!(refused.body["details"]["field"], "content.data");
    app.stop().await;
}

/// What the OpenAPI document promises, the decoder keeps (each found by schemathesis):
/// a PATCH field is absent or a value, never `null` (a body of nulls passed the
/// document's `minProperties` and then failed "at least one field"); a number without a
/// fraction is an integer, as JSON Schema counts; an empty `cursor=` is the first page.
#[tokio::test]
async fn the_decoder_keeps_what_the_document_promises() {
    let app = TestApp::start().await;
    let team = app.team("doc").await;
    let a = app.agent(&team, "a", &[]).await;
    let b = app.agent(&team, "b", &[]).await;

    for (path, token, body, field) in [
        (
            "/v1/teams/doc/agents/a",
            &a.token,
            json!({"role": null}),
            "role",
        ),
        (
            "/v1/teams/doc/agents/a",
            &a.token,
            json!({"watch": null}),
            "watch",
        ),
        ("/v1/teams/doc", &team.key, json!({"name": null}), "name"),
        (
            "/v1/teams/doc",
            &team.key,
            json!({"retention": null}),
            "retention",
        ),
    ] {
        app.patch(path)
            .token(token)
            .json(body)
            .send()
            .await
            .expect_invalid(field);
    }

    let res = app
        .patch("/v1/teams/doc")
        .token(&team.key)
        .json(json!({"retention": {"read_messages_seconds": 3600.0}}))
        .send()
        .await
        .expect_status(200);
    assert_eq!(res.body["retention"]["read_messages_seconds"], 3600);
    app.patch("/v1/teams/doc")
        .token(&team.key)
        .json(json!({"retention": {"read_messages_seconds": 3600.5}}))
        .send()
        .await
        .expect_invalid("retention.read_messages_seconds");

    app.send(&a, &[&b], "first").await;
    let page = app.inbox(&b, "?cursor=").await.expect_status(200);
    assert_eq!(page.body["messages"].as_array().map(Vec::len), Some(1));
    let tasks = app
        .get("/v1/tasks?cursor=")
        .token(&b.token)
        .send()
        .await
        .expect_status(200);
    assert!(tasks.body["tasks"].is_array(), "{}", tasks.body);
    app.stop().await;
}

/// Any token is a valid HTTP method, so a client could make up one per request. Each
/// used to become a `method` label of the request metrics, growing the registry and
/// every scrape of `/metrics` without end; a method outside HTTP's own is now counted
/// as `other`, while HTTP's own keep their names.
#[tokio::test]
async fn made_up_methods_are_counted_as_other_not_one_label_each() {
    let app = TestApp::start().await;
    let made_up: Vec<String> = (0..5).map(|i| format!("BREW{i}X7Q")).collect();
    for method in &made_up {
        let method = reqwest::Method::from_bytes(method.as_bytes()).expect("a token");
        let answered = app.req(method, "/v1/teams").send().await;
        assert!(answered.status >= 400, "{}", answered.status);
    }
    app.get("/healthz").send().await.expect_status(200);
    let metrics = reqwest::get(app.url("/metrics"))
        .await
        .expect("sent")
        .text()
        .await
        .expect("text");
    let requests: Vec<&str> = metrics
        .lines()
        .filter(|l| l.starts_with("switchboard_http_requests_total{"))
        .collect();
    for method in &made_up {
        assert!(!metrics.contains(method.as_str()), "{method}: {metrics}");
    }
    let counted = |method: &str, route: &str| {
        requests.iter().any(|l| {
            l.contains(&format!("method=\"{method}\"")) && l.contains(&format!("route=\"{route}\""))
        })
    };
    assert!(counted("other", "/v1/teams"), "{requests:#?}");
    assert!(counted("GET", "/healthz"), "{requests:#?}");
    app.stop().await;
}
