//! An outside A2A agent with several nodes: one node at a time acts for it. Before, every
//! node acted for every outside agent it had read at its start, so a task given to one
//! reached it once per node. Driven with the official SDK's server side
//! (`tests/interop/a2a_remote.py`, which counts the tasks it was given at
//! `GET /executions`) and two node processes on one PostgreSQL database.

use std::path::Path;
use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::{Value, json};

use crate::process::{Process, call};
use crate::python;
use crate::support::ADMIN;

fn node(url: &Path, id: &str) -> Process {
    Process::start_with(url, &["--node-id", id, "--allow-private-callbacks"])
}

/// Team `out` with agent `a`: the team key and `a`'s token.
async fn team(http: &reqwest::Client, node: &Process) -> (String, String) {
    let body = json!({"name": "Outside", "team_id": "out"});
    let (status, team) = call(http, node, Method::POST, "/v1/teams", ADMIN, Some(body)).await;
    assert_eq!(status, 201, "{team}");
    let key = team["team_key"].as_str().expect("key").to_owned();
    let body = json!({"agent_id": "a", "role": "r", "capabilities": []});
    let path = "/v1/teams/out/agents";
    let (status, agent) = call(http, node, Method::POST, path, &key, Some(body)).await;
    assert_eq!(status, 201, "{agent}");
    (key, agent["token"].as_str().expect("token").to_owned())
}

/// Gives the outside agent a task through `node`; its id.
async fn give(http: &reqwest::Client, node: &Process, token: &str, text: &str) -> String {
    let body = json!({"description": text, "originating_agent_id": "a",
                      "target_agent_id": "Translator-Bot"});
    let (status, made) = call(http, node, Method::POST, "/v1/tasks", token, Some(body)).await;
    assert_eq!(status, 201, "{made}");
    made["task"]["task_id"].as_str().expect("id").to_owned()
}

/// Waits (at most `patience`) until the task succeeded.
async fn done(http: &reqwest::Client, node: &Process, token: &str, id: &str, patience: u64) {
    let deadline = Instant::now() + Duration::from_secs(patience);
    loop {
        let path = format!("/v1/tasks/{id}");
        let (_, task) = call(http, node, Method::GET, &path, token, None).await;
        if task["task"]["status"] == "success" {
            return;
        }
        assert!(Instant::now() < deadline, "task {id} not done: {task:#}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn an_outside_agent_is_acted_for_by_one_node_and_taken_over_when_it_dies() {
    let test = "an_outside_agent_is_acted_for_by_one_node_and_taken_over_when_it_dies";
    if !python::available(test) {
        return;
    }
    let Some(db) = crate::pg::database("outside").await else {
        return;
    };
    let url = Path::new(&db.url);
    let first = node(url, "first");
    let second = node(url, "second");
    let http = reqwest::Client::new();
    let (key, token) = team(&http, &first).await;
    let (_remote, ready) = python::start("a2a_remote.py", &[]).await;
    let base = format!("http://127.0.0.1:{}", ready["port"]);
    let path = "/v1/teams/out/a2a-agents";
    let body = json!({"card_url": base});
    let (status, made) = call(&http, &first, Method::POST, path, &key, Some(body)).await;
    assert_eq!(status, 201, "{made}");
    // The second node starts again: it reads the outside agent at its start, as every
    // node did and acted for it.
    second.kill();
    let second = node(url, "second");
    tokio::time::sleep(Duration::from_millis(500)).await;
    let nodes = [&first, &second];
    let mut given = Vec::new();
    for i in 0..6 {
        let text = format!("once {i}");
        given.push((give(&http, nodes[i % 2], &token, &text).await, text));
    }
    for (id, _) in &given {
        done(&http, &first, &token, id, 20).await;
    }
    let executions = |http: reqwest::Client| {
        let url = format!("{base}/executions");
        async move {
            let res = http
                .get(url)
                .send()
                .await
                .expect("the outside agent answers");
            res.json::<Value>().await.expect("JSON")
        }
    };
    // Give a second forward time to arrive, were there one.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let counted = executions(http.clone()).await;
    for (_, text) in &given {
        assert_eq!(
            counted[text], 1,
            "'{text}' reached the outside agent once: {counted}"
        );
    }
    // The node acting for it dies: the other takes it over once its hold runs out.
    first.kill();
    let id = give(&http, &second, &token, "after the holder died").await;
    done(&http, &second, &token, &id, 40).await;
    let counted = executions(http.clone()).await;
    assert_eq!(counted["after the holder died"], 1, "{counted}");
    second.kill();
}
