//! A task waiting on a person reads `input-required` over A2A (`docs/approvals.md`, "An
//! approval of a task"): the worker asks for an approval of the task a client sent it;
//! `GetTask` shows the approval's summary as the status message until the team key
//! decides, then the task is working again.

use serde_json::json;

use super::{call, held, rpc_body, team};
use crate::support::TestApp;

#[tokio::test]
async fn a_task_with_a_pending_approval_is_input_required_until_it_is_decided() {
    let app = TestApp::start().await;
    let (team, client, worker) = team(&app).await;
    let task_id = held(&app, &client, "m-approval", json!({})).await;
    let asked = app
        .post("/v1/approvals")
        .token(&worker.token)
        .json(json!({"summary": "Publish the review?", "task_id": task_id}))
        .send()
        .await
        .expect_status(201);
    let approval_id = asked.body["approval"]["approval_id"]
        .as_str()
        .expect("id")
        .to_owned();
    let get = || rpc_body("GetTask", json!({"id": task_id}));
    let waiting = call(&app, &client, "worker", get(), &[]).await;
    let status = &waiting["result"]["status"];
    assert_eq!(status["state"], "TASK_STATE_INPUT_REQUIRED", "{waiting:#}");
    assert_eq!(status["message"]["parts"][0]["text"], "Publish the review?");

    app.post(&format!("/v1/approvals/{approval_id}/decision"))
        .token(&team.key)
        .json(json!({"decision": "approve"}))
        .send()
        .await
        .expect_status(200);
    let going = call(&app, &client, "worker", get(), &[]).await;
    assert_eq!(
        going["result"]["status"]["state"], "TASK_STATE_WORKING",
        "{going:#}"
    );
}
