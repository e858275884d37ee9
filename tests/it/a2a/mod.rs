//! A2A: the official Python A2A SDK (`tests/interop/a2a_agents.py`), unmodified, calls a
//! Switchboard agent that works over our WebSocket; the tasks it made are then checked
//! through REST. Every JSON-RPC and HTTP error path is checked with plain requests
//! (`rpc.rs`).

mod approvals;
mod exact;
mod js;
mod outbound;
mod push;
mod race;
mod roles;
mod rpc;

use serde_json::{Value, json};

use crate::support::{Agent, Team, TestApp};
use crate::{python, readme};

/// A team with a client agent and a worker that does reviews.
pub(super) async fn team(app: &TestApp) -> (Team, Agent, Agent) {
    let team = app.team("a2a").await;
    let client = app.agent(&team, "client", &[]).await;
    let worker = app.agent(&team, "worker", &["review", "summarise"]).await;
    (team, client, worker)
}

async fn scenario(app: &TestApp, name: &str, team: &Team, client: &Agent, worker: &Agent) -> Value {
    python::run(
        "a2a_agents.py",
        &[
            name,
            &app.base,
            &team.id,
            &client.token,
            &worker.id,
            &worker.token,
        ],
    )
    .await
}

#[tokio::test]
async fn the_stock_client_streams_a_task_with_a_question_and_its_answer() {
    if !crate::python::available("the_stock_client_streams_a_task_with_a_question_and_its_answer") {
        return;
    }
    let app = TestApp::start().await;
    let (team, client, worker) = team(&app).await;
    let out = scenario(&app, "conversation", &team, &client, &worker).await;
    // The card came from the registry.
    assert_eq!(out["card"]["name"], "worker");
    assert_eq!(out["card"]["streaming"], true);
    assert_eq!(out["card"]["skills"], json!(["review", "summarise"]));
    assert_eq!(
        out["card"]["url"],
        format!("{}/a2a/a2a/worker", app.base).as_str()
    );
    // The first stream stops where the worker asked; the answer's stream ends completed.
    assert_eq!(
        out["asked"],
        json!([
            ["task", "TASK_STATE_SUBMITTED"],
            ["status", "TASK_STATE_INPUT_REQUIRED", "Which region?"]
        ])
    );
    assert_eq!(
        out["answered"],
        json!([
            ["task", "TASK_STATE_WORKING"],
            ["status", "TASK_STATE_WORKING", ""],
            ["artifact", {"data": {"summary": "done: EMEA"}}],
            ["status", "TASK_STATE_COMPLETED", null]
        ])
    );
    let task = &out["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED");
    let history: Vec<&str> = task["history"]
        .as_array()
        .map(|h| {
            h.iter()
                .filter_map(|m| m["parts"][0]["text"].as_str())
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(history, ["ask: summarise Q3", "Which region?", "EMEA"]);
    assert!(
        out["wrong_context"]
            .as_str()
            .is_some_and(|e| e.contains("contextId 'other'"))
    );
    assert_eq!(out["unknown_task"], "TaskNotFoundError");
    assert_eq!(out["finished_subscribe"], "UnsupportedOperationError");
    assert_eq!(out["listed"], json!([task["id"]]));
    assert_eq!(out["blocking"]["state"], "TASK_STATE_COMPLETED");
    assert_eq!(
        out["blocking"]["artifact"]["parts"][0]["data"]["summary"],
        "done: count the logs"
    );
    assert_eq!(out["immediate"], "TASK_STATE_SUBMITTED");
    assert_eq!(out["canceled"], "TASK_STATE_CANCELED");
    assert_eq!(out["cancel_again"], "TaskNotCancelableError");

    // Through REST the same task is an ordinary task of the task protocol.
    let id = task["id"].as_str().expect("a task id");
    let rest = app
        .get(&format!("/v1/tasks/{id}"))
        .token(&client.token)
        .send()
        .await
        .expect_status(200);
    assert_eq!(rest.body["task"]["status"], "success");
    assert_eq!(rest.body["task"]["originating_agent_id"], "client");
    assert_eq!(rest.body["task"]["assignee_agent_id"], "worker");
    assert_eq!(rest.body["task"]["description"], "ask: summarise Q3");
    assert_eq!(rest.body["task"]["context"][0]["answer"], "EMEA");
    assert_eq!(rest.body["task"]["result_data"]["summary"], "done: EMEA");
}

#[tokio::test]
async fn a_dropped_subscription_resumes_from_its_last_event_without_a_gap() {
    if !crate::python::available("a_dropped_subscription_resumes_from_its_last_event_without_a_gap")
    {
        return;
    }
    let app = TestApp::start().await;
    let (team, client, worker) = team(&app).await;
    let out = scenario(&app, "resume", &team, &client, &worker).await;
    assert_eq!(out["first"], json!([["task", "TASK_STATE_SUBMITTED"]]));
    assert_eq!(
        out["resumed"],
        json!([
            ["status", "TASK_STATE_WORKING", ""],
            ["artifact", {"data": {"summary": "done: slow"}}],
            ["status", "TASK_STATE_COMPLETED", null]
        ])
    );
}

#[tokio::test]
async fn the_same_send_twice_makes_one_task() {
    if !crate::python::available("the_same_send_twice_makes_one_task") {
        return;
    }
    let app = TestApp::start().await;
    let (team, client, worker) = team(&app).await;
    let out = scenario(&app, "idempotent", &team, &client, &worker).await;
    assert_eq!(out["ids"][0], out["ids"][1]);
    let listed = app
        .get("/v1/tasks")
        .token(&client.token)
        .send()
        .await
        .expect_status(200);
    assert_eq!(listed.body["tasks"].as_array().map(Vec::len), Some(1));
    // An Idempotency-Key does the same for sends with fresh message ids.
    let keyed = |message_id: &str| {
        rpc_body(
            "SendMessage",
            json!({"message": text(message_id, "hold: keyed"),
                   "configuration": {"returnImmediately": true}}),
        )
    };
    let one = call(
        &app,
        &client,
        "worker",
        keyed("k1"),
        &[("Idempotency-Key", "job-7")],
    )
    .await;
    let two = call(
        &app,
        &client,
        "worker",
        keyed("k2"),
        &[("Idempotency-Key", "job-7")],
    )
    .await;
    assert_eq!(one["result"]["task"]["id"], "a2a-job-7");
    assert_eq!(two["result"]["task"]["id"], "a2a-job-7");
}

#[tokio::test]
async fn the_stock_client_manages_push_configs_and_the_receiver_gets_each_change() {
    if !crate::python::available(
        "the_stock_client_manages_push_configs_and_the_receiver_gets_each_change",
    ) {
        return;
    }
    let app = TestApp::start_with(|c| c.callbacks.allow_private = true).await;
    let (team, client, worker) = team(&app).await;
    let out = scenario(&app, "push", &team, &client, &worker).await;
    let created = &out["created"];
    assert_eq!(created["id"], "hook-1");
    assert_eq!(created["token"], "tok-42");
    // The credentials went in and are never shown back.
    assert_eq!(created["authentication"], json!({"scheme": "Bearer"}));
    assert_eq!(out["got"], *created);
    assert_eq!(out["listed"], json!(["hook-1", "hook-2"]));
    assert_eq!(out["after_delete"], json!(["hook-1"]));
    assert_eq!(out["deleted_get"], "TaskNotFoundError");
    // Every change after the config, with the token and credentials the receiver checks.
    assert_eq!(
        out["pushed"],
        json!([
            ["status", "TASK_STATE_WORKING"],
            ["artifact", {"data": {"summary": "done: slow"}}],
            ["status", "TASK_STATE_COMPLETED"]
        ])
    );
    assert_eq!(out["refused"], 0);
}

/// A task for the worker, sent by `client` with `returnImmediately` (and the rest of
/// `configuration`), that waits for the worker; its id.
pub(super) async fn held(
    app: &TestApp,
    client: &Agent,
    message_id: &str,
    configuration: Value,
) -> String {
    let mut configuration = configuration;
    configuration["returnImmediately"] = json!(true);
    let body = rpc_body(
        "SendMessage",
        json!({"message": text(message_id, "hold: push"), "configuration": configuration}),
    );
    let made = call(app, client, "worker", body, &[]).await;
    made["result"]["task"]["id"]
        .as_str()
        .unwrap_or_else(|| panic!("a task: {made:#}"))
        .to_owned()
}

pub(super) fn text(message_id: &str, text: &str) -> Value {
    json!({"messageId": message_id, "role": "ROLE_USER", "parts": [{"text": text}]})
}

pub(super) fn rpc_body(method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
}

/// One JSON-RPC call to `agent`'s interface; asserts HTTP 200 and returns the response.
pub(super) async fn call(
    app: &TestApp,
    caller: &Agent,
    agent: &str,
    body: Value,
    headers: &[(&str, &str)],
) -> Value {
    let mut req = app
        .post(&format!("/a2a/a2a/{agent}"))
        .token(&caller.token)
        .raw(body.to_string());
    for (name, value) in headers {
        req = req.header(name, value);
    }
    req.send().await.expect_status(200).body
}

/// Asserts a JSON-RPC error with `code`, and returns its message.
#[track_caller]
pub(super) fn error_of(response: &Value, code: i64) -> String {
    assert_eq!(response["error"]["code"], code, "{response:#}");
    assert_eq!(response["jsonrpc"], "2.0");
    response["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[tokio::test]
async fn the_sdks_0_3_client_runs_the_same_conversation() {
    if !crate::python::available("the_sdks_0_3_client_runs_the_same_conversation") {
        return;
    }
    let app = TestApp::start().await;
    let (team, client, worker) = team(&app).await;
    let out = scenario(&app, "legacy", &team, &client, &worker).await;
    assert_eq!(out["versions"], json!(["1.0", "0.3"]));
    assert_eq!(out["transport"], "CompatJsonRpcTransport");
    assert_eq!(
        out["asked"],
        json!([
            ["task", "TASK_STATE_SUBMITTED"],
            ["status", "TASK_STATE_INPUT_REQUIRED", "Which region?"]
        ])
    );
    assert_eq!(
        out["answered"][3],
        json!(["status", "TASK_STATE_COMPLETED", null])
    );
    assert_eq!(out["state"], "TASK_STATE_COMPLETED");
    assert_eq!(
        out["history"],
        json!(["ask: legacy report", "Which region?", "APAC"])
    );
    assert_eq!(out["unknown_task"], "TaskNotFoundError");
}

#[tokio::test]
async fn the_a2a_walkthrough_works_as_written() {
    let app =
        TestApp::start_with(|c| c.admin_token = Some(readme::WALKTHROUGH_ADMIN.to_owned())).await;
    let script = format!(
        "{}echo '=== docs/a2a.md'\n{}",
        readme::readme(),
        readme::walkthrough("docs/a2a.md", "a2a")
    );
    let out = readme::run(&app, &script).await;
    let answers = readme::page_answers(&out, "docs/a2a.md");
    assert_eq!(answers.len(), 4, "{out}");
    assert_eq!(answers[0]["name"], "coder", "{out}");
    assert_eq!(answers[0]["skills"][0]["id"], "python");
    let task = &answers[1]["result"]["task"];
    assert_eq!(task["id"], "a2a-review-42", "{out}");
    assert_eq!(task["status"]["state"], "TASK_STATE_SUBMITTED");
    let artifact = &answers[2]["result"]["artifactUpdate"]["artifact"];
    assert_eq!(artifact["parts"][0]["data"]["verdict"], "approved", "{out}");
    let status = &answers[3]["result"]["statusUpdate"]["status"];
    assert_eq!(status["state"], "TASK_STATE_COMPLETED", "{out}");
    app.stop().await;
}

/// 0.3 clients discover a member by its card at the URL they were given: the card
/// carries 0.3's fields beside 1.0's (as the reference server merges them), so the SDK's
/// 1.0 resolver and its 0.3 card model both read it (`a2a_agents.py cards`).
#[tokio::test]
async fn a_card_reads_as_1_0_and_as_0_3() {
    if !crate::python::available("a_card_reads_as_1_0_and_as_0_3") {
        return;
    }
    let app = TestApp::start().await;
    let (team, client, worker) = team(&app).await;
    let out = scenario(&app, "cards", &team, &client, &worker).await;
    let url = format!("{}/a2a/a2a/worker", app.base);
    assert_eq!(
        out["v10_interfaces"],
        json!([[url, "JSONRPC", "1.0"], [url, "JSONRPC", "0.3"]])
    );
    assert_eq!(out["v03_url"], url);
    assert_eq!(out["v03_version"], "0.3.0");
    assert_eq!(out["v03_transport"], "JSONRPC");
    assert_eq!(out["v03_security"], json!([["bearer"]]));
    assert_eq!(
        out["v03_scheme"],
        json!({"type": "http", "scheme": "bearer"})
    );
}

/// A chain of tasks through `referenceTaskIds` meets the loop guard, and the stock client
/// gets the refusal as A2A says it: `-32004` with the contract's code in `ErrorInfo`.
#[tokio::test]
async fn a_chain_of_referenced_tasks_is_refused_by_the_loop_guard() {
    if !crate::python::available("a_chain_of_referenced_tasks_is_refused_by_the_loop_guard") {
        return;
    }
    let app = TestApp::start().await;
    let (team, client, worker) = team(&app).await;
    app.patch("/v1/teams/a2a")
        .token(&team.key)
        .json(json!({"loop_guard": {"max_hops": 2}}))
        .send()
        .await
        .expect_status(200);
    let out = scenario(&app, "loop", &team, &client, &worker).await;
    assert_eq!(out["ids"].as_array().map(Vec::len), Some(2), "{out}");
    let refused = &out["refused"];
    assert_eq!(refused["type"], "UnsupportedOperationError", "{out}");
    let text = refused.to_string();
    assert!(text.contains("LOOP_DETECTED"), "{out}");
    assert!(text.contains("max_hops"), "{out}");
    // The refused send made no task: the client's tasks are the two.
    let tasks = app
        .get("/v1/tasks?role=originated")
        .token(&client.token)
        .send()
        .await
        .expect_status(200);
    assert_eq!(
        tasks.body["tasks"].as_array().map(Vec::len),
        Some(2),
        "{:#}",
        tasks.body
    );
    app.stop().await;
}

/// A spent task budget, as the stock client gets it (A2A has no rate-limit error: the
/// contract's code is in `ErrorInfo`); the send it let through continued the trace its
/// message's metadata named, and the task says so in its own metadata.
#[tokio::test]
async fn a_spent_budget_and_a_trace_in_metadata_reach_the_stock_client() {
    if !crate::python::available("a_spent_budget_and_a_trace_in_metadata_reach_the_stock_client") {
        return;
    }
    let app = TestApp::start().await;
    let (team, client, worker) = team(&app).await;
    app.patch("/v1/teams/a2a")
        .token(&team.key)
        .json(json!({"budgets": {"agent_tasks_per_day": 1}}))
        .send()
        .await
        .expect_status(200);
    let out = scenario(&app, "budget", &team, &client, &worker).await;
    let traceparent = out["task"]["traceparent"].as_str().unwrap_or_default();
    assert!(
        traceparent.starts_with("00-4bf92f3577b34da6a3ce929d0e0e4736-"),
        "{out}"
    );
    let refused = out["refused"].to_string();
    assert!(refused.contains("RATE_LIMITED"), "{out}");
    assert!(refused.contains("agent_tasks_per_day"), "{out}");
    // The trace as stored: the task, a child of the span the metadata named.
    let trace = app
        .get("/v1/traces/4bf92f3577b34da6a3ce929d0e0e4736")
        .token(&team.key)
        .send()
        .await
        .expect_status(200);
    assert_eq!(
        trace.body["tasks"][0]["task_id"], out["task"]["id"],
        "{}",
        trace.body
    );
    assert_eq!(trace.body["tasks"][0]["parent_span_id"], "00f067aa0ba902b7");
    // Its originator, which follows it over A2A, sees the trace; an agent that took no
    // part does not.
    app.get("/v1/traces/4bf92f3577b34da6a3ce929d0e0e4736")
        .token(&client.token)
        .send()
        .await
        .expect_status(200);
    let outsider = app.agent(&team, "outsider", &[]).await;
    app.get("/v1/traces/4bf92f3577b34da6a3ce929d0e0e4736")
        .token(&outsider.token)
        .send()
        .await
        .expect_error(404, "NOT_FOUND");
    app.stop().await;
}
