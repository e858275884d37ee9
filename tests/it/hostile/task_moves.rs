//! Work moving between agents on a task counts, as messages do (issue 61, item 5).

use serde_json::{Value, json};

use crate::support::{Agent, Res, Team, TestApp};

/// The agent that moves the task next: the assignee hands off, or the other answers.
fn other<'a>(me: &'a str, a: &'a str, b: &'a str) -> &'a str {
    if me == a { b } else { a }
}

/// A team of three that does work: a originates, b and c take it.
async fn team() -> (TestApp, Team, [Agent; 3]) {
    let app = TestApp::start().await;
    let team = app.team("moves").await;
    let a = app.agent(&team, "a", &["work"]).await;
    let b = app.agent(&team, "b", &["work"]).await;
    let c = app.agent(&team, "c", &["work"]).await;
    (app, team, [a, b, c])
}

/// One question-and-answer round on `task`: b asks, a answers; the refusal if any.
async fn round(app: &TestApp, a: &Agent, b: &Agent, task: &str) -> Result<(), Res> {
    let asked = app
        .task_action(b, task, "clarifications", json!({"question": "and?"}))
        .await;
    if asked.status != 201 {
        return Err(asked);
    }
    let id = asked.body["task"]["open_clarification"]["clarification_id"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let answered = app
        .task_action(
            a,
            task,
            &format!("clarifications/{id}/answer"),
            json!({"answer": "so"}),
        )
        .await;
    if answered.status != 200 {
        return Err(answered);
    }
    Ok(())
}

/// 80 handoffs back and forth on one task were all taken, counted against nothing. They
/// are hops of the task's chain now: the loop guard stops them (a cycle, long before
/// `max_hops`), blaming the agent that made the move.
#[tokio::test]
async fn handoffs_back_and_forth_meet_the_loop_guard() {
    let (app, _team, [a, b, c]) = team().await;
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

    app.stop().await;
}

/// 80 rounds of questions and answers on one task: stopped by the loop guard too.
#[tokio::test]
async fn clarification_rounds_meet_the_loop_guard() {
    let (app, _team, [a, b, _c]) = team().await;
    app.submit(&a, json!({"task_id": "qa", "target_agent_id": "b"}))
        .await
        .expect_status(201);
    let mut rounds = 0;
    let refusal = loop {
        match round(&app, &a, &b, "qa").await {
            Ok(()) => rounds += 1,
            Err(refused) => break refused.body,
        }
        assert!(rounds < 40, "{rounds} rounds were taken");
    };
    assert_eq!(refusal["error_code"], "LOOP_DETECTED", "{refusal}");
    app.stop().await;
}

/// Each question and each answer spends from its agent's message budget.
#[tokio::test]
async fn clarification_rounds_spend_the_message_budgets() {
    let (app, team, [a, b, _c]) = team().await;
    app.patch("/v1/teams/moves")
        .token(&team.key)
        .json(json!({"budgets": {"agent_messages_per_minute": 3}}))
        .send()
        .await
        .expect_status(200);
    app.submit(&a, json!({"task_id": "budget", "target_agent_id": "b"}))
        .await
        .expect_status(201);
    for _ in 0..3 {
        round(&app, &a, &b, "budget")
            .await
            .expect("within the budget");
    }
    let refused = round(&app, &a, &b, "budget")
        .await
        .expect_err("over the budget");
    assert_eq!(refused.status, 429, "b's fourth question: {}", refused.body);
    assert_eq!(
        refused.body["error_code"], "RATE_LIMITED",
        "{}",
        refused.body
    );
    app.stop().await;
}
