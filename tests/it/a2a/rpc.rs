//! The JSON-RPC interface with plain requests: every error path, messages on a task in
//! each state, team isolation, cards, 0.3 shapes, the stream bound.

use serde_json::{Value, json};

use super::{call, error_of, held, rpc_body, team, text};
use crate::support::{Agent, Res, TestApp};

/// A raw body to the worker's interface; asserts HTTP 200.
pub(super) async fn raw(app: &TestApp, caller: &Agent, body: &str) -> Value {
    app.post("/a2a/a2a/worker")
        .token(&caller.token)
        .raw(body.to_owned())
        .send()
        .await
        .expect_status(200)
        .body
}

#[tokio::test]
async fn envelope_errors_have_the_spec_codes() {
    let app = TestApp::start().await;
    let (_, client, _) = team(&app).await;
    let parse = raw(&app, &client, "{not json").await;
    error_of(&parse, -32700);
    assert_eq!(parse["id"], Value::Null);
    error_of(&raw(&app, &client, "[1, 2]").await, -32600);
    error_of(
        &raw(&app, &client, r#"{"id": 1, "method": "GetTask"}"#).await,
        -32600,
    );
    error_of(
        &raw(&app, &client, r#"{"jsonrpc": "2.0", "id": 1}"#).await,
        -32600,
    );
    error_of(
        &raw(
            &app,
            &client,
            r#"{"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": [1]}"#,
        )
        .await,
        -32602,
    );
    let unknown = raw(
        &app,
        &client,
        r#"{"jsonrpc": "2.0", "id": "x", "method": "Frobnicate"}"#,
    )
    .await;
    error_of(&unknown, -32601);
    assert_eq!(unknown["id"], "x");
}

#[tokio::test]
async fn method_errors_have_the_spec_codes() {
    let app = TestApp::start().await;
    let (_, client, _) = team(&app).await;
    // Params that are not the method's.
    let bad = call(
        &app,
        &client,
        "worker",
        rpc_body("SendMessage", json!({"message": 5})),
        &[],
    )
    .await;
    assert!(error_of(&bad, -32602).contains("message"));
    let page = call(
        &app,
        &client,
        "worker",
        rpc_body("ListTasks", json!({"pageSize": 0})),
        &[],
    )
    .await;
    error_of(&page, -32602);
    // An unknown task; a version this server does not speak; the 0.3 names under it.
    let missing = call(
        &app,
        &client,
        "worker",
        rpc_body("GetTask", json!({"id": "nope"})),
        &[],
    )
    .await;
    error_of(&missing, -32001);
    let v2 = rpc_body("GetTask", json!({"id": "nope"}));
    error_of(
        &call(&app, &client, "worker", v2, &[("A2A-Version", "2.0")]).await,
        -32009,
    );
    // 0.3 names are served as 0.3 when no version (or 0.3) is named, not under 1.0.
    let old = rpc_body("tasks/get", json!({"id": "nope"}));
    error_of(
        &call(&app, &client, "worker", old.clone(), &[]).await,
        -32001,
    );
    let under_v1 = call(&app, &client, "worker", old, &[("A2A-Version", "1.0")]).await;
    error_of(&under_v1, -32601);
    let v1_under_v03 = rpc_body("GetTask", json!({"id": "nope"}));
    let v03 = call(
        &app,
        &client,
        "worker",
        v1_under_v03,
        &[("A2A-Version", "0.3")],
    )
    .await;
    error_of(&v03, -32601);
    // No extended card.
    let card = rpc_body("GetExtendedAgentCard", json!({}));
    error_of(&call(&app, &client, "worker", card, &[]).await, -32007);
}

/// A `SendMessage` (`returnImmediately`) of one text part, on `task_id` if given.
pub(super) fn send_text(message_id: &str, words: &str, task_id: Option<&str>) -> Value {
    let mut message = text(message_id, words);
    if let Some(task_id) = task_id {
        message["taskId"] = json!(task_id);
    }
    rpc_body(
        "SendMessage",
        json!({"message": message, "configuration": {"returnImmediately": true}}),
    )
}

#[tokio::test]
async fn messages_on_a_task_follow_its_state() {
    let app = TestApp::start().await;
    let (_, client, worker) = team(&app).await;
    let send = |id: &str, task_id: Option<&str>| send_text(id, "hold: please", task_id);
    let made = call(&app, &client, "worker", send("m1", None), &[]).await;
    let task_id = made["result"]["task"]["id"]
        .as_str()
        .expect("a task")
        .to_owned();
    // Working, not asking: another message has nowhere to go.
    let working = call(&app, &client, "worker", send("m2", Some(&task_id)), &[]).await;
    assert!(error_of(&working, -32004).contains("working"));
    // Asking: a message without text is no answer.
    app.post(&format!("/v1/tasks/{task_id}/clarifications"))
        .token(&worker.token)
        .json(json!({"question": "Which one?"}))
        .send()
        .await
        .expect_status(201);
    let mut empty = send("m3", Some(&task_id));
    empty["params"]["message"]["parts"] = json!([{"data": {"x": 1}}]);
    error_of(&call(&app, &client, "worker", empty, &[]).await, -32602);
    let answered = call(&app, &client, "worker", send("m4", Some(&task_id)), &[]).await;
    assert_eq!(
        answered["result"]["task"]["status"]["state"],
        "TASK_STATE_WORKING"
    );
    // Finished: canceled, then nothing more is taken and it cannot be canceled again.
    let cancel = rpc_body(
        "CancelTask",
        json!({"id": task_id, "metadata": {"reason": "done"}}),
    );
    let canceled = call(&app, &client, "worker", cancel.clone(), &[]).await;
    assert_eq!(canceled["result"]["status"]["state"], "TASK_STATE_CANCELED");
    error_of(&call(&app, &client, "worker", cancel, &[]).await, -32002);
    let after = call(&app, &client, "worker", send("m5", Some(&task_id)), &[]).await;
    assert!(error_of(&after, -32004).contains("canceled"));
    // The contract's code travels in the error's ErrorInfo.
    let gone = call(
        &app,
        &client,
        "worker",
        rpc_body("GetTask", json!({"id": "x"})),
        &[],
    )
    .await;
    assert_eq!(
        gone["error"]["data"][0]["metadata"]["error_code"],
        "TASK_NOT_FOUND"
    );
}

#[tokio::test]
async fn cards_and_interfaces_stay_inside_the_team() {
    let app = TestApp::start().await;
    let (team, client, _) = team(&app).await;
    let other = app.team("elsewhere").await;
    let stranger = app.agent(&other, "stranger", &[]).await;
    let card = "/a2a/a2a/worker/.well-known/agent-card.json";
    // No token; a token of another team; the team key may read cards but not call.
    app.get(card).send().await.expect_error(401, "UNAUTHORIZED");
    let foreign: Res = app.get(card).token(&stranger.token).send().await;
    assert!(matches!(foreign.status, 403 | 404), "{foreign:?}");
    let keyed = app
        .get(card)
        .token(&team.key)
        .send()
        .await
        .expect_status(200);
    assert_eq!(keyed.body["name"], "worker");
    app.post("/a2a/a2a/worker")
        .token(&team.key)
        .raw(rpc_body("GetTask", json!({"id": "x"})).to_string())
        .send()
        .await
        .expect_error(403, "FORBIDDEN");
    let called = app
        .post("/a2a/a2a/worker")
        .token(&stranger.token)
        .raw(rpc_body("GetTask", json!({"id": "x"})).to_string())
        .send()
        .await;
    assert!(matches!(called.status, 403 | 404), "{called:?}");
    app.get("/a2a/a2a/nobody/.well-known/agent-card.json")
        .token(&client.token)
        .send()
        .await
        .expect_error(404, "AGENT_NOT_FOUND");
    cards_are_cached_and_listed(&app, &client, card).await;
    // A task sent through one member's interface is not reachable through another's.
    let id = json!(held(&app, &client, "iso", json!({})).await);
    let elsewhere = call(
        &app,
        &client,
        "client",
        rpc_body("GetTask", json!({"id": id})),
        &[],
    )
    .await;
    error_of(&elsewhere, -32001);
    // The interface with a trailing slash is the same interface (the 1.0 kit's client
    // and Agno's always add one); its card is where the slash says.
    let slashed = app
        .post("/a2a/a2a/worker/")
        .token(&client.token)
        .raw(rpc_body("GetTask", json!({"id": id})).to_string())
        .send()
        .await
        .expect_status(200);
    assert_eq!(slashed.body["result"]["id"], id, "{:#}", slashed.body);
}

#[tokio::test]
async fn a_0_3_request_gets_0_3_shapes() {
    let app = TestApp::start().await;
    let (_, client, _) = team(&app).await;
    let send = rpc_body(
        "message/send",
        json!({"message": {"kind": "message", "messageId": "old-1", "role": "user",
                           "parts": [{"kind": "text", "text": "hold: legacy"},
                                     {"kind": "file", "file": {"uri": "https://example.com/a.txt",
                                                               "mimeType": "text/plain"}}]},
               "configuration": {"blocking": false}}),
    );
    let task = call(&app, &client, "worker", send, &[]).await["result"].clone();
    assert_eq!(task["kind"], "task", "{task:#}");
    assert_eq!(task["id"], "a2a-old-1");
    assert_eq!(task["status"]["state"], "submitted");
    assert_eq!(task["history"][0]["role"], "user");
    assert_eq!(
        task["history"][0]["parts"][0],
        json!({"kind": "text", "text": "hold: legacy"})
    );
    // The file part reached the task as an attachment.
    let rest = app
        .get("/v1/tasks/a2a-old-1")
        .token(&client.token)
        .send()
        .await
        .expect_status(200);
    assert_eq!(
        rest.body["task"]["data"]["attachments"][0]["url"],
        "https://example.com/a.txt"
    );
}

#[tokio::test]
async fn an_agent_holds_a_bounded_number_of_streams() {
    let app = TestApp::start_with(|c| c.ws_max_per_agent = 2).await;
    let (_, client, _) = team(&app).await;
    let id = json!(held(&app, &client, "s1", json!({})).await);
    let http = reqwest::Client::new();
    let subscribe = || {
        http.post(app.url("/a2a/a2a/worker"))
            .bearer_auth(&client.token)
            .body(rpc_body("SubscribeToTask", json!({"id": id})).to_string())
            .send()
    };
    let first = subscribe().await.expect("a stream");
    let second = subscribe().await.expect("a stream");
    assert_eq!(first.status(), 200);
    assert_eq!(second.status(), 200);
    let third = subscribe().await.expect("an answer");
    assert_eq!(third.status(), 429);
    let body: Value = third.json().await.expect("the contract's body");
    assert_eq!(body["error_code"], "RATE_LIMITED");
    assert_eq!(body["details"]["max"], 2);
    // A stream the client closed frees its place.
    drop(first);
    let mut admitted = false;
    for _ in 0..50 {
        let again = subscribe().await.expect("an answer");
        if again.status() == 200 {
            admitted = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(admitted, "a closed stream's place was never freed");
    drop(second);
}

/// A card carries an ETag (304 when the client has it); the directory lists every card.
async fn cards_are_cached_and_listed(app: &TestApp, client: &Agent, card: &str) {
    // The card is cacheable: the same ETag answers 304.
    let first = app
        .get(card)
        .token(&client.token)
        .send()
        .await
        .expect_status(200);
    assert_eq!(first.headers["cache-control"], "private, max-age=60");
    let etag = first.headers["etag"].to_str().expect("an etag").to_owned();
    app.get(card)
        .token(&client.token)
        .header("If-None-Match", &etag)
        .send()
        .await
        .expect_status(304);
    assert_eq!(
        first.body["supportedInterfaces"][0]["protocolVersion"],
        "1.0"
    );
    assert_eq!(
        first.body["securitySchemes"]["bearer"]["httpAuthSecurityScheme"]["scheme"],
        "Bearer"
    );
    // The directory lists every member's card.
    let listed = app
        .get("/a2a/a2a/agents")
        .token(&client.token)
        .send()
        .await
        .expect_status(200);
    let names: Vec<&str> = listed.body["agents"]
        .as_array()
        .map(|l| l.iter().filter_map(|c| c["name"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(names, ["client", "worker"]);
}

/// The inbox of a GET_MESSAGES caller: how many entries it holds, and their frames.
async fn inbox(app: &TestApp, who: &Agent) -> (u64, Vec<String>) {
    let res = app
        .get("/v1/messages?sort_order=oldest_first")
        .token(&who.token)
        .send()
        .await
        .expect_status(200);
    let frames = res.body["messages"]
        .as_array()
        .map(|m| {
            m.iter()
                .map(|m| {
                    m["content"]["data"]["type"]
                        .as_str()
                        .unwrap_or("")
                        .to_owned()
                })
                .collect()
        })
        .unwrap_or_default();
    (res.body["total_count"].as_u64().unwrap_or(u64::MAX), frames)
}

#[tokio::test]
async fn an_a2a_caller_follows_its_task_over_a2a_and_its_inbox_stays_empty() {
    let app = TestApp::start().await;
    let (team, client, worker) = team(&app).await;
    let helper = app.agent(&team, "helper", &[]).await;
    let send = |id: &str, task_id: Option<&str>| send_text(id, "look into it", task_id);
    let made = call(&app, &client, "worker", send("f1", None), &[]).await;
    let task_id = made["result"]["task"]["id"].as_str().expect("a task");
    // Every change that tells the originator: a question, progress, a handoff, the end.
    app.task_action(
        &worker,
        task_id,
        "clarifications",
        json!({"question": "Which?"}),
    )
    .await
    .expect_status(201);
    call(&app, &client, "worker", send("f2", Some(task_id)), &[]).await;
    app.task_action(&worker, task_id, "result", json!({"status": "in-progress"}))
        .await
        .expect_status(200);
    app.task_action(
        &worker,
        task_id,
        "handoff",
        json!({"new_agent_id": "helper", "reason": "hers"}),
    )
    .await
    .expect_status(200);
    app.task_action(&helper, task_id, "result", json!({"status": "success"}))
        .await
        .expect_status(200);
    let got = call(
        &app,
        &client,
        "worker",
        rpc_body("GetTask", json!({"id": task_id})),
        &[],
    )
    .await;
    assert_eq!(got["result"]["status"]["state"], "TASK_STATE_COMPLETED");
    // The client saw all of it over A2A; nothing piled up unread in its inbox.
    assert_eq!(inbox(&app, &client).await, (0, Vec::new()));
    // The agents that work on it are told as always.
    let (_, to_worker) = inbox(&app, &worker).await;
    assert_eq!(
        to_worker,
        [
            "TaskRequest",
            "ClarificationResponse",
            "HandoffNotification"
        ]
    );
    let (_, to_helper) = inbox(&app, &helper).await;
    assert_eq!(to_helper, ["TaskRequest", "HandoffNotification"]);
    // The same agent submitting over REST follows by its inbox.
    app.submit(&client, json!({"target_agent_id": "worker"}))
        .await
        .expect_status(201);
    assert_eq!(
        inbox(&app, &client).await,
        (1, vec!["TaskResponse".to_owned()])
    );
}
