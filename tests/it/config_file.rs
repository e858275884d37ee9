//! `serve --config FILE`: settings from a YAML file, under the command line and the
//! environment, and a wrong file refused with every problem and its line.

use std::process::Command;

use crate::process::Process;

async fn node_of(server: &Process) -> String {
    let health: serde_json::Value = reqwest::get(format!("{}/healthz", server.base))
        .await
        .expect("healthz answers")
        .json()
        .await
        .expect("JSON");
    health["node_id"].as_str().unwrap_or_default().to_owned()
}

#[tokio::test]
async fn the_file_fills_what_flags_and_variables_leave_unset() {
    let dir = tempfile::tempdir().expect("a folder");
    let file = dir.path().join("switchboard.yaml");
    std::fs::write(
        &file,
        "# the settings every node shares\n\
         listen: 127.0.0.1:1          # the command line's --listen wins\n\
         node-id: from-the-file\n\
         allow_private_callbacks: true\n\
         budget:\n  - team_messages_per_minute=5000\n",
    )
    .expect("written");
    let config = file.to_str().expect("UTF-8");
    let database = dir.path().join("a.db");
    let server = Process::start_with(&database, &["--config", config]);
    // The file's node id, on the port the command line chose.
    assert_eq!(node_of(&server).await, "from-the-file");
    server.kill();
    // A variable wins over the file, and so does the config named by one.
    let server = Process::start_with_env(
        &database,
        &[
            ("SWITCHBOARD_NODE_ID", "from-the-environment"),
            ("SWITCHBOARD_CONFIG", config),
        ],
        &[],
    );
    assert_eq!(node_of(&server).await, "from-the-environment");
    server.kill();
    let server = Process::start_with(&database, &["--config", config, "--node-id", "from-a-flag"]);
    assert_eq!(node_of(&server).await, "from-a-flag");
    server.kill();
}

#[test]
fn a_wrong_file_is_refused_with_every_problem_and_its_line() {
    let dir = tempfile::tempdir().expect("a folder");
    let file = dir.path().join("bad.yaml");
    std::fs::write(
        &file,
        "lisen: 127.0.0.1:9000\n\
         allow-private-callbacks: yes\n\
         node-id:\n  name: a mapping\n\
         config: other.yaml\n",
    )
    .expect("written");
    let out = Command::new(env!("CARGO_BIN_EXE_switchboard"))
        .args(["serve", "--config"])
        .arg(&file)
        .arg("--database")
        .arg(dir.path().join("never.db"))
        .output()
        .expect("the binary runs");
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let shown = file.display();
    for expected in [
        format!("{shown}:1: `lisen` is not a setting of `serve` (did you mean `listen`?)"),
        format!("{shown}:2: `allow-private-callbacks` is `true` or `false`"),
        format!("{shown}:4: `node-id` takes a value, not a mapping"),
        format!("{shown}:5: `config` names the file itself"),
    ] {
        assert!(stderr.contains(&expected), "{expected}\nin:\n{stderr}");
    }
    assert!(!dir.path().join("never.db").exists(), "nothing started");
    // Not YAML: the parser's line.
    std::fs::write(&file, "listen: [1, 2\n").expect("written");
    let out = Command::new(env!("CARGO_BIN_EXE_switchboard"))
        .args(["serve", "--config"])
        .arg(&file)
        .output()
        .expect("the binary runs");
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains(&format!("{shown}:1: not YAML")),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
