//! `switchboard apply -f team.yaml` against a real server (both engines): a team made
//! from a file, the same file again changing nothing, a plan that changes nothing, an
//! edit and `--prune`, and a wrong file refused whole with every problem's line.

use std::process::Stdio;

use crate::support::{ADMIN, TestApp};

/// `switchboard apply ARGS` with `token`: its exit status and output.
async fn apply(
    app: &TestApp,
    token: &str,
    dir: &std::path::Path,
    args: &[&str],
) -> (i32, String, String) {
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_switchboard"))
        .arg("apply")
        .args(args)
        .current_dir(dir)
        .env("SWITCHBOARD_URL", &app.base)
        .env("SWITCHBOARD_TOKEN", token)
        .stdin(Stdio::null())
        .output()
        .await
        .expect("the binary runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

const TEAM: &str = "\
# The squad, as code.
team: squad
name: The squad
settings:
  max_attempts: 5
  stomp_auto_register: true
  loop_guard:
    max_hops: 12
agents:
  - id: planner
    role: Planner
    capabilities: [planning]
  - id: coder
    role: Coder
    capabilities: [python, code-review]
    watch: [WriteDesign]
  - id: tester
    role: Tester
    capabilities: [testing]
    communication_enabled: false
";

fn tokens(dir: &std::path::Path) -> Vec<(String, String)> {
    std::fs::read_to_string(dir.join("tokens.yaml"))
        .expect("the tokens file")
        .lines()
        .filter_map(|l| l.split_once(": "))
        .map(|(a, b)| (a.to_owned(), b.to_owned()))
        .collect()
}

#[tokio::test]
async fn a_team_file_applied_twice_changes_the_server_once() {
    let app = TestApp::start().await;
    let dir = tempfile::tempdir().expect("a folder");
    std::fs::write(dir.path().join("team.yaml"), TEAM).expect("written");
    // The plan alone changes nothing.
    let (code, plan, _) = apply(&app, ADMIN, dir.path(), &["-f", "team.yaml", "--dry-run"]).await;
    assert_eq!(code, 0, "{plan}");
    assert!(
        plan.contains("+ would create team squad (The squad)"),
        "{plan}"
    );
    assert!(
        plan.contains("+ would register agent coder (Coder; python, code-review)"),
        "{plan}"
    );
    app.get("/v1/teams/squad")
        .token(ADMIN)
        .send()
        .await
        .expect_error(404, "NOT_FOUND");
    // Applied: the team, its settings and three agents; the secrets in a file only its
    // owner reads.
    let args = ["-f", "team.yaml", "--tokens-out", "tokens.yaml"];
    let (code, out, err) = apply(&app, ADMIN, dir.path(), &args).await;
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("4 new secrets written to tokens.yaml"),
        "{out}"
    );
    assert!(!out.contains("sb_"), "no secret printed: {out}");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(dir.path().join("tokens.yaml"))
            .expect("file")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    let secrets = tokens(dir.path());
    let names: Vec<&str> = secrets.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["team_key", "planner", "coder", "tester"]);
    let team_key = &secrets[0].1;
    let team = app
        .get("/v1/teams/squad")
        .token(team_key)
        .send()
        .await
        .expect_status(200)
        .body;
    assert_eq!(
        (team["name"].as_str(), team["max_attempts"].as_u64()),
        (Some("The squad"), Some(5))
    );
    assert_eq!(team["loop_guard"]["max_hops"], 12);
    assert_eq!(team["stomp_auto_register"], true);
    let coder = app
        .get("/v1/teams/squad/agents/coder")
        .token(&secrets[2].1)
        .send()
        .await;
    let coder = coder.expect_status(200).body;
    assert_eq!(coder["agent"]["watch"], serde_json::json!(["WriteDesign"]));
    let tester = app
        .get("/v1/teams/squad/agents/tester")
        .token(team_key)
        .send()
        .await
        .body;
    assert_eq!(tester["agent"]["communication_enabled"], false);
    // Again, with the team key this time: nothing to change.
    let (code, out, _) = apply(&app, team_key, dir.path(), &["-f", "team.yaml"]).await;
    assert_eq!((code, out.trim()), (0, "team squad: nothing to change"));
    app.stop().await;
}

