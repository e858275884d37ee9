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
    READY.get_or_init(|| {
        let dir = root().join("target").join("inspector");
        let bin = dir.join("node_modules/.bin/mcp-inspector");
        if bin.exists() {
            return Ok(bin);
        }
        std::fs::create_dir_all(&dir).map_err(|e| format!("target/inspector: {e}"))?;
        for file in ["package.json", "package-lock.json"] {
            std::fs::copy(
                root().join("tests/interop/inspector").join(file),
                dir.join(file),
            )
            .map_err(|e| format!("copying the pinned {file}: {e}"))?;
        }
        let installed = std::process::Command::new("npm")
            .args(["ci", "--no-audit", "--no-fund", "--ignore-scripts"])
            .current_dir(&dir)
            .stdout(Stdio::null())
            .status()
            .map_err(|e| format!("npm does not run: {e}"))?;
        if !installed.success() || !bin.exists() {
            return Err("`npm ci` in target/inspector failed (no npm registry?)".into());
        }
        Ok(bin)
    })
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
