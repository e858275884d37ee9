//! Who may do what, what is refused, and which callbacks are allowed.

use super::*;

/// The team of these rules: A originates, B is assigned, C takes over, D is a bystander
/// until it is handed the task.
struct Cast {
    app: TestApp,
    a: Agent,
    b: Agent,
    c: Agent,
    d: Agent,
}

/// How many events a task detail lists.
fn events(res: &Res) -> usize {
    res.body["events"].as_array().map_or(0, Vec::len)
}

/// Wrong parties, strangers and impossible handoffs are refused and change nothing.
async fn wrong_parties_are_refused(x: &Cast) {
    let before = events(&x.app.task(&x.a, "t").await);
    // Answering a question nobody asked.
    x.app
        .task_action(
            &x.a,
            "t",
            "clarifications/clar_x/answer",
            json!({"answer": "?"}),
        )
        .await
        .expect_error(409, "INVALID_TASK_TRANSITION");
    // The wrong party for each action.
    x.app
        .task_action(&x.a, "t", "result", json!({"status": "success"}))
        .await
        .expect_error(403, "FORBIDDEN");
    x.app
        .task_action(&x.a, "t", "clarifications", json!({"question": "?"}))
        .await
        .expect_error(403, "FORBIDDEN");
    x.app
        .task_action(&x.b, "t", "cancel", json!({}))
        .await
        .expect_error(403, "FORBIDDEN");
    // A stranger cannot see the task, let alone hand it off.
    x.app
        .task_action(
            &x.d,
            "t",
            "handoff",
            json!({"new_agent_id": "C", "reason": "mine"}),
        )
        .await
        .expect_error(404, "TASK_NOT_FOUND");
    x.app
        .task(&x.d, "t")
        .await
        .expect_error(404, "TASK_NOT_FOUND");
    // Handoffs to nobody, to the current assignee, or with a wrong belief about it.
    x.app
        .task_action(
            &x.b,
            "t",
            "handoff",
            json!({"new_agent_id": "zed", "reason": "r"}),
        )
        .await
        .expect_error(404, "AGENT_NOT_FOUND");
    x.app
        .task_action(
            &x.b,
            "t",
            "handoff",
            json!({"new_agent_id": "B", "reason": "r"}),
        )
        .await
        .expect_error(409, "INVALID_TASK_TRANSITION");
    x.app
        .task_action(
            &x.a,
            "t",
            "handoff",
            json!({"new_agent_id": "C", "reason": "r", "current_agent_id": "D"}),
        )
        .await
        .expect_error(409, "INVALID_TASK_TRANSITION");
    x.app
        .task_action(&x.b, "t", "handoff", json!({"new_agent_id": "C"}))
        .await
        .expect_invalid("reason");
    assert_eq!(
        events(&x.app.task(&x.a, "t").await),
        before,
        "nothing changed"
    );
}

/// One open question at a time; answers must match it; no progress while waiting.
async fn clarification_rules(x: &Cast) {
    // One open question at a time; answers must match it; no progress while waiting.
    let asked = x
        .app
        .task_action(&x.b, "t", "clarifications", json!({"question": "which?"}))
        .await
        .expect_status(201);
    let cid = asked.body["task"]["open_clarification"]["clarification_id"]
        .as_str()
        .expect("id")
        .to_owned();
    x.app
        .task_action(&x.b, "t", "clarifications", json!({"question": "again?"}))
        .await
        .expect_error(409, "INVALID_TASK_TRANSITION");
    x.app
        .task_action(
            &x.a,
            "t",
            "clarifications/clar_other/answer",
            json!({"answer": "x"}),
        )
        .await
        .expect_error(409, "INVALID_TASK_TRANSITION");
    x.app
        .task_action(&x.b, "t", "result", json!({"status": "in-progress"}))
        .await
        .expect_error(409, "INVALID_TASK_TRANSITION");
    x.app
        .task_action(
            &x.b,
            "t",
            &format!("clarifications/{cid}/answer"),
            json!({"answer": "x"}),
        )
        .await
        .expect_error(403, "FORBIDDEN");
    x.app
        .task_action(
            &x.a,
            "t",
            &format!("clarifications/{cid}/answer"),
            json!({"answer": ""}),
        )
        .await
        .expect_invalid("answer");
    x.app
        .task_action(
            &x.a,
            "t",
            &format!("clarifications/{cid}/answer"),
            json!({"answer": "this"}),
        )
        .await
        .expect_status(200);
    // The same question cannot be answered twice.
    x.app
        .task_action(
            &x.a,
            "t",
            &format!("clarifications/{cid}/answer"),
            json!({"answer": "that"}),
        )
        .await
        .expect_error(409, "INVALID_TASK_TRANSITION");
}