/// An edited file and `--prune`: one setting, one agent changed, one gone, in an order
/// the server accepts; and then nothing again.
#[tokio::test]
async fn an_edited_file_changes_what_differs_and_prune_removes() {
    let app = TestApp::start().await;
    let dir = tempfile::tempdir().expect("a folder");
    std::fs::write(dir.path().join("team.yaml"), TEAM).expect("written");
    let args = ["-f", "team.yaml", "--tokens-out", "tokens.yaml"];
    let (code, _, _) = apply(&app, ADMIN, dir.path(), &args).await;
    assert_eq!(code, 0);
    let team_key = &tokens(dir.path())[0].1;
    // An edit, and --prune: one setting, one agent changed, one gone.
    let edited = TEAM
        .replace("max_attempts: 5", "max_attempts: 4")
        .replace("capabilities: [testing]", "capabilities: [testing, python]")
        .replace(
            "  - id: planner\n    role: Planner\n    capabilities: [planning]\n",
            "",
        );
    std::fs::write(dir.path().join("team.yaml"), edited).expect("written");
    let (code, out, _) = apply(&app, team_key, dir.path(), &["-f", "team.yaml", "--prune"]).await;
    assert_eq!(code, 0, "{out}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines,
        [
            "~ update agent tester: capabilities: [\"testing\"] → [\"testing\",\"python\"]",
            "~ set team settings: max_attempts: 5 → 4",
            "- remove agent planner",
        ]
    );
    let agents = app
        .get("/v1/teams/squad/agents")
        .token(team_key)
        .send()
        .await
        .body;
    let ids: Vec<&str> = agents["agents"]
        .as_array()
        .expect("agents")
        .iter()
        .filter_map(|a| a["agent_id"].as_str())
        .collect();
    assert_eq!(ids, ["coder", "tester"]);
    let (_, out, _) = apply(&app, team_key, dir.path(), &["-f", "team.yaml", "--prune"]).await;
    assert_eq!(out.trim(), "team squad: nothing to change");
    app.stop().await;
}

#[tokio::test]
async fn a_wrong_file_is_refused_whole_with_every_line() {
    let app = TestApp::start().await;
    let dir = tempfile::tempdir().expect("a folder");
    let bad = "\
team: squad
nmae: typo
settings:
  max_attempts: lots
agents:
  - id: coder
    capabilities: python
  - role: Nobody
  - id: bad id!
    role: X
";
    std::fs::write(dir.path().join("team.yaml"), bad).expect("written");
    let (code, out, err) = apply(&app, ADMIN, dir.path(), &["-f", "team.yaml"]).await;
    assert_eq!(code, 2, "{out}{err}");
    for expected in [
        "team.yaml: line 2: `nmae` is not a key of a team file",
        "team.yaml: line 4: settings: invalid type: string \"lots\"",
        "team.yaml: line 7: agent: invalid type: string \"python\", expected a sequence",
        "team.yaml: line 6: agent `coder` needs a `role`",
        "team.yaml: line 8: an agent needs an `id`",
        "team.yaml: line 9: id may only contain",
    ] {
        assert!(err.contains(expected), "{expected}\nin:\n{err}");
    }
    // Nothing applied: the team was not created.
    app.get("/v1/teams/squad")
        .token(ADMIN)
        .send()
        .await
        .expect_error(404, "NOT_FOUND");
    // A team that does not exist, named without a `name`: told how to create it.
    std::fs::write(dir.path().join("team.yaml"), "team: squad\nagents: []\n").expect("written");
    let (code, _, err) = apply(&app, ADMIN, dir.path(), &["-f", "team.yaml"]).await;
    assert_eq!(code, 2);
    assert!(err.contains("give it a `name`"), "{err}");
    app.stop().await;
}

/// The commented example in `examples/team.yaml` applies as it is, and once.
#[tokio::test]
async fn the_example_team_file_applies() {
    let app = TestApp::start().await;
    let example = crate::python::root().join("examples/team.yaml");
    let example = example.to_str().expect("UTF-8");
    let dir = tempfile::tempdir().expect("a folder");
    let args = ["-f", example, "--tokens-out", "tokens.yaml"];
    let (code, out, err) = apply(&app, ADMIN, dir.path(), &args).await;
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("+ create team research-demo"), "{out}");
    let (_, again, _) = apply(&app, ADMIN, dir.path(), &["-f", example]).await;
    assert_eq!(again.trim(), "team research-demo: nothing to change");
    app.stop().await;
}
