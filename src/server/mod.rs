//! Wiring: storage, core, transports, and a graceful stop.
//!
//! [`Server::start`] is what `switchboard serve` runs and what the integration tests
//! start on `127.0.0.1:0`: there is one way to run the server.

mod config;
mod limits;
mod listener;

pub use config::ServerConfig;

use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;
use switchboard_types::ids::TeamId;

use axum::Router;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use utoipa_axum::router::OpenApiRouter;

use crate::callbacks;
use crate::core::auth::AdminToken;
use crate::core::retention;
use crate::core::tasks::TaskSettings;
use crate::core::{Core, CoreSettings};
use crate::hub::HubSettings;
use crate::store::{Store, StoreError, StoreOptions};
use crate::telemetry::MetricsHandle;
use crate::transport::a2a;
use crate::transport::common::gate::Gate;
use crate::transport::http::{self, HttpSettings, HttpState};
use crate::transport::mcp::{self, McpState};
use crate::transport::stomp::frame::Limits;
use crate::transport::stomp::{self, StompSettings, StompState};
use crate::transport::ws::{self, WsSettings, WsState};

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("cannot open the database: {0}")]
    Store(#[from] StoreError),
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        #[source]
        source: io::Error,
    },
    #[error("cannot make the HTTP client for outside A2A agents: {0}")]
    Outbound(String),
    #[error("there is no database at {0}")]
    NoDatabase(PathBuf),
}

impl StartError {
    /// Whether the start was refused for how it was asked (another server on the same
    /// SQLite file): the command line's fault, exit code 2 like a bad flag.
    pub fn is_usage(&self) -> bool {
        matches!(self, StartError::Store(StoreError::InUse { .. }))
    }
}

/// `switchboard admin reset-token`: sets a new admin token on the database `database`
/// names and returns it. A SQLite file must exist and must not be served meanwhile (its
/// server's lock refuses this); PostgreSQL nodes keep the token they loaded until they
/// restart.
pub async fn reset_admin_token(database: &std::path::Path) -> Result<String, StartError> {
    let text = database.to_string_lossy();
    if !crate::store::postgres::is_url(&text) {
        let file = PathBuf::from(text.strip_prefix("sqlite://").unwrap_or(&text));
        if !file.exists() {
            return Err(StartError::NoDatabase(file));
        }
    }
    let store = Store::open(database, StoreOptions::default()).await?;
    let replaced = crate::core::auth::replace_admin_token(&store, None).await;
    store.close().await;
    Ok(replaced?.1)
}

/// A running server.
pub struct Server {
    addr: SocketAddr,
    stomp_addr: Option<SocketAddr>,
    admin_token: AdminToken,
    stop: CancellationToken,
    task: JoinHandle<()>,
}

impl Server {
    /// Opens storage, loads the registry, binds the listener and starts serving.
    pub async fn start(config: ServerConfig) -> Result<Server, StartError> {
        crate::ticks::stretch(config.tick_scale);
        // Before anything is written, so the first storage batches are counted too.
        let metrics = MetricsHandle::global();
        // Before any task that may build an HTTP client starts: reqwest panics building
        // one without a process-wide TLS provider, and the tasks start in no fixed order
        // (the span exporter, spawned without it, died at start in some runs).
        switchboard_client::ensure_tls_provider();
        // Every listener before storage: a start that cannot listen (a port in use)
        // creates no database and settles no admin token nobody will ever see.
        let (listener, addr) = bind(config.listen).await?;
        let stomp_listener = match config.stomp_listen {
            Some(at) => Some(bind(at).await?),
            None => None,
        };
        let (store, core, admin_token) = open_core(&config).await?;
        let gate = limits::connection_gate(config.max_connections);
        let ws = WsState {
            core: core.clone(),
            settings: WsSettings {
                ping_interval: config.ws_ping_interval,
                max_frame_bytes: config.max_body_bytes,
            },
            shutdown: CancellationToken::new(),
            tracker: TaskTracker::new(),
        };
        let stomp = stomp_state(&config, &core, &ws, &gate);
        let stomp_addr = start_stomp(stomp_listener, &stomp);
        let stop = CancellationToken::new();
        let delegation = a2a::Delegation::new(
            core.clone(),
            (config.callbacks.allow_private, config.a2a_card_refresh),
            stop.clone(),
        )
        .map_err(StartError::Outbound)?;
        let app = compose(
            &core,
            metrics,
            (&ws, &stomp, &delegation),
            HttpSettings {
                max_body_bytes: config.max_body_bytes,
                body_timeout: config.http_body_timeout,
            },
        );
        tokio::spawn(delegation.resume());
        let workers = Workers::spawn(&core, &config, &stop);
        let http = listener::HttpLimits {
            header_timeout: config.http_header_timeout,
        };
        let task = tokio::spawn(serve(
            (listener, gate, http),
            app,
            stop.clone(),
            config.shutdown_timeout,
            ws,
            workers,
            (core, store),
        ));
        // An info metric: the label carries the name, the value is always 1.
        metrics::gauge!("switchboard_node_info", "node_id" => config.node_id.to_string()).set(1.0);
        let base = base_url(addr);
        tracing::info!(
            %addr,
            node_id = %config.node_id,
            database = %config.database.display(),
            console = %format_args!("{base}/console"),
            docs = %format_args!("{base}/docs"),
            "switchboard listening"
        );
        Ok(Server {
            addr,
            stomp_addr,
            admin_token,
            stop,
            task,
        })
    }