/// After a handoff the former assignee may read but not act.
async fn former_assignee_only_reads(x: &Cast) {
    // After a handoff the former assignee may read but not act.
    x.app
        .task_action(
            &x.b,
            "t",
            "handoff",
            json!({"new_agent_id": "C", "reason": "r"}),
        )
        .await
        .expect_status(200);
    x.app.task(&x.b, "t").await.expect_status(200);
    x.app
        .task_action(&x.b, "t", "result", json!({"status": "success"}))
        .await
        .expect_error(403, "FORBIDDEN");
    x.app
        .task_action(
            &x.b,
            "t",
            "handoff",
            json!({"new_agent_id": "D", "reason": "r"}),
        )
        .await
        .expect_error(403, "FORBIDDEN");
}

/// A finished task accepts nothing.
async fn finished_task_accepts_nothing(x: &Cast) {
    // A finished task accepts nothing.
    x.app
        .task_action(
            &x.c,
            "t",
            "result",
            json!({"status": "failed", "result_data": {"why": "no"}}),
        )
        .await
        .expect_status(200);
    let finished = events(&x.app.task(&x.a, "t").await);
    x.app
        .task_action(&x.c, "t", "result", json!({"status": "success"}))
        .await
        .expect_error(409, "INVALID_TASK_TRANSITION");
    x.app
        .task_action(&x.a, "t", "cancel", json!({}))
        .await
        .expect_error(409, "INVALID_TASK_TRANSITION");
    x.app
        .task_action(
            &x.a,
            "t",
            "handoff",
            json!({"new_agent_id": "D", "reason": "r"}),
        )
        .await
        .expect_error(409, "INVALID_TASK_TRANSITION");
    x.app
        .task_action(&x.c, "t", "clarifications", json!({"question": "late?"}))
        .await
        .expect_error(409, "INVALID_TASK_TRANSITION");
    let detail = x.app.task(&x.a, "t").await.expect_status(200);
    assert_eq!(events(&detail), finished, "refusals change nothing");
    assert_eq!(detail.body["task"]["status"], "failed");
}

/// Cancel by the originator tells the assignee.
async fn cancel_tells_the_assignee(x: &Cast) {
    // Cancel by the originator tells the assignee.
    x.app
        .submit(&x.a, json!({"task_id": "u", "target_agent_id": "D"}))
        .await
        .expect_status(201);
    let canceled = x
        .app
        .task_action(&x.a, "u", "cancel", json!({"reason": "not needed"}))
        .await
        .expect_status(200);
    assert_eq!(canceled.body["task"]["status"], "canceled");
    let inbox = x.app.inbox(&x.d, "?kinds=task").await.expect_status(200);
    let last = &inbox.body["messages"][0]["content"]["data"];
    assert_eq!(last["type"], "TaskResponse");
    assert_eq!(last["result_data"]["canceled"], true);
    assert_eq!(last["result_data"]["reason"], "not needed");
}

#[tokio::test]
async fn illegal_transitions_are_refused_and_change_nothing() {
    let app = app().await;
    let team = app.team("rules").await;
    let a = app.agent(&team, "A", &[]).await;
    let b = app.agent(&team, "B", &["x"]).await;
    let c = app.agent(&team, "C", &["y"]).await;
    let d = app.agent(&team, "D", &["z"]).await;
    app.submit(&a, json!({"task_id": "t", "target_agent_id": "B"}))
        .await
        .expect_status(201);
    let cast = Cast { app, a, b, c, d };
    wrong_parties_are_refused(&cast).await;
    clarification_rules(&cast).await;
    former_assignee_only_reads(&cast).await;
    finished_task_accepts_nothing(&cast).await;
    cancel_tells_the_assignee(&cast).await;
    cast.app.stop().await;
}

