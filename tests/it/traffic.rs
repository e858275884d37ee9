//! The operator's views (team key): the team's traffic as one timeline, its tasks as one
//! list, and any message or task of the team read in full — what the console shows.

use serde_json::{Value, json};

use crate::support::{ADMIN, Agent, Res, Team, TestApp};

fn ids(page: &Res) -> Vec<String> {
    page.body["entries"]
        .as_array()
        .expect("entries")
        .iter()
        .map(|e| e["message"]["message_id"].as_str().expect("id").to_owned())
        .collect()
}

fn positions(page: &Res) -> Vec<i64> {
    page.body["entries"]
        .as_array()
        .expect("entries")
        .iter()
        .map(|e| e["position"].as_i64().expect("position"))
        .collect()
}

#[tokio::test]
async fn the_team_key_follows_every_message_of_its_team_in_order() {
    let app = TestApp::start().await;
    let team = app.team("ops").await;
    let other = app.team("elsewhere").await;
    let a = app.agent(&team, "a", &["plan"]).await;
    let b = app.agent(&team, "b", &["code"]).await;
    let z = app.agent(&other, "z", &[]).await;
    let z2 = app.agent(&other, "z2", &[]).await;

    let first = app.send(&a, &[&b], "first").await;
    app.send(&z, &[&z2], "not this team's").await;
    let broadcast = app
        .post("/v1/broadcasts")
        .token(&b.token)
        .json(json!({"sender_agent_id": "b", "update_type": "progress", "urgency": "info", "content": {"summary": "all hear", "details": "d", "impact": "i", "action_required": false}}))
        .send()
        .await
        .expect_status(201)
        .str("broadcast_id");
    app.post("/v1/tasks")
        .token(&a.token)
        .json(json!({"task_id": "t1", "description": "do it", "originating_agent_id": "a", "target_agent_id": "b"}))
        .send()
        .await
        .expect_status(201);

    // Without `after`: the newest, oldest first; only this team's.
    let page = app
        .get("/v1/teams/ops/messages")
        .token(&team.key)
        .send()
        .await
        .expect_status(200);
    let entries = page.body["entries"].as_array().expect("entries").clone();
    // The submission is two notices: the request to b, the assignment to a.
    assert_eq!(entries.len(), 4, "{}", page.body);
    assert_eq!(entries[0]["message"]["message_id"], first.as_str());
    assert_eq!(entries[0]["message"]["content"]["text"], "first");
    assert_eq!(entries[0]["recipient_agent_ids"], json!(["b"]));
    assert_eq!(entries[1]["message"]["message_id"], broadcast.as_str());
    assert_eq!(entries[1]["message"]["kind"], "broadcast");
    assert_eq!(entries[1]["recipient_agent_ids"], json!(["a"]));
    assert_eq!(entries[2]["message"]["kind"], "task");
    assert_eq!(entries[2]["message"]["thread_id"], "task:t1");
    assert_eq!(
        entries[2]["message"]["content"]["data"]["type"],
        "TaskRequest"
    );
    let p = positions(&page);
    assert!(p.windows(2).all(|w| w[0] < w[1]), "{p:?}");
    assert_eq!(page.body["next_after"], p[3]);
    assert_eq!(page.body["more"], false);

    // Following from `next_after`: nothing yet, then exactly what came next.
    let after = p[3];
    let empty = app
        .get(&format!("/v1/teams/ops/messages?after={after}"))
        .token(&team.key)
        .send()
        .await
        .expect_status(200);
    assert_eq!(ids(&empty), Vec::<String>::new());
    assert_eq!(empty.body["next_after"], after);
    let next = app.send(&b, &[&a], "next").await;
    let followed = app
        .get(&format!("/v1/teams/ops/messages?after={after}"))
        .token(&team.key)
        .send()
        .await
        .expect_status(200);
    assert_eq!(ids(&followed), vec![next]);
    app.stop().await;
}