    /// Where a person on this machine reaches the HTTP listener: `http://host:port`, with
    /// `localhost` for a wildcard address (`0.0.0.0`, `::`), which no browser opens.
    pub fn base_url(&self) -> String {
        base_url(self.addr)
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Where the STOMP listener is bound, when there is one.
    pub fn stomp_addr(&self) -> Option<SocketAddr> {
        self.stomp_addr
    }

    /// The admin token generated at this start, if one was (first start, no flag).
    pub fn generated_admin_token(&self) -> Option<&str> {
        match &self.admin_token {
            AdminToken::Generated(token) => Some(token),
            _ => None,
        }
    }

    /// What this start settled about the admin token (for the operator's start-up note).
    pub fn admin_token(&self) -> &AdminToken {
        &self.admin_token
    }

    /// A token that stops the server when cancelled.
    pub fn stop_token(&self) -> CancellationToken {
        self.stop.clone()
    }

    /// Stops accepting, lets in-flight work finish, closes storage; returns when done.
    pub async fn shutdown(self) {
        self.stop.cancel();
        self.wait().await;
    }

    /// Waits until the server has stopped (after [`Server::stop_token`] is cancelled).
    pub async fn wait(self) {
        if let Err(err) = self.task.await {
            tracing::error!(error = %err, "server task ended abnormally");
        }
    }
}

/// What STOMP sessions need, on TCP and at `/v1/stomp`. They end with the WebSocket
/// sessions at shutdown, and shutdown waits for them alike.
fn stomp_state(config: &ServerConfig, core: &Core, ws: &WsState, gate: &Gate) -> StompState {
    StompState {
        core: core.clone(),
        settings: StompSettings {
            limits: Limits {
                max_frame_bytes: config.max_body_bytes.saturating_add(64 * 1024),
                ..Limits::default()
            },
            heart_beat: config.stomp_heart_beat,
            connect_timeout: Duration::from_secs(10),
            write_stall: config.ws_ping_interval,
            anonymous_team: config.stomp_anonymous_team.clone().map(TeamId::from),
        },
        shutdown: ws.shutdown.clone(),
        tracker: ws.tracker.clone(),
        gate: gate.clone(),
        replies: Default::default(),
    }
}

/// Binds a listener; the address it got (the port, for `:0`).
async fn bind(addr: SocketAddr) -> Result<(TcpListener, SocketAddr), StartError> {
    let bind_error = |source| StartError::Bind { addr, source };
    let listener = TcpListener::bind(addr).await.map_err(bind_error)?;
    let local = listener.local_addr().map_err(bind_error)?;
    Ok((listener, local))
}

/// Starts accepting on the STOMP listener, if one was asked for and bound.
fn start_stomp(
    listener: Option<(TcpListener, SocketAddr)>,
    state: &StompState,
) -> Option<SocketAddr> {
    let (listener, local) = listener?;
    tokio::spawn(stomp::listen(listener, state.clone()));
    tracing::info!(addr = %local, "STOMP listening");
    Some(local)
}

/// `http://host:port` for `addr`, with `localhost` for a wildcard address.
fn base_url(addr: SocketAddr) -> String {
    if addr.ip().is_unspecified() {
        format!("http://localhost:{}", addr.port())
    } else {
        format!("http://{addr}")
    }
}

/// Opens storage and the core on it.
async fn open_core(config: &ServerConfig) -> Result<(Store, Core, AdminToken), StartError> {
    let options = StoreOptions {
        durability: config.durability,
        busy_timeout: config.busy_timeout,
        wal_max_bytes: config.wal_max_bytes,
    };
    let store = Store::open(&config.database, options).await?;
    let settings = CoreSettings {
        admin_token: config.admin_token.clone(),
        rate_limit: config.rate_limit,
        hub: HubSettings {
            outbox: config.ws_outbox,
            max_per_agent: config.ws_max_per_agent,
            max_total: config.ws_max_connections,
        },
        tasks: TaskSettings {
            allow_private_callbacks: config.callbacks.allow_private,
            claim_grace: config.claim_grace,
        },
        retention: config.retention,
        node_id: config.node_id.clone(),
        budgets: config.budgets,
        spans: config.otlp_endpoint.as_deref().map(|endpoint| {
            let (sink, spans) = crate::core::spans::sink();
            let url = crate::otlp::traces_url(endpoint);
            tracing::info!(url = %url, "exporting spans over OTLP");
            tokio::spawn(crate::otlp::export(spans, url, config.node_id.to_string()));
            sink
        }),
    };
    let (core, generated) = Core::open(store.clone(), settings).await?;
    Ok((store, core, generated))
}

/// Every transport's routes, and the OpenAPI document of all of them: what the server
/// serves and what `switchboard openapi` prints come from the same composition.
fn routes() -> (
    OpenApiRouter<HttpState>,
    OpenApiRouter<WsState>,
    OpenApiRouter<StompState>,
    OpenApiRouter<a2a::Delegation>,
) {
    (
        http::routes(),
        ws::routes(),
        stomp::websocket::routes(),
        a2a::Delegation::routes(),
    )
}

/// The OpenAPI document, as served at `/openapi.json` and committed in `openapi/`.
pub fn openapi_document() -> utoipa::openapi::OpenApi {
    let (rest, live, stomp, outside) = routes();
    let mut doc = rest.into_openapi();
    doc.merge(live.into_openapi());
    doc.merge(stomp.into_openapi());
    doc.merge(outside.into_openapi());
    let _unmatched = finish_document(&mut doc);
    doc
}

/// Completes what the routes' annotations cannot say: the enums used only by query
/// parameters, the types only MCP tools use (so their schemas come from here too), and
/// every limit the validation enforces (from its own constants).
/// Returns the table rows that found nothing to constrain; a test keeps it empty.
pub fn finish_document(doc: &mut utoipa::openapi::OpenApi) -> Vec<String> {
    #[derive(utoipa::OpenApi)]
    #[openapi(components(schemas(
        switchboard_types::messages::SortOrder,
        switchboard_types::tasks::TaskRole,
        switchboard_types::inbox::WaitForMessages,
        switchboard_types::inbox::InboxWait
    )))]
    struct QueryEnums;
    doc.merge(<QueryEnums as utoipa::OpenApi>::openapi());
    switchboard_types::openapi::constrain(doc)
}

