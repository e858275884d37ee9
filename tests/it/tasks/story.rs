//! The whole task story over REST and the WebSocket, and a task nobody can take.

use super::*;
use crate::wsclient::Ws;

/// The cast of the story: A plans, B summarises, C reviews (and is offline until the
/// handoff), D is a bystander; A and B are connected throughout.
struct Story {
    app: TestApp,
    a: Agent,
    b: Agent,
    c: Agent,
    a_ws: Ws,
    b_ws: Ws,
}

/// Act 1: A submits with a callback; B is chosen by capability and gets the request.
async fn submit_and_assign(s: &mut Story, hook: &str) {
    let submitted = s
        .app
        .submit(
            &s.a,
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

    let request = s.b_ws.next_of("TaskRequest").await;
    assert_eq!(request["task_id"], "t-1");
    assert_eq!(request["description"], "Summarise the incident reports");
    assert_eq!(request["data"]["reports"], 3);
    assert_eq!(request["originating_agent_id"], "A");
    assert_eq!(request["callback_url"], hook);
    assert_eq!(request["priority"], "high");
    assert!(request["seq"].as_i64().is_some(), "{request}");
    let assigned = s.a_ws.next_of("TaskResponse").await;
    assert_eq!(assigned["status"], "in-progress");
    assert_eq!(assigned["agent_id"], "B");
}

/// Act 2: B asks over the socket, A answers over REST, the answer joins the context.
async fn clarify(s: &mut Story) {
    let reply = s
        .b_ws
        .call(
            "ClarificationRequest",
            json!({"task_id": "t-1", "question": "Which quarter?", "requested_by": "B"}),
        )
        .await;
    assert_eq!(reply["ok"], true, "{reply}");
    assert_eq!(reply["result"]["task"]["status"], "input-required");
    let question = s.a_ws.next_of("ClarificationRequest").await;
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

    let answered = s
        .app
        .task_action(
            &s.a,
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
    let answer = s.b_ws.next_of("ClarificationResponse").await;
    assert_eq!(answer["answer"], "Q3");
    assert_eq!(answer["response_provided_by"], "A");
    assert_eq!(answer["clarification_id"], clarification_id.as_str());
}

/// Act 3: B hands off to C, who was offline and gets the request (with the context so
/// far) on connecting. C's socket.
async fn hand_off_to_offline_c(s: &mut Story) -> Ws {
    let handed = s
        .app
        .task_action(
            &s.b,
            "t-1",
            "handoff",
            json!({"new_agent_id": "C", "reason": "C reviews these"}),
        )
        .await
        .expect_status(200);
    assert_eq!(handed.body["task"]["assignee_agent_id"], "C");
    for ws in [&mut s.a_ws, &mut s.b_ws] {
        let note = ws.next_of("HandoffNotification").await;
        assert_eq!(note["current_agent_id"], "B");
        assert_eq!(note["new_agent_id"], "C");
        assert_eq!(note["reason"], "C reviews these");
    }
    let (c_ws, replayed, _) = s.app.ws_caught_up(&s.c, "?since=0").await;
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
    c_ws
}

/// Act 4: C reports progress over the socket, then success over REST; A sees both.
async fn progress_and_success(s: &mut Story, c_ws: &mut Ws) {
    let progress = c_ws
        .call(
            "TaskResponse",
            json!({"task_id": "t-1", "status": "in-progress", "result_data": {"done": 1}, "agent_id": "C"}),
        )
        .await;
    assert_eq!(progress["ok"], true, "{progress}");
    let update = s.a_ws.next_of("TaskResponse").await;
    assert_eq!(
        (update["status"].as_str(), update["agent_id"].as_str()),
        (Some("in-progress"), Some("C"))
    );
    assert_eq!(update["result_data"]["done"], 1);
    let done = s
        .app
        .task_action(
            &s.c,
            "t-1",
            "result",
            json!({"status": "success", "result_data": {"summary": "all good"}}),
        )
        .await
        .expect_status(200);
    assert_eq!(done.body["task"]["status"], "success");
    let result = s.a_ws.next_of("TaskResponse").await;
    assert_eq!(result["status"], "success");
    assert_eq!(result["result_data"]["summary"], "all good");
}

/// The history, readable by the originator and every assignee, past or present.
async fn history_is_complete(s: &Story) {
    let detail = s.app.task(&s.a, "t-1").await.expect_status(200);
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
    s.app.task(&s.b, "t-1").await.expect_status(200);
    s.app.task(&s.c, "t-1").await.expect_status(200);
}

/// Every status change reached the receiver, in order, signed with the team secret.
async fn callbacks_arrived_signed_in_order(receiver: &Receiver, hook: &str, secret: &str) {
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
        assert_eq!(body["sent_to"], hook);
    }
    assert_eq!(delivered[5]["result_data"]["summary"], "all good");
    let calls = receiver.calls();
    assert_eq!(calls.len(), 8, "two refused attempts, then six deliveries");
    for (headers, body, _) in &calls {
        assert!(
            verify(secret, headers, body),
            "signature must verify: {headers:?}"
        );
        assert!(!verify("whsec_wrong", headers, body));
    }
}

/// The delivery outcome is recorded on the task.
async fn delivery_is_recorded(s: &Story) {
    let mut detail = s.app.task(&s.a, "t-1").await.expect_status(200);
    for _ in 0..100 {
        if detail.body["task"]["callback_delivery"]["state"] == "delivered" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
        detail = s.app.task(&s.a, "t-1").await.expect_status(200);
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
    let a_ws = app.ws(&a, "").await;
    let b_ws = app.ws(&b, "").await;
    let mut story = Story {
        app,
        a,
        b,
        c,
        a_ws,
        b_ws,
    };

    submit_and_assign(&mut story, &hook).await;
    clarify(&mut story).await;
    let mut c_ws = hand_off_to_offline_c(&mut story).await;
    progress_and_success(&mut story, &mut c_ws).await;
    history_is_complete(&story).await;
    let secret = story.app.secret(&team).await;
    callbacks_arrived_signed_in_order(&receiver, &hook, &secret).await;
    delivery_is_recorded(&story).await;
    story.app.stop().await;
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
