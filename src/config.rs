//! The command line. Every flag of `serve` is also an environment variable
//! `SWITCHBOARD_<FLAG>`, so a container is configured without a wrapper script.

use std::fmt;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::str::FromStr;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::telemetry::LogFormat;
use switchboard_types::budgets::{Budget, MAX_BUDGET};

/// Switchboard: a coordination server for teams of AI agents.
///
/// Agents register with a team and talk through Switchboard over REST, a WebSocket for
/// live push, STOMP (Wise Agents), MCP or A2A, and an operator watches and steps in from
/// the console at /console. Everything is committed (to a SQLite file, or PostgreSQL)
/// before anyone is told it exists.
#[derive(Debug, Parser)]
#[command(name = "switchboard", version, about, long_about)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the server.
    ///
    /// On the very first start without --admin-token, an admin token is generated and
    /// printed once; keep it, it creates teams.
    Serve(Box<ServeArgs>),
    /// Print the OpenAPI document (JSON) to stdout.
    Openapi,
    /// Exit 0 if a server on this machine answers /healthz, 1 otherwise (for container
    /// health checks; reads the same SWITCHBOARD_LISTEN as `serve`).
    Healthcheck(HealthcheckArgs),
    /// Act as an agent from the terminal: listen, send, read the inbox, run tasks.
    ///
    /// The server URL and your agent token come from --url and --token, or
    /// SWITCHBOARD_URL and SWITCHBOARD_TOKEN. Exit codes: 0 done, 1 the server refused
    /// (its error code is printed), 2 bad usage, 3 the server could not be reached.
    Agent(crate::cli::AgentArgs),
    /// Set a team up from the shell: create a team (admin token), register agents
    /// (team key).
    Admin(crate::cli::AdminArgs),
    /// Make a team what a file says: its settings, agents and outside A2A agents
    /// (`-f team.yaml`; `--dry-run` shows the plan only). New agents' tokens are shown
    /// once, or written to `--tokens-out`. The admin token creates a missing team.
    Apply(crate::cli::ApplyArgs),
    /// Find messages by the words in them: what your agent sent or received, or with a
    /// team key anything of the team (--url and --token, or SWITCHBOARD_URL and
    /// SWITCHBOARD_TOKEN).
    Search(crate::cli::SearchArgs),
    /// Speak MCP on stdin/stdout for an MCP host that launches commands, carried to a
    /// running server's /mcp with an agent token (--url and --token, or SWITCHBOARD_URL
    /// and SWITCHBOARD_TOKEN).
    Mcp(crate::cli::McpArgs),
    /// Copy a SQLite deployment into an empty PostgreSQL database (teams, agents and
    /// their token digests, messages, inboxes with their sequence numbers, tasks,
    /// callbacks, settings) and verify every table's row count. Stop the server first:
    /// the copy is of the moment it starts.
    MigrateDb(MigrateDbArgs),
}

/// Settings of `switchboard migrate-db`.
#[derive(Debug, Clone, Args)]
pub struct MigrateDbArgs {
    /// The SQLite database file to copy (what `serve --database` used).
    #[arg(long, value_name = "FILE")]
    pub from: PathBuf,
    /// The PostgreSQL database to copy into (`postgres://user@host:port/db`); migrated
    /// first, and it must hold no deployment yet.
    #[arg(long, value_name = "URL")]
    pub to: String,
}

/// Settings of `switchboard healthcheck`.
#[derive(Debug, Clone, Args)]
pub struct HealthcheckArgs {
    /// The server's listen address; an unspecified IP (0.0.0.0, ::) means this machine.
    #[arg(long, env = "SWITCHBOARD_LISTEN", default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,

    /// Seconds to wait for the answer.
    #[arg(long, default_value_t = 3)]
    pub timeout: u64,
}

/// Settings of `switchboard serve`.
#[derive(Debug, Clone, Args)]
pub struct ServeArgs {
    /// A YAML file of settings, each key a flag of `serve` without its dashes
    /// (`listen: 127.0.0.1:9000`, `allow-private-callbacks: true`, a list for a flag
    /// given several times). A flag on the command line, or its environment variable,
    /// wins over the file. Every problem in the file is reported with its line, and
    /// the server does not start.
    #[arg(long, env = "SWITCHBOARD_CONFIG")]
    pub config: Option<PathBuf>,

