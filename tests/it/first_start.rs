//! A newcomer's first starts, as the binary runs them: a start that cannot listen leaves
//! nothing behind, the admin token is always accounted for (shown when generated, named
//! by its date when kept, replaceable offline), and one SQLite file has one server.

use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// A server process started without `--admin-token` (or with `SWITCHBOARD_ADMIN_TOKEN`),
/// with its stdout and its log collected.
struct Started {
    child: Child,
    base: String,
    stdout: Arc<Mutex<String>>,
    log: Arc<Mutex<Vec<String>>>,
}

impl Started {
    fn start(database: &Path) -> Started {
        Started::start_with_token(database, None)
    }

    fn start_with_token(database: &Path, token: Option<&str>) -> Started {
        crate::support::init();
        let mut command = Command::new(env!("CARGO_BIN_EXE_switchboard"));
        command
            .args(["serve", "--listen", "127.0.0.1:0", "--log-format", "json"])
            .arg("--database")
            .arg(database)
            .env("RUST_LOG", "info");
        match token {
            Some(token) => command.env("SWITCHBOARD_ADMIN_TOKEN", token),
            None => command.env_remove("SWITCHBOARD_ADMIN_TOKEN"),
        };
        let mut child = command
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("server binary starts");
        let stdout = Arc::new(Mutex::new(String::new()));
        let mut out = child.stdout.take().expect("stdout");
        let collected = stdout.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = out.read(&mut buf) {
                if n == 0 {
                    break;
                }
                let text = String::from_utf8_lossy(&buf[..n]).into_owned();
                collected.lock().expect("stdout text").push_str(&text);
            }
        });
        let mut lines = BufReader::new(child.stderr.take().expect("stderr")).lines();
        let addr = loop {
            let line = lines
                .next()
                .expect("the server printed its address")
                .expect("line");
            if let Ok(entry) = serde_json::from_str::<Value>(&line)
                && let Some(addr) = entry["addr"].as_str()
            {
                break addr.to_owned();
            }
        };
        let log = Arc::new(Mutex::new(Vec::new()));
        let kept = log.clone();
        std::thread::spawn(move || {
            for line in lines.map_while(Result::ok) {
                kept.lock().expect("log").push(line);
            }
        });
        Started {
            child,
            base: format!("http://{addr}"),
            stdout,
            log,
        }
    }

    /// The log lines so far that contain `part`, once one is there (20 s at most).
    fn logged(&self, part: &str) -> Vec<String> {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let found = self.logged_now(part);
            if !found.is_empty() || Instant::now() > deadline {
                return found;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The log lines so far that contain `part`.
    fn logged_now(&self, part: &str) -> Vec<String> {
        let lines = self.log.lock().expect("log");
        lines.iter().filter(|l| l.contains(part)).cloned().collect()
    }

    /// What the server printed on stdout, once a line containing `part` is there.
    fn printed(&self, part: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let text = self.stdout.lock().expect("stdout text").clone();
            if text.contains(part) || Instant::now() > deadline {
                return text;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// SIGTERM, then waits for the clean stop.
    fn stop(mut self) {
        let pid = self.child.id().to_string();
        let sent = Command::new("kill").args(["-TERM", &pid]).status();
        assert!(sent.is_ok_and(|s| s.success()), "SIGTERM sent");
        let status = self.child.wait().expect("reaped");
        assert!(status.success(), "a clean stop: {status}");
    }
}

/// Runs the binary with `args` to its end: exit code, stdout, stderr.
fn run(args: &[&str], database: &Path) -> (Option<i32>, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_switchboard"))
        .args(args)
        .arg("--database")
        .arg(database)
        .env_remove("SWITCHBOARD_ADMIN_TOKEN")
        .output()
        .expect("the binary runs");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The token printed on its own indented line.
fn shown_token(stdout: &str) -> String {
    stdout
        .lines()
        .map(str::trim)
        .find(|l| l.starts_with("sb_admin_"))
        .unwrap_or_else(|| panic!("no token shown in:\n{stdout}"))
        .to_owned()
}

/// Whether `token` may create a team on `base`.
async fn creates_teams(base: &str, token: &str) -> u16 {
    reqwest::Client::new()
        .post(format!("{base}/v1/teams"))
        .bearer_auth(token)
        .json(&json!({"name": "t"}))
        .send()
        .await
        .expect("sent")
        .status()
        .as_u16()
}

/// A first start on a port in use fails before anything is created; the next start
/// shows the generated token once; later starts name the day it was set and the way to
/// replace it; `admin reset-token` replaces it offline (the old one stops working).
#[tokio::test]
async fn the_admin_token_is_never_lost_from_the_first_start_on() {
    let dir = tempfile::tempdir().expect("tmp");
    let db = dir.path().join("first.db");
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
    let port = taken.local_addr().expect("addr").port().to_string();
    let listen = format!("127.0.0.1:{port}");
    let (code, _, stderr) = run(&["serve", "--listen", &listen], &db);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("cannot listen"), "{stderr}");
    let left: Vec<_> = std::fs::read_dir(dir.path()).expect("dir").collect();
    assert!(left.is_empty(), "a failed start left {left:?}");
    drop(taken);

    let first = Started::start(&db);
    let generated = shown_token(&first.printed("sb_admin_"));
    assert_eq!(creates_teams(&first.base, &generated).await, 201);
    first.stop();

    let again = Started::start(&db);
    let note = again.printed("reset-token");
    let today = &switchboard_types::time::Timestamp::now().to_string()[..10];
    assert!(
        note.contains(&format!("The admin token was set on {today}")),
        "{note}"
    );
    assert!(
        !note.contains("sb_admin_"),
        "a kept token is never shown: {note}"
    );
    assert!(
        note.contains(&format!(
            "switchboard admin reset-token --database {}",
            db.display()
        )),
        "{note}"
    );
    // Offline only: the running server's lock refuses it.
    let (code, _, stderr) = run(&["admin", "reset-token"], &db);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("already served by process"), "{stderr}");
    again.stop();

    let (code, stdout, stderr) = run(&["admin", "reset-token"], &db);
    assert_eq!(code, Some(0), "{stderr}");
    let replaced = shown_token(&stdout);
    assert_ne!(replaced, generated);
    let after = Started::start(&db);
    assert_eq!(creates_teams(&after.base, &replaced).await, 201);
    assert_eq!(creates_teams(&after.base, &generated).await, 401);
    after.stop();

    let missing = dir.path().join("typo.db");
    let (code, _, stderr) = run(&["admin", "reset-token"], &missing);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("there is no database at"), "{stderr}");
    assert!(!missing.exists(), "reset-token created a database");
}

/// A second server on the same SQLite file is refused at start (exit 2), naming the
/// process that serves it; the first goes on serving; once it stopped, the file is free.
#[tokio::test]
async fn one_sqlite_file_has_one_server() {
    let dir = tempfile::tempdir().expect("tmp");
    let db = dir.path().join("shared.db");
    let first = Started::start(&db);
    let token = shown_token(&first.printed("sb_admin_"));
    let (code, _, stderr) = run(&["serve", "--listen", "127.0.0.1:0"], &db);
    assert_eq!(code, Some(2), "{stderr}");
    let pid = first.child.id();
    assert!(
        stderr.contains(&format!("is already served by process {pid} (")),
        "{stderr}"
    );
    assert!(
        stderr.contains("PostgreSQL"),
        "says where several nodes belong: {stderr}"
    );
    assert_eq!(creates_teams(&first.base, &token).await, 201);
    // A copy of the file while it is served would be of a moment, not of the last state.
    if let Some(target) = crate::pg::database("served_copy").await {
        let out = Command::new(env!("CARGO_BIN_EXE_switchboard"))
            .args(["migrate-db", "--to", &target.url, "--from"])
            .arg(&db)
            .output()
            .expect("the binary runs");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        assert!(
            stderr.contains(&format!("already served by process {pid}")),
            "{stderr}"
        );
        target.remove().await;
    }
    first.stop();
    let next = Started::start(&db);
    assert_eq!(creates_teams(&next.base, &token).await, 201);
    next.stop();
}

/// A token in `SWITCHBOARD_ADMIN_TOKEN` that differs from the stored one replaces it — and
/// says so at WARN (it used to without a word, and the old token got 401). The same
/// token again says nothing. The banner names the console and the docs, and `GET /`
/// leads to the console.
#[tokio::test]
async fn a_replaced_admin_token_is_said_aloud_and_the_start_names_every_url() {
    let dir = tempfile::tempdir().expect("tmp");
    let db = dir.path().join("replaced.db");
    let first = Started::start_with_token(&db, Some("sb_admin_first_token_0123456789"));
    let banner = first.printed("Metrics");
    for path in ["/console", "/docs", "/v1/ws", "/mcp", "/metrics"] {
        assert!(
            banner.contains(&format!("{}{path}", first.base.replace("http://", ""))),
            "{banner}"
        );
    }
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("client");
    let root = http
        .get(format!("{}/", first.base))
        .send()
        .await
        .expect("answered");
    assert_eq!(root.status(), 307);
    assert_eq!(root.headers()["location"], "/console");
    // (The token is settled before the address is announced: its line would be here.)
    assert!(first.logged_now("replaces the one stored").is_empty());
    first.stop();

    let same = Started::start_with_token(&db, Some("sb_admin_first_token_0123456789"));
    same.printed("Metrics");
    assert!(same.logged_now("replaces the one stored").is_empty());
    same.stop();
    let second = Started::start_with_token(&db, Some("sb_admin_second_token_012345678"));
    let warned = second.logged("replaces the one stored");
    assert_eq!(warned.len(), 1, "{warned:?}");
    let line: Value = serde_json::from_str(&warned[0]).expect("json");
    assert_eq!(line["level"], "WARN");
    assert!(warned[0].contains(&db.display().to_string()), "{warned:?}");
    assert_eq!(
        creates_teams(&second.base, "sb_admin_first_token_0123456789").await,
        401
    );
    assert_eq!(
        creates_teams(&second.base, "sb_admin_second_token_012345678").await,
        201
    );
    second.stop();
}
