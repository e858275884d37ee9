//! The MCP Inspector (npm, pinned in `tests/interop/inspector/`), installed on first use
//! into `target/inspector` so `cargo test` alone works on a fresh machine (`.ci/run`
//! installs it first).

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::OnceLock;

use crate::python::root;

/// The Inspector's command, installed (once per test run) if needed.
pub fn inspector() -> PathBuf {
    static READY: OnceLock<PathBuf> = OnceLock::new();
    READY
        .get_or_init(|| {
            let dir = root().join("target").join("inspector");
            let bin = dir.join("node_modules/.bin/mcp-inspector");
            if !bin.exists() {
                std::fs::create_dir_all(&dir).expect("target/inspector");
                for file in ["package.json", "package-lock.json"] {
                    std::fs::copy(
                        root().join("tests/interop/inspector").join(file),
                        dir.join(file),
                    )
                    .expect("copy the pinned package files");
                }
                let installed = std::process::Command::new("npm")
                    .args(["ci", "--no-audit", "--no-fund", "--ignore-scripts"])
                    .current_dir(&dir)
                    .stdout(Stdio::null())
                    .status()
                    .expect("npm runs");
                assert!(installed.success(), "npm ci in target/inspector failed");
            }
            bin
        })
        .clone()
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
