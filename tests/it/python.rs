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

/// A virtualenv under `target/` with the versions pinned in a requirements file.
pub struct Venv {
    /// Its folder under `target/`.
    dir: &'static str,
    requirements: &'static str,
    /// A Python statement that runs when everything is installed.
    probe: &'static str,
    made: OnceLock<Result<PathBuf, String>>,
}

/// The stock clients (stomp.py, the official MCP and A2A SDKs, Agno, …).
pub static STOCK: Venv = Venv {
    dir: "pyenv",
    requirements: "tests/interop/requirements.txt",
    probe: "import stomp, yaml, mcp, jsonschema, a2a, websockets, agno",
    made: OnceLock::new(),
};

/// The agent frameworks' MCP adapters that need `mcp` 1.x (LangChain's): their own
/// virtualenv, beside the stock clients' `mcp` 2.x.
pub static FRAMEWORKS: Venv = Venv {
    dir: "pyenv-frameworks",
    requirements: "tests/interop/requirements-frameworks.txt",
    probe: "import langchain_mcp_adapters",
    made: OnceLock::new(),
};

/// CrewAI's MCP adapter (`crewai_tools.MCPServerAdapter`): a virtualenv of its own.
pub static CREWAI: Venv = Venv {
    dir: "pyenv-crewai",
    requirements: "tests/interop/requirements-crewai.txt",
    probe: "from crewai_tools import MCPServerAdapter",
    made: OnceLock::new(),
};

/// Playwright for the console's browser tests (it drives Debian's Chromium), with a
/// WebSocket client for the worker agent beside it.
pub static BROWSER: Venv = Venv {
    dir: "pyenv-browser",
    requirements: "tests/interop/requirements-browser.txt",
    probe: "import playwright.sync_api, websockets.sync.client",
    made: OnceLock::new(),
};

/// Google ADK's MCP toolset (`McpToolset`): a virtualenv of its own.
pub static ADK: Venv = Venv {
    dir: "pyenv-adk",
    requirements: "tests/interop/requirements-adk.txt",
    probe: "from google.adk.tools.mcp_tool.mcp_toolset import McpToolset",
    made: OnceLock::new(),
};

/// Our Python client (`clients/python`, installed editable with its toolkits' frameworks)
/// and what checks it: pytest, mypy, ruff and `build`.
pub static CLIENT: Venv = Venv {
    dir: "pyenv-client",
    requirements: "tests/interop/requirements-client.txt",
    probe: "import switchboard_client, pytest, mypy, build, agno, langchain_core",
    made: OnceLock::new(),
};

/// Whether the stock Python clients can run here (making the virtualenv on first use);
/// `false`, with a `SKIPPED` note, when they cannot and are not required.
pub fn available(test: &str) -> bool {
    available_in(&STOCK, test)
}

/// As [`available`], for the virtualenv `venv`.
pub fn available_in(venv: &Venv, test: &str) -> bool {
    gate(test, "python3 with venv and PyPI", venv.ready())
}

/// The virtualenv's interpreter (after [`available`] said yes).
pub fn python() -> PathBuf {
    STOCK.python()
}

impl Venv {
    /// The virtualenv's interpreter (after [`available_in`] said yes).
    pub fn python(&self) -> PathBuf {
        match self.ready() {
            Ok(python) => python.clone(),
            Err(why) => panic!("the stock Python clients are not available: {why}"),
        }
    }

    /// The virtualenv, made (once per test run) if needed, or why it cannot be.
    fn ready(&self) -> &Result<PathBuf, String> {
        self.made.get_or_init(|| {
            let venv = root().join("target").join(self.dir);
            let python = venv.join("bin").join("python");
            let has = |python: &Path| {
                std::process::Command::new(python)
                    .args(["-c", self.probe])
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
                return Err(format!(
                    "`python3 -m venv target/{}` failed (is python3-venv installed?)",
                    self.dir
                ));
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
                .arg(root().join(self.requirements))
                .status()
                .map_err(|e| format!("pip does not run: {e}"))?;
            if !installed.success() || !has(&python) {
                return Err(format!(
                    "`pip install -r {}` failed (no PyPI?)",
                    self.requirements
                ));
            }
            Ok(python)
        })
    }
}

/// How long a script may run: a guard against a hang, not a figure, so generous. Scripts
/// run beside hundreds of other tests (twice, the second time on PostgreSQL), where a
/// browser script that takes 20 s alone may take several times that.
const SCRIPT_LIMIT: Duration = Duration::from_secs(180);

/// Runs `tests/interop/<script>` with `args`; asserts it succeeds within [`SCRIPT_LIMIT`]
/// and returns the JSON object on the last line it printed.
pub async fn run(script: &str, args: &[&str]) -> Value {
    run_in(&STOCK, script, args).await
}

/// As [`run`], with the interpreter of `venv`.
pub async fn run_in(venv: &Venv, script: &str, args: &[&str]) -> Value {
    let child = spawn_in(venv, script, args);
    let out = tokio::time::timeout(SCRIPT_LIMIT, child.wait_with_output())
        .await
        .unwrap_or_else(|_| panic!("{script} ended by itself within {SCRIPT_LIMIT:?}"))
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
    tokio::time::timeout(SCRIPT_LIMIT, read)
        .await
        .unwrap_or_else(|_| panic!("the script ended by itself within {SCRIPT_LIMIT:?}"));
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
    spawn_in(&STOCK, script, args)
}

fn spawn_in(venv: &Venv, script: &str, args: &[&str]) -> Child {
    Command::new(venv.python())
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
