//! A task's history has a bound (issue 61, item 1).

use serde_json::json;

use crate::support::TestApp;

/// 300 progress reports of 0.9 MB made one read of the task 272 MB and the server's
/// memory 1.2 GB. A task's history now holds at most 4 MiB of data and 1,000 entries:
/// past that a progress report is refused (`413`), the result is still taken, and a read
/// of the task stays within the bound.
#[tokio::test]
async fn a_tasks_history_is_bounded_and_the_task_can_still_finish() {
    let app = TestApp::start().await;
    let team = app.team("history").await;
    let a = app.agent(&team, "a", &["work"]).await;
    let b = app.agent(&team, "b", &["work"]).await;
    app.submit(&a, json!({"task_id": "big", "target_agent_id": "b"}))
        .await
        .expect_status(201);
    let heavy = json!({"status": "in-progress", "result_data": {"blob": "x".repeat(900 * 1024)}});
    let mut taken = 0;
    let refusal = loop {
        let res = app.task_action(&b, "big", "result", heavy.clone()).await;
        if res.status != 200 {
            break res;
        }
        taken += 1;
        assert!(taken < 10, "the history took {taken} reports of 0.9 MB");
    };
    assert_eq!(
        taken, 4,
        "four reports of 0.9 MB fit in 4 MiB, the fifth does not"
    );
    let refusal = refusal.expect_error(413, "PAYLOAD_TOO_LARGE");
    assert_eq!(refusal.body["details"]["max_bytes"], 4 * 1024 * 1024);
    let read = app.task(&a, "big").await.expect_status(200);
    let size = serde_json::to_vec(&read.body).map(|b| b.len()).unwrap_or(0);
    assert!(size < 5 * 1024 * 1024, "a read of {size} bytes");
    // The result is always taken.
    app.task_action(
        &b,
        "big",
        "result",
        json!({"status": "success", "result_data": {"ok": 1}}),
    )
    .await
    .expect_status(200);

    // The count: 1,000 entries, small ones included.
    app.submit(&a, json!({"task_id": "chatty", "target_agent_id": "b"}))
        .await
        .expect_status(201);
    let small = json!({"status": "in-progress", "result_data": {"p": 1}});
    for _ in 1..1000 {
        app.task_action(&b, "chatty", "result", small.clone())
            .await
            .expect_status(200);
    }
    app.task_action(&b, "chatty", "result", small)
        .await
        .expect_error(413, "PAYLOAD_TOO_LARGE");
    app.task_action(&b, "chatty", "result", json!({"status": "failed"}))
        .await
        .expect_status(200);
    app.stop().await;
}
