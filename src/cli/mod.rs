//! `switchboard agent …` and `switchboard admin …`: act as an agent, or set a team up,
//! from a terminal, through the `switchboard-client` crate.
//!
//! Output is a short line for people by default and the server's JSON answer with
//! `--json`; `listen` prints every incoming frame as one JSON line either way. Text a
//! peer wrote is shown inert in human output: control characters (escape sequences that
//! retitle a window, clear the screen or fake lines) are printed escaped. Exit
//! codes: 0 done, 1 the server refused (its error code is printed), 3 the server could
//! not be reached; clap uses 2 for bad usage.

mod admin;
mod agent;
mod apply;
mod approval;
mod lease;
mod search;
mod task;
mod ws;

pub use apply::{ApplyArgs, run_apply};
pub use approval::ApprovalCommand;
pub use lease::LeaseCommand;
pub use search::{SearchArgs, run_search};
use std::process::ExitCode;
use switchboard_types::ids::{AgentId, TaskId, TeamId};

use clap::{Args, Subcommand};
use serde::Serialize;
use serde_json::{Map, Value};
use switchboard_client::ClientError;

/// Where the server is and who you are.
#[derive(Debug, Clone, Args)]
pub struct Connection {
    /// The server's URL.
    #[arg(
        long,
        env = "SWITCHBOARD_URL",
        default_value = "http://127.0.0.1:8080",
        global = true
    )]
    pub url: String,
    /// Your token: an agent token for `agent`, the admin token or a team key for `admin`.
    #[arg(long, env = "SWITCHBOARD_TOKEN", hide_env_values = true, global = true)]
    pub token: Option<String>,
    /// Print the server's JSON answer instead of a summary.
    #[arg(long, global = true)]
    pub json: bool,
}

/// `switchboard agent …`.
#[derive(Debug, Args)]
pub struct AgentArgs {
    #[command(flatten)]
    pub connection: Connection,
    #[command(subcommand)]
    pub command: AgentCommand,
}

#[derive(Debug, Subcommand)]
pub enum AgentCommand {
    /// Print every incoming frame, live: one line each (the frame's JSON with --json);
    /// reconnects and resumes by itself. Ctrl-C to stop.
    Listen {
        /// Start after this sequence number (default: after your last acknowledged one).
        #[arg(long)]
        since: Option<i64>,
        /// Stop after this many frames.
        #[arg(long)]
        count: Option<usize>,
    },
    /// The WebSocket hub by hand: every frame it pushes printed as one line, every line
    /// you type (a JSON frame, see docs/websocket.md) sent. At the end of the input it
    /// waits --linger seconds for answers, then closes.
    Ws {
        /// Replay everything after this sequence number (default: after your last ack).
        #[arg(long)]
        since: Option<i64>,
        /// Only the entries that are news for you (publish/watch).
        #[arg(long)]
        news_only: bool,
        /// Also the team's activity, after the replay and at every change.
        #[arg(long)]
        activity: bool,
        /// Seconds to wait for answers after the last line of input.
        #[arg(long, default_value_t = 1.0)]
        linger: f64,
    },
    /// Send a message (the contract's SEND_MESSAGE).
    Send {
        /// Recipients, comma-separated, or ALL.
        #[arg(long, value_delimiter = ',', required = true)]
        to: Vec<String>,
        /// The text.
        text: String,
        /// information, request, response or coordination.
        #[arg(long = "type", default_value = "information")]
        message_type: String,
        /// low, normal, high or urgent.
        #[arg(long, default_value = "normal")]
        priority: String,
        /// Ask for a response.
        #[arg(long)]
        requires_response: bool,
        /// content.data, a JSON object.
        #[arg(long)]
        data: Option<String>,
        /// The conversation it belongs to (`thread_id`): replies and follow-ups share one.
        #[arg(long)]
        thread: Option<String>,
    },
    /// GET_MESSAGES: your inbox, newest first.
    Inbox {
        /// Only what you have not marked read.
        #[arg(long)]
        unread: bool,
        /// At most this many entries (1–100).
        #[arg(long, default_value_t = 20)]
        limit: i64,
        /// Oldest first instead.
        #[arg(long)]
        oldest_first: bool,
    },
    /// MARK_MESSAGE_READ.
    Read {
        /// The messages to mark read (their ids, as the inbox shows them).
        #[arg(required = true)]
        message_ids: Vec<String>,
    },
    /// RESPOND_TO_MESSAGE.
    Respond {
        /// The message you answer.
        message_id: String,
        /// Your answer.
        text: String,
        /// completed, partial, unable or delegated.
        #[arg(long, default_value = "completed")]
        status: String,
    },
    /// BROADCAST_UPDATE to the whole team.
    Broadcast {
        /// One line: what happened.
        summary: String,
        /// progress, discovery, issue or completion.
        #[arg(long = "type", default_value = "progress")]
        update_type: String,
        /// info, attention, action_required or critical.
        #[arg(long, default_value = "info")]
        urgency: String,
        /// More words, if the summary is not enough.
        #[arg(long, default_value = "")]
        details: String,
    },
    /// REQUEST_ASSISTANCE.
    Assist {
        /// What you need help with.
        description: String,
        /// expertise, resources, review or collaboration.
        #[arg(long = "type", default_value = "expertise")]
        assistance_type: String,
        /// The capabilities a helper needs, comma-separated.
        #[arg(long, value_delimiter = ',')]
        capabilities: Vec<String>,
    },
    /// The task protocol.
    #[command(subcommand)]
    Task(TaskCommand),
    /// Leases on named resources: "I am working on this — keep off".
    #[command(subcommand)]
    Lease(LeaseCommand),
    /// Ask a person to decide, and read the outcome.
    #[command(subcommand)]
    Approval(ApprovalCommand),
}

