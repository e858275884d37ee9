//! Restarts, given-up callbacks, isolation, assignment and listing.

use super::*;

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
    // By target: what was given to one member, in either role.
    assert_eq!(ids(&list("?target_agent_id=B", &a).await).len(), 5);
    assert_eq!(ids(&list("?target_agent_id=A", &a).await), ["back"]);
    assert!(ids(&list("?target_agent_id=nobody", &a).await).is_empty());
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
    // Both roles at once, a page at a time: originated and assigned interleave in order.
    let mut seen = Vec::new();
    let mut query = "?limit=2".to_owned();
    loop {
        let page = list(&query, &a).await;
        seen.extend(ids(&page));
        match page.body["next_cursor"].as_str() {
            Some(cursor) => query = format!("?limit=2&cursor={cursor}"),
            None => break,
        }
    }
    assert_eq!(seen, ["back", "t4", "t3", "t2", "t1", "t0"]);
    assert_eq!(ids(&list("?status=success", &b).await), ["t1"]);
    app.stop().await;
}

/// Task ids belong to their originator: an agent that cannot see a task cannot learn
/// that its id is in use (its own task with that id is simply created), and each agent
/// finds the task it means by the id, or by `id@originator` where the id names two.
#[tokio::test]
async fn a_task_id_reveals_nothing_about_tasks_the_caller_cannot_see() {
    let app = app().await;
    let team = app.team("t").await;
    let a = app.agent(&team, "a", &[]).await;
    let b = app.agent(&team, "b", &["work"]).await;
    let c = app.agent(&team, "c", &[]).await;
    let mine = json!({"task_id": "build", "target_agent_id": "b", "description": "A's build"});
    app.submit(&a, mine.clone()).await.expect_status(201);
    // C cannot see A's task: reading it is not found, and creating its own with the same
    // id works as if the id were free.
    app.task(&c, "build")
        .await
        .expect_error(404, "TASK_NOT_FOUND");
    let theirs = json!({"task_id": "build", "target_agent_id": "a", "description": "C's build"});
    app.submit(&c, theirs).await.expect_status(201);
    assert_eq!(
        app.task(&c, "build").await.body["task"]["description"],
        "C's build"
    );
    // A takes part in both (its own, and C's given to it): the id alone names neither,
    // and each is named by its originator. The assignee of A's sees the one it was given.
    let both = app.task(&a, "build").await.expect_error(409, "CONFLICT");
    assert_eq!(both.body["details"]["originators"], json!(["a", "c"]));
    assert_eq!(
        app.task(&a, "build@a").await.body["task"]["description"],
        "A's build"
    );
    assert_eq!(
        app.task(&a, "build@c").await.body["task"]["description"],
        "C's build"
    );
    assert_eq!(
        app.task(&b, "build").await.body["task"]["description"],
        "A's build"
    );
    // An originator cannot reuse its own id.
    app.submit(&a, mine).await.expect_error(409, "CONFLICT");
    app.stop().await;
}

