//! Stock Python clients (stomp.py, PyYAML, the MCP SDK, …) for the interop tests: a virtualenv under
//! `target/pyenv` with the versions pinned in `tests/interop/requirements.txt`, made on
//! first use, so `cargo test` alone works on a fresh machine (`.ci/run` makes it first).
//!
//! A machine without Python 3 (with `venv`) or without PyPI cannot run them: each such
//! test starts with [`available`], which says `SKIPPED … (needs python3 …)` on the
//! terminal and lets the test pass without running — unless
//! `SWITCHBOARD_TEST_STOCK_CLIENTS=required` (`.ci/run` sets it), where it fails instead,
//! as the PostgreSQL tests do under `SWITCHBOARD_TEST_POSTGRES`.

use std::io::Write;
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

/// Whether the stock clients' tools can run here; see the module's doc. `what` names
/// the tools in the note (`python3 with venv and PyPI`), `ready` says why not.
pub fn gate(test: &str, what: &str, ready: &Result<PathBuf, String>) -> bool {
    let why = match ready {
        Ok(_) => return true,
        Err(why) => why,
    };
    if std::env::var("SWITCHBOARD_TEST_STOCK_CLIENTS").is_ok_and(|v| v == "required") {
        panic!("{test} needs {what}, and SWITCHBOARD_TEST_STOCK_CLIENTS=required: {why}");
    }
    // Straight to the terminal: the harness keeps a passing test's prints to itself.
    let _ = writeln!(std::io::stderr(), "\nSKIPPED {test} (needs {what}): {why}");
    false
}

/// Whether the stock Python clients can run here (making the virtualenv on first use);
/// `false`, with a `SKIPPED` note, when they cannot and are not required.
pub fn available(test: &str) -> bool {
    gate(test, "python3 with venv and PyPI", ready())
}

/// The virtualenv's interpreter (after [`available`] said yes).
pub fn python() -> PathBuf {
    match ready() {
        Ok(python) => python.clone(),
        Err(why) => panic!("the stock Python clients are not available: {why}"),
    }
}

/// The virtualenv, made (once per test run) if needed, or why it cannot be.
fn ready() -> &'static Result<PathBuf, String> {
    static READY: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    READY.get_or_init(|| {
        let venv = root().join("target").join("pyenv");
        let python = venv.join("bin").join("python");
        let has = |python: &Path| {
            std::process::Command::new(python)
                .args(["-c", "import stomp, yaml, mcp, jsonschema, a2a, websockets"])
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        };
        if has(&python) {
            return Ok(python);
        }
        let made = std::process::Command::new("python3")
            .args(["-m", "venv"])
            .arg(&venv)
            .stdout(Stdio::null())
            .status()
            .map_err(|e| format!("python3 does not run: {e}"))?;
        if !made.success() {
            return Err(
                "`python3 -m venv target/pyenv` failed (is python3-venv installed?)".into(),
            );
        }
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
            .map_err(|e| format!("pip does not run: {e}"))?;
        if !installed.success() || !has(&python) {
            return Err("`pip install -r tests/interop/requirements.txt` failed (no PyPI?)".into());
        }
        Ok(python)
    })
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
