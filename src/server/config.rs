//! What a server runs with: the settings `serve`'s flags make, or a test's.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use crate::callbacks::CallbackSettings;
use crate::config::{DurabilityArg, ServeArgs};
use crate::core::node::{InvalidNodeId, NodeId};
use crate::core::ratelimit::RateLimit;
use crate::core::retention::RetentionSettings;
use crate::store::{Durability, StoreOptions};

/// Everything needed to run a server.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    pub listen: SocketAddr,
    /// This process's name among the nodes (`--node-id`; generated when not given).
    pub node_id: NodeId,
    pub database: PathBuf,
    pub admin_token: Option<String>,
    pub durability: Durability,
    pub max_body_bytes: usize,
    pub shutdown_timeout: Duration,
    /// How long a write waits for a database lock held elsewhere before failing.
    pub busy_timeout: Duration,
    /// The size the write-ahead log is kept under (`--wal-max-bytes`).
    pub wal_max_bytes: u64,
    /// Per-agent limit on sending operations.
    pub rate_limit: Option<RateLimit>,
    /// Budget ceilings (`--budget`).
    pub budgets: switchboard_types::budgets::Budgets,
    /// Where spans are exported (`--otlp-endpoint`); none: not at all.
    pub otlp_endpoint: Option<String>,
    /// Seconds between WebSocket pings (and the time allowed for the pong).
    pub ws_ping_interval: Duration,
    /// What every background interval is multiplied by (`--tick-scale`; 1 but in the
    /// cost check).
    pub tick_scale: u32,
    /// Frames a WebSocket connection may have waiting.
    pub ws_outbox: usize,
    /// Live connections one agent may hold at once (more are closed with 4029).
    pub ws_max_per_agent: usize,
    /// Live connections the server holds at once (more are closed with 1013).
    pub ws_max_connections: usize,
    /// Sockets of every kind held at once (`--max-connections`; `None`: what the
    /// file-descriptor limit leaves).
    pub max_connections: Option<usize>,
    /// Time for a request head, from a connection's start or its last answer.
    pub http_header_timeout: Duration,
    /// Time for a request body, from its head.
    pub http_body_timeout: Duration,
    /// How task callbacks are sent (timeout, retries, private addresses).
    pub callbacks: CallbackSettings,
    /// What is kept how long, and how often the retention pass runs.
    pub retention: RetentionSettings,
    /// Where STOMP clients connect (`--stomp-listen`); no STOMP listener when `None`.
    pub stomp_listen: Option<SocketAddr>,
    /// The heart-beat the server asks of STOMP clients (zero: none).
    pub stomp_heart_beat: Duration,
    /// STOMP clients without credentials act as this team's bridge.
    pub stomp_anonymous_team: Option<String>,
    /// How often an outside A2A agent's card is read again.
    pub a2a_card_refresh: Duration,
    /// How long a claimer may be gone before its claims go back (`--claim-grace`).
    pub claim_grace: Duration,
}

impl ServerConfig {
    /// Defaults for a server on `listen` with its database at `database`.
    pub fn new(listen: SocketAddr, database: PathBuf) -> Self {
        ServerConfig {
            listen,
            node_id: NodeId::generate(),
            database,
            admin_token: None,
            durability: Durability::Normal,
            max_body_bytes: 1024 * 1024,
            shutdown_timeout: Duration::from_secs(10),
            busy_timeout: StoreOptions::default().busy_timeout,
            wal_max_bytes: StoreOptions::default().wal_max_bytes,
            rate_limit: None,
            budgets: Default::default(),
            otlp_endpoint: None,
            ws_ping_interval: Duration::from_secs(20),
            tick_scale: 1,
            ws_outbox: 1024,
            ws_max_per_agent: 16,
            ws_max_connections: 10_000,
            max_connections: None,
            http_header_timeout: Duration::from_secs(30),
            http_body_timeout: Duration::from_secs(30),
            callbacks: CallbackSettings::default(),
            retention: RetentionSettings::default(),
            stomp_listen: None,
            stomp_heart_beat: Duration::ZERO,
            stomp_anonymous_team: None,
            a2a_card_refresh: Duration::from_secs(600),
            claim_grace: Duration::from_secs(30),
        }
    }
}

/// The command line's settings; fails only on a `--node-id` the core refuses.
impl TryFrom<&ServeArgs> for ServerConfig {
    type Error = InvalidNodeId;

    fn try_from(args: &ServeArgs) -> Result<Self, InvalidNodeId> {
        let node_id = match &args.node_id {
            Some(name) => NodeId::parse(name)?,
            None => NodeId::generate(),
        };
        Ok(ServerConfig {
            listen: args.listen,
            node_id,
            database: args.database.clone(),
            admin_token: args.admin_token.as_ref().map(|s| s.0.clone()),
            durability: match args.durability {
                DurabilityArg::Normal => Durability::Normal,
                DurabilityArg::Full => Durability::Full,
            },
            max_body_bytes: args.max_body_bytes,
            shutdown_timeout: Duration::from_secs(args.shutdown_timeout),
            busy_timeout: StoreOptions::default().busy_timeout,
            wal_max_bytes: args.wal_max_bytes,
            rate_limit: args.rate_limit.map(|per_second| RateLimit {
                per_second,
                burst: args.rate_limit_burst.unwrap_or(per_second).max(1.0),
            }),
            budgets: {
                let mut budgets = switchboard_types::budgets::Budgets::default();
                for (budget, limit) in &args.budgets {
                    budgets.set(*budget, Some(*limit));
                }
                budgets
            },
            otlp_endpoint: args.otlp_endpoint.clone(),
            a2a_card_refresh: Duration::from_secs(args.a2a_card_refresh),
            claim_grace: Duration::from_secs(args.claim_grace),
            ws_ping_interval: Duration::from_secs(args.ws_ping_interval),
            tick_scale: args.tick_scale,
            ws_outbox: usize::try_from(args.ws_outbox).unwrap_or(usize::MAX),
            ws_max_per_agent: usize::try_from(args.ws_max_per_agent).unwrap_or(usize::MAX),
            ws_max_connections: usize::try_from(args.ws_max_connections).unwrap_or(usize::MAX),
            max_connections: args
                .max_connections
                .map(|n| usize::try_from(n).unwrap_or(usize::MAX)),
            http_header_timeout: Duration::from_secs(args.http_header_timeout),
            http_body_timeout: Duration::from_secs(args.http_body_timeout),
            callbacks: CallbackSettings {
                timeout: Duration::from_secs(args.callback_timeout),
                max_attempts: i64::from(args.callback_max_attempts),
                retry_base: Duration::from_millis(args.callback_retry_base_ms),
                allow_private: args.allow_private_callbacks,
            },
            retention: RetentionSettings {
                server: switchboard_types::teams::Retention {
                    read_messages_seconds: args.retention_read_messages.seconds(),
                    unread_messages_seconds: args.retention_unread_messages.seconds(),
                    finished_tasks_seconds: args.retention_finished_tasks.seconds(),
                },
                idempotency_keys: Duration::from_secs(args.retention_idempotency_keys.0),
                callbacks: Duration::from_secs(args.retention_callbacks.0),
                interval: Duration::from_secs(args.retention_interval.0),
            },
            stomp_listen: args.stomp_listen,
            stomp_heart_beat: Duration::from_millis(args.stomp_heart_beat_ms),
            stomp_anonymous_team: args.stomp_anonymous_team.clone(),
        })
    }
}
