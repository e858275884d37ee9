//! Exactly JSON-RPC 2.0 and A2A 1.0's ProtoJSON, each case found by the A2A test kit or
//! by hand.

use serde_json::json;

use super::rpc::{raw, send_text};
use super::{call, error_of, held, rpc_body, team, text};
use crate::support::TestApp;

/// A member named twice is an invalid request (it ran the last one); a request without
/// `id` is a notification: done, and answered 204 with no body.
#[tokio::test]
async fn the_envelope_is_read_as_json_rpc_2_0_writes_it() {
    let app = TestApp::start().await;
    let (_, client, _) = team(&app).await;
    let twice = raw(
        &app,
        &client,
        r#"{"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "method": "GetTask", "params": {"id": "x"}}"#,
    )
    .await;
    assert!(
        error_of(&twice, -32600).contains("'method' twice"),
        "{twice:#}"
    );

    // A notification: 204, no body, and the send was made.
    let mut note = send_text("note-1", "fire and forget", None);
    note.as_object_mut().expect("object").remove("id");
    let quiet = app
        .post("/a2a/a2a/worker")
        .token(&client.token)
        .raw(note.to_string())
        .send()
        .await
        .expect_status(204);
    assert_eq!(quiet.body, json!(""), "a notification is not answered");
    let made = call(
        &app,
        &client,
        "worker",
        rpc_body("GetTask", json!({"id": "a2a-note-1"})),
        &[],
    )
    .await;
    assert_eq!(made["result"]["id"], "a2a-note-1", "{made:#}");
}

/// A message has parts; `historyLength` is not negative; a 0.3 part has a `kind`: each
/// refused (-32602) before anything is sent.
#[tokio::test]
async fn shapes_the_spec_refuses_are_refused_before_anything_is_sent() {
    let app = TestApp::start().await;
    let (_, client, _) = team(&app).await;
    held(&app, &client, "note-1", json!({})).await;
    let no_parts = json!({"messageId": "empty", "role": "ROLE_USER", "parts": []});
    let refused = call(
        &app,
        &client,
        "worker",
        rpc_body("SendMessage", json!({"message": no_parts})),
        &[],
    )
    .await;
    assert!(error_of(&refused, -32602).contains("at least one part"));
    for params in [
        json!({"id": "a2a-note-1", "historyLength": -1}),
        json!({"id": "a2a-note-1", "history_length": -1}),
    ] {
        let negative = call(&app, &client, "worker", rpc_body("GetTask", params), &[]).await;
        assert!(error_of(&negative, -32602).contains("negative"));
    }
    let negative_send = rpc_body(
        "SendMessage",
        json!({"message": text("neg", "x"), "configuration": {"historyLength": -2}}),
    );
    error_of(
        &call(&app, &client, "worker", negative_send, &[]).await,
        -32602,
    );
    let never_made = rpc_body("GetTask", json!({"id": "a2a-neg"}));
    error_of(
        &call(&app, &client, "worker", never_made, &[]).await,
        -32001,
    );
    let kindless = rpc_body(
        "message/send",
        json!({"message": {"kind": "message", "messageId": "k", "role": "user",
                           "parts": [{"text": "no kind"}]}}),
    );
    let kindless = call(&app, &client, "worker", kindless, &[]).await;
    assert!(error_of(&kindless, -32602).contains("kind"), "{kindless:#}");
}