#[tokio::test]
async fn only_the_key_and_the_admin_read_the_traffic() {
    let app = TestApp::start().await;
    let team = app.team("ops").await;
    let other = app.team("elsewhere").await;
    let a = app.agent(&team, "a", &[]).await;
    // The admin reads it too; agents and other teams' keys do not.
    app.get("/v1/teams/ops/messages")
        .token(ADMIN)
        .send()
        .await
        .expect_status(200);
    app.get("/v1/teams/ops/messages")
        .token(&a.token)
        .send()
        .await
        .expect_error(403, "FORBIDDEN");
    app.get("/v1/teams/ops/messages")
        .token(&other.key)
        .send()
        .await
        .expect_error(403, "FORBIDDEN");
    app.stop().await;
}

#[tokio::test]
async fn traffic_pages_skip_and_repeat_nothing() {
    let app = TestApp::start().await;
    let team = app.team("pages").await;
    let a = app.agent(&team, "a", &[]).await;
    let b = app.agent(&team, "b", &[]).await;
    let mut sent = Vec::new();
    for i in 0..25 {
        sent.push(app.send(&a, &[&b], &format!("m{i}")).await);
    }
    let mut seen = Vec::new();
    let mut after = 0;
    loop {
        let page = app
            .get(&format!("/v1/teams/pages/messages?after={after}&limit=7"))
            .token(&team.key)
            .send()
            .await
            .expect_status(200);
        seen.extend(ids(&page));
        after = page.body["next_after"].as_i64().expect("next_after");
        if page.body["more"] == false {
            break;
        }
    }
    assert_eq!(seen, sent);
    // The newest page of 5 is the last five, oldest first.
    let newest = app
        .get("/v1/teams/pages/messages?limit=5")
        .token(&team.key)
        .send()
        .await
        .expect_status(200);
    assert_eq!(ids(&newest), sent[20..].to_vec());
    app.stop().await;
}

#[tokio::test]
async fn traffic_queries_are_checked() {
    let app = TestApp::start().await;
    let team = app.team("checked").await;
    for (query, field) in [
        ("limit=0", "limit"),
        ("limit=101", "limit"),
        ("after=-1", "after"),
    ] {
        app.get(&format!("/v1/teams/checked/messages?{query}"))
            .token(&team.key)
            .send()
            .await
            .expect_invalid(field);
    }
    app.get("/v1/teams/checked/messages?after=soon")
        .token(&team.key)
        .send()
        .await
        .expect_error(400, "VALIDATION_ERROR");
    app.get("/v1/teams/checked/messages?since=1")
        .token(&team.key)
        .send()
        .await
        .expect_error(400, "VALIDATION_ERROR");
    app.get("/v1/teams/nobody/messages")
        .token(ADMIN)
        .send()
        .await
        .expect_error(404, "NOT_FOUND");
    app.stop().await;
}

async fn submit(app: &TestApp, token: &str, body: Value) -> Res {
    app.post("/v1/tasks")
        .token(token)
        .json(body)
        .send()
        .await
        .expect_status(201)
}

/// A team `board` whose agents `a` and `c` both gave `b` a task named `same`, and `a`
/// gave `c` the task `done`, which `c` finished.
async fn board(app: &TestApp) -> (Team, Team, [Agent; 3]) {
    let team = app.team("board").await;
    let other = app.team("apart").await;
    let a = app.agent(&team, "a", &["plan"]).await;
    let b = app.agent(&team, "b", &["code"]).await;
    let c = app.agent(&team, "c", &["code"]).await;
    // Two originators chose the same id; a third task is done.
    submit(app, &a.token, json!({"task_id": "same", "description": "one", "originating_agent_id": "a", "target_agent_id": "b"})).await;
    submit(app, &c.token, json!({"task_id": "same", "description": "two", "originating_agent_id": "c", "target_agent_id": "b"})).await;
    submit(app, &a.token, json!({"task_id": "done", "description": "three", "originating_agent_id": "a", "target_agent_id": "c"})).await;
    app.post("/v1/tasks/done/result")
        .token(&c.token)
        .json(json!({"status": "success", "result_data": {"n": 1}}))
        .send()
        .await
        .expect_status(200);

    (team, other, [a, b, c])
}