#[derive(Debug, Subcommand)]
pub enum TaskCommand {
    /// Submit a TaskRequest.
    Submit(SubmitTask),
    /// A task with its history.
    Show {
        /// The task (`id` or `id@originator`).
        task_id: String,
    },
    /// Hand a task to another agent.
    Handoff {
        /// The task you hold.
        task_id: String,
        /// The agent who takes it over.
        #[arg(long)]
        to: String,
        /// Why, for the new assignee and the originator.
        #[arg(long)]
        reason: String,
    },
    /// Ask the originator a question.
    Clarify {
        /// The task you hold.
        task_id: String,
        /// What you ask the originator.
        question: String,
    },
    /// Answer a task's open question.
    Answer {
        /// The task you submitted.
        task_id: String,
        /// The question, as `task show` lists it.
        clarification_id: String,
        /// Your answer.
        answer: String,
    },
    /// Report progress.
    Progress {
        /// The task you hold.
        task_id: String,
        /// result_data, JSON.
        #[arg(long)]
        data: Option<String>,
    },
    /// Report success.
    Complete {
        /// The task you hold.
        task_id: String,
        /// The result (result_data), JSON.
        #[arg(long)]
        data: Option<String>,
    },
    /// Report failure.
    Fail {
        /// The task you hold.
        task_id: String,
        /// What went wrong (result_data), JSON.
        #[arg(long)]
        data: Option<String>,
    },
    /// Cancel a task you submitted.
    Cancel {
        /// The task you submitted.
        task_id: String,
        /// Why, for the assignee.
        #[arg(long)]
        reason: Option<String>,
    },
    /// Take the next task offered to your role (prints nothing to do when none came).
    Claim {
        /// Wait up to this many seconds (0–60) for a task to be offered.
        #[arg(long, default_value_t = 0)]
        wait: u64,
        /// Seconds the claim holds without progress (1–3600; default 300).
        #[arg(long)]
        lease: Option<u64>,
    },
    /// Give a task you claimed back to its role.
    Release {
        /// The task you claimed.
        task_id: String,
        /// Why, in the task's history.
        #[arg(long)]
        reason: Option<String>,
    },
    /// Keep a task you claimed without reporting progress (renew its lease).
    Extend {
        /// The task you claimed.
        task_id: String,
        /// Seconds from now the lease ends (1–3600; default the claim's own lease).
        #[arg(long)]
        lease: Option<u64>,
    },
}

/// `task submit`'s arguments.
#[derive(Debug, Args)]
pub struct SubmitTask {
    /// What is to be done.
    description: String,
    /// Its id (unique among your tasks); generated when absent.
    #[arg(long)]
    task_id: Option<TaskId>,
    /// Required capabilities, comma-separated.
    #[arg(long, value_delimiter = ',')]
    capabilities: Vec<String>,
    /// Give it to this agent.
    #[arg(long)]
    target: Option<AgentId>,
    /// Offer it to any agent of this role instead: one of them claims it.
    #[arg(long, conflicts_with = "target")]
    role: Option<String>,
    /// An http(s) URL or an agent id to report status changes to.
    #[arg(long)]
    callback_url: Option<String>,
    /// Task data, a JSON object.
    #[arg(long)]
    data: Option<String>,
}

/// `switchboard admin …`.
#[derive(Debug, Args)]
pub struct AdminArgs {
    #[command(flatten)]
    pub connection: Connection,
    #[command(subcommand)]
    pub command: AdminCommand,
}