    /// Address and port to listen on.
    #[arg(long, env = "SWITCHBOARD_LISTEN", default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,

    /// This process's name, in the log, in `/metrics` (`switchboard_node_info`) and in
    /// `/healthz` and `/readyz`: which node of several said what. 1 to 64 letters,
    /// digits, `.`, `_` or `-`; without it, a new `node-xxxxxxxx` at every start.
    // The rule is the core's `NodeId`, checked when the server is configured.
    #[arg(long, env = "SWITCHBOARD_NODE_ID")]
    pub node_id: Option<String>,

    /// SQLite database file (a path, or `sqlite://path`; it and its folder are created
    /// if missing), or a PostgreSQL URL (`postgres://user@host:5432/db`; the database
    /// must exist) to serve from PostgreSQL, where several nodes may share it.
    #[arg(long, env = "SWITCHBOARD_DATABASE", default_value = "switchboard.db")]
    pub database: PathBuf,

    /// Admin token (creates teams). Without it, the token from an earlier start is kept;
    /// on the first start one is generated and printed once.
    #[arg(long, env = "SWITCHBOARD_ADMIN_TOKEN", hide_env_values = true)]
    pub admin_token: Option<Secret>,

    /// `normal`: a commit survives a crash of the process. `full`: it also survives a
    /// power cut (one fsync per group commit; slower).
    #[arg(long, env = "SWITCHBOARD_DURABILITY", value_enum, default_value_t = DurabilityArg::Normal)]
    pub durability: DurabilityArg,

    /// The write-ahead log is kept under this many bytes under any write load, cut back
    /// to an eighth of it when the load eases and to nothing when writes stop.
    #[arg(long, env = "SWITCHBOARD_WAL_MAX_BYTES", default_value_t = 256 * 1024 * 1024, value_parser = clap::value_parser!(u64).range(1024 * 1024..))]
    pub wal_max_bytes: u64,

    /// Largest request body accepted, in bytes; larger ones get 413 PAYLOAD_TOO_LARGE.
    #[arg(long, env = "SWITCHBOARD_MAX_BODY_BYTES", default_value_t = 1024 * 1024)]
    pub max_body_bytes: usize,

    /// Most sending operations (messages, responses, broadcasts, assistance requests,
    /// task actions) per second per agent; above it, RATE_LIMITED. No limit by default.
    #[arg(long, env = "SWITCHBOARD_RATE_LIMIT", value_parser = positive_rate)]
    pub rate_limit: Option<f64>,

    /// Short bursts above --rate-limit that are still accepted (default: one second's worth).
    #[arg(long, env = "SWITCHBOARD_RATE_LIMIT_BURST", value_parser = positive_rate, requires = "rate_limit")]
    pub rate_limit_burst: Option<f64>,

    /// A budget ceiling, NAME=LIMIT, repeatable (or comma-separated in the variable):
    /// NAME is one of team_messages_per_minute, team_messages_per_day,
    /// team_tasks_per_minute, team_tasks_per_day, agent_messages_per_minute,
    /// agent_messages_per_day, agent_tasks_per_minute, agent_tasks_per_day,
    /// thread_messages_per_day. A send past it gets RATE_LIMITED with Retry-After; a team
    /// key may set a lower one. Counted in the database, so it holds across nodes. None by
    /// default.
    #[arg(long = "budget", env = "SWITCHBOARD_BUDGET", value_name = "NAME=LIMIT", value_parser = budget_arg, value_delimiter = ',')]
    pub budgets: Vec<(Budget, u32)>,

    /// Exports a span per message, task, callback attempt and refused send over OTLP/HTTP
    /// in protobuf to this collector URL (`/v1/traces` is added unless the path ends with
    /// it), with the team, agents and ids as attributes, never content. Off by default.
    #[arg(long, env = "SWITCHBOARD_OTLP_ENDPOINT", value_name = "URL", value_parser = http_url)]
    pub otlp_endpoint: Option<String>,

