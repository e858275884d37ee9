//! Work moving between agents on a task counts, as messages do (issue 61, item 5).

use serde_json::{Value, json};

use crate::support::TestApp;

/// The agent that moves the task next: the assignee hands off, or the other answers.
fn other<'a>(me: &'a str, a: &'a str, b: &'a str) -> &'a str {
    if me == a { b } else { a }
}

/// 80 handoffs back and forth and 80 rounds of questions on one task were all taken,
/// counted against nothing. They are hops of the task's chain now: the loop guard stops
/// them (a cycle, long before `max_hops`), blaming the agent that made the move, and a
/// budget on messages stops them too.
#[tokio::test]
async fn handoffs_and_clarification_rounds_meet_the_loop_guard_and_the_budgets() {
    let app = TestApp::start().await;
    let team = app.team("moves").await;
    let a = app.agent(&team, "a", &["work"]).await;
    let b = app.agent(&team, "b", &["work"]).await;
    let c = app.agent(&team, "c", &["work"]).await;

    // Handoffs, b and c passing the task between them.
    app.submit(&a, json!({"task_id": "ping", "target_agent_id": "b"}))
        .await
        .expect_status(201);
    let (mut holder, mut moves, mut refusal) = ("b", 0, Value::Null);
    for _ in 0..80 {
        let (me, to) = (holder, other(holder, "b", "c"));
        let token = if me == "b" { &b.token } else { &c.token };
        let res = app
            .post("/v1/tasks/ping/handoff")
            .token(token)
            .json(json!({"new_agent_id": to, "reason": "yours"}))
            .send()
            .await;
        if res.status != 200 {
            refusal = res.body;
            break;
        }
        moves += 1;
        holder = to;
    }
    assert!(moves < 80, "80 handoffs were all taken");
    assert_eq!(refusal["error_code"], "LOOP_DETECTED", "{refusal}");
    assert_eq!(refusal["details"]["agent_id"], holder, "{refusal}");

    // Question-and-answer rounds between the assignee and the originator.
    app.submit(&a, json!({"task_id": "qa", "target_agent_id": "b"}))
        .await
        .expect_status(201);
    let (mut rounds, mut refusal) = (0, Value::Null);
    for _ in 0..80 {
        let asked = app
            .task_action(&b, "qa", "clarifications", json!({"question": "and?"}))
            .await;
        if asked.status != 201 {
            refusal = asked.body;
            break;
        }
        let id = asked.body["task"]["open_clarification"]["clarification_id"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let answered = app
            .task_action(
                &a,
                "qa",
                &format!("clarifications/{id}/answer"),
                json!({"answer": "so"}),
            )
            .await;
        if answered.status != 200 {
            refusal = answered.body;
            break;
        }
        rounds += 1;
    }
    assert!(rounds < 40, "{rounds} rounds were taken");
    assert_eq!(refusal["error_code"], "LOOP_DETECTED", "{refusal}");

    // A budget on the team's messages counts each move.
    app.patch("/v1/teams/moves")
        .token(&team.key)
        .json(json!({"budgets": {"agent_messages_per_minute": 3}}))
        .send()
        .await
        .expect_status(200);
    app.submit(&a, json!({"task_id": "budget", "target_agent_id": "b"}))
        .await
        .expect_status(201);
    let mut answers = Vec::new();
    for _ in 0..4 {
        let asked = app
            .task_action(&b, "budget", "clarifications", json!({"question": "?"}))
            .await;
        answers.push(asked.status);
        if asked.status != 201 {
            assert_eq!(asked.body["error_code"], "RATE_LIMITED", "{}", asked.body);
            break;
        }
        let id = asked.body["task"]["open_clarification"]["clarification_id"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        app.task_action(
            &a,
            "budget",
            &format!("clarifications/{id}/answer"),
            json!({"answer": "!"}),
        )
        .await
        .expect_status(200);
    }
    assert_eq!(
        answers,
        [201, 201, 201, 429],
        "b's fourth question is over its budget"
    );
    app.stop().await;
}
