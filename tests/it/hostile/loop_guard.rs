//! The loop guard cannot be turned against the team it protects (issue 61, item 4).

use serde_json::json;

use crate::support::{Agent, TestApp};

async fn reply(app: &TestApp, from: &Agent, to: &str, original: &str) -> crate::support::Res {
    app.send_with(
        from,
        json!({"recipient_agent_ids": [to], "in_reply_to": original, "thread_id": "standup"}),
    )
    .await
}

/// One member sent 64 messages to the whole team in thread `standup`, each replying to
/// its own last: every later send by anyone else in that thread was `LOOP_DETECTED`,
/// for ever, and the supervisor was told the victim's name. A send by the agent that
/// made the last one is no hop now (no work moved between agents), so the thread stays
/// open to everyone.
#[tokio::test]
async fn one_member_cannot_close_a_thread_to_the_others() {
    let app = TestApp::start().await;
    let team = app.team("standup").await;
    let m = app.agent(&team, "m", &[]).await;
    let x = app.agent(&team, "x", &[]).await;
    let _y = app.agent(&team, "y", &[]).await;
    let mut last = app
        .send_with(
            &m,
            json!({"recipient_agent_ids": ["ALL"], "thread_id": "standup"}),
        )
        .await
        .expect_status(201)
        .str("message_id");
    for _ in 0..64 {
        last = reply(&app, &m, "ALL", &last)
            .await
            .expect_status(201)
            .str("message_id");
    }
    reply(&app, &x, "m", &last).await.expect_status(201);
    app.send_with(
        &x,
        json!({"recipient_agent_ids": ["ALL"], "thread_id": "standup"}),
    )
    .await
    .expect_status(201);
    app.stop().await;
}

/// A chain stopped by `max_hops` was stopped for ever (no window). Counted within the
/// guard's window now, it opens again once it has been quiet that long; and the refusal
/// names who built the chain, not only who met the limit.
#[tokio::test]
async fn a_stopped_chain_opens_again_after_the_window_and_names_its_builders() {
    let app = TestApp::start().await;
    let team = app.team("window").await;
    let x = app.agent(&team, "x", &[]).await;
    let y = app.agent(&team, "y", &[]).await;
    app.patch("/v1/teams/window")
        .token(&team.key)
        .json(json!({"loop_guard": {"max_hops": 3, "cycle_messages": 0,
                                    "cycle_window_seconds": 1}}))
        .send()
        .await
        .expect_status(200);
    let mut last = app.send(&x, &[&y], "hop 1").await;
    last = reply(&app, &y, "x", &last)
        .await
        .expect_status(201)
        .str("message_id");
    last = reply(&app, &x, "y", &last)
        .await
        .expect_status(201)
        .str("message_id");
    let refused = reply(&app, &y, "x", &last)
        .await
        .expect_error(409, "LOOP_DETECTED");
    let details = &refused.body["details"];
    assert_eq!(details["agent_id"], "y", "{details}");
    assert_eq!(details["chain_agent_ids"], json!(["x", "y"]), "{details}");
    tokio::time::sleep(std::time::Duration::from_millis(2100)).await;
    reply(&app, &y, "x", &last).await.expect_status(201);
    app.stop().await;
}
