//! Every list a client pages through keeps the page byte bound (issue 61, item 2).

use serde_json::{Value, json};

use crate::support::{Agent, Res, TestApp};

/// Four mebibytes, the inbox's page bound, and some room for the answer's own fields.
const MOST: usize = 4 * 1024 * 1024 + 64 * 1024;

/// About 900 kB of data: ten of them are two pages' worth.
fn heavy(n: usize) -> Value {
    json!({"blob": "x".repeat(900 * 1024), "n": n})
}

/// Walks a list from `first` by its cursor until it says there is no more; every
/// answer within the bound. What each page held, by `field`'s `n`.
async fn walk(app: &TestApp, token: &str, first: &str, items: &str, n: &str) -> Vec<Vec<u64>> {
    let mut pages = Vec::new();
    let mut path = first.to_owned();
    loop {
        let res: Res = app.get(&path).token(token).send().await.expect_status(200);
        let size = serde_json::to_vec(&res.body).map(|b| b.len()).unwrap_or(0);
        assert!(size <= MOST, "{path}: an answer of {size} bytes");
        let got: Vec<u64> = res.body[items]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|e| e.pointer(n).and_then(Value::as_u64))
            .collect();
        pages.push(got);
        assert!(pages.len() < 20, "the walk never ends: {pages:?}");
        let more = |key: &str| res.body.get(key).filter(|v| !v.is_null()).cloned();
        match (more("next_cursor"), res.body["more"].as_bool()) {
            (Some(cursor), _) => {
                let base = first.split("cursor=").next().unwrap_or(first);
                let join = if base.contains('?') { "&" } else { "?" };
                path = format!(
                    "{}{join}cursor={}",
                    base.trim_end_matches(['&', '?']),
                    cursor.as_str().unwrap_or_default()
                );
            }
            (None, Some(true)) => {
                let after = res.body["next_after"].as_i64().unwrap_or(0);
                path = format!(
                    "{}&after={after}",
                    first.split("&after=").next().unwrap_or(first)
                );
            }
            _ => return pages,
        }
    }
}

/// The team's traffic (`GET /v1/teams/{id}/messages`), the caller's tasks and the
/// team's tasks answered 90–180 MB once entries were large: each page now stops at the
/// bound, says there is more, and a walk by its cursor sees every entry once.
#[tokio::test]
async fn the_teams_traffic_and_task_lists_keep_the_page_byte_bound() {
    let app = TestApp::start().await;
    let team = app.team("heavy").await;
    let a: Agent = app.agent(&team, "a", &["work"]).await;
    let b: Agent = app.agent(&team, "b", &["work"]).await;
    for n in 0..10 {
        app.send_with(
            &a,
            json!({"recipient_agent_ids": ["b"], "content": {
            "text": "heavy", "data": heavy(n)}}),
        )
        .await
        .expect_status(201);
        app.submit(
            &a,
            json!({"task_id": format!("t{n}"), "target_agent_id": "b",
                              "data": heavy(n)}),
        )
        .await
        .expect_status(201);
    }
    let traffic = walk(
        &app,
        &team.key,
        "/v1/teams/heavy/messages?limit=100&after=0",
        "entries",
        "/message/content/data/n",
    )
    .await;
    let tasks = walk(&app, &a.token, "/v1/tasks?limit=100", "tasks", "/data/n").await;
    let team_tasks = walk(
        &app,
        &team.key,
        "/v1/teams/heavy/tasks?limit=100",
        "tasks",
        "/data/n",
    )
    .await;
    for (name, pages) in [
        ("traffic", traffic),
        ("tasks", tasks),
        ("team tasks", team_tasks),
    ] {
        assert!(pages.len() >= 3, "{name}: {pages:?}");
        let mut seen: Vec<u64> = pages.into_iter().flatten().collect();
        seen.sort_unstable();
        assert_eq!(seen, (0..10).collect::<Vec<u64>>(), "{name}: each once");
    }
    let _ = b;
    app.stop().await;
}
