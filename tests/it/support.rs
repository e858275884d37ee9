//! The test harness: a real server on `127.0.0.1:0` with a fresh SQLite file, and a
//! real HTTP client. Tests read as scenarios through these helpers.

use std::path::PathBuf;
use std::time::Duration;

use reqwest::Method;
use serde_json::{Value, json};
use switchboard::server::{Server, ServerConfig};
use tempfile::TempDir;

pub const ADMIN: &str = "test-admin-token-0123456789";

/// The Wise Agents context [`TestApp::wise_team`] names as its default.
pub const WISE_TEST_CONTEXT: &str = "wise-tests";

/// A running server and a client for it.
pub struct TestApp {
    pub base: String,
    pub http: reqwest::Client,
    pub config: ServerConfig,
    server: Option<Server>,
    /// Holds the database folder until the test ends.
    _dir: TempDir,
    /// The test's PostgreSQL database, when the suite runs on that engine (removed when
    /// the test ends).
    _pg: Option<PgGuard>,
}

/// Removes a test's PostgreSQL database when the test ends (on a thread of its own: a
/// drop cannot wait for the async removal on the test's runtime).
struct PgGuard(Option<crate::pg::PgDatabase>);

impl Drop for PgGuard {
    fn drop(&mut self) {
        if let Some(db) = self.0.take() {
            let _ = std::thread::spawn(move || {
                if let Ok(rt) = tokio::runtime::Runtime::new() {
                    rt.block_on(db.remove());
                }
            })
            .join();
        }
    }
}

/// Whether the suite runs on PostgreSQL (`SWITCHBOARD_TEST_ENGINE=postgres`): every
/// [`TestApp`] then serves from a database of its own on the server `pg` names.
pub fn on_postgres() -> bool {
    std::env::var("SWITCHBOARD_TEST_ENGINE").as_deref() == Ok("postgres")
}

impl TestApp {
    /// A server with the defaults of `switchboard serve` and a fresh database.
    pub async fn start() -> TestApp {
        TestApp::start_with(|_| {}).await
    }

    /// Like [`TestApp::start`], after `adjust` changed the configuration.
    pub async fn start_with(adjust: impl FnOnce(&mut ServerConfig)) -> TestApp {
        let pg = if on_postgres() {
            let db = crate::pg::database("app")
                .await
                .expect("SWITCHBOARD_TEST_ENGINE=postgres needs a PostgreSQL server");
            Some(db)
        } else {
            None
        };
        TestApp::launch(adjust, pg).await
    }

    /// A server on a SQLite file whichever engine the suite runs on, for the tests of
    /// what is SQLite's own (the file, its WAL, a copy from it).
    pub async fn start_on_sqlite_with(adjust: impl FnOnce(&mut ServerConfig)) -> TestApp {
        TestApp::launch(adjust, None).await
    }

    /// A server on a PostgreSQL database of its own whichever engine the suite runs
    /// on, for what only PostgreSQL does (several nodes); `None` (and a `SKIPPED` note)
    /// when no PostgreSQL answers and none was required.
    pub async fn start_on_postgres() -> Option<TestApp> {
        TestApp::start_on_postgres_with(|_| {}).await
    }

    /// Like [`TestApp::start_on_postgres`], after `adjust` changed the configuration.
    pub async fn start_on_postgres_with(adjust: impl FnOnce(&mut ServerConfig)) -> Option<TestApp> {
        let db = crate::pg::database("nodes").await?;
        Some(TestApp::launch(adjust, Some(db)).await)
    }

