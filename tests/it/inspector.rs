//! The MCP Inspector (npm, pinned in `tests/interop/inspector/`), installed on first use
//! into `target/inspector` so `cargo test` alone works on a fresh machine (`.ci/run`
//! installs it first).

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::OnceLock;

use crate::python::root;

/// Whether the Inspector can run here (installing it on first use); `false`, with a
/// `SKIPPED` note, on a machine without Node.js and npm (see `python::gate`).
pub fn available(test: &str) -> bool {
    crate::python::gate(test, "Node.js with npm and its registry", ready())
}

/// The Inspector's command (after [`available`] said yes).
pub fn inspector() -> PathBuf {
    match ready() {
        Ok(bin) => bin.clone(),
        Err(why) => panic!("the MCP Inspector is not available: {why}"),
    }
}

/// The Inspector, installed (once per test run) if needed, or why it cannot be.
fn ready() -> &'static Result<PathBuf, String> {
    static READY: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    READY.get_or_init(|| npm_package("inspector", "node_modules/.bin/mcp-inspector"))
}

/// A pinned npm package folder of `tests/interop/<name>`, installed into
/// `target/<name>` with every file of the folder beside it (scripts import from its
/// `node_modules`); `probe` is a file the install leaves, returned when there.
pub fn npm_package(name: &str, probe: &str) -> Result<PathBuf, String> {
    let dir = root().join("target").join(name);
    let source = root().join("tests/interop").join(name);
    let probe = dir.join(probe);
    std::fs::create_dir_all(&dir).map_err(|e| format!("target/{name}: {e}"))?;
    let files = std::fs::read_dir(&source).map_err(|e| format!("tests/interop/{name}: {e}"))?;
    for file in files.flatten().filter(|f| f.path().is_file()) {
        std::fs::copy(file.path(), dir.join(file.file_name()))
            .map_err(|e| format!("copying {}: {e}", file.path().display()))?;
    }
    if probe.exists() {
        return Ok(probe);
    }
    let installed = std::process::Command::new("npm")
        .args(["ci", "--no-audit", "--no-fund", "--ignore-scripts"])
        .current_dir(&dir)
        .stdout(Stdio::null())
        .status()
        .map_err(|e| format!("npm does not run: {e}"))?;
    if !installed.success() || !probe.exists() {
        return Err(format!(
            "`npm ci` in target/{name} failed (no npm registry?)"
        ));
    }
    Ok(probe)
}

/// Runs the Inspector's CLI mode against `url` with a bearer token and `args`; returns
/// (exit code, stdout, stderr).
pub async fn cli(url: &str, token: &str, args: &[&str]) -> (i32, String, String) {
    let out = tokio::process::Command::new(inspector())
        .arg("--cli")
        .arg(url)
        .arg("--header")
        .arg(format!("Authorization: Bearer {token}"))
        .args(args)
        .output()
        .await
        .expect("the Inspector runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}