#[derive(Debug, Subcommand)]
pub enum AdminCommand {
    /// Teams (admin token).
    #[command(subcommand)]
    Team(TeamCommand),
    /// Agents (team key).
    #[command(subcommand)]
    Agent(AdminAgentCommand),
    /// List and decide the team's approvals (team key).
    #[command(subcommand)]
    Approval(ApprovalCommand),
    /// Replace a lost admin token: sets a new one in the database and prints it (shown
    /// once). Offline: run it while no server serves a SQLite file (it refuses
    /// otherwise); on PostgreSQL, restart the nodes afterwards.
    ResetToken {
        /// The database, as `serve --database` names it.
        #[arg(long, env = "SWITCHBOARD_DATABASE", default_value = "switchboard.db")]
        database: std::path::PathBuf,
    },
}

#[derive(Debug, Subcommand)]
pub enum TeamCommand {
    /// Create a team; prints its key (shown once).
    Create {
        /// A name for people.
        name: String,
        /// Its id (1–64 of A-Z a-z 0-9 . _ -); generated when absent.
        #[arg(long)]
        team_id: Option<TeamId>,
    },
    /// List every team of the server (admin token).
    List,
    /// Give a team a new key (with the team key or the admin token); prints it (shown
    /// once). The old key stops working at once.
    RotateKey {
        /// The team whose key is replaced.
        team_id: TeamId,
    },
}

#[derive(Debug, Subcommand)]
pub enum AdminAgentCommand {
    /// Register an agent; prints its token (shown once).
    Register {
        /// The team it joins.
        #[arg(long)]
        team: String,
        /// Its id in the team.
        agent_id: String,
        /// What it does, for people and for work offered to a role.
        #[arg(long, default_value = "agent")]
        role: String,
        /// What it can do, comma-separated (found by capability).
        #[arg(long, value_delimiter = ',')]
        capabilities: Vec<String>,
    },
    /// Give an agent a new token (with the team key, the admin token or the agent's own
    /// token); prints it (shown once). The old token stops working and the agent's live
    /// connections end.
    RotateToken {
        /// The agent's team.
        #[arg(long)]
        team: String,
        /// The agent whose token is replaced.
        agent_id: String,
    },
}

/// What a command failed with.
enum Failure {
    Usage(String),
    Client(ClientError),
}

impl From<ClientError> for Failure {
    fn from(err: ClientError) -> Self {
        Failure::Client(err)
    }
}

fn finish(result: Result<(), Failure>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Usage(why)) => {
            print_error(&format!("error: {why}"));
            ExitCode::from(2)
        }
        Err(Failure::Client(err @ ClientError::Server { .. })) => {
            print_error(&format!("error: {}", inert(&err.to_string())));
            if let Some(action) = err.server_error().map(|e| e.suggested_action.clone()) {
                print_error(&format!("hint: {}", inert(&action)));
            }
            ExitCode::from(1)
        }
        Err(Failure::Client(err)) => {
            print_error(&format!("error: {}", inert(&err.to_string())));
            ExitCode::from(3)
        }
    }
}

fn token(connection: &Connection) -> Result<&str, Failure> {
    connection
        .token
        .as_deref()
        .ok_or_else(|| Failure::Usage("give a token with --token or SWITCHBOARD_TOKEN".into()))
}

fn parse<T: serde::de::DeserializeOwned>(field: &str, text: &str) -> Result<T, Failure> {
    serde_json::from_value(Value::String(text.to_owned()))
        .map_err(|_| Failure::Usage(format!("'{text}' is not a valid {field}")))
}

fn json_object(field: &str, text: Option<&str>) -> Result<Map<String, Value>, Failure> {
    match text {
        None => Ok(Map::new()),
        Some(text) => match serde_json::from_str(text) {
            Ok(Value::Object(map)) => Ok(map),
            _ => Err(Failure::Usage(format!("--{field} must be a JSON object"))),
        },
    }
}

fn json_value(text: Option<&str>) -> Result<Value, Failure> {
    match text {
        None => Ok(Value::Null),
        Some(text) => {
            serde_json::from_str(text).map_err(|_| Failure::Usage("--data must be JSON".into()))
        }
    }
}

/// Prints `answer` as JSON with `--json`, else the summary.
fn show(json: bool, answer: &impl Serialize, summary: impl FnOnce() -> String) {
    if json {
        match serde_json::to_string(answer) {
            Ok(text) => print_line(&inert_json(&text)),
            Err(err) => print_error(&format!(
                "error: the answer could not be printed as JSON: {err}"
            )),
        }
    } else {
        print_line(&summary());
    }
}

