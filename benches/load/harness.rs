//! The pieces every scenario uses: the server as a child process, a lean HTTP load
//! generator, latency statistics and the result table.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::{Request, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio::net::TcpStream;

pub use crate::slices::{Side, interleaved};

pub const ADMIN: &str = "bench-admin-token-0123456789";

/// The release server binary running on a temporary (or kept) database.
pub struct ServerProcess {
    child: Child,
    pub addr: SocketAddr,
    /// The STOMP listener, when started with `--stomp-listen`.
    pub stomp_addr: Option<SocketAddr>,
    db: PathBuf,
    _dir: Option<tempfile::TempDir>,
}

/// Which server a [`ServerProcess`] runs: a binary — this build's, or `BENCH_SERVER_BIN`
/// (another build's: an A/B driven by the same load generator, only the server differs)
/// — and settings added to the environment it inherits.
#[derive(Debug, Clone, Default)]
pub struct Launch {
    pub binary: Option<PathBuf>,
    pub env: Vec<(String, String)>,
}

impl Launch {
    fn binary(&self) -> PathBuf {
        self.binary
            .clone()
            .or_else(|| std::env::var_os("BENCH_SERVER_BIN").map(PathBuf::from))
            .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_switchboard")))
    }
}

impl ServerProcess {
    pub fn start(extra: &[&str]) -> ServerProcess {
        ServerProcess::start_as(&Launch::default(), extra)
    }

    /// A server on a fresh database, as `launch` says.
    pub fn start_as(launch: &Launch, extra: &[&str]) -> ServerProcess {
        let dir = tempfile::tempdir().expect("temp dir");
        let db = dir.path().join("bench.db");
        let mut server = ServerProcess::launch(launch, &db, extra);
        server._dir = Some(dir);
        server
    }

    /// A server on a database that outlives it (see `--data-dir`).
    pub fn start_on(db: &std::path::Path, extra: &[&str]) -> ServerProcess {
        ServerProcess::launch(&Launch::default(), db, extra)
    }

    fn launch(launch: &Launch, db: &std::path::Path, extra: &[&str]) -> ServerProcess {
        let db: PathBuf = db.to_path_buf();
        let mut child = Command::new(launch.binary())
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
            .arg(&db)
            .args(extra)
            // BENCH_SERVER_LOG widens what the server logs (a filter, e.g. a module at
            // debug). The listening lines stay on whatever it says: they are how the
            // harness learns the ports, and without them it would wait forever.
            .env(
                "RUST_LOG",
                format!(
                    "{},switchboard::server=info",
                    std::env::var("BENCH_SERVER_LOG").unwrap_or_else(|_| "warn".to_owned())
                ),
            )
            .envs(launch.env.iter().map(|(k, v)| (k, v)))
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start the server binary");
        let stderr = child.stderr.take().expect("stderr");
        let mut lines = BufReader::new(stderr).lines();
        let mut stomp_addr = None;
        let addr = loop {
            let line = lines
                .next()
                .expect("server printed its address")
                .expect("line");
            if let Ok(entry) = serde_json::from_str::<Value>(&line)
                && let Some(addr) = entry["addr"].as_str()
            {
                // The STOMP listener (when asked for) is announced first.
                if entry["message"] == "STOMP listening" {
                    stomp_addr = Some(addr.parse().expect("addr"));
                    continue;
                }
                break addr.parse().expect("addr");
            }
        };
        let everything = std::env::var_os("BENCH_SERVER_LOG").is_some();
        std::thread::spawn(move || {
            for line in lines.map_while(Result::ok) {
                if everything || line.contains("\"ERROR\"") || line.contains("\"WARN\"") {
                    eprintln!("server: {line}");
                }
            }
        });
        ServerProcess {
            child,
            addr,
            stomp_addr,
            db,
            _dir: None,
        }
    }