    /// Multiplies every interval of the server's background work (checkpoints, storage
    /// checks, saving cursors, sweeps) by this factor. For the cost check only
    /// (`benches/cost_check.py`), so that no timer's work falls into what it counts; a
    /// stretched server checkpoints and checks its storage that much less often.
    #[arg(long, env = "SWITCHBOARD_TICK_SCALE", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    pub tick_scale: u32,

    /// Seconds between the server's WebSocket pings; a connection that has not answered
    /// by the next ping is closed (code 4001).
    #[arg(long, env = "SWITCHBOARD_WS_PING_INTERVAL", default_value_t = 20, value_parser = clap::value_parser!(u64).range(1..))]
    pub ws_ping_interval: u64,

    /// Frames a WebSocket connection may have waiting to be written; a connection that
    /// falls further behind is closed (code 4008) and resumes from its cursor.
    #[arg(long, env = "SWITCHBOARD_WS_OUTBOX", default_value_t = 1024, value_parser = clap::value_parser!(u64).range(1..))]
    pub ws_outbox: u64,

    /// WebSocket connections one agent may hold at once; one more is closed with 4029.
    #[arg(long, env = "SWITCHBOARD_WS_MAX_PER_AGENT", default_value_t = 16, value_parser = clap::value_parser!(u64).range(1..))]
    pub ws_max_per_agent: u64,

    /// WebSocket connections the server holds at once; one more is closed with 1013.
    #[arg(long, env = "SWITCHBOARD_WS_MAX_CONNECTIONS", default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub ws_max_connections: u64,

    /// Sockets the server holds at once, of every kind (HTTP, WebSocket, STOMP); when
    /// full, an idle one is let go for a new one, and without an idle one the new one is
    /// refused (503). Never more than the file-descriptor limit leaves after a reserve
    /// for the database and outgoing calls; by default, that much.
    #[arg(long, env = "SWITCHBOARD_MAX_CONNECTIONS", value_parser = clap::value_parser!(u64).range(16..))]
    pub max_connections: Option<u64>,

    /// Seconds a connection may take to send a whole request head, counted from its
    /// opening or from the end of its last answer: so also how long an idle keep-alive
    /// connection stays open. Past it the connection is closed.
    #[arg(long, env = "SWITCHBOARD_HTTP_HEADER_TIMEOUT", default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..))]
    pub http_header_timeout: u64,

    /// Seconds a request body may take to arrive in full, from its head; past it the
    /// request is answered 408 REQUEST_TIMEOUT and the connection closed.
    #[arg(long, env = "SWITCHBOARD_HTTP_BODY_TIMEOUT", default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..))]
    pub http_body_timeout: u64,

    /// Address and port of the STOMP listener (61613 is STOMP's usual port); no STOMP
    /// listener without it. Wise Agents processes and any STOMP 1.0–1.2 client connect here.
    #[arg(long, env = "SWITCHBOARD_STOMP_LISTEN")]
    pub stomp_listen: Option<SocketAddr>,

    /// Milliseconds between heart-beats the server asks of STOMP clients; a client that
    /// agreed and then stays silent twice that long is disconnected. 0 asks for none (the
    /// server always sends the heart-beats a client asks for).
    #[arg(long, env = "SWITCHBOARD_STOMP_HEART_BEAT_MS", default_value_t = 0)]
    pub stomp_heart_beat_ms: u64,

    /// STOMP clients that send no credentials act as this team's bridge. Unsafe anywhere
    /// but a laptop: whoever reaches the STOMP port is the team. Off by default.
    #[arg(long, env = "SWITCHBOARD_STOMP_ANONYMOUS_TEAM")]
    pub stomp_anonymous_team: Option<String>,

    /// Allow task callback URLs on loopback and private networks (refused by default, so
    /// a client cannot make the server call into its own network).
    #[arg(long, env = "SWITCHBOARD_ALLOW_PRIVATE_CALLBACKS")]
    pub allow_private_callbacks: bool,

