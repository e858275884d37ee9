//! Push notification configs with plain JSON-RPC and a real HTTP receiver: every change
//! arrives as a StreamResponse with the config's token and credentials (and our
//! signature), in order, retried when the receiver fails; a config given with the send
//! misses nothing; credentials are never shown back; the error paths; 0.3's shapes.

use std::time::Duration;

use serde_json::{Value, json};

use super::{call, error_of, held, rpc_body, team, text};
use crate::support::{Agent, TestApp};
use crate::tasks::{Receiver, verify};

/// A server that calls private addresses and retries quickly.
async fn app() -> TestApp {
    TestApp::start_with(|c| {
        c.callbacks.allow_private = true;
        c.callbacks.retry_base = Duration::from_millis(20);
    })
    .await
}

async fn report(app: &TestApp, worker: &Agent, task_id: &str, status: &str, data: Value) {
    app.task_action(
        worker,
        task_id,
        "result",
        json!({"status": status, "result_data": data}),
    )
    .await
    .expect_status(200);
}

fn state_of(push: &Value) -> &str {
    push["statusUpdate"]["status"]["state"]
        .as_str()
        .unwrap_or_default()
}

#[tokio::test]
async fn a_config_gets_every_change_with_its_token_and_credentials() {
    let app = app().await;
    let (team, client, worker) = team(&app).await;
    let receiver = Receiver::default();
    let url = receiver.start().await;
    let task_id = held(&app, &client, "m1", json!({})).await;
    let config = json!({"taskId": task_id, "id": "cfg", "url": url, "token": "tok-1",
                        "authentication": {"scheme": "Bearer", "credentials": "sekrit"}});
    let made = call(
        &app,
        &client,
        "worker",
        rpc_body("CreateTaskPushNotificationConfig", config),
        &[],
    )
    .await;
    // Shown back without the credentials, by Create, Get and List alike.
    let shown = json!({"taskId": task_id, "id": "cfg", "url": url, "token": "tok-1",
                       "authentication": {"scheme": "Bearer"}});
    assert_eq!(made["result"], shown, "{made:#}");
    let ids = json!({"taskId": task_id, "id": "cfg"});
    let got = call(
        &app,
        &client,
        "worker",
        rpc_body("GetTaskPushNotificationConfig", ids.clone()),
        &[],
    )
    .await;
    assert_eq!(got["result"], shown);
    let list = rpc_body(
        "ListTaskPushNotificationConfigs",
        json!({"taskId": task_id}),
    );
    let listed = call(&app, &client, "worker", list.clone(), &[]).await;
    assert_eq!(listed["result"], json!({"configs": [shown]}));

    report(
        &app,
        &worker,
        &task_id,
        "in-progress",
        json!({"percent": 50}),
    )
    .await;
    report(&app, &worker, &task_id, "success", json!({"summary": "ok"})).await;
    let pushes = receiver.wait_for(3).await;
    assert_eq!(state_of(&pushes[0]), "TASK_STATE_WORKING", "{pushes:#?}");
    assert_eq!(
        pushes[1]["artifactUpdate"]["artifact"]["parts"][0]["data"],
        json!({"summary": "ok"})
    );
    assert_eq!(state_of(&pushes[2]), "TASK_STATE_COMPLETED");
    assert_eq!(pushes[2]["statusUpdate"]["taskId"], task_id.as_str());
    let secret = app.secret(&team).await;
    for (headers, body, _) in receiver.calls() {
        assert_eq!(headers["x-a2a-notification-token"], "tok-1");
        assert_eq!(headers["authorization"], "Bearer sekrit");
        assert!(verify(&secret, &headers, &body), "signed: {body}");
    }
    // The task's own callback record is about its callback_url only.
    let detail = app.task(&client, &task_id).await.expect_status(200);
    assert_eq!(detail.body["callbacks"], json!([]));

    deleting_is_idempotent(&app, &client, ids, list).await;
}

