//! The task protocol end to end: submission and assignment, clarification rounds,
//! handoff, results, cancel, signed callbacks to a real HTTP receiver, the registry by
//! message, illegal transitions, restarts and team isolation.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use hmac::{Hmac, Mac};
use serde_json::{Value, json};
use sha2::Sha256;

use crate::support::{Agent, Res, Team, TestApp};

/// A callback receiver: records every POST; answers 503 while `failures` is above zero
/// (counting down), 200 afterwards.
#[derive(Clone, Default)]
struct Receiver {
    calls: Arc<Mutex<Vec<(HeaderMap, String, u16)>>>,
    failures: Arc<Mutex<u32>>,
}

impl Receiver {
    /// Starts it on an ephemeral port; returns its URL.
    async fn start(&self) -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let app = axum::Router::new()
            .route("/hook", axum::routing::post(receive))
            .with_state(self.clone());
        tokio::spawn(async move { axum::serve(listener, app).await });
        format!("http://{addr}/hook")
    }

    fn fail_next(&self, n: u32) {
        *self.failures.lock().expect("lock") = n;
    }

    /// Bodies of the accepted (200) calls.
    fn delivered(&self) -> Vec<Value> {
        self.calls
            .lock()
            .expect("lock")
            .iter()
            .filter(|(_, _, status)| *status == 200)
            .map(|(_, body, _)| serde_json::from_str(body).expect("JSON body"))
            .collect()
    }

    fn calls(&self) -> Vec<(HeaderMap, String, u16)> {
        self.calls.lock().expect("lock").clone()
    }

    /// Waits until `n` callbacks were accepted.
    async fn wait_for(&self, n: usize) -> Vec<Value> {
        for _ in 0..400 {
            let delivered = self.delivered();
            if delivered.len() >= n {
                return delivered;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        panic!("expected {n} callbacks, got {:?}", self.delivered());
    }
}

async fn receive(State(r): State<Receiver>, headers: HeaderMap, body: String) -> StatusCode {
    let status = {
        let mut failures = r.failures.lock().expect("lock");
        if *failures > 0 {
            *failures -= 1;
            503
        } else {
            200
        }
    };
    r.calls.lock().expect("lock").push((headers, body, status));
    StatusCode::from_u16(status).expect("status")
}

/// Verifies `Switchboard-Signature: t=…,v1=…` the way the README tells receivers to.
fn verify(secret: &str, headers: &HeaderMap, body: &str) -> bool {
    let Some(header) = headers
        .get("switchboard-signature")
        .and_then(|v| v.to_str().ok())
    else {
        return false;
    };
    let mut t = None;
    let mut v1 = None;
    for part in header.split(',') {
        match part.split_once('=') {
            Some(("t", value)) => t = Some(value.to_owned()),
            Some(("v1", value)) => v1 = Some(value.to_owned()),
            _ => {}
        }
    }
    let (Some(t), Some(v1)) = (t, v1) else {
        return false;
    };
    let Ok(expected) = hex::decode(v1) else {
        return false;
    };
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("key");
    mac.update(format!("{t}.{body}").as_bytes());
    mac.verify_slice(&expected).is_ok()
}

/// A server that calls private addresses and retries callbacks quickly.
async fn app() -> TestApp {
    TestApp::start_with(|c| {
        c.callbacks.allow_private = true;
        c.callbacks.retry_base = Duration::from_millis(20);
    })
    .await
}

impl TestApp {
    async fn submit(&self, from: &Agent, fields: Value) -> Res {
        let mut body = json!({"description": "do the thing", "originating_agent_id": from.id});
        crate::support::merge(&mut body, fields);
        self.post("/v1/tasks")
            .token(&from.token)
            .json(body)
            .send()
            .await
    }

    async fn task_action(&self, who: &Agent, task_id: &str, action: &str, body: Value) -> Res {
        self.post(&format!("/v1/tasks/{task_id}/{action}"))
            .token(&who.token)
            .json(body)
            .send()
            .await
    }

    async fn task(&self, who: &Agent, task_id: &str) -> Res {
        self.get(&format!("/v1/tasks/{task_id}"))
            .token(&who.token)
            .send()
            .await
    }

    async fn secret(&self, team: &Team) -> String {
        self.get(&format!("/v1/teams/{}/callback-secret", team.id))
            .token(&team.key)
            .send()
            .await
            .expect_status(200)
            .str("secret")
    }
}

fn kinds(detail: &Value) -> Vec<String> {
    detail["events"]
        .as_array()
        .expect("events")
        .iter()
        .map(|e| e["kind"].as_str().expect("kind").to_owned())
        .collect()
}

#[tokio::test]
async fn the_whole_story_over_rest_and_websocket_with_signed_callbacks() {
    let app = app().await;
    let receiver = Receiver::default();
    let hook = receiver.start().await;
    // The receiver is down for the first two attempts.
    receiver.fail_next(2);
    let team = app.team("story").await;
    let a = app.agent(&team, "A", &["planning"]).await;
    let b = app.agent(&team, "B", &["summarise"]).await;
    let c = app.agent(&team, "C", &["review"]).await;
    let _d = app.agent(&team, "D", &[]).await;
    let mut a_ws = app.ws(&a, "").await;
    let mut b_ws = app.ws(&b, "").await;

    // A submits; B is chosen by capability.
    let submitted = app
        .submit(
            &a,
            json!({
                "task_id": "t-1",
                "description": "Summarise the incident reports",
                "data": {"reports": 3},
                "callback_url": hook,
                "priority": "high",
                "required_capabilities": ["Summarise"],
            }),
        )
        .await
        .expect_status(201);
    assert_eq!(submitted.body["success"], true);
    assert_eq!(submitted.body["task_response"]["status"], "in-progress");
    assert_eq!(submitted.body["task_response"]["agent_id"], "B");
    assert_eq!(submitted.body["task"]["assignee_agent_id"], "B");
    assert_eq!(submitted.body["error_message"], Value::Null);

    let request = b_ws.next_of("TaskRequest").await;
    assert_eq!(request["task_id"], "t-1");
    assert_eq!(request["description"], "Summarise the incident reports");
    assert_eq!(request["data"]["reports"], 3);
    assert_eq!(request["originating_agent_id"], "A");
    assert_eq!(request["callback_url"], hook.as_str());
    assert_eq!(request["priority"], "high");
    assert!(request["seq"].as_i64().is_some(), "{request}");
    let assigned = a_ws.next_of("TaskResponse").await;
    assert_eq!(assigned["status"], "in-progress");
    assert_eq!(assigned["agent_id"], "B");

    // B asks for clarification over the socket; A gets the question.
    let reply = b_ws
        .call(
            "ClarificationRequest",
            json!({"task_id": "t-1", "question": "Which quarter?", "requested_by": "B"}),
        )
        .await;
    assert_eq!(reply["ok"], true, "{reply}");
    assert_eq!(reply["result"]["task"]["status"], "input-required");
    let question = a_ws.next_of("ClarificationRequest").await;
    assert_eq!(question["question"], "Which quarter?");
    assert_eq!(question["requested_by"], "B");
    let clarification_id = question["clarification_id"]
        .as_str()
        .expect("id")
        .to_owned();
    assert_eq!(
        reply["result"]["task"]["open_clarification"]["clarification_id"],
        clarification_id.as_str()
    );

    // A answers over REST; B gets the answer and the task resumes with it in context.
    let answered = app
        .task_action(
            &a,
            "t-1",
            &format!("clarifications/{clarification_id}/answer"),
            json!({"answer": "Q3"}),
        )
        .await
        .expect_status(200);
    assert_eq!(answered.body["task"]["status"], "in-progress");
    assert_eq!(answered.body["task"]["context"][0]["answer"], "Q3");
    assert_eq!(
        answered.body["task"]["context"][0]["question"],
        "Which quarter?"
    );
    let answer = b_ws.next_of("ClarificationResponse").await;
    assert_eq!(answer["answer"], "Q3");
    assert_eq!(answer["response_provided_by"], "A");
    assert_eq!(answer["clarification_id"], clarification_id.as_str());

    // B hands off to C.
    let handed = app
        .task_action(
            &b,
            "t-1",
            "handoff",
            json!({"new_agent_id": "C", "reason": "C reviews these"}),
        )
        .await
        .expect_status(200);
    assert_eq!(handed.body["task"]["assignee_agent_id"], "C");
    for ws in [&mut a_ws, &mut b_ws] {
        let note = ws.next_of("HandoffNotification").await;
        assert_eq!(note["current_agent_id"], "B");
        assert_eq!(note["new_agent_id"], "C");
        assert_eq!(note["reason"], "C reviews these");
    }
    // C was offline: it gets the TaskRequest (with the context so far) on connecting.
    let (mut c_ws, replayed, _) = app.ws_caught_up(&c, "?since=0").await;
    let types: Vec<&str> = replayed
        .iter()
        .map(|f| f["type"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(
        types,
        ["TaskRequest", "HandoffNotification"],
        "{replayed:?}"
    );
    assert_eq!(replayed[0]["context"][0]["answer"], "Q3");
    assert_eq!(replayed[0]["assignee_agent_id"], "C");

    // C reports progress over the socket, then success over REST.
    let progress = c_ws
        .call(
            "TaskResponse",
            json!({"task_id": "t-1", "status": "in-progress", "result_data": {"done": 1}, "agent_id": "C"}),
        )
        .await;
    assert_eq!(progress["ok"], true, "{progress}");
    let update = a_ws.next_of("TaskResponse").await;
    assert_eq!(
        (update["status"].as_str(), update["agent_id"].as_str()),
        (Some("in-progress"), Some("C"))
    );
    assert_eq!(update["result_data"]["done"], 1);
    let done = app
        .task_action(
            &c,
            "t-1",
            "result",
            json!({"status": "success", "result_data": {"summary": "all good"}}),
        )
        .await
        .expect_status(200);
    assert_eq!(done.body["task"]["status"], "success");
    let result = a_ws.next_of("TaskResponse").await;
    assert_eq!(result["status"], "success");
    assert_eq!(result["result_data"]["summary"], "all good");

    // The history, readable by the originator and every assignee, past or present.
    let detail = app.task(&a, "t-1").await.expect_status(200);
    assert_eq!(
        kinds(&detail.body),
        [
            "submitted",
            "clarification_requested",
            "clarification_answered",
            "handed_off",
            "progress",
            "succeeded"
        ]
    );
    let seqs: Vec<i64> = detail.body["events"]
        .as_array()
        .expect("events")
        .iter()
        .map(|e| e["seq"].as_i64().expect("seq"))
        .collect();
    assert_eq!(seqs, [1, 2, 3, 4, 5, 6]);
    assert_eq!(detail.body["events"][3]["agent_id"], "B");
    assert_eq!(detail.body["task"]["result_data"]["summary"], "all good");
    app.task(&b, "t-1").await.expect_status(200);
    app.task(&c, "t-1").await.expect_status(200);

    // Every status change reached the receiver, in order, signed with the team secret.
    let delivered = receiver.wait_for(6).await;
    let order: Vec<(i64, &str, &str)> = delivered
        .iter()
        .map(|b| {
            (
                b["event_seq"].as_i64().unwrap_or(0),
                b["event"].as_str().unwrap_or(""),
                b["status"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(
        order,
        [
            (1, "submitted", "in-progress"),
            (2, "clarification_requested", "in-progress"),
            (3, "clarification_answered", "in-progress"),
            (4, "handed_off", "in-progress"),
            (5, "progress", "in-progress"),
            (6, "succeeded", "complete"),
        ]
    );
    for body in &delivered {
        assert_eq!(body["type"], "CallbackNotification");
        assert_eq!(body["task_id"], "t-1");
        assert_eq!(body["sent_to"], hook.as_str());
    }
    assert_eq!(delivered[5]["result_data"]["summary"], "all good");
    let secret = app.secret(&team).await;
    let calls = receiver.calls();
    assert_eq!(calls.len(), 8, "two refused attempts, then six deliveries");
    for (headers, body, _) in &calls {
        assert!(
            verify(&secret, headers, body),
            "signature must verify: {headers:?}"
        );
        assert!(!verify("whsec_wrong", headers, body));
    }
    // The delivery outcome is recorded on the task.
    let mut detail = app.task(&a, "t-1").await.expect_status(200);
    for _ in 0..100 {
        if detail.body["task"]["callback_delivery"]["state"] == "delivered" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
        detail = app.task(&a, "t-1").await.expect_status(200);
    }
    assert_eq!(
        detail.body["task"]["callback_delivery"]["state"],
        "delivered"
    );
    assert_eq!(detail.body["task"]["callback_delivery"]["event_seq"], 6);
    let callbacks = detail.body["callbacks"].as_array().expect("callbacks");
    assert_eq!(callbacks.len(), 6);
    assert_eq!(callbacks[0]["attempts"], 3);
    assert_eq!(callbacks[0]["last_status"], 200);
    assert!(callbacks.iter().all(|c| c["state"] == "delivered"));
    app.stop().await;
}

#[tokio::test]
async fn nobody_suitable_fails_the_task_with_an_error_message() {
    let app = app().await;
    let team = app.team("nobody").await;
    let a = app.agent(&team, "A", &[]).await;
    let _b = app.agent(&team, "B", &["python"]).await;

    let failed = app
        .submit(
            &a,
            json!({"task_id": "q", "required_capabilities": ["quantum"]}),
        )
        .await
        .expect_status(201);
    assert_eq!(failed.body["success"], false);
    assert_eq!(failed.body["task_response"]["status"], "failed");
    assert_eq!(
        failed.body["error_message"]["error_code"],
        "NO_SUITABLE_AGENT"
    );
    assert_eq!(failed.body["error_message"]["task_id"], "q");
    assert_eq!(failed.body["error_message"]["originating_agent_id"], "A");
    assert!(
        failed.body["error_message"]["error_message"]
            .as_str()
            .is_some_and(|m| m.contains("quantum"))
    );
    assert_eq!(failed.body["task"]["status"], "failed");
    assert_eq!(failed.body["task"]["assignee_agent_id"], Value::Null);
    let detail = app.task(&a, "q").await.expect_status(200);
    assert_eq!(kinds(&detail.body), ["assignment_failed"]);
    // The originator's inbox holds the TaskResponse and the ErrorMessage.
    let inbox = app
        .inbox(&a, "?kinds=task&sort_order=oldest_first")
        .await
        .expect_status(200);
    let types: Vec<&str> = inbox.body["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .map(|m| m["content"]["data"]["type"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(types, ["TaskResponse", "ErrorMessage"]);

    // A named target that does not accept tasks fails the same way.
    app.patch(&format!("/v1/teams/{}/agents/B", team.id))
        .token(&team.key)
        .json(json!({"status": "unavailable"}))
        .send()
        .await
        .expect_status(200);
    let busy = app
        .submit(&a, json!({"target_agent_id": "B"}))
        .await
        .expect_status(201);
    assert_eq!(
        busy.body["error_message"]["error_code"],
        "NO_SUITABLE_AGENT"
    );
    // Nobody else is available at all.
    let alone = app.submit(&a, json!({})).await.expect_status(201);
    assert_eq!(alone.body["task"]["status"], "failed");
    // An unknown target is a plain error, and nothing is stored.
    app.submit(&a, json!({"task_id": "ghost", "target_agent_id": "nobody"}))
        .await
        .expect_error(404, "AGENT_NOT_FOUND");
    app.task(&a, "ghost")
        .await
        .expect_error(404, "TASK_NOT_FOUND");
    app.stop().await;
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
    let events = |res: &Res| res.body["events"].as_array().map_or(0, Vec::len);
    let before = events(&app.task(&a, "t").await);

    // Answering a question nobody asked.
    app.task_action(
        &a,
        "t",
        "clarifications/clar_x/answer",
        json!({"answer": "?"}),
    )
    .await
    .expect_error(409, "INVALID_TASK_TRANSITION");
    // The wrong party for each action.
    app.task_action(&a, "t", "result", json!({"status": "success"}))
        .await
        .expect_error(403, "FORBIDDEN");
    app.task_action(&a, "t", "clarifications", json!({"question": "?"}))
        .await
        .expect_error(403, "FORBIDDEN");
    app.task_action(&b, "t", "cancel", json!({}))
        .await
        .expect_error(403, "FORBIDDEN");
    // A stranger cannot see the task, let alone hand it off.
    app.task_action(
        &d,
        "t",
        "handoff",
        json!({"new_agent_id": "C", "reason": "mine"}),
    )
    .await
    .expect_error(404, "TASK_NOT_FOUND");
    app.task(&d, "t").await.expect_error(404, "TASK_NOT_FOUND");
    // Handoffs to nobody, to the current assignee, or with a wrong belief about it.
    app.task_action(
        &b,
        "t",
        "handoff",
        json!({"new_agent_id": "zed", "reason": "r"}),
    )
    .await
    .expect_error(404, "AGENT_NOT_FOUND");
    app.task_action(
        &b,
        "t",
        "handoff",
        json!({"new_agent_id": "B", "reason": "r"}),
    )
    .await
    .expect_error(409, "INVALID_TASK_TRANSITION");
    app.task_action(
        &a,
        "t",
        "handoff",
        json!({"new_agent_id": "C", "reason": "r", "current_agent_id": "D"}),
    )
    .await
    .expect_error(409, "INVALID_TASK_TRANSITION");
    app.task_action(&b, "t", "handoff", json!({"new_agent_id": "C"}))
        .await
        .expect_invalid("reason");
    assert_eq!(events(&app.task(&a, "t").await), before, "nothing changed");

    // One open question at a time; answers must match it; no progress while waiting.
    let asked = app
        .task_action(&b, "t", "clarifications", json!({"question": "which?"}))
        .await
        .expect_status(201);
    let cid = asked.body["task"]["open_clarification"]["clarification_id"]
        .as_str()
        .expect("id")
        .to_owned();
    app.task_action(&b, "t", "clarifications", json!({"question": "again?"}))
        .await
        .expect_error(409, "INVALID_TASK_TRANSITION");
    app.task_action(
        &a,
        "t",
        "clarifications/clar_other/answer",
        json!({"answer": "x"}),
    )
    .await
    .expect_error(409, "INVALID_TASK_TRANSITION");
    app.task_action(&b, "t", "result", json!({"status": "in-progress"}))
        .await
        .expect_error(409, "INVALID_TASK_TRANSITION");
    app.task_action(
        &b,
        "t",
        &format!("clarifications/{cid}/answer"),
        json!({"answer": "x"}),
    )
    .await
    .expect_error(403, "FORBIDDEN");
    app.task_action(
        &a,
        "t",
        &format!("clarifications/{cid}/answer"),
        json!({"answer": ""}),
    )
    .await
    .expect_invalid("answer");
    app.task_action(
        &a,
        "t",
        &format!("clarifications/{cid}/answer"),
        json!({"answer": "this"}),
    )
    .await
    .expect_status(200);
    // The same question cannot be answered twice.
    app.task_action(
        &a,
        "t",
        &format!("clarifications/{cid}/answer"),
        json!({"answer": "that"}),
    )
    .await
    .expect_error(409, "INVALID_TASK_TRANSITION");

    // After a handoff the former assignee may read but not act.
    app.task_action(
        &b,
        "t",
        "handoff",
        json!({"new_agent_id": "C", "reason": "r"}),
    )
    .await
    .expect_status(200);
    app.task(&b, "t").await.expect_status(200);
    app.task_action(&b, "t", "result", json!({"status": "success"}))
        .await
        .expect_error(403, "FORBIDDEN");
    app.task_action(
        &b,
        "t",
        "handoff",
        json!({"new_agent_id": "D", "reason": "r"}),
    )
    .await
    .expect_error(403, "FORBIDDEN");

    // A finished task accepts nothing.
    app.task_action(
        &c,
        "t",
        "result",
        json!({"status": "failed", "result_data": {"why": "no"}}),
    )
    .await
    .expect_status(200);
    let finished = events(&app.task(&a, "t").await);
    app.task_action(&c, "t", "result", json!({"status": "success"}))
        .await
        .expect_error(409, "INVALID_TASK_TRANSITION");
    app.task_action(&a, "t", "cancel", json!({}))
        .await
        .expect_error(409, "INVALID_TASK_TRANSITION");
    app.task_action(
        &a,
        "t",
        "handoff",
        json!({"new_agent_id": "D", "reason": "r"}),
    )
    .await
    .expect_error(409, "INVALID_TASK_TRANSITION");
    app.task_action(&c, "t", "clarifications", json!({"question": "late?"}))
        .await
        .expect_error(409, "INVALID_TASK_TRANSITION");
    let detail = app.task(&a, "t").await.expect_status(200);
    assert_eq!(events(&detail), finished, "refusals change nothing");
    assert_eq!(detail.body["task"]["status"], "failed");

    // Cancel by the originator tells the assignee.
    app.submit(&a, json!({"task_id": "u", "target_agent_id": "D"}))
        .await
        .expect_status(201);
    let canceled = app
        .task_action(&a, "u", "cancel", json!({"reason": "not needed"}))
        .await
        .expect_status(200);
    assert_eq!(canceled.body["task"]["status"], "canceled");
    let inbox = app.inbox(&d, "?kinds=task").await.expect_status(200);
    let last = &inbox.body["messages"][0]["content"]["data"];
    assert_eq!(last["type"], "TaskResponse");
    assert_eq!(last["result_data"]["canceled"], true);
    assert_eq!(last["result_data"]["reason"], "not needed");
    app.stop().await;
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

#[tokio::test]
async fn a_restart_in_the_middle_loses_neither_the_task_nor_its_callbacks() {
    let mut app = app().await;
    let receiver = Receiver::default();
    let hook = receiver.start().await;
    // Down until after the restart.
    receiver.fail_next(u32::MAX);
    let team = app.team("restart").await;
    let a = app.agent(&team, "A", &[]).await;
    let b = app.agent(&team, "B", &["x"]).await;
    app.submit(
        &a,
        json!({"task_id": "r", "required_capabilities": ["x"], "callback_url": hook}),
    )
    .await
    .expect_status(201);
    let asked = app
        .task_action(&b, "r", "clarifications", json!({"question": "how?"}))
        .await
        .expect_status(201);
    let cid = asked.body["task"]["open_clarification"]["clarification_id"]
        .as_str()
        .expect("id")
        .to_owned();

    app.restart().await;
    receiver.fail_next(0);

    let task = app.task(&a, "r").await.expect_status(200);
    assert_eq!(task.body["task"]["status"], "input-required");
    assert_eq!(
        task.body["task"]["open_clarification"]["clarification_id"],
        cid.as_str()
    );
    app.task_action(
        &a,
        "r",
        &format!("clarifications/{cid}/answer"),
        json!({"answer": "so"}),
    )
    .await
    .expect_status(200);
    app.task_action(&b, "r", "result", json!({"status": "success"}))
        .await
        .expect_status(200);
    let delivered = receiver.wait_for(4).await;
    let seqs: Vec<i64> = delivered
        .iter()
        .map(|b| b["event_seq"].as_i64().unwrap_or(0))
        .collect();
    assert_eq!(
        seqs,
        [1, 2, 3, 4],
        "queued callbacks survived the restart, in order"
    );
    // B's inbox still has the TaskRequest and the answer after the restart.
    let inbox = app
        .inbox(&b, "?kinds=task&sort_order=oldest_first")
        .await
        .expect_status(200);
    let types: Vec<&str> = inbox.body["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .map(|m| m["content"]["data"]["type"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(types, ["TaskRequest", "ClarificationResponse"]);
    app.stop().await;
}

#[tokio::test]
async fn a_callback_that_never_succeeds_is_given_up_and_recorded() {
    let app = TestApp::start_with(|c| {
        c.callbacks.allow_private = true;
        c.callbacks.retry_base = Duration::from_millis(10);
        c.callbacks.max_attempts = 3;
    })
    .await;
    let receiver = Receiver::default();
    let hook = receiver.start().await;
    receiver.fail_next(u32::MAX);
    let team = app.team("giveup").await;
    let a = app.agent(&team, "A", &[]).await;
    let _b = app.agent(&team, "B", &["x"]).await;
    app.submit(
        &a,
        json!({"task_id": "g", "target_agent_id": "B", "callback_url": hook}),
    )
    .await
    .expect_status(201);
    let mut state = Value::Null;
    for _ in 0..200 {
        let detail = app.task(&a, "g").await.expect_status(200);
        state = detail.body["task"]["callback_delivery"].clone();
        if state["state"] == "failed" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(state["state"], "failed", "{state}");
    assert_eq!(state["attempts"], 3);
    assert_eq!(state["last_status"], 503);
    assert_eq!(receiver.calls().len(), 3);
    app.stop().await;
}

#[tokio::test]
async fn tasks_are_invisible_across_teams() {
    let app = app().await;
    let red = app.team("red").await;
    let blue = app.team("blue").await;
    let a = app.agent(&red, "A", &[]).await;
    let _b = app.agent(&red, "B", &["x"]).await;
    let eve = app.agent(&blue, "E", &["x"]).await;
    app.submit(&a, json!({"task_id": "secret", "target_agent_id": "B"}))
        .await
        .expect_status(201);
    app.task(&eve, "secret")
        .await
        .expect_error(404, "TASK_NOT_FOUND");
    app.task_action(&eve, "secret", "cancel", json!({}))
        .await
        .expect_error(404, "TASK_NOT_FOUND");
    // Another team's agents cannot be targets or new assignees.
    app.submit(&a, json!({"target_agent_id": "E"}))
        .await
        .expect_error(404, "AGENT_NOT_FOUND");
    let listed = app
        .get("/v1/tasks")
        .token(&eve.token)
        .send()
        .await
        .expect_status(200);
    assert_eq!(listed.body["tasks"], json!([]));
    // The same task id is free in another team.
    app.submit(
        &eve,
        json!({"task_id": "secret", "required_capabilities": ["x"]}),
    )
    .await
    .expect_status(201);
    // Callback secrets are per team and need that team's key.
    app.get(&format!("/v1/teams/{}/callback-secret", blue.id))
        .token(&red.key)
        .send()
        .await
        .expect_error(403, "FORBIDDEN");
    app.get(&format!("/v1/teams/{}/callback-secret", red.id))
        .token(&a.token)
        .send()
        .await
        .expect_error(403, "FORBIDDEN");
    let red_secret = app.secret(&red).await;
    assert_ne!(red_secret, app.secret(&blue).await);
    let rotated = app
        .post(&format!("/v1/teams/{}/callback-secret", red.id))
        .token(&red.key)
        .send()
        .await
        .expect_status(200)
        .str("secret");
    assert_ne!(rotated, red_secret);
    assert_eq!(app.secret(&red).await, rotated);
    app.stop().await;
}

#[tokio::test]
async fn assignment_prefers_capability_then_connection_then_fewest_open_tasks() {
    let app = app().await;
    let team = app.team("assign").await;
    let a = app.agent(&team, "A", &[]).await;
    let b = app.agent(&team, "B", &["rust"]).await;
    let _c = app.agent(&team, "C", &["rust", "sql"]).await;
    let d = app.agent(&team, "D", &["rust"]).await;
    let assignee = |res: Res| {
        res.body["task"]["assignee_agent_id"]
            .as_str()
            .map(str::to_owned)
    };

    // The best capability match wins, connected or not.
    let mut b_ws = app.ws(&b, "").await;
    let both = app
        .submit(&a, json!({"required_capabilities": ["rust", "sql"]}))
        .await;
    assert_eq!(assignee(both).as_deref(), Some("C"));
    // Among equal matches, a connected agent wins.
    let rust = app
        .submit(&a, json!({"required_capabilities": ["rust"]}))
        .await;
    assert_eq!(assignee(rust).as_deref(), Some("B"));
    b_ws.next_of("TaskRequest").await;
    drop(b_ws);
    // Among equal matches and nobody connected: the fewest open tasks (B has one, C
    // has one, D none).
    tokio::time::sleep(Duration::from_millis(100)).await;
    let next = app
        .submit(&a, json!({"required_capabilities": ["rust"]}))
        .await;
    assert_eq!(assignee(next).as_deref(), Some("D"));
    // A busy agent is not picked.
    app.patch(&format!("/v1/teams/{}/agents/D", team.id))
        .token(&team.key)
        .json(json!({"status": "busy"}))
        .send()
        .await
        .expect_status(200);
    let skip = app
        .submit(&a, json!({"required_capabilities": ["rust"]}))
        .await;
    assert_ne!(assignee(skip).as_deref(), Some("D"));
    let _ = d;
    app.stop().await;
}

#[tokio::test]
async fn tasks_are_listed_by_role_and_status_a_page_at_a_time() {
    let app = app().await;
    let team = app.team("lists").await;
    let a = app.agent(&team, "A", &[]).await;
    let b = app.agent(&team, "B", &["x"]).await;
    for i in 0..5 {
        app.submit(
            &a,
            json!({"task_id": format!("t{i}"), "target_agent_id": "B"}),
        )
        .await
        .expect_status(201);
    }
    app.task_action(&b, "t1", "result", json!({"status": "success"}))
        .await
        .expect_status(200);
    app.submit(&b, json!({"task_id": "back", "target_agent_id": "A"}))
        .await
        .expect_status(201);
    let ids = |res: &Res| -> Vec<String> {
        res.body["tasks"]
            .as_array()
            .expect("tasks")
            .iter()
            .map(|t| t["task_id"].as_str().expect("id").to_owned())
            .collect()
    };
    let list = |query: &str, who: &Agent| {
        let path = format!("/v1/tasks{query}");
        let token = who.token.clone();
        let app = &app;
        async move { app.get(&path).token(&token).send().await.expect_status(200) }
    };
    assert_eq!(
        ids(&list("?role=originated", &a).await),
        ["t4", "t3", "t2", "t1", "t0"]
    );
    assert_eq!(ids(&list("?role=assigned", &a).await), ["back"]);
    assert_eq!(ids(&list("", &a).await).len(), 6);
    assert_eq!(
        ids(&list("?role=assigned&status=success", &b).await),
        ["t1"]
    );
    assert_eq!(
        ids(&list("?status=in-progress,input-required&role=assigned", &b).await),
        ["t4", "t3", "t2", "t0"]
    );
    // Paging walks everything once.
    let mut seen = Vec::new();
    let mut query = "?role=originated&limit=2".to_owned();
    loop {
        let page = list(&query, &a).await;
        seen.extend(ids(&page));
        match page.body["next_cursor"].as_str() {
            Some(cursor) => query = format!("?role=originated&limit=2&cursor={cursor}"),
            None => break,
        }
    }
    assert_eq!(seen, ["t4", "t3", "t2", "t1", "t0"]);
    app.stop().await;
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

    // Finding, over the WebSocket as a TaskRequest frame.
    let mut ws = app.ws(&a, "").await;
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
