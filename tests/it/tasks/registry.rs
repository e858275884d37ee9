//! The registry by message, and task frames with bad fields.

use super::*;

/// Finding, over the WebSocket as a TaskRequest frame: by capability (case-insensitive),
/// nobody found, and a request that names no capability.
async fn find_over_the_socket(app: &TestApp, a: &Agent) {
    // Finding, over the WebSocket as a TaskRequest frame.
    let mut ws = app.ws(a, "").await;
    let found = ws
        .call(
            "TaskRequest",
            json!({"description": "find an agent for SQL work", "originating_agent_id": "A", "data": {"capabilities": ["sql"]}}),
        )
        .await;
    assert_eq!(found["ok"], true, "{found}");
    let response = &found["result"]["task_response"];
    assert_eq!(response["status"], "success");
    assert_eq!(response["result_data"]["agents"][0]["agent_id"], "newbie");
    assert_eq!(response["result_data"]["agents"][0]["address"], "tcp://n:1");
    let none = ws
        .call(
            "TaskRequest",
            json!({"description": "find an agent", "originating_agent_id": "A", "data": {"capability": "juggling"}}),
        )
        .await;
    assert_eq!(none["result"]["task_response"]["status"], "failed");
    assert_eq!(
        none["result"]["task_response"]["result_data"]["message"],
        "No available agents found."
    );
    let bad = ws
        .call(
            "TaskRequest",
            json!({"description": "find an agent", "originating_agent_id": "A"}),
        )
        .await;
    assert_eq!(
        bad["result"]["task_response"]["result_data"]["message"],
        "Invalid lookup request."
    );
}

#[tokio::test]
async fn the_registry_by_message_registers_and_finds_agents() {
    let app = app().await;
    let team = app.team("registry").await;
    let a = app.agent(&team, "A", &["planning"]).await;
    let register = |fields: Value| {
        let mut body = json!({"description": "Please register me as an agent", "originating_agent_id": "newbie"});
        crate::support::merge(&mut body, fields);
        app.post("/v1/tasks").token(&team.key).json(body).send()
    };
    let ok = register(json!({"data": {"capabilities": ["search", "SQL"], "address": "tcp://n:1"}}))
        .await
        .expect_status(200);
    assert_eq!(ok.body["success"], true);
    assert_eq!(ok.body["task"], Value::Null);
    let response = &ok.body["task_response"];
    assert_eq!(response["status"], "success");
    assert_eq!(
        response["result_data"]["message"],
        "Agent newbie registered successfully with capabilities: search, SQL."
    );
    assert_eq!(response["result_data"]["agent"]["address"], "tcp://n:1");
    let token = response["result_data"]["token"].as_str().expect("token");
    // The same registry as REST: the new agent exists and its token works.
    app.get(&format!("/v1/teams/{}/agents/newbie", team.id))
        .token(token)
        .send()
        .await
        .expect_status(200);

    let again = register(json!({"data": {"capabilities": ["x"]}}))
        .await
        .expect_status(200);
    assert_eq!(again.body["success"], false);
    assert_eq!(again.body["task_response"]["status"], "failed");
    assert_eq!(
        again.body["task_response"]["result_data"]["message"],
        "Error: Agent with ID newbie is already registered."
    );
    assert_eq!(
        again.body["error_message"]["error_code"],
        "AGENT_ALREADY_REGISTERED"
    );
    let invalid = register(json!({"data": {"role": "no capabilities"}}))
        .await
        .expect_status(200);
    assert_eq!(
        invalid.body["task_response"]["result_data"]["message"],
        "Invalid registration request."
    );
    // An agent token cannot register others (a team-key action, as over REST).
    let by_agent = app
        .submit(&a, json!({"description": "register me as an agent", "data": {"agent_id": "x2", "capabilities": ["x"]}}))
        .await
        .expect_status(200);
    assert_eq!(by_agent.body["task_response"]["status"], "failed");
    assert_eq!(by_agent.body["error_message"]["error_code"], "FORBIDDEN");

    find_over_the_socket(&app, &a).await;
    app.stop().await;
}

#[tokio::test]
async fn task_frames_with_bad_fields_get_the_rest_errors() {
    let app = app().await;
    let team = app.team("frames").await;
    let a = app.agent(&team, "A", &[]).await;
    let b = app.agent(&team, "B", &["x"]).await;
    let mut ws = app.ws(&b, "").await;
    let missing = ws
        .call("TaskRequest", json!({"originating_agent_id": "B"}))
        .await;
    assert_eq!(missing["type"], "ErrorMessage");
    assert_eq!(missing["error_code"], "VALIDATION_ERROR");
    assert_eq!(missing["details"]["field"], "description");
    app.submit(&a, json!({"task_id": "f", "target_agent_id": "B"}))
        .await
        .expect_status(201);
    let impostor = ws
        .call(
            "TaskResponse",
            json!({"task_id": "f", "status": "success", "agent_id": "A"}),
        )
        .await;
    assert_eq!(impostor["ok"], false);
    assert_eq!(impostor["error"]["error_code"], "FORBIDDEN");
    let unknown = ws
        .call(
            "ClarificationRequest",
            json!({"task_id": "nope", "question": "?"}),
        )
        .await;
    assert_eq!(unknown["error"]["error_code"], "TASK_NOT_FOUND");
    // CallbackNotification and ErrorMessage frames report like TaskResponse.
    let failed = ws
        .call(
            "ErrorMessage",
            json!({"task_id": "f", "error_message": "disk full", "error_code": "E_DISK"}),
        )
        .await;
    assert_eq!(failed["ok"], true, "{failed}");
    assert_eq!(failed["result"]["task"]["status"], "failed");
    assert_eq!(
        failed["result"]["task"]["result_data"]["error_message"],
        "disk full"
    );
    let listed = ws.call("list_tasks", json!({"role": "assigned"})).await;
    assert_eq!(listed["result"]["tasks"][0]["task_id"], "f");
    let got = ws.call("get_task", json!({"task_id": "f"})).await;
    assert_eq!(got["result"]["events"][1]["kind"], "failed");
    app.stop().await;
}