/// The application: every transport's routes, each with its own state, inside the HTTP
/// middleware.
fn compose(
    core: &Core,
    metrics: MetricsHandle,
    (ws, stomp, delegation): (&WsState, &StompState, &a2a::Delegation),
    settings: HttpSettings,
) -> Router {
    let max_body_bytes = settings.max_body_bytes;
    let (rest, live, stomp_ws, outside) = routes();
    let (rest, mut openapi) = rest
        .with_state::<()>(HttpState::new(core.clone(), metrics))
        .split_for_parts();
    let (live, live_doc) = live.with_state::<()>(ws.clone()).split_for_parts();
    openapi.merge(live_doc);
    let (stomp_ws, stomp_doc) = stomp_ws.with_state::<()>(stomp.clone()).split_for_parts();
    openapi.merge(stomp_doc);
    let (outside, outside_doc) = outside
        .with_state::<()>(delegation.clone())
        .split_for_parts();
    openapi.merge(outside_doc);
    for problem in finish_document(&mut openapi) {
        tracing::warn!(%problem, "an OpenAPI limit found no field to describe");
    }
    let mcp = mcp::router(McpState::new(core.clone(), &openapi), max_body_bytes);
    let a2a = a2a::router(core.clone());
    http::app(
        rest.merge(live)
            .merge(stomp_ws)
            .merge(mcp)
            .merge(a2a)
            .merge(outside),
        openapi,
        &settings,
    )
}