/// Writes one line to stdout. A reader that stopped early (`| head`) closed the pipe:
/// that ends the command quietly (exit 0), never with a panic; any other failure to
/// write ends it with 1.
pub fn print_line(text: &str) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    if let Err(err) = writeln!(out, "{text}").and_then(|()| out.flush()) {
        if err.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
        print_error(&format!("error: cannot write to stdout: {err}"));
        std::process::exit(1);
    }
}

/// Writes one line to stderr; a closed stderr is ignored (there is nowhere to say so).
pub fn print_error(text: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr().lock(), "{text}");
}

/// Whether a character must never reach a terminal as itself: controls (C0, DEL, C1),
/// the line and paragraph separators, and the characters that reorder or hide text
/// (bidi controls, zero-width joiners, the byte-order mark).
fn is_unsafe_on_terminal(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{200b}'..='\u{200f}' | '\u{2028}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{feff}')
}

/// JSON text made inert on a terminal and still the same JSON: serde_json escapes only
/// C0 controls, so DEL, C1 controls and the bidi and zero-width characters a peer wrote
/// are written as `\uXXXX` escapes. (Outside strings JSON text is ASCII, so every such
/// character is inside a string, where the escape means the same character.)
pub fn inert_json(json: &str) -> String {
    use std::fmt::Write;
    let mut out = String::with_capacity(json.len());
    for c in json.chars() {
        if is_unsafe_on_terminal(c) && !c.is_ascii_control() || c == '\u{7f}' {
            let mut units = [0u16; 2];
            for unit in c.encode_utf16(&mut units) {
                let _ = write!(out, "\\u{unit:04x}");
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// `text` safe to print on a terminal: control characters (C0, DEL, C1) and the
/// characters that reorder or hide text (bidi controls, zero-width joiners) are shown
/// escaped, so nothing a peer wrote can move the cursor, retitle the window, clear the
/// screen or start a fake line.
pub fn inert(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if is_unsafe_on_terminal(c) {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

/// Runs `switchboard agent …`.
pub async fn run_agent(args: AgentArgs) -> ExitCode {
    finish(agent::agent(args).await)
}

/// Runs `switchboard admin …`.
pub async fn run_admin(args: AdminArgs) -> ExitCode {
    finish(admin::admin(args).await)
}

/// `switchboard mcp`: the MCP stdio bridge, for MCP hosts that launch a command.
#[derive(Debug, Args)]
pub struct McpArgs {
    /// The server's URL.
    #[arg(long, env = "SWITCHBOARD_URL", default_value = "http://127.0.0.1:8080")]
    pub url: String,
    /// The agent token the host's model acts with.
    #[arg(long, env = "SWITCHBOARD_TOKEN", hide_env_values = true)]
    pub token: String,
}

/// Runs `switchboard mcp`: MCP on stdin/stdout, carried to the server's `/mcp`. Logs
/// and errors go to stderr (stdout belongs to the protocol).
pub async fn run_mcp(args: McpArgs) -> ExitCode {
    match switchboard_client::mcp::bridge_stdio(&args.url, &args.token).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            print_error(&format!("error: {err}"));
            ExitCode::from(3)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{inert, inert_json};

    /// `--json` and `listen` lines stay the same JSON, with nothing a terminal acts on.
    #[test]
    fn json_lines_escape_what_a_terminal_would_act_on() {
        let value =
            serde_json::json!({"text": "a\u{9b}2J\u{85}b\u{7f}c\u{202e}d\u{1b}[31m\u{2028}e"});
        let line = inert_json(&serde_json::to_string(&value).expect("json"));
        assert!(
            line.chars()
                .all(|c| !c.is_control() && !('\u{2028}'..='\u{202e}').contains(&c)),
            "{line:?}"
        );
        assert!(line.contains("\\u009b") && line.contains("\\u202e") && line.contains("\\u007f"));
        let back: serde_json::Value = serde_json::from_str(&line).expect("still JSON");
        assert_eq!(back, value);
        // Outside the BMP nothing changes (only the listed characters are escaped).
        assert_eq!(inert_json("{\"e\":\"😀\"}"), "{\"e\":\"😀\"}");
    }

    #[test]
    fn control_characters_are_shown_escaped() {
        assert_eq!(inert("plain text, ünïcode"), "plain text, ünïcode");
        assert_eq!(inert("\u{1b}]0;pwned\u{7}"), "\\u{1b}]0;pwned\\u{7}");
        assert_eq!(inert("a\nb\rc"), "a\\nb\\rc");
        assert_eq!(inert("\u{9b}2J"), "\\u{9b}2J");
        assert_eq!(inert("abc\u{202e}fed"), "abc\\u{202e}fed");
    }
}