#[tokio::test]
async fn the_team_key_lists_every_task_of_its_team() {
    let app = TestApp::start().await;
    let (team, _, [a, ..]) = board(&app).await;
    let list = app
        .get("/v1/teams/board/tasks")
        .token(&team.key)
        .send()
        .await
        .expect_status(200);
    let tasks = list.body["tasks"].as_array().expect("tasks").clone();
    let names: Vec<(String, String)> = tasks
        .iter()
        .map(|t| {
            (
                t["task_id"].as_str().unwrap_or("").to_owned(),
                t["originating_agent_id"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect();
    assert_eq!(
        names,
        vec![
            ("done".to_owned(), "a".to_owned()),
            ("same".to_owned(), "c".to_owned()),
            ("same".to_owned(), "a".to_owned())
        ],
        "newest first, every originator: {}",
        list.body
    );
    // By status, and a page at a time.
    let done = app
        .get("/v1/teams/board/tasks?status=success")
        .token(&team.key)
        .send()
        .await
        .expect_status(200);
    assert_eq!(
        done.body["tasks"].as_array().map(Vec::len),
        Some(1),
        "{}",
        done.body
    );
    let first = app
        .get("/v1/teams/board/tasks?limit=2")
        .token(&team.key)
        .send()
        .await
        .expect_status(200);
    let cursor = first.str("next_cursor");
    let rest = app
        .get(&format!("/v1/teams/board/tasks?limit=2&cursor={cursor}"))
        .token(&team.key)
        .send()
        .await
        .expect_status(200);
    assert_eq!(rest.body["tasks"][0]["description"], "one");
    assert!(rest.body["next_cursor"].is_null());
    // An agent's filter is not the board's.
    app.get("/v1/teams/board/tasks?role=assigned")
        .token(&team.key)
        .send()
        .await
        .expect_error(400, "VALIDATION_ERROR");
    app.get("/v1/teams/board/tasks")
        .token(&a.token)
        .send()
        .await
        .expect_error(403, "FORBIDDEN");

    app.stop().await;
}

#[tokio::test]
async fn the_team_key_reads_any_task_and_message_of_its_team_in_full() {
    let app = TestApp::start().await;
    let (team, other, [a, b, c]) = board(&app).await;
    // One task in full: the id alone names two, so the originator is named.
    app.get("/v1/tasks/same")
        .token(&team.key)
        .send()
        .await
        .expect_error(409, "CONFLICT");
    let full = app
        .get("/v1/tasks/same@c")
        .token(&team.key)
        .send()
        .await
        .expect_status(200);
    assert_eq!(full.body["task"]["description"], "two");
    assert!(!full.body["events"].as_array().expect("events").is_empty());
    app.get("/v1/tasks/done")
        .token(&other.key)
        .send()
        .await
        .expect_error(404, "TASK_NOT_FOUND");

    // A message in full, with who read it, for the key (not only for its sender).
    let msg = app.send(&a, &[&b, &c], "read me").await;
    app.post("/v1/messages/read")
        .token(&b.token)
        .json(json!({"agent_id": "b", "message_ids": [msg]}))
        .send()
        .await
        .expect_status(200);
    let detail = app
        .get(&format!("/v1/messages/{msg}"))
        .token(&team.key)
        .send()
        .await
        .expect_status(200);
    assert_eq!(detail.body["read_by"], json!(["b"]));
    assert_eq!(detail.body["recipient_agent_ids"], json!(["b", "c"]));
    app.get(&format!("/v1/messages/{msg}"))
        .token(&other.key)
        .send()
        .await
        .expect_error(404, "MESSAGE_NOT_FOUND");
    app.stop().await;
}

/// More originators chose one id than a lookup lists as namesakes (16): the team key
/// still reads each one it names with its originator.
#[tokio::test]
async fn the_team_key_reads_a_task_among_many_namesakes() {
    let app = TestApp::start().await;
    let team = app.team("namesakes").await;
    app.agent(&team, "worker", &[]).await;
    for i in 0..18 {
        let o = app.agent(&team, &format!("o{i}"), &[]).await;
        submit(
            &app,
            &o.token,
            json!({"task_id": "t1", "description": format!("from o{i}"), "originating_agent_id": o.id, "target_agent_id": "worker"}),
        )
        .await;
    }
    for i in [0, 16, 17] {
        let full = app
            .get(&format!("/v1/tasks/t1@o{i}"))
            .token(&team.key)
            .send()
            .await
            .expect_status(200);
        assert_eq!(full.body["task"]["description"], format!("from o{i}"));
    }
    app.get("/v1/tasks/t1@worker")
        .token(&team.key)
        .send()
        .await
        .expect_error(404, "TASK_NOT_FOUND");
    app.stop().await;
}

/// A message's position is taken when it is written, not when it commits: with several
/// writers (nodes on PostgreSQL) a later position can commit first. A follower of the
/// timeline must not be shown it before the earlier one can no longer come, or it moves
/// past the earlier one for good. The test's own transaction plays the slower node: it
/// writes a message (a copy of one the server wrote, under a new id, from an agent of its
/// own: writing a message locks its sender's counters) and holds its commit while the
/// server commits a later one and a follower reads.
#[tokio::test]
async fn a_follower_on_postgresql_misses_no_message_committed_out_of_order() {
    let Some(mut app) = TestApp::start_on_postgres().await else {
        return;
    };
    let db = app.keep_database().expect("a database of its own");
    let team = app.team("order").await;
    let a = app.agent(&team, "a", &[]).await;
    let b = app.agent(&team, "b", &[]).await;
    app.agent(&team, "slow", &[]).await;
    let first = app.send(&a, &[&b], "first").await;
    let follow = |after: i64| {
        let request = reqwest::Client::new()
            .get(app.url(&format!("/v1/teams/order/messages?after={after}")))
            .bearer_auth(&team.key);
        async move {
            let res = request.send().await.expect("answered");
            assert_eq!(res.status(), 200);
            res.json::<Value>().await.expect("a page")
        }
    };
    let page = app
        .get("/v1/teams/order/messages")
        .token(&team.key)
        .send()
        .await
        .expect_status(200);
    assert_eq!(ids(&page), [first.as_str()]);
    let after = page.body["next_after"].as_i64().expect("next_after");

    let mut slow = db.connect().await;
    let columns: String = sqlx::query_scalar(
        "SELECT string_agg(column_name, ', ') FROM information_schema.columns \
         WHERE table_name = 'messages' \
         AND column_name NOT IN ('pk', 'message_id', 'sender_pk', 'tx') AND is_generated = 'NEVER'",
    )
    .fetch_one(&mut slow)
    .await
    .expect("the columns");
    sqlx::raw_sql("BEGIN")
        .execute(&mut slow)
        .await
        .expect("begin");
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "INSERT INTO messages (message_id, sender_pk, {columns}) \
         SELECT 'msg_held', (SELECT pk FROM agents WHERE agent_id = 'slow'), {columns} \
         FROM messages WHERE message_id = $1"
    )))
    .bind(&first)
    .execute(&mut slow)
    .await
    .expect("the slow node's message, written");
    let later = app.send(&a, &[&b], "later").await;
    // Its position is after the held one's, which may still commit: the read waits for
    // it (briefly: the test holds it for less than the read's 2 s), and so shows both.
    let reading = tokio::spawn(follow(after));
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert!(
        !reading.is_finished(),
        "a read answered before the held write ended"
    );
    sqlx::raw_sql("COMMIT")
        .execute(&mut slow)
        .await
        .expect("commit");
    let page = reading.await.expect("the read");
    let shown: Vec<&str> = page["entries"]
        .as_array()
        .expect("entries")
        .iter()
        .filter_map(|e| e["message"]["message_id"].as_str())
        .collect();
    assert_eq!(shown, ["msg_held", later.as_str()], "{page}");
    let rest = follow(page["next_after"].as_i64().expect("next_after")).await;
    assert_eq!(rest["entries"], json!([]), "{rest}");
    drop(slow);
    app.stop().await;
    db.remove().await;
}