/// Background tasks that end with the server.
struct Workers {
    saver: JoinHandle<()>,
    sender: JoinHandle<()>,
    retention: JoinHandle<()>,
    holds: JoinHandle<()>,
}

impl Workers {
    /// The background work: presence saved, callbacks sent, retention passes, ended
    /// leases and lapsed claims swept; each until `stop`.
    fn spawn(core: &Core, config: &ServerConfig, stop: &CancellationToken) -> Workers {
        Workers {
            saver: tokio::spawn(save_presence_every_second(core.clone(), stop.clone())),
            sender: tokio::spawn(callbacks::run(core.clone(), config.callbacks, stop.clone())),
            retention: tokio::spawn(retention::run(core.clone(), stop.clone())),
            holds: tokio::spawn(crate::core::holds::run(
                core.clone(),
                crate::ticks::every(Duration::from_secs(1)),
                stop.clone(),
            )),
        }
    }
}

/// Serves until `stop`, then shuts down in order: in-flight requests (bounded by
/// `grace`), WebSocket sessions, background work, the last cursors, storage.
async fn serve(
    (listener, gate, http): (TcpListener, Gate, listener::HttpLimits),
    app: Router,
    stop: CancellationToken,
    grace: Duration,
    ws: WsState,
    workers: Workers,
    (core, store): (Core, Store),
) {
    let serving = listener::serve(listener, app, stop.clone(), gate, http);
    let mut serving = std::pin::pin!(serving);
    let deadline = async {
        stop.cancelled().await;
        // Sessions get their close frame (1001) as soon as the stop is requested.
        ws.shutdown.cancel();
        tokio::time::sleep(grace).await;
    };
    tokio::select! {
        () = &mut serving => {}
        // In-flight requests get `grace` to finish after the stop signal.
        () = deadline => {
            tracing::warn!("in-flight requests did not finish within {grace:?}; closing");
        }
    }
    // axum does not wait for upgraded connections: wait for the sessions here.
    ws.shutdown.cancel();
    ws.tracker.close();
    if tokio::time::timeout(grace, ws.tracker.wait())
        .await
        .is_err()
    {
        tracing::warn!("WebSocket sessions did not end within {grace:?}");
    }
    let _ = workers.saver.await;
    let _ = workers.sender.await;
    let _ = workers.retention.await;
    let _ = workers.holds.await;
    if let Err(err) = core.live().save_presence().await {
        tracing::warn!(error = %err, "saving acknowledged cursors at shutdown failed");
    }
    store.close().await;
    tracing::info!(node_id = %core.node().node_id(), "server stopped");
}

/// Acks and last activity are kept in memory by the hub and written once a second.
async fn save_presence_every_second(core: Core, stop: CancellationToken) {
    let mut tick = tokio::time::interval(crate::ticks::every(Duration::from_secs(1)));
    loop {
        tokio::select! {
            () = stop.cancelled() => break,
            _ = tick.tick() => {
                if let Err(err) = core.live().save_presence().await {
                    tracing::warn!(error = %err, "saving acknowledged cursors failed");
                }
            }
        }
    }
}

/// Asks the server listening on `listen` for `/healthz`; `Ok` when it answers 200.
///
/// A hand-written HTTP/1.1 request over a plain socket: it runs inside the server's
/// container image, where nothing else (curl, a TLS stack) needs to be present.
pub async fn healthcheck(listen: SocketAddr, timeout: Duration) -> io::Result<()> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut target = listen;
    if target.ip().is_unspecified() {
        target.set_ip(if target.is_ipv4() {
            std::net::Ipv4Addr::LOCALHOST.into()
        } else {
            std::net::Ipv6Addr::LOCALHOST.into()
        });
    }
    let check = async {
        let mut stream = TcpStream::connect(target).await?;
        stream
            .write_all(
                format!("GET /healthz HTTP/1.1\r\nHost: {target}\r\nConnection: close\r\n\r\n")
                    .as_bytes(),
            )
            .await?;
        let mut answer = Vec::new();
        stream.read_to_end(&mut answer).await?;
        if answer.starts_with(b"HTTP/1.1 200") {
            Ok(())
        } else {
            let line = String::from_utf8_lossy(&answer);
            let line = line.lines().next().unwrap_or("no answer").to_owned();
            Err(io::Error::other(format!("{target} answered: {line}")))
        }
    };
    tokio::time::timeout(timeout, check).await.map_err(|_| {
        io::Error::new(
            io::ErrorKind::TimedOut,
            format!("{target} did not answer within {timeout:?}"),
        )
    })?
}