#[tokio::test]
async fn task_requests_are_validated() {
    let app = app().await;
    let team = app.team("valid").await;
    let a = app.agent(&team, "A", &[]).await;
    let _b = app.agent(&team, "B", &["x"]).await;
    app.submit(&a, json!({"task_id": "dup", "target_agent_id": "B"}))
        .await
        .expect_status(201);
    app.submit(&a, json!({"task_id": "dup", "target_agent_id": "B"}))
        .await
        .expect_error(409, "CONFLICT");
    app.submit(&a, json!({"task_id": "bad id"}))
        .await
        .expect_invalid("task_id");
    app.submit(&a, json!({"description": " "}))
        .await
        .expect_invalid("description");
    app.submit(&a, json!({"description": "x".repeat(2001)}))
        .await
        .expect_error(400, "MESSAGE_TOO_LONG");
    app.submit(&a, json!({"originating_agent_id": "B"}))
        .await
        .expect_error(403, "FORBIDDEN");
    let many: Vec<String> = (0..33).map(|i| format!("c{i}")).collect();
    app.submit(&a, json!({"required_capabilities": many}))
        .await
        .expect_invalid("required_capabilities");
    app.submit(&a, json!({"priority": "whenever"}))
        .await
        .expect_invalid("priority");
    app.submit(&a, json!({"surprise": 1}))
        .await
        .expect_invalid("surprise");
    app.submit(&a, json!({"callback_url": "ftp://example.com/x"}))
        .await
        .expect_invalid("callback_url");
    app.submit(&a, json!({"callback_url": "nobody"}))
        .await
        .expect_error(404, "AGENT_NOT_FOUND");
    // The team key submits no work (it is not an agent).
    app.post("/v1/tasks")
        .token(&team.key)
        .json(json!({"description": "work", "originating_agent_id": "A"}))
        .send()
        .await
        .expect_error(403, "FORBIDDEN");
    app.post("/v1/tasks")
        .json(json!({"description": "work", "originating_agent_id": "A"}))
        .send()
        .await
        .expect_error(401, "UNAUTHORIZED");
    app.task_action(&a, "dup", "result", json!({"status": "done"}))
        .await
        .expect_invalid("status");
    app.task_action(&a, "missing", "cancel", json!({}))
        .await
        .expect_error(404, "TASK_NOT_FOUND");
    app.get("/v1/tasks?limit=0")
        .token(&a.token)
        .send()
        .await
        .expect_invalid("limit");
    app.get("/v1/tasks?cursor=zzz")
        .token(&a.token)
        .send()
        .await
        .expect_invalid("cursor");
    app.get("/v1/tasks?status=sleeping")
        .token(&a.token)
        .send()
        .await
        .expect_invalid("status");
    app.stop().await;
}

#[tokio::test]
async fn private_callback_addresses_are_refused_by_default() {
    let app = TestApp::start().await;
    let team = app.team("private").await;
    let a = app.agent(&team, "A", &[]).await;
    let _b = app.agent(&team, "B", &["x"]).await;
    for url in [
        "http://127.0.0.1:9/hook",
        "http://localhost:8080/hook",
        "http://10.0.0.5/hook",
        "http://169.254.169.254/latest/meta-data",
        "http://[::1]:9/hook",
    ] {
        let refused = app
            .submit(&a, json!({"callback_url": url}))
            .await
            .expect_invalid("callback_url");
        assert!(
            refused.body["suggested_action"]
                .as_str()
                .is_some_and(|s| s.contains("--allow-private-callbacks")),
            "{:#}",
            refused.body
        );
    }
    app.stop().await;
}

#[tokio::test]
async fn a_callback_to_an_agent_is_pushed_to_it() {
    let app = app().await;
    let team = app.team("agentcb").await;
    let a = app.agent(&team, "A", &[]).await;
    let b = app.agent(&team, "B", &["x"]).await;
    let watcher = app.agent(&team, "W", &[]).await;
    let mut w_ws = app.ws(&watcher, "").await;
    app.submit(
        &a,
        json!({"task_id": "w", "target_agent_id": "B", "callback_url": "W"}),
    )
    .await
    .expect_status(201);
    let first = w_ws.next_of("CallbackNotification").await;
    assert_eq!(first["status"], "in-progress");
    assert_eq!(first["sent_to"], "W");
    app.task_action(
        &b,
        "w",
        "result",
        json!({"status": "success", "result_data": 42}),
    )
    .await
    .expect_status(200);
    let last = w_ws.next_of("CallbackNotification").await;
    assert_eq!(last["status"], "complete");
    assert_eq!(last["result_data"], 42);
    assert_eq!(last["event_seq"], 2);
    app.stop().await;
}
