//! The Python client (`clients/python`): its pytest suite against the server binary this
//! build made, its strict type check and lint, and its wheel. The suite starts its own
//! servers (a fresh SQLite file each, on a free port), so it runs once, not per engine.

use std::path::Path;
use std::process::Output;
use std::time::Duration;

use tokio::process::Command;

use crate::python::{CLIENT, CREWAI, available_in, root};

/// A guard against a hang: the suite takes about 30 s alone.
const LIMIT: Duration = Duration::from_secs(600);

fn client_dir() -> std::path::PathBuf {
    root().join("clients").join("python")
}

async fn run(program: &Path, args: &[&str]) -> Output {
    run_with(program, args, &[]).await
}

async fn run_with(program: &Path, args: &[&str], envs: &[(&str, &Path)]) -> Output {
    let mut command = Command::new(program);
    command
        .args(args)
        .envs(envs.iter().copied())
        .current_dir(client_dir())
        .env("SWITCHBOARD_BIN", env!("CARGO_BIN_EXE_switchboard"))
        .kill_on_drop(true);
    let out = tokio::time::timeout(LIMIT, command.output())
        .await
        .unwrap_or_else(|_| panic!("{args:?} ended within {LIMIT:?}"))
        .expect("the command runs");
    assert!(
        out.status.success(),
        "{args:?} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

#[tokio::test]
async fn the_python_clients_suite_passes_against_the_server() {
    let test = "python_client::the_python_clients_suite_passes_against_the_server";
    // CrewAI's toolkit example runs in CrewAI's own virtualenv (its pins conflict).
    if !available_in(&CLIENT, test) || !available_in(&CREWAI, test) {
        return;
    }
    let crewai = CREWAI.python();
    let out = run_with(
        &CLIENT.python(),
        &[
            "-m",
            "pytest",
            "-q",
            "-rs",
            "-p",
            "no:cacheprovider",
            "tests",
        ],
        &[("SWITCHBOARD_CREWAI_PYTHON", &crewai)],
    )
    .await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains(" passed"), "pytest ran tests: {stdout}");
    assert!(!stdout.contains("skipped"), "no test skipped: {stdout}");
}

#[tokio::test]
async fn the_python_client_is_strictly_typed_and_linted() {
    if !available_in(
        &CLIENT,
        "python_client::the_python_client_is_strictly_typed_and_linted",
    ) {
        return;
    }
    let python = CLIENT.python();
    run(&python, &["-m", "mypy", "--no-incremental"]).await;
    run(&python, &["-m", "ruff", "check", "--no-cache", "."]).await;
    run(
        &python,
        &["-m", "ruff", "format", "--check", "--no-cache", "."],
    )
    .await;
}

#[tokio::test]
async fn the_python_client_builds_a_wheel() {
    if !available_in(&CLIENT, "python_client::the_python_client_builds_a_wheel") {
        return;
    }
    let out_dir = tempfile::tempdir().expect("a temporary folder");
    let out = out_dir.path().to_str().expect("a UTF-8 path");
    // --no-isolation: the build backend is in the virtualenv already (no second download).
    run(
        &CLIENT.python(),
        &[
            "-m",
            "build",
            "--wheel",
            "--no-isolation",
            "--outdir",
            out,
            ".",
        ],
    )
    .await;
    let wheels: Vec<_> = std::fs::read_dir(out_dir.path())
        .expect("the wheel's folder")
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    let version = env!("CARGO_PKG_VERSION");
    assert_eq!(
        wheels,
        [format!("switchboard_client-{version}-py3-none-any.whl")]
    );
}

/// The README's Python example is `clients/python/examples/quickstart.py` as it is, and
/// runs as the README says: `pip install ./clients/python` into a fresh virtualenv, then
/// the example against the walkthrough's server and agents.
#[tokio::test]
async fn the_readme_python_example_runs_in_a_fresh_virtualenv() {
    if !available_in(
        &CLIENT,
        "python_client::the_readme_python_example_runs_in_a_fresh_virtualenv",
    ) {
        return;
    }
    let readme = crate::readme::doc("README.md");
    let example =
        std::fs::read_to_string(client_dir().join("examples/quickstart.py")).expect("the example");
    assert!(
        readme.contains(&format!("```python\n{example}```")),
        "the README shows examples/quickstart.py as it is"
    );
    assert!(example.lines().count() <= 20, "twenty lines");
    let app = crate::readme::walkthrough_server().await;
    let script = format!(
        "{}{}",
        crate::readme::readme(),
        crate::readme::walkthrough("README.md", "python")
    );
    let out = crate::readme::run(&app, &script).await;
    assert!(
        out.trim_end().ends_with("the coder says: {'words': 6}"),
        "{out}"
    );
    app.stop().await;
}