    async fn launch(
        adjust: impl FnOnce(&mut ServerConfig),
        pg: Option<crate::pg::PgDatabase>,
    ) -> TestApp {
        init();
        let dir = tempfile::tempdir().expect("temp dir");
        let database = match &pg {
            Some(db) => PathBuf::from(&db.url),
            None => dir.path().join("data").join("switchboard.db"),
        };
        let mut config = ServerConfig::new("127.0.0.1:0".parse().expect("addr"), database);
        config.admin_token = Some(ADMIN.to_owned());
        adjust(&mut config);
        let server = Server::start(config.clone()).await.expect("server starts");
        TestApp {
            base: format!("http://{}", server.local_addr()),
            // A hung request fails the test instead of hanging the run.
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(30))
                .build()
                .expect("client"),
            config,
            server: Some(server),
            _dir: dir,
            _pg: Some(PgGuard(pg)),
        }
    }

    /// A second node on this server's database (PostgreSQL: several nodes share one),
    /// with a node id of its own. It reads the registry at its start: create what it
    /// must know first.
    pub async fn another_node(&self) -> TestApp {
        let mut config = self.config.clone();
        config.node_id = switchboard::core::node::NodeId::generate();
        let server = Server::start(config.clone())
            .await
            .expect("the second node starts");
        TestApp {
            base: format!("http://{}", server.local_addr()),
            http: self.http.clone(),
            config,
            server: Some(server),
            _dir: tempfile::tempdir().expect("temp dir"),
            _pg: None,
        }
    }

    pub fn database(&self) -> PathBuf {
        self.config.database.clone()
    }

    pub fn server(&self) -> &Server {
        self.server.as_ref().expect("server running")
    }

    /// Stops the server gracefully and starts it again on the same database file (on a
    /// new port).
    pub async fn restart(&mut self) {
        if let Some(server) = self.server.take() {
            server.shutdown().await;
        }
        let server = Server::start(self.config.clone())
            .await
            .expect("server restarts");
        self.base = format!("http://{}", server.local_addr());
        self.server = Some(server);
    }

    /// Stops the server gracefully and keeps its database (for [`TestApp::restart`]).
    pub async fn pause(&mut self) {
        if let Some(server) = self.server.take() {
            server.shutdown().await;
        }
    }

    /// Stops the server gracefully.
    /// The test's PostgreSQL database, no longer removed when this app is dropped (the
    /// test removes it, after looking at it with the servers stopped).
    pub fn keep_database(&mut self) -> Option<crate::pg::PgDatabase> {
        self._pg.as_mut().and_then(|guard| guard.0.take())
    }

    pub async fn stop(mut self) {
        if let Some(server) = self.server.take() {
            server.shutdown().await;
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    pub fn req(&self, method: Method, path: &str) -> Req {
        Req {
            builder: self.http.request(method, self.url(path)),
        }
    }

    pub fn get(&self, path: &str) -> Req {
        self.req(Method::GET, path)
    }

    pub fn post(&self, path: &str) -> Req {
        self.req(Method::POST, path)
    }

    pub fn patch(&self, path: &str) -> Req {
        self.req(Method::PATCH, path)
    }

    pub fn put(&self, path: &str) -> Req {
        self.req(Method::PUT, path)
    }

    pub fn delete(&self, path: &str) -> Req {
        self.req(Method::DELETE, path)
    }

    /// Creates a team with the admin token.
    pub async fn team(&self, team_id: &str) -> Team {
        let res = self
            .post("/v1/teams")
            .token(ADMIN)
            .json(json!({"name": format!("Team {team_id}"), "team_id": team_id}))
            .send()
            .await
            .expect_status(201);
        Team {
            id: team_id.to_owned(),
            key: res.str("team_key"),
        }
    }

    /// A team whose Wise Agents deployment creates the context `wise-tests` at start,
    /// and says so (`stomp_default_context`): messages that name no context reach its
    /// Wise agents in that one.
    pub async fn wise_team(&self, team_id: &str) -> Team {
        let team = self.team(team_id).await;
        self.patch(&format!("/v1/teams/{team_id}"))
            .token(&team.key)
            .json(json!({"stomp_default_context": WISE_TEST_CONTEXT}))
            .send()
            .await
            .expect_status(200);
        team
    }

    /// Registers an agent the team's STOMP bridge serves (`stomp_bridge: true`): a Wise
    /// Agents process connecting with the team key may act for it.
    pub async fn wise_agent(&self, team: &Team, agent_id: &str) -> Agent {
        self.register(
            team,
            json!({"agent_id": agent_id, "role": "wise-agent", "capabilities": [],
                   "stomp_bridge": true}),
        )
        .await
    }

    /// Registers an agent with the team key, as `body` says.
    async fn register(&self, team: &Team, body: Value) -> Agent {
        let res = self
            .post(&format!("/v1/teams/{}/agents", team.id))
            .token(&team.key)
            .json(body)
            .send()
            .await
            .expect_status(201);
        Agent {
            id: res.body["agent"]["agent_id"]
                .as_str()
                .expect("id")
                .to_owned(),
            token: res.body["token"].as_str().expect("token").to_owned(),
        }
    }

    /// Registers an agent with the team key.
    pub async fn agent(&self, team: &Team, agent_id: &str, capabilities: &[&str]) -> Agent {
        self.register(
            team,
            json!({"agent_id": agent_id, "role": format!("role of {agent_id}"),
                   "capabilities": capabilities}),
        )
        .await
    }
}

pub struct Team {
    pub id: String,
    pub key: String,
}

impl TestApp {
    /// SEND_MESSAGE from `from` with the given body fields merged into a valid default
    /// body; returns the response.
    pub async fn send_with(&self, from: &Agent, fields: Value) -> Res {
        let mut body = json!({
            "sender_agent_id": from.id,
            "recipient_agent_ids": [],
            "message_type": "information",
            "content": {"text": "hello"},
        });
        merge(&mut body, fields);
        self.post("/v1/messages")
            .token(&from.token)
            .json(body)
            .send()
            .await
    }

    /// Sends a plain message and returns its id.
    pub async fn send(&self, from: &Agent, to: &[&Agent], text: &str) -> String {
        let ids: Vec<&str> = to.iter().map(|a| a.id.as_str()).collect();
        self.send_with(
            from,
            json!({"recipient_agent_ids": ids, "content": {"text": text}}),
        )
        .await
        .expect_status(201)
        .str("message_id")
    }

    /// GET_MESSAGES for `agent` with a query string (starting with `?`, or empty).
    pub async fn inbox(&self, agent: &Agent, query: impl AsRef<str>) -> Res {
        self.get(&format!("/v1/messages{}", query.as_ref()))
            .token(&agent.token)
            .send()
            .await
    }
}

/// Merges `patch` into `target` (objects recursively; `null` removes a key).
pub fn merge(target: &mut Value, patch: Value) {
    match (target, patch) {
        (Value::Object(t), Value::Object(p)) => {
            for (k, v) in p {
                if v.is_null() {
                    t.remove(&k);
                } else {
                    merge(t.entry(k).or_insert(Value::Null), v);
                }
            }
        }
        (t, p) => *t = p,
    }
}

/// The `message_id`s of an inbox answer, in order.
pub fn ids_of(res: &Res) -> Vec<String> {
    res.body["messages"]
        .as_array()
        .unwrap_or_else(|| panic!("no messages in {:#}", res.body))
        .iter()
        .map(|m| m["message_id"].as_str().unwrap_or_default().to_owned())
        .collect()
}

#[derive(Clone)]
pub struct Agent {
    pub id: String,
    pub token: String,
}

/// A request being built.
pub struct Req {
    builder: reqwest::RequestBuilder,
}

impl Req {
    pub fn token(self, token: &str) -> Req {
        Req {
            builder: self.builder.bearer_auth(token),
        }
    }

    pub fn header(self, name: &str, value: &str) -> Req {
        Req {
            builder: self.builder.header(name, value),
        }
    }

    pub fn json(self, body: Value) -> Req {
        Req {
            builder: self.builder.json(&body),
        }
    }

    pub fn raw(self, body: impl Into<reqwest::Body>) -> Req {
        Req {
            builder: self
                .builder
                .header("content-type", "application/json")
                .body(body),
        }
    }

    /// A body sent with whatever Content-Type was set (or none).
    pub fn raw_untyped(self, body: impl Into<reqwest::Body>) -> Req {
        Req {
            builder: self.builder.body(body),
        }
    }

    pub async fn send(self) -> Res {
        let response = self.builder.send().await.expect("request sent");
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let text = response.text().await.expect("body read");
        let body = serde_json::from_str(&text).unwrap_or(Value::String(text));
        Res {
            status,
            headers,
            body,
        }
    }
}

/// A response: status and JSON body (a string if the body was not JSON).
#[derive(Debug)]
pub struct Res {
    pub status: u16,
    pub headers: reqwest::header::HeaderMap,
    pub body: Value,
}

impl Res {
    #[track_caller]
    pub fn expect_status(self, status: u16) -> Res {
        assert_eq!(
            self.status, status,
            "unexpected status; body: {:#}",
            self.body
        );
        self
    }

    /// Asserts the error body of the contract with this status and code.
    #[track_caller]
    pub fn expect_error(self, status: u16, code: &str) -> Res {
        assert_eq!(
            self.status, status,
            "unexpected status; body: {:#}",
            self.body
        );
        assert_eq!(self.body["success"], false, "{:#}", self.body);
        assert_eq!(self.body["error_code"], code, "{:#}", self.body);
        assert!(
            self.body["error_message"]
                .as_str()
                .is_some_and(|m| !m.is_empty()),
            "error_message missing: {:#}",
            self.body
        );
        assert!(
            self.body["details"].is_object(),
            "details missing: {:#}",
            self.body
        );
        assert!(
            self.body["suggested_action"]
                .as_str()
                .is_some_and(|m| !m.is_empty()),
            "suggested_action missing: {:#}",
            self.body
        );
        self
    }

    /// Asserts a `VALIDATION_ERROR` that names `field`.
    #[track_caller]
    pub fn expect_invalid(self, field: &str) -> Res {
        let res = self.expect_error(400, "VALIDATION_ERROR");
        assert_eq!(res.body["details"]["field"], field, "{:#}", res.body);
        res
    }

    #[track_caller]
    pub fn str(&self, key: &str) -> String {
        self.body[key]
            .as_str()
            .unwrap_or_else(|| panic!("no string '{key}' in {:#}", self.body))
            .to_owned()
    }
}

/// Process-wide set-up for tests: the TLS provider reqwest needs, and logs with TEST_LOG.
pub fn init() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
        if std::env::var_os("TEST_LOG").is_some() {
            let _ = tracing_subscriber::fmt()
                .with_env_filter(tracing_subscriber::EnvFilter::from_env("TEST_LOG"))
                .with_test_writer()
                .try_init();
        }
    });
}

impl TestApp {
    /// Runs `examples/<name>.rs` (built first if needed) against this server with the
    /// admin token; asserts it succeeds within a minute and returns what it printed.
    pub async fn run_example(&self, name: &str) -> String {
        let example = std::env::current_exe()
            .expect("test binary")
            .parent()
            .and_then(|deps| deps.parent())
            .map(|dir| dir.join("examples").join(name))
            .expect("examples folder");
        if !example.exists() {
            let built = tokio::process::Command::new(env!("CARGO"))
                .args(["build", "-p", "switchboard-client", "--example", name])
                .status()
                .await
                .expect("cargo runs");
            assert!(built.success());
        }
        let out = tokio::time::timeout(
            std::time::Duration::from_secs(60),
            tokio::process::Command::new(&example)
                .args(["--url", &self.base, "--admin-token", ADMIN])
                .output(),
        )
        .await
        .expect("the example ends by itself")
        .expect("runs");
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        stdout
    }
}
