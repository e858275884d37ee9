//! A role as an A2A member (`/a2a/{team_id}/role:{role}`): a message sent there is a task
//! offered to the role's agents, worked by the first that claims it and followed by the
//! A2A client as any task; the role has a card and a place in the directory; a role
//! nobody has is no one to address.

use serde_json::{Value, json};

use super::{call, error_of, rpc_body, team, text};
use crate::support::{Agent, TestApp};
use crate::tasks::claims::{claim, member};

/// `GetTask` of `task_id` at `member`'s interface.
async fn get(app: &TestApp, caller: &Agent, member: &str, task_id: &str) -> Value {
    let body = rpc_body("GetTask", json!({"id": task_id}));
    call(app, caller, member, body, &[]).await
}

/// The ids of the tasks `ListTasks` at `member`'s interface answers, with `params`.
async fn listed(app: &TestApp, caller: &Agent, member: &str, params: Value) -> Vec<String> {
    let answer = call(app, caller, member, rpc_body("ListTasks", params), &[]).await;
    answer["result"]["tasks"]
        .as_array()
        .map(|tasks| {
            tasks
                .iter()
                .filter_map(|t| t["id"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn a_message_to_a_role_is_offered_and_followed_until_its_claimer_finishes() {
    let app = TestApp::start().await;
    let (team, client, worker) = team(&app).await;
    let coder = member(&app, &team, "coder-1", "coder", &["rust"]).await;
    member(&app, &team, "coder-2", "coder", &["python", "rust"]).await;
    let send = rpc_body(
        "SendMessage",
        json!({"message": text("fix-1", "Fix the flaky test"),
               "configuration": {"returnImmediately": true}}),
    );
    let sent = call(&app, &client, "role:coder", send, &[]).await;
    assert_eq!(sent["result"]["task"]["id"], "a2a-fix-1", "{sent:#}");
    assert_eq!(
        sent["result"]["task"]["status"]["state"],
        "TASK_STATE_SUBMITTED"
    );
    // Over REST it is an ordinary offered task, open for the role.
    let task = app
        .get("/v1/tasks/a2a-fix-1")
        .token(&client.token)
        .send()
        .await
        .expect_status(200);
    assert_eq!(task.body["task"]["status"], "open");
    assert_eq!(task.body["task"]["assignee_role"], "coder");
    assert_eq!(task.body["task"]["target_agent_id"], Value::Null);
    // Listed at the role's interface (open is SUBMITTED), not at another member's.
    let submitted = json!({"status": "TASK_STATE_SUBMITTED"});
    assert_eq!(
        listed(&app, &client, "role:coder", submitted).await,
        ["a2a-fix-1"]
    );
    assert!(listed(&app, &client, "worker", json!({})).await.is_empty());
    error_of(&get(&app, &client, "worker", "a2a-fix-1").await, -32001);
    // A coder claims it: the A2A client sees it worked on.
    let claimed = claim(&app, &coder, json!({})).await.expect_status(200);
    assert_eq!(claimed.body["task"]["task_id"], "a2a-fix-1");
    let working = get(&app, &client, "role:coder", "a2a-fix-1").await;
    assert_eq!(working["result"]["status"]["state"], "TASK_STATE_WORKING");
    app.post("/v1/tasks/a2a-fix-1/result")
        .token(&coder.token)
        .json(json!({"status": "success", "result_data": {"fixed": true}}))
        .send()
        .await
        .expect_status(200);
    let done = get(&app, &client, "role:coder", "a2a-fix-1").await;
    assert_eq!(done["result"]["status"]["state"], "TASK_STATE_COMPLETED");
    assert_eq!(
        done["result"]["artifacts"][0]["parts"][0]["data"],
        json!({"fixed": true})
    );
    // The claimer's own interface never shows it: it was given to the role.
    error_of(&get(&app, &client, "coder-1", "a2a-fix-1").await, -32001);
    assert_eq!(worker.id, "worker");
}

#[tokio::test]
async fn a_role_has_a_card_and_a_place_in_the_directory_and_an_unknown_one_is_404() {
    let app = TestApp::start().await;
    let (team, client, _) = team(&app).await;
    member(&app, &team, "coder-1", "coder", &["rust"]).await;
    member(&app, &team, "coder-2", "coder", &["python", "rust"]).await;
    member(&app, &team, "lead", "senior reviewer", &[]).await;
    let card = app
        .get("/a2a/a2a/role:coder/.well-known/agent-card.json")
        .token(&client.token)
        .send()
        .await
        .expect_status(200);
    assert_eq!(card.body["name"], "role:coder");
    let skills: Vec<&str> = card.body["skills"]
        .as_array()
        .map(|s| s.iter().filter_map(|s| s["id"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(skills, ["python", "rust"]);
    let url = format!("{}/a2a/a2a/role:coder", app.base);
    assert_eq!(card.body["supportedInterfaces"][0]["url"], url.as_str());
    // A role with a space is named percent-encoded, and answers there.
    let spaced = "/a2a/a2a/role:senior%20reviewer";
    let card = app
        .get(&format!("{spaced}/.well-known/agent-card.json"))
        .token(&client.token)
        .send()
        .await
        .expect_status(200);
    let url = format!("{}{spaced}", app.base);
    assert_eq!(card.body["supportedInterfaces"][0]["url"], url.as_str());
    let send = rpc_body(
        "SendMessage",
        json!({"message": text("review-9", "Review the design"),
               "configuration": {"returnImmediately": true}}),
    );
    let sent = call(&app, &client, "role:senior%20reviewer", send, &[]).await;
    assert_eq!(
        sent["result"]["task"]["status"]["state"],
        "TASK_STATE_SUBMITTED"
    );
    // The directory lists the roles beside the members.
    let directory = app
        .get("/a2a/a2a/agents")
        .token(&client.token)
        .send()
        .await
        .expect_status(200);
    let roles: Vec<&str> = directory.body["roles"]
        .as_array()
        .map(|l| l.iter().filter_map(|c| c["name"].as_str()).collect())
        .unwrap_or_default();
    assert!(roles.contains(&"role:coder") && roles.contains(&"role:senior reviewer"));
    // A role nobody has: no card, no interface, nothing sent.
    let unknown = app
        .get("/a2a/a2a/role:tester/.well-known/agent-card.json")
        .token(&client.token)
        .send()
        .await
        .expect_status(404);
    assert_eq!(unknown.body["error_code"], "AGENT_NOT_FOUND");
    let body = rpc_body("SendMessage", json!({"message": text("t-1", "Test it")}));
    let refused = app
        .post("/a2a/a2a/role:tester")
        .token(&client.token)
        .raw(body.to_string())
        .send()
        .await
        .expect_status(404);
    assert_eq!(refused.body["error_code"], "AGENT_NOT_FOUND");
    app.get("/v1/tasks/a2a-t-1")
        .token(&client.token)
        .send()
        .await
        .expect_status(404);
}

#[tokio::test]
async fn the_task_list_filters_by_role_and_checks_the_filter() {
    let app = TestApp::start().await;
    let (team, client, worker) = team(&app).await;
    member(&app, &team, "coder-1", "coder", &[]).await;
    crate::tasks::claims::offer(&app, &client, "for-role", "coder", json!({}))
        .await
        .expect_status(201);
    app.post("/v1/tasks")
        .token(&client.token)
        .json(json!({"task_id": "for-agent", "description": "d",
                     "originating_agent_id": client.id, "target_agent_id": worker.id}))
        .send()
        .await
        .expect_status(201);
    let page = app
        .get("/v1/tasks?role=originated&assignee_role=coder")
        .token(&client.token)
        .send()
        .await
        .expect_status(200);
    let ids: Vec<&str> = page.body["tasks"]
        .as_array()
        .map(|t| t.iter().filter_map(|t| t["task_id"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(ids, ["for-role"]);
    for bad in ["%20", &"r".repeat(101)] {
        let refused = app
            .get(&format!("/v1/tasks?assignee_role={bad}"))
            .token(&client.token)
            .send()
            .await
            .expect_status(400);
        assert_eq!(refused.body["error_code"], "VALIDATION_ERROR");
        assert_eq!(refused.body["details"]["field"], "assignee_role");
    }
}

#[tokio::test]
async fn the_stock_client_reaches_a_role_and_an_agent_of_it_does_the_work() {
    if !crate::python::available("the_stock_client_reaches_a_role_and_an_agent_of_it_does_the_work")
    {
        return;
    }
    let app = TestApp::start().await;
    let (team, client, _) = team(&app).await;
    let coder = member(&app, &team, "coder-1", "coder", &["rust"]).await;
    let args = [
        "role",
        &app.base,
        &team.id,
        &client.token,
        &coder.id,
        &coder.token,
    ];
    let out = crate::python::run("a2a_agents.py", &args).await;
    assert_eq!(out["card"]["name"], "role:coder");
    assert_eq!(out["card"]["skills"], json!(["rust"]));
    let url = format!("{}/a2a/a2a/role:coder", app.base);
    assert_eq!(out["card"]["url"], url.as_str());
    // Offered while nobody worked it, then worked by the claimer to the end. The stream
    // opens with the task as it is at that moment: still offered, or — when the worker
    // claimed it first, as a loaded machine may schedule it — already being worked.
    let stream = out["stream"].as_array().cloned().unwrap_or_default();
    let first = stream.first().cloned().unwrap_or_default();
    assert!(
        first == json!(["task", "TASK_STATE_SUBMITTED"])
            || first == json!(["task", "TASK_STATE_WORKING"]),
        "{out:#}"
    );
    assert_eq!(
        stream.last(),
        Some(&json!(["status", "TASK_STATE_COMPLETED", null]))
    );
    assert!(
        stream.contains(&json!(["artifact", {"data": {"summary": "done: tidy the changelog"}}]))
    );
    assert_eq!(out["offered"], json!([out["task_id"]]));
    assert_eq!(out["listed"], json!([out["task_id"]]));
    // The server's record: claimed by the coder, once.
    let task_id = out["task_id"].as_str().unwrap_or_default();
    let task = app
        .get(&format!("/v1/tasks/{task_id}"))
        .token(&client.token)
        .send()
        .await
        .expect_status(200);
    assert_eq!(task.body["task"]["assignee_agent_id"], "coder-1");
    assert_eq!(task.body["task"]["attempts"], 1);
    assert_eq!(task.body["task"]["status"], "success");
}