    /// Seconds an agent that claimed tasks may be without any live connection (WebSocket
    /// or STOMP) and silent on its claims before they go back to their role at once;
    /// an agent that never connected keeps its claims until their lease runs out.
    #[arg(long, env = "SWITCHBOARD_CLAIM_GRACE", default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub claim_grace: u64,

    /// Seconds one callback attempt may take before it counts as failed.
    #[arg(long, env = "SWITCHBOARD_CALLBACK_TIMEOUT", default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..))]
    pub callback_timeout: u64,

    /// Attempts per callback before it is given up (the outcome is recorded on the task).
    #[arg(long, env = "SWITCHBOARD_CALLBACK_MAX_ATTEMPTS", default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub callback_max_attempts: u32,

    /// Milliseconds before the second attempt of a failed callback; doubled for each
    /// further one, up to ten minutes.
    #[arg(long, env = "SWITCHBOARD_CALLBACK_RETRY_BASE_MS", default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..))]
    pub callback_retry_base_ms: u64,

    /// How long a message every recipient has read is kept after it was sent (e.g. 7d;
    /// `forever` keeps it). Teams may set less, never more.
    #[arg(long, env = "SWITCHBOARD_RETENTION_READ_MESSAGES", default_value_t = Keep(None))]
    pub retention_read_messages: Keep,
    /// How long any message, read or not, is kept after it was sent (e.g. 30d).
    #[arg(long, env = "SWITCHBOARD_RETENTION_UNREAD_MESSAGES", default_value_t = Keep(None))]
    pub retention_unread_messages: Keep,
    /// How long a succeeded, failed or canceled task is kept after its last change.
    #[arg(long, env = "SWITCHBOARD_RETENTION_FINISHED_TASKS", default_value_t = Keep(None))]
    pub retention_finished_tasks: Keep,
    /// How long a retry with the same Idempotency-Key gets the first answer back.
    #[arg(long, env = "SWITCHBOARD_RETENTION_IDEMPOTENCY_KEYS", default_value_t = Age(24 * 3600))]
    pub retention_idempotency_keys: Age,
    /// How long the record of a delivered or abandoned callback is kept.
    #[arg(long, env = "SWITCHBOARD_RETENTION_CALLBACKS", default_value_t = Age(7 * 86_400))]
    pub retention_callbacks: Age,
    /// Time between retention passes.
    #[arg(long, env = "SWITCHBOARD_RETENTION_INTERVAL", default_value_t = Age(60))]
    pub retention_interval: Age,

    /// Seconds in-flight requests and live connections get to finish at shutdown.
    #[arg(long, env = "SWITCHBOARD_SHUTDOWN_TIMEOUT", default_value_t = 10)]
    pub shutdown_timeout: u64,

    /// Seconds between readings of an outside A2A agent's card (its skills and
    /// interface are taken from the card read last).
    #[arg(long, env = "SWITCHBOARD_A2A_CARD_REFRESH", default_value_t = 600, value_parser = clap::value_parser!(u64).range(1..))]
    pub a2a_card_refresh: u64,

    /// Log format; the level comes from RUST_LOG (default `info`).
    #[arg(long, env = "SWITCHBOARD_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
}

/// A length of time on the command line: `90s`, `15m`, `12h`, `30d` or plain seconds;
/// at least one second.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Age(pub u64);

impl FromStr for Age {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let s = s.trim();
        let (number, unit) = match s.char_indices().last() {
            Some((i, c)) if c.is_ascii_alphabetic() => (&s[..i], c),
            _ => (s, 's'),
        };
        let scale = match unit {
            's' => 1,
            'm' => 60,
            'h' => 3600,
            'd' => 86_400,
            _ => return Err("use a number with s, m, h or d (e.g. 30d)".to_owned()),
        };
        number
            .parse::<u64>()
            .ok()
            .and_then(|n| n.checked_mul(scale))
            .filter(|&secs| (1..=switchboard_types::teams::MAX_RETENTION_SECONDS).contains(&secs))
            .map(Age)
            .ok_or_else(|| {
                "use a number of 1 second to 100 years with s, m, h or d (e.g. 30d)".to_owned()
            })
    }
}