    /// Waits (up to 30 s each) until the WAL is fully checkpointed and then cut back by
    /// the idle truncation, and has the kernel write back what seeding left dirty, so a
    /// measurement after seeding sees the steady state, not the checkpointer catching up
    /// (a seeded hot inbox leaves a ~1 GiB log; its truncation and writeback overlapped
    /// the first queries and doubled their p99).
    pub async fn settle(&self) {
        let url = format!("{}/metrics", self.base());
        let mut settled = false;
        for _ in 0..300 {
            tokio::time::sleep(Duration::from_millis(100)).await;
            let Ok(res) = reqwest::get(&url).await else {
                continue;
            };
            let text = res.text().await.unwrap_or_default();
            let backlog = text
                .lines()
                .find_map(|l| l.strip_prefix("switchboard_store_wal_backlog_frames "))
                .and_then(|v| v.trim().parse::<f64>().ok());
            if backlog == Some(0.0) {
                settled = true;
                break;
            }
        }
        if !settled {
            eprintln!("  (the WAL did not settle within 30 s)");
            return;
        }
        for _ in 0..300 {
            if self.wal_bytes() <= 64 * 1024 * 1024 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let _ = tokio::process::Command::new("sync").status().await;
    }

    /// Bytes of the database file.
    pub fn database_bytes(&self) -> u64 {
        std::fs::metadata(&self.db).map_or(0, |m| m.len())
    }

    /// Bytes of the write-ahead log (0 when there is none).
    pub fn wal_bytes(&self) -> u64 {
        let mut wal = self.db.as_os_str().to_owned();
        wal.push("-wal");
        std::fs::metadata(PathBuf::from(wal)).map_or(0, |m| m.len())
    }

    pub fn base(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The server's own memory (anonymous resident pages: heap, stacks), in KiB. Pages
    /// of the database file mapped by SQLite's readers are the kernel's page cache and
    /// are left out (see [`ServerProcess::mapped_kib`]).
    pub fn rss_kib(&self) -> u64 {
        self.status_kib("RssAnon:")
    }

    /// The server's process id (for sampling its memory from another thread).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Resident pages of mapped files (the database), in KiB.
    pub fn mapped_kib(&self) -> u64 {
        self.status_kib("RssFile:")
    }

    fn status_kib(&self, field: &str) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .unwrap_or_default();
        status
            .lines()
            .find_map(|l| l.strip_prefix(field))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or(0)
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A client for set-up calls (creating teams, registering agents).
pub struct Setup {
    http: reqwest::Client,
    base: String,
}

#[derive(Clone, serde::Serialize, serde::Deserialize)]
pub struct AgentCreds {
    pub id: String,
    pub token: String,
}

impl Setup {
    pub fn new(server: &ServerProcess) -> Setup {
        Setup {
            http: reqwest::Client::new(),
            base: server.base(),
        }
    }

    pub async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        token: &str,
        body: Option<Value>,
    ) -> Value {
        let mut req = self
            .http
            .request(method, format!("{}{path}", self.base))
            .bearer_auth(token);
        if let Some(body) = body {
            req = req.json(&body);
        }
        let res = req.send().await.expect("setup call");
        let status = res.status();
        let body: Value = res.json().await.unwrap_or(Value::Null);
        assert!(status.is_success(), "setup {path}: {status} {body}");
        body
    }

    /// A team with `n` agents named `{prefix}{i}`; returns the team key and the agents.
    pub async fn team(
        &self,
        team_id: &str,
        prefix: &str,
        n: usize,
        capabilities: &[&str],
    ) -> (String, Vec<AgentCreds>) {
        let team = self
            .call(
                reqwest::Method::POST,
                "/v1/teams",
                ADMIN,
                Some(json!({"name": team_id, "team_id": team_id})),
            )
            .await;
        let key = team["team_key"].as_str().expect("key").to_owned();
        let mut agents = Vec::with_capacity(n);
        for i in 0..n {
            let id = format!("{prefix}{i}");
            let res = self
                .call(
                    reqwest::Method::POST,
                    &format!("/v1/teams/{team_id}/agents"),
                    &key,
                    Some(json!({"agent_id": id, "role": "bench", "capabilities": capabilities})),
                )
                .await;
            agents.push(AgentCreds {
                id,
                token: res["token"].as_str().expect("token").to_owned(),
            });
        }
        (key, agents)
    }
}

/// What one load run measured.
#[derive(Default)]
pub struct LoadResult {
    pub ok: u64,
    /// Every request answered, warm-ups included: what the server did while it was
    /// driven (its CPU time over a run is divided by this).
    pub answered: u64,
    pub errors: u64,
    pub elapsed: Duration,
    /// Latencies in microseconds, unsorted.
    pub latencies: Vec<u32>,
}

impl LoadResult {
    pub fn per_second(&self) -> f64 {
        self.ok as f64 / self.elapsed.as_secs_f64()
    }

    /// Adds another run's figures (for measurements taken in several slices).
    pub fn merge(&mut self, other: LoadResult) {
        self.ok += other.ok;
        self.answered += other.answered;
        self.errors += other.errors;
        self.elapsed += other.elapsed;
        self.latencies.extend(other.latencies);
    }
}

/// Builds the `i`-th request of connection `conn`.
pub type MakeRequest = Arc<dyn Fn(usize, u64) -> Request<Full<Bytes>> + Send + Sync>;

/// Runs `connections` keep-alive HTTP/1.1 connections in a closed loop (each sends its
/// next request when the previous answer arrived) for `duration`, after `warmup`.
pub async fn http_load(
    addr: SocketAddr,
    connections: usize,
    warmup: Duration,
    duration: Duration,
    expect: StatusCode,
    make: MakeRequest,
) -> LoadResult {
    let flags = Arc::new(Flags::default());
    let mut tasks = Vec::with_capacity(connections);
    for conn in 0..connections {
        let load = OneConnection {
            addr,
            conn,
            expect,
            make: make.clone(),
            flags: flags.clone(),
        };
        tasks.push(tokio::spawn(load.run()));
    }
    tokio::time::sleep(warmup).await;
    flags.measuring.store(true, Ordering::Relaxed);
    let started = Instant::now();
    tokio::time::sleep(duration).await;
    flags.measuring.store(false, Ordering::Relaxed);
    let elapsed = started.elapsed();
    flags.stop.store(true, Ordering::Relaxed);
    let mut total = LoadResult {
        elapsed,
        ..LoadResult::default()
    };
    for task in tasks {
        let r = task.await.expect("load task");
        total.ok += r.ok;
        total.answered += r.answered;
        total.errors += r.errors;
        total.latencies.extend(r.latencies);
    }
    total
}

/// When a load counts (after the warm-up) and when it stops.
#[derive(Default)]
struct Flags {
    measuring: AtomicBool,
    stop: AtomicBool,
}

/// One keep-alive connection of a closed-loop load.
struct OneConnection {
    addr: SocketAddr,
    conn: usize,
    expect: StatusCode,
    make: MakeRequest,
    flags: Arc<Flags>,
}

impl OneConnection {
    /// Sends requests one after another until stopped; counts what came back while
    /// measuring.
    async fn run(self) -> LoadResult {
        let mut result = LoadResult::default();
        let stream = TcpStream::connect(self.addr).await.expect("connect");
        stream.set_nodelay(true).expect("nodelay");
        let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .expect("handshake");
        tokio::spawn(connection);
        let mut i = 0u64;
        while !self.flags.stop.load(Ordering::Relaxed) {
            let req = (self.make)(self.conn, i);
            i += 1;
            let started = Instant::now();
            let ok = match sender.send_request(req).await {
                Ok(res) => {
                    let status = res.status();
                    let body = res.into_body().collect().await;
                    if status != self.expect && body.is_ok() {
                        if result.errors == 0 {
                            eprintln!("unexpected {status}: {:?}", body.map(|b| b.to_bytes()));
                        }
                        false
                    } else {
                        body.is_ok()
                    }
                }
                Err(err) => {
                    eprintln!("request failed: {err}");
                    break;
                }
            };
            result.answered += 1;
            if self.flags.measuring.load(Ordering::Relaxed) {
                if ok {
                    result.ok += 1;
                    result
                        .latencies
                        .push(started.elapsed().as_micros().min(u32::MAX as u128) as u32);
                } else {
                    result.errors += 1;
                }
            }
        }
        result
    }
}

/// Sends exactly `total` requests over `connections` keep-alive connections, as fast as
/// the server answers (for seeding data); returns how long it took and how many failed.
pub async fn http_count(
    addr: SocketAddr,
    connections: usize,
    total: u64,
    expect: StatusCode,
    make: MakeRequest,
) -> (Duration, u64) {
    let next = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let started = Instant::now();
    let mut tasks = Vec::with_capacity(connections);
    for conn in 0..connections {
        let make = make.clone();
        let next = next.clone();
        tasks.push(tokio::spawn(async move {
            let stream = TcpStream::connect(addr).await.expect("connect");
            stream.set_nodelay(true).expect("nodelay");
            let (mut sender, connection) =
                hyper::client::conn::http1::handshake(TokioIo::new(stream))
                    .await
                    .expect("handshake");
            tokio::spawn(connection);
            let mut failed = 0u64;
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= total {
                    break;
                }
                let res = sender.send_request(make(conn, i)).await.expect("request");
                let status = res.status();
                let body = res.into_body().collect().await.expect("body");
                if status != expect {
                    if failed == 0 {
                        eprintln!("unexpected {status}: {:?}", body.to_bytes());
                    }
                    failed += 1;
                }
            }
            failed
        }));
    }
    let mut failed = 0;
    for task in tasks {
        failed += task.await.expect("seed task");
    }
    (started.elapsed(), failed)
}

/// The `q`-quantile (0.0–1.0) of microsecond samples, in milliseconds.
pub fn quantile_ms(samples: &mut [u32], q: f64) -> f64 {
    if samples.is_empty() {
        return f64::NAN;
    }
    samples.sort_unstable();
    let idx = ((samples.len() - 1) as f64 * q).round() as usize;
    samples[idx] as f64 / 1000.0
}

/// One line of the result table.
pub struct Row {
    pub scenario: String,
    pub setting: String,
    pub rate: String,
    pub p50: String,
    pub p99: String,
    pub rss: String,
    pub note: String,
}

impl Row {
    pub fn from_load(
        scenario: &str,
        setting: String,
        mut result: LoadResult,
        rss_kib: u64,
        note: String,
    ) -> Row {
        Row {
            scenario: scenario.to_owned(),
            setting,
            rate: format!("{:.0} req/s", result.per_second()),
            p50: format!("{:.2} ms", quantile_ms(&mut result.latencies, 0.50)),
            p99: format!("{:.2} ms", quantile_ms(&mut result.latencies, 0.99)),
            rss: format!("{:.1} MiB", rss_kib as f64 / 1024.0),
            note: if result.errors > 0 {
                format!("{} errors; {note}", result.errors)
            } else {
                note
            },
        }
    }
}

pub fn print_table(rows: &[Row]) {
    let header = [
        "scenario",
        "setting",
        "rate",
        "p50",
        "p99",
        "server RSS",
        "note",
    ];
    let cells: Vec<[&str; 7]> = rows
        .iter()
        .map(|r| {
            [
                r.scenario.as_str(),
                &r.setting,
                &r.rate,
                &r.p50,
                &r.p99,
                &r.rss,
                &r.note,
            ]
        })
        .collect();
    let mut widths = header.map(str::len);
    for row in &cells {
        for (w, c) in widths.iter_mut().zip(row) {
            *w = (*w).max(c.len());
        }
    }
    let line = |cols: [&str; 7]| {
        let parts: Vec<String> = cols
            .iter()
            .zip(widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        println!("| {} |", parts.join(" | "));
    };
    line(header);
    let dashes: Vec<String> = widths.iter().map(|w| "-".repeat(*w)).collect();
    println!("|-{}-|", dashes.join("-|-"));
    for row in cells {
        line(row);
    }
}
