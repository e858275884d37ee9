//! The server binary as a child process (so it can be killed without warning, or run
//! inside a small filesystem), and plain HTTP calls to it.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use serde_json::{Value, json};

use crate::support::ADMIN;

/// The server binary as a child process, so it can be killed without warning.
pub struct Process {
    pub child: Child,
    pub base: String,
    /// The line the server announced its address with.
    pub listening: Value,
    /// Every line the server logged since (JSON, one per line), as it comes.
    pub log: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl Process {
    pub fn start(database: &Path) -> Process {
        Process::start_with(database, &[])
    }

    /// The server with `extra` arguments after `serve`'s usual ones.
    pub fn start_with(database: &Path, extra: &[&str]) -> Process {
        Process::spawn(
            Command::new(env!("CARGO_BIN_EXE_switchboard")),
            database,
            extra,
        )
    }

    /// The server with environment variables `env` and `extra` arguments.
    pub fn start_with_env(database: &Path, env: &[(&str, &str)], extra: &[&str]) -> Process {
        let mut command = Command::new(env!("CARGO_BIN_EXE_switchboard"));
        command.envs(env.iter().copied());
        Process::spawn(command, database, extra)
    }

    /// The server logging at `rust_log` (`RUST_LOG`; `info` otherwise).
    pub fn start_logging(database: &Path, rust_log: &str) -> Process {
        let mut command = Command::new(env!("CARGO_BIN_EXE_switchboard"));
        command.env("RUST_LOG", rust_log);
        Process::spawn(command, database, &[])
    }

    /// The server with at most `descriptors` file descriptors (`ulimit -n`, soft and hard),
    /// as on a machine whose limit is low.
    pub fn start_with_descriptors(database: &Path, descriptors: u32, extra: &[&str]) -> Process {
        let mut command = Command::new("bash");
        command
            .args(["-c", r#"ulimit -n "$0" && exec "$@""#])
            .arg(descriptors.to_string())
            .arg(env!("CARGO_BIN_EXE_switchboard"));
        Process::spawn(command, database, extra)
    }

    /// The server with its database on a disk of `size` (`3m`): a tmpfs mounted at
    /// `dir` in a mount namespace of its own (an unprivileged user namespace, so no
    /// root is needed). The test reaches the files through [`Process::seen_by_server`].
    pub fn start_on_small_disk(dir: &Path, size: &str) -> Process {
        let mut command = Command::new("unshare");
        command
            .args(["--user", "--map-root-user", "--mount", "sh", "-c"])
            .arg(r#"mount -t tmpfs -o size="$1" tmpfs "$2" && shift 2 && exec "$@""#)
            .args(["sh", size])
            .arg(dir)
            .arg(env!("CARGO_BIN_EXE_switchboard"));
        Process::spawn(command, &dir.join("small.db"), &[])
    }

    /// `path` as the server sees it (inside its mount namespace).
    pub fn seen_by_server(&self, path: &Path) -> PathBuf {
        PathBuf::from(format!("/proc/{}/root{}", self.child.id(), path.display()))
    }

    /// Runs `command` with `serve` and its arguments appended; waits for the address.
    fn spawn(mut command: Command, database: &Path, extra: &[&str]) -> Process {
        crate::support::init();
        command
            .args([
                "serve",
                "--listen",
                "127.0.0.1:0",
                "--log-format",
                "json",
                "--admin-token",
                ADMIN,
            ])
            .arg("--database")
            .arg(database)
            .args(extra);
        if command.get_envs().all(|(name, _)| name != "RUST_LOG") {
            command.env("RUST_LOG", "info");
        }
        let mut child = command
            .stderr(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .expect("server binary starts");
        let stderr = child.stderr.take().expect("stderr");
        let mut lines = BufReader::new(stderr).lines();
        // The lines before the address are the log's too.
        let mut startup = Vec::new();
        let (addr, listening) = loop {
            let line = lines
                .next()
                .expect("server printed its address")
                .expect("line");
            let entry = serde_json::from_str::<Value>(&line).ok();
            startup.push(line);
            if let Some(entry) = entry
                && let Some(addr) = entry["addr"].as_str()
            {
                break (addr.to_owned(), entry.clone());
            }
        };
        // Keep draining the log so the child never blocks on a full pipe.
        let log = std::sync::Arc::new(std::sync::Mutex::new(startup));
        let kept = log.clone();
        std::thread::spawn(move || {
            for line in lines.map_while(Result::ok) {
                kept.lock().expect("log").push(line);
            }
        });
        Process {
            child,
            base: format!("http://{addr}"),
            listening,
            log,
        }
    }

    /// The log lines so far, parsed.
    pub fn logged(&self) -> Vec<Value> {
        self.log
            .lock()
            .expect("log")
            .iter()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    /// Sends `which` (`-STOP`, `-CONT`) to the server process: a node paused as an
    /// overloaded machine or a debugger would pause it.
    pub fn signal(&self, which: &str) {
        let pid = self.child.id().to_string();
        let done = std::process::Command::new("kill")
            .args([which, &pid])
            .status()
            .expect("kill runs");
        assert!(done.success(), "kill {which} {pid}");
    }

    pub fn kill(mut self) {
        self.child.kill().expect("SIGKILL");
        self.child.wait().expect("reaped");
    }
}

/// A test that fails midway leaves no server behind (each holds database connections: a
/// few left over exhaust PostgreSQL's for every later test).
impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One call to a server process: its status and JSON body (null if none).
pub async fn call(
    http: &reqwest::Client,
    server: &Process,
    method: reqwest::Method,
    path: &str,
    token: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let mut req = http
        .request(method, format!("{}{path}", server.base))
        .bearer_auth(token);
    if let Some(body) = body {
        req = req.json(&body);
    }
    let res = req.send().await.expect("sent");
    let status = res.status().as_u16();
    (status, res.json::<Value>().await.unwrap_or(Value::Null))
}

/// Team `k` with agents a and b on a server process; their tokens.
pub async fn team_k(http: &reqwest::Client, server: &Process) -> Vec<String> {
    use reqwest::Method;
    let body = json!({"name": "k", "team_id": "k"});
    let (_, team) = call(http, server, Method::POST, "/v1/teams", ADMIN, Some(body)).await;
    let key = team["team_key"].as_str().expect("key").to_owned();
    let mut tokens = Vec::new();
    for id in ["a", "b"] {
        let body = json!({"agent_id": id, "role": "r", "capabilities": []});
        let path = "/v1/teams/k/agents";
        let (_, agent) = call(http, server, Method::POST, path, &key, Some(body)).await;
        tokens.push(agent["token"].as_str().expect("token").to_owned());
    }
    tokens
}

/// Every entry of an inbox as `(seq, message id)`, oldest first, page by page.
pub async fn every_inbox_entry(
    http: &reqwest::Client,
    server: &Process,
    token: &str,
) -> Vec<(i64, String)> {
    let mut entries = Vec::new();
    let mut cursor = String::new();
    loop {
        let path = format!("/v1/messages?sort_order=oldest_first&limit=100{cursor}");
        let (_, page) = call(http, server, reqwest::Method::GET, &path, token, None).await;
        for m in page["messages"].as_array().expect("messages") {
            let id = m["message_id"].as_str().unwrap_or_default().to_owned();
            entries.push((m["seq"].as_i64().unwrap_or(-1), id));
        }
        match page["next_cursor"].as_str() {
            Some(next) => cursor = format!("&cursor={next}"),
            None => return entries,
        }
    }
}

/// Every message id in an inbox.
pub async fn every_inbox_id(
    http: &reqwest::Client,
    server: &Process,
    token: &str,
) -> std::collections::HashSet<String> {
    let entries = every_inbox_entry(http, server, token).await;
    entries.into_iter().map(|(_, id)| id).collect()
}