impl fmt::Display for Age {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            s if s % 86_400 == 0 => write!(f, "{}d", s / 86_400),
            s if s % 3600 == 0 => write!(f, "{}h", s / 3600),
            s if s % 60 == 0 => write!(f, "{}m", s / 60),
            s => write!(f, "{s}s"),
        }
    }
}

/// An [`Age`], or `forever`: how long something is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Keep(pub Option<Age>);

impl Keep {
    pub fn seconds(self) -> Option<u64> {
        self.0.map(|a| a.0)
    }
}

impl FromStr for Keep {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim() {
            "forever" | "off" => Ok(Keep(None)),
            other => other.parse().map(|a| Keep(Some(a))),
        }
    }
}

impl fmt::Display for Keep {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(age) => age.fmt(f),
            None => f.write_str("forever"),
        }
    }
}

fn positive_rate(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 => Ok(v),
        _ => Err("a positive number".to_owned()),
    }
}

/// An `http://` or `https://` URL.
fn http_url(text: &str) -> Result<String, String> {
    match reqwest::Url::parse(text) {
        Ok(url) if matches!(url.scheme(), "http" | "https") && url.host().is_some() => {
            Ok(text.to_owned())
        }
        _ => Err("an http:// or https:// URL, e.g. http://127.0.0.1:4318".to_owned()),
    }
}

/// `--budget NAME=LIMIT`.
fn budget_arg(text: &str) -> Result<(Budget, u32), String> {
    let (name, limit) = text
        .split_once('=')
        .ok_or_else(|| "NAME=LIMIT, e.g. agent_messages_per_minute=60".to_owned())?;
    let budget = Budget::named(name.trim()).ok_or_else(|| {
        let names: Vec<&str> = Budget::ALL.iter().map(|b| b.as_str()).collect();
        format!("no budget '{}'; one of {}", name.trim(), names.join(", "))
    })?;
    match limit.trim().parse::<u32>() {
        Ok(n) if (1..=MAX_BUDGET).contains(&n) => Ok((budget, n)),
        _ => Err(format!(
            "the limit must be a whole number from 1 to {MAX_BUDGET}"
        )),
    }
}

/// `--durability`: how hard a commit tries to survive a crash.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum DurabilityArg {
    /// A commit survives a crash of the process, not a power cut.
    Normal,
    /// One fsync per group commit; survives a power cut.
    Full,
}

/// A secret from the command line or the environment; never printed by `Debug`.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(pub String);

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

impl FromStr for Secret {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        if s.trim().len() < 16 {
            return Err("use at least 16 characters".to_owned());
        }
        Ok(Secret(s.trim().to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    /// The flag's default is written as a literal (config does not depend on the
    /// store); it must be the store's.
    #[test]
    fn the_wal_bound_default_is_the_stores() {
        let cli = Cli::try_parse_from(["switchboard", "serve"]).expect("parses");
        let Command::Serve(args) = cli.command else {
            panic!("serve")
        };
        assert_eq!(args.wal_max_bytes, crate::store::DEFAULT_WAL_MAX_BYTES);
    }

    #[test]
    fn ages_take_units_and_refuse_nonsense() {
        assert_eq!("30d".parse::<Age>(), Ok(Age(30 * 86_400)));
        assert_eq!("12h".parse::<Age>(), Ok(Age(12 * 3600)));
        assert_eq!("90".parse::<Age>(), Ok(Age(90)));
        assert_eq!(Age(7 * 86_400).to_string(), "7d");
        for bad in ["0", "0s", "5x", "", "d", "-3h", "36501d"] {
            assert!(bad.parse::<Age>().is_err(), "{bad}");
        }
        assert_eq!("forever".parse::<Keep>(), Ok(Keep(None)));
        assert_eq!("15m".parse::<Keep>(), Ok(Keep(Some(Age(900)))));
    }

    #[test]
    fn secrets_are_redacted_in_debug() {
        let secret = Secret("super-secret-admin-token".to_owned());
        assert!(!format!("{secret:?}").contains("super"));
    }
}