/// Deleted: gone from the list; deleting again succeeds too (the spec calls the
/// operation idempotent); a get says which config is missing; a task that is not the
/// caller's is still an error.
async fn deleting_is_idempotent(app: &TestApp, client: &Agent, ids: Value, list: Value) {
    let delete = rpc_body("DeleteTaskPushNotificationConfig", ids.clone());
    let deleted = call(app, client, "worker", delete.clone(), &[]).await;
    assert_eq!(deleted["result"], json!({}));
    let listed = call(app, client, "worker", list, &[]).await;
    assert_eq!(listed["result"], json!({}));
    let again = call(app, client, "worker", delete, &[]).await;
    assert_eq!(again["result"], json!({}), "{again:#}");
    let get = rpc_body("GetTaskPushNotificationConfig", ids);
    assert!(
        error_of(&call(app, client, "worker", get, &[]).await, -32001)
            .contains("no push notification config 'cfg'")
    );
    // A task that is not the caller's (or does not exist) is still an error.
    let elsewhere = rpc_body(
        "DeleteTaskPushNotificationConfig",
        json!({"taskId": "no-such-task", "id": "cfg"}),
    );
    error_of(&call(app, client, "worker", elsewhere, &[]).await, -32001);
}

#[tokio::test]
async fn a_config_sent_with_the_message_misses_nothing_and_failures_are_retried() {
    let app = app().await;
    let (_, client, worker) = team(&app).await;
    let receiver = Receiver::default();
    let url = receiver.start().await;
    receiver.fail_next(2);
    let push = json!({"taskPushNotificationConfig": {"url": url, "token": "t"}});
    let task_id = held(&app, &client, "m1", push).await;
    report(&app, &worker, &task_id, "success", json!({"n": 1})).await;
    let pushes = receiver.wait_for(3).await;
    let states: Vec<&str> = pushes.iter().map(state_of).collect();
    assert_eq!(
        states,
        ["TASK_STATE_SUBMITTED", "", "TASK_STATE_COMPLETED"],
        "{pushes:#?}"
    );
    assert_eq!(
        receiver.calls().len(),
        5,
        "two failures, then three deliveries"
    );
    // The config took the task's id: the same send again sets it again, not twice.
    let list = rpc_body(
        "ListTaskPushNotificationConfigs",
        json!({"taskId": task_id}),
    );
    let listed = call(&app, &client, "worker", list, &[]).await;
    assert_eq!(listed["result"]["configs"][0]["id"], task_id.as_str());
    assert_eq!(
        listed["result"]["configs"].as_array().map(Vec::len),
        Some(1)
    );
}

#[tokio::test]
async fn config_errors_have_the_spec_codes() {
    // Default settings: private addresses are refused.
    let app = TestApp::start().await;
    let (team, client, _) = team(&app).await;
    let create = |params: Value| rpc_body("CreateTaskPushNotificationConfig", params);
    let missing = create(json!({"taskId": "nope", "url": "https://example.com/hook"}));
    error_of(&call(&app, &client, "worker", missing, &[]).await, -32001);
    let task_id = held(&app, &client, "m1", json!({})).await;
    let private = create(json!({"taskId": task_id, "url": "http://127.0.0.1:9/hook"}));
    let refused = call(&app, &client, "worker", private, &[]).await;
    error_of(&refused, -32602);
    assert_eq!(
        refused["error"]["data"][0]["metadata"]["error_code"],
        "VALIDATION_ERROR"
    );
    let not_url = create(json!({"taskId": task_id, "url": "hook"}));
    error_of(&call(&app, &client, "worker", not_url, &[]).await, -32602);
    let no_url = create(json!({"taskId": task_id}));
    error_of(&call(&app, &client, "worker", no_url, &[]).await, -32602);
    let long_token = create(json!({"taskId": task_id, "url": "https://example.com/h",
                                   "token": "x".repeat(5000)}));
    error_of(
        &call(&app, &client, "worker", long_token, &[]).await,
        -32602,
    );
    // A send whose config is refused is refused as a whole.
    let bad_send = rpc_body(
        "SendMessage",
        json!({"message": text("m2", "hold: x"),
               "configuration": {"taskPushNotificationConfig": {"url": "http://10.0.0.1/h"}}}),
    );
    error_of(&call(&app, &client, "worker", bad_send, &[]).await, -32602);
    let made = rpc_body("GetTask", json!({"id": "a2a-m2"}));
    error_of(&call(&app, &client, "worker", made, &[]).await, -32001);
    // At most ten per task; replacing one by its id is not an eleventh.
    for n in 0..10 {
        let ok = create(json!({"taskId": task_id, "id": format!("c{n}"),
                               "url": "https://example.com/hook"}));
        let made = call(&app, &client, "worker", ok, &[]).await;
        assert_eq!(made["result"]["id"], format!("c{n}"), "{made:#}");
    }
    let eleventh = create(json!({"taskId": task_id, "id": "c10", "url": "https://example.com/h"}));
    assert!(error_of(&call(&app, &client, "worker", eleventh, &[]).await, -32602).contains("10"));
    let replace = create(json!({"taskId": task_id, "id": "c3", "url": "https://example.org/h"}));
    let replaced = call(&app, &client, "worker", replace, &[]).await;
    assert_eq!(replaced["result"]["url"], "https://example.org/h");
    // Another agent of the team sees none of it.
    let other = app.agent(&team, "other", &[]).await;
    let list = rpc_body(
        "ListTaskPushNotificationConfigs",
        json!({"taskId": task_id}),
    );
    error_of(&call(&app, &other, "worker", list, &[]).await, -32001);
}