/// Protobuf's original field names are the JSON names' equals (both at once is -32602),
/// and a data part's own keys stay as sent.
#[tokio::test]
async fn original_field_names_are_the_json_names_equals() {
    // A push config to 127.0.0.1 (never called here: the task does not change).
    let app = TestApp::start_with(|c| c.callbacks.allow_private = true).await;
    let (_, client, _) = team(&app).await;
    // Original names: page_size pages, history_length cuts the history, task_id names
    // the task; metadata's own snake_case keys stay as sent.
    held(&app, &client, "p1", json!({})).await;
    held(&app, &client, "p2", json!({})).await;
    let page = call(
        &app,
        &client,
        "worker",
        rpc_body(
            "ListTasks",
            json!({"page_size": 1, "include_artifacts": false}),
        ),
        &[],
    )
    .await;
    assert_eq!(
        page["result"]["tasks"].as_array().map(Vec::len),
        Some(1),
        "{page:#}"
    );
    let cut = call(
        &app,
        &client,
        "worker",
        rpc_body("GetTask", json!({"id": "a2a-p1", "history_length": 0})),
        &[],
    )
    .await;
    assert_eq!(cut["result"]["history"], json!([]), "{cut:#}");
    let create = rpc_body(
        "CreateTaskPushNotificationConfig",
        json!({"task_id": "a2a-p1", "id": "c1", "url": "http://127.0.0.1:9/hook"}),
    );
    let created = call(&app, &client, "worker", create, &[]).await;
    assert_eq!(created["result"]["taskId"], "a2a-p1", "{created:#}");
    let both = rpc_body(
        "GetTask",
        json!({"id": "a2a-p1", "historyLength": 1, "history_length": 1}),
    );
    assert!(error_of(&call(&app, &client, "worker", both, &[]).await, -32602).contains("twice"));
    // A data part's keys are the client's own: they reach the task as sent.
    let mut with_data = text("meta", "keep my keys");
    with_data["parts"] = json!([{"text": "keep my keys"}, {"data": {"my_key": {"inner_key": 1}}}]);
    let kept = call(
        &app,
        &client,
        "worker",
        rpc_body(
            "SendMessage",
            json!({"message": with_data, "configuration": {"return_immediately": true}}),
        ),
        &[],
    )
    .await;
    assert_eq!(kept["result"]["task"]["id"], "a2a-meta", "{kept:#}");
    let task = app.task(&client, "a2a-meta").await.expect_status(200);
    assert_eq!(
        task.body["task"]["data"]["my_key"],
        json!({"inner_key": 1}),
        "{:#}",
        task.body
    );
}

/// What the A2A test kit (a2a-tck, 1.0-dev) found in its own run: a body declared as
/// another Content-Type is ContentTypeNotSupportedError (`-32005`, JSONRPC-SSE-002), not a
/// parse error; every name the server writes is camelCase (DM-SERIAL-001: the task's
/// `metadata.switchboard` said `assignee_agent_id`); a member's card says when it last
/// changed (`Last-Modified`, CARD-CACHE-003).
#[tokio::test]
async fn what_the_test_kit_checks_holds() {
    let app = TestApp::start().await;
    let (_, client, _) = team(&app).await;
    let send = rpc_body("SendMessage", json!({"message": text("typed", "hello")}));
    let refused = app
        .post("/a2a/a2a/worker")
        .token(&client.token)
        .header("content-type", "text/plain")
        .raw_untyped(send.to_string())
        .send()
        .await
        .expect_status(200)
        .body;
    assert!(
        error_of(&refused, -32005).contains("text/plain"),
        "{refused:#}"
    );
    assert_eq!(refused["id"], 1, "the id is kept when it can be read");
    let task = held(&app, &client, "camel", json!({})).await;
    let got = call(
        &app,
        &client,
        "worker",
        rpc_body("GetTask", json!({"id": task})),
        &[],
    )
    .await;
    let mut snake = Vec::new();
    names_with_underscores(&got["result"], &mut snake);
    assert!(snake.is_empty(), "snake_case names {snake:?} in {got:#}");
    assert_eq!(
        got["result"]["metadata"]["switchboard"]["assigneeAgentId"],
        "worker"
    );
    let card = app
        .get("/a2a/a2a/worker/.well-known/agent-card.json")
        .token(&client.token)
        .send()
        .await
        .expect_status(200);
    let modified = card
        .headers
        .get("last-modified")
        .map(|v| v.to_str().unwrap_or(""));
    assert!(
        modified.is_some_and(|m| m.ends_with(" GMT")),
        "Last-Modified: {modified:?}"
    );
}

/// Every object key with `_` in it, outside a data part's `data` (the sender's own).
fn names_with_underscores(value: &serde_json::Value, out: &mut Vec<String>) {
    match value {
        serde_json::Value::Object(map) => {
            for (key, inner) in map {
                if key.contains('_') {
                    out.push(key.clone());
                }
                if key != "data" {
                    names_with_underscores(inner, out);
                }
            }
        }
        serde_json::Value::Array(items) => {
            items.iter().for_each(|v| names_with_underscores(v, out));
        }
        _ => {}
    }
}
