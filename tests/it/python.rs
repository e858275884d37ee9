//! Stock Python clients (stomp.py, PyYAML, the MCP SDK, …) for the interop tests: a virtualenv under
//! `target/pyenv` with the versions pinned in `tests/interop/requirements.txt`, made on
//! first use, so `cargo test` alone works on a fresh machine (`.ci/run` makes it first).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::OnceLock;
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader, Lines};
use tokio::process::{Child, ChildStdout, Command};

/// The repository (the crate's manifest folder).
pub fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The virtualenv's interpreter, the environment made (once per test run) if needed.
pub fn python() -> PathBuf {
    static READY: OnceLock<PathBuf> = OnceLock::new();
    READY
        .get_or_init(|| {
            let venv = root().join("target").join("pyenv");
            let python = venv.join("bin").join("python");
            let has = |python: &Path| {
                std::process::Command::new(python)
                    .args(["-c", "import stomp, yaml, mcp, jsonschema, a2a, websockets"])
                    .stderr(Stdio::null())
                    .status()
                    .is_ok_and(|s| s.success())
            };
            if !has(&python) {
                let made = std::process::Command::new("python3")
                    .args(["-m", "venv"])
                    .arg(&venv)
                    .status()
                    .expect("python3 runs");
                assert!(made.success(), "python3 -m venv target/pyenv failed");
                let installed = std::process::Command::new(&python)
                    .args([
                        "-m",
                        "pip",
                        "install",
                        "-q",
                        "--disable-pip-version-check",
                        "-r",
                    ])
                    .arg(root().join("tests/interop/requirements.txt"))
                    .status()
                    .expect("pip runs");
                assert!(
                    installed.success(),
                    "pip install -r tests/interop/requirements.txt failed"
                );
            }
            python
        })
        .clone()
}

/// Runs `tests/interop/<script>` with `args`; asserts it succeeds within a minute and
/// returns the JSON object on the last line it printed.
pub async fn run(script: &str, args: &[&str]) -> Value {
    let child = spawn(script, args);
    let out = tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
        .await
        .expect("the script ends by itself")
        .expect("the script runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{script} {args:?} failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    last_json(&stdout)
}

/// A script started with [`start`]: the process and the rest of its output.
pub struct Script {
    child: Child,
    lines: Lines<BufReader<ChildStdout>>,
}

/// Starts `tests/interop/<script>` with `args` and waits for its first line (the script
/// says it is ready); [`finish`] collects the rest.
pub async fn start(script: &str, args: &[&str]) -> (Script, Value) {
    let mut child = spawn(script, args);
    let stdout = child.stdout.take().expect("stdout piped");
    let mut lines = BufReader::new(stdout).lines();
    let first = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
        .await
        .expect("the script gets ready")
        .expect("stdout readable")
        .expect("the script printed its first line");
    let first = serde_json::from_str(&first).expect("a JSON line");
    (Script { child, lines }, first)
}

/// Waits for a script [`start`]ed earlier and returns its last JSON line.
pub async fn finish(mut script: Script) -> Value {
    let mut stdout = String::new();
    let read = async {
        while let Some(line) = script.lines.next_line().await.expect("stdout readable") {
            stdout.push_str(&line);
            stdout.push('\n');
        }
    };
    tokio::time::timeout(Duration::from_secs(60), read)
        .await
        .expect("the script ends by itself");
    let out = script
        .child
        .wait_with_output()
        .await
        .expect("the script runs");
    assert!(
        out.status.success(),
        "script failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    last_json(&stdout)
}

fn spawn(script: &str, args: &[&str]) -> Child {
    Command::new(python())
        .arg(root().join("tests/interop").join(script))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("the script starts")
}

fn last_json(stdout: &str) -> Value {
    let line = stdout.lines().last().unwrap_or_default();
    serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {stdout}"))
}