/// New tasks are written together by the batch's flush; one whose id its originator
/// already used must fail alone, write nothing (not even its notice), and leave every
/// other task of the batch and the assignee's sequence numbers whole.
#[tokio::test]
async fn a_reused_task_id_in_a_busy_batch_fails_alone_and_writes_nothing() {
    let app = app().await;
    let team = app.team("dup").await;
    let a = app.agent(&team, "A", &[]).await;
    let b = app.agent(&team, "B", &[]).await;
    let submissions = (0..24).map(|i| {
        let id = if i % 2 == 0 {
            "same".to_owned()
        } else {
            format!("u{i}")
        };
        app.submit(&a, json!({"task_id": id, "target_agent_id": "B"}))
    });
    let answers = futures_util::future::join_all(submissions).await;
    let created = answers.iter().filter(|r| r.status == 201).count();
    let conflicts: Vec<&Res> = answers.iter().filter(|r| r.status == 409).collect();
    assert_eq!(
        (created, conflicts.len()),
        (13, 11),
        "one 'same' and twelve others"
    );
    for res in conflicts {
        assert_eq!(res.body["error_code"], "CONFLICT", "{}", res.body);
    }
    // B was told about exactly the thirteen tasks that exist, numbered 1..=13.
    let inbox = app.inbox(&b, "?limit=100&sort_order=oldest_first").await;
    let seqs: Vec<i64> = inbox.body["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .map(|m| m["seq"].as_i64().expect("seq"))
        .collect();
    assert_eq!(seqs, (1..=13).collect::<Vec<i64>>());
    let listed = app
        .get("/v1/tasks?role=assigned&limit=100")
        .token(&b.token)
        .send()
        .await
        .expect_status(200);
    assert_eq!(listed.body["tasks"].as_array().expect("tasks").len(), 13);
    let same = app.task(&a, "same").await.expect_status(200);
    assert_eq!(kinds(&same.body), ["submitted"], "{}", same.body);
    app.stop().await;
}

/// A batch's new tasks are written by one statement per table, each row finding its
/// task by its place in the batch: under many concurrent submissions (batches of every
/// size, several statements when a batch is larger than one holds) every task must come
/// back with its own assignee, its own first event and its own callback.
#[tokio::test]
async fn many_tasks_at_once_each_keep_their_own_assignee_event_and_callback() {
    let app = app().await;
    let receiver = Receiver::default();
    let hook = receiver.start().await;
    let team = app.team("crowd").await;
    let a = app.agent(&team, "A", &[]).await;
    let mut workers = Vec::new();
    for w in 0..5 {
        workers.push(app.agent(&team, &format!("W{w}"), &[]).await);
    }
    const TASKS: usize = 150;
    let submissions = (0..TASKS).map(|i| {
        let mut fields = json!({
            "task_id": format!("t{i}"),
            "description": format!("job {i}"),
            "target_agent_id": format!("W{}", i % 5),
        });
        if i % 3 == 0 {
            fields["callback_url"] = json!(hook);
        }
        app.submit(&a, fields)
    });
    for res in futures_util::future::join_all(submissions).await {
        res.expect_status(201);
    }
    let with_callbacks = TASKS.div_ceil(3);
    let mut called: Vec<String> = receiver
        .wait_for(with_callbacks)
        .await
        .iter()
        .map(|body| body["task_id"].as_str().expect("task_id").to_owned())
        .collect();
    called.sort();
    let mut expected: Vec<String> = (0..TASKS)
        .filter(|i| i % 3 == 0)
        .map(|i| format!("t{i}"))
        .collect();
    expected.sort();
    assert_eq!(
        called, expected,
        "one callback per task that asked, for that task"
    );
    for i in 0..TASKS {
        let task = delivered_or_none(&app, &a, &format!("t{i}"), i % 3 == 0).await;
        let worker = format!("W{}", i % 5);
        assert_eq!(task.body["task"]["description"], format!("job {i}"));
        assert_eq!(
            task.body["task"]["assignee_agent_id"], worker,
            "{}",
            task.body
        );
        let events = task.body["events"].as_array().expect("events");
        assert_eq!(events.len(), 1, "{}", task.body);
        assert_eq!(
            events[0]["data"]["assignee_agent_id"], worker,
            "{}",
            task.body
        );
    }
    for (w, worker) in workers.iter().enumerate() {
        let expected: Vec<String> = (0..TASKS)
            .filter(|i| i % 5 == w)
            .map(|i| format!("t{i}"))
            .collect();
        assert_eq!(assigned_ids(&app, worker).await, sorted(expected), "W{w}'s");
    }
    app.stop().await;
}

/// The ids of the tasks an agent was assigned, sorted.
async fn assigned_ids(app: &TestApp, worker: &Agent) -> Vec<String> {
    let listed = app
        .get("/v1/tasks?role=assigned&limit=100")
        .token(&worker.token)
        .send()
        .await
        .expect_status(200);
    let ids = listed.body["tasks"].as_array().expect("tasks").iter();
    sorted(
        ids.map(|t| t["task_id"].as_str().expect("id").to_owned())
            .collect(),
    )
}

fn sorted(mut ids: Vec<String>) -> Vec<String> {
    ids.sort();
    ids
}

/// The task once its callback was delivered (`called`), or as it is (no callback: its
/// delivery must be empty). A callback row written for the wrong task would show there.
async fn delivered_or_none(app: &TestApp, a: &Agent, task_id: &str, called: bool) -> Res {
    for _ in 0..200 {
        let task = app.task(a, task_id).await.expect_status(200);
        let delivery = &task.body["task"]["callback_delivery"];
        if !called {
            assert!(delivery.is_null(), "{}", task.body);
            return task;
        }
        if delivery["state"] == "delivered" {
            return task;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("task {task_id}'s callback was never shown delivered");
}
