//! `--node-id`: the name a server process goes by in its log, its metrics and its health
//! answers, so that behind a load balancer an operator can tell which node said what.

use std::process::Command;

use serde_json::Value;

use crate::process::Process;

/// `/healthz` and `/readyz` of a server process: both bodies.
async fn health(server: &Process) -> (Value, Value) {
    let http = reqwest::Client::new();
    let mut bodies = Vec::new();
    for path in ["/healthz", "/readyz"] {
        let res = http
            .get(format!("{}{path}", server.base))
            .send()
            .await
            .expect("sent");
        assert_eq!(res.status(), 200, "{path}");
        bodies.push(res.json::<Value>().await.expect("json"));
    }
    let readyz = bodies.pop().expect("two");
    (bodies.pop().expect("two"), readyz)
}

#[tokio::test]
async fn a_named_node_says_its_name_in_the_log_the_health_answers_and_the_metrics() {
    let dir = tempfile::tempdir().expect("tmp");
    let server = Process::start_with(&dir.path().join("n.db"), &["--node-id", "east-1.b_2"]);
    assert_eq!(server.listening["node_id"], "east-1.b_2");
    let (healthz, readyz) = health(&server).await;
    assert_eq!(
        healthz,
        serde_json::json!({"status": "ok", "node_id": "east-1.b_2"})
    );
    assert_eq!(
        readyz,
        serde_json::json!({"status": "ready", "node_id": "east-1.b_2"})
    );
    let metrics = reqwest::get(format!("{}/metrics", server.base))
        .await
        .expect("sent")
        .text()
        .await
        .expect("text");
    assert!(
        metrics
            .lines()
            .any(|l| l == r#"switchboard_node_info{node_id="east-1.b_2"} 1"#),
        "{metrics}"
    );
    server.kill();
}

#[tokio::test]
async fn an_unnamed_node_gets_a_new_name_at_every_start() {
    let dir = tempfile::tempdir().expect("tmp");
    let db = dir.path().join("n.db");
    let mut names = Vec::new();
    for _ in 0..2 {
        let server = Process::start(&db);
        let logged = server.listening["node_id"]
            .as_str()
            .expect("logged")
            .to_owned();
        let (healthz, readyz) = health(&server).await;
        assert_eq!(healthz["node_id"], logged.as_str());
        assert_eq!(readyz["node_id"], logged.as_str());
        assert!(
            logged.starts_with("node-") && logged.len() == 13,
            "{logged}"
        );
        names.push(logged);
        server.kill();
    }
    assert_ne!(names[0], names[1]);
}

#[test]
fn a_node_id_outside_the_alphabet_or_too_long_is_refused_before_anything_starts() {
    let dir = tempfile::tempdir().expect("tmp");
    let db = dir.path().join("refused.db");
    let long = "n".repeat(65);
    for bad in ["two words", "quote\"d", "", long.as_str()] {
        let out = Command::new(env!("CARGO_BIN_EXE_switchboard"))
            .args(["serve", "--listen", "127.0.0.1:0", "--node-id", bad])
            .arg("--database")
            .arg(&db)
            .output()
            .expect("runs");
        assert_eq!(out.status.code(), Some(2), "{bad:?}: {out:?}");
        let said = String::from_utf8_lossy(&out.stderr);
        assert!(said.contains("1 to 64 letters, digits"), "{bad:?}: {said}");
        assert!(!db.exists(), "nothing is created for a refused start");
    }
}