#[tokio::test]
async fn the_03_methods_speak_03_shapes_and_push_the_task() {
    let app = app().await;
    let (_, client, worker) = team(&app).await;
    let receiver = Receiver::default();
    let url = receiver.start().await;
    let task_id = held(&app, &client, "m1", json!({})).await;
    let set = rpc_body(
        "tasks/pushNotificationConfig/set",
        json!({"taskId": task_id, "pushNotificationConfig": {
            "url": url, "token": "old",
            "authentication": {"schemes": ["Bearer"], "credentials": "c"}}}),
    );
    let made = call(&app, &client, "worker", set, &[]).await;
    let shown = json!({"taskId": task_id, "pushNotificationConfig": {
        "id": task_id, "url": url, "token": "old", "authentication": {"schemes": ["Bearer"]}}});
    assert_eq!(made["result"], shown, "{made:#}");
    let get = rpc_body("tasks/pushNotificationConfig/get", json!({"id": task_id}));
    assert_eq!(
        call(&app, &client, "worker", get, &[]).await["result"],
        shown
    );
    let list = rpc_body("tasks/pushNotificationConfig/list", json!({"id": task_id}));
    assert_eq!(
        call(&app, &client, "worker", list.clone(), &[]).await["result"],
        json!([shown])
    );
    report(&app, &worker, &task_id, "success", json!({"n": 1})).await;
    let pushes = receiver.wait_for(1).await;
    assert_eq!(pushes[0]["kind"], "task", "{pushes:#?}");
    assert_eq!(pushes[0]["id"], task_id.as_str());
    assert_eq!(pushes[0]["status"]["state"], "completed");
    assert_eq!(receiver.calls()[0].0["authorization"], "Bearer c");
    let delete = rpc_body(
        "tasks/pushNotificationConfig/delete",
        json!({"id": task_id, "pushNotificationConfigId": task_id}),
    );
    assert_eq!(
        call(&app, &client, "worker", delete, &[]).await["result"],
        Value::Null
    );
    assert_eq!(
        call(&app, &client, "worker", list, &[]).await["result"],
        json!([])
    );
}

#[tokio::test]
async fn pushes_not_yet_delivered_survive_a_restart() {
    let mut app = TestApp::start_with(|c| {
        c.callbacks.allow_private = true;
        c.callbacks.retry_base = Duration::from_millis(300);
    })
    .await;
    let (_, client, worker) = team(&app).await;
    let receiver = Receiver::default();
    let url = receiver.start().await;
    // The receiver is down for a while: every attempt before the restart fails.
    receiver.fail_next(1_000);
    let push = json!({"taskPushNotificationConfig": {"url": url}});
    let task_id = held(&app, &client, "m1", push).await;
    report(&app, &worker, &task_id, "success", json!({"n": 1})).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(receiver.delivered().is_empty());
    app.restart().await;
    receiver.fail_next(0);
    // Queued in the database with the changes, so sent after the restart, in order.
    let pushes = receiver.wait_for(3).await;
    let states: Vec<&str> = pushes.iter().map(state_of).collect();
    assert_eq!(
        states,
        ["TASK_STATE_SUBMITTED", "", "TASK_STATE_COMPLETED"],
        "{pushes:#?}"
    );
}
