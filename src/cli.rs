//! `switchboard agent …` and `switchboard admin …`: act as an agent, or set a team up,
//! from a terminal, through [`crate::client`].
//!
//! Output is a short line for people by default and the server's JSON answer with
//! `--json`; `listen` prints every incoming frame as one JSON line either way. Exit
//! codes: 0 done, 1 the server refused (its error code is printed), 3 the server could
//! not be reached; clap uses 2 for bad usage.

use std::process::ExitCode;

use clap::{Args, Subcommand};
use serde::Serialize;
use serde_json::{Map, Value, json};

use crate::client::{Client, ClientError};
use crate::core::assistance::{AssistanceType, RequestAssistance, RequestDetails};
use crate::core::broadcasts::{BroadcastContent, BroadcastUpdate, UpdateType, Urgency};
use crate::core::messages::{
    Content, InboxQuery, MessageType, Priority, RespondToMessage, ResponseContent, ResponseStatus,
    SendMessage, SortOrder,
};
use crate::core::tasks::{
    Answer, Cancel, Clarify, Handoff, TaskRequest, TaskResponseStatus, TaskResult,
};

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
    /// Print every incoming frame as one JSON line, live; reconnects and resumes by
    /// itself. Ctrl-C to stop.
    Listen {
        /// Start after this sequence number (default: after your last acknowledged one).
        #[arg(long)]
        since: Option<i64>,
        /// Stop after this many frames.
        #[arg(long)]
        count: Option<usize>,
    },
    /// SEND_MESSAGE.
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
    },
    /// GET_MESSAGES: your inbox, newest first.
    Inbox {
        #[arg(long)]
        unread: bool,
        #[arg(long, default_value_t = 20)]
        limit: i64,
        /// Oldest first instead.
        #[arg(long)]
        oldest_first: bool,
    },
    /// MARK_MESSAGE_READ.
    Read {
        #[arg(required = true)]
        message_ids: Vec<String>,
    },
    /// RESPOND_TO_MESSAGE.
    Respond {
        message_id: String,
        text: String,
        /// completed, partial, unable or delegated.
        #[arg(long, default_value = "completed")]
        status: String,
    },
    /// BROADCAST_UPDATE to the whole team.
    Broadcast {
        summary: String,
        /// progress, discovery, issue or completion.
        #[arg(long = "type", default_value = "progress")]
        update_type: String,
        /// info, attention, action_required or critical.
        #[arg(long, default_value = "info")]
        urgency: String,
        #[arg(long, default_value = "")]
        details: String,
    },
    /// REQUEST_ASSISTANCE.
    Assist {
        description: String,
        /// expertise, resources, review or collaboration.
        #[arg(long = "type", default_value = "expertise")]
        assistance_type: String,
        #[arg(long, value_delimiter = ',')]
        capabilities: Vec<String>,
    },
    /// The task protocol.
    #[command(subcommand)]
    Task(TaskCommand),
}

#[derive(Debug, Subcommand)]
pub enum TaskCommand {
    /// Submit a TaskRequest.
    Submit {
        description: String,
        #[arg(long)]
        task_id: Option<String>,
        /// Required capabilities, comma-separated.
        #[arg(long, value_delimiter = ',')]
        capabilities: Vec<String>,
        /// Give it to this agent.
        #[arg(long)]
        target: Option<String>,
        /// An http(s) URL or an agent id to report status changes to.
        #[arg(long)]
        callback_url: Option<String>,
        /// Task data, a JSON object.
        #[arg(long)]
        data: Option<String>,
    },
    /// A task with its history.
    Show { task_id: String },
    /// Hand a task to another agent.
    Handoff {
        task_id: String,
        #[arg(long)]
        to: String,
        #[arg(long)]
        reason: String,
    },
    /// Ask the originator a question.
    Clarify { task_id: String, question: String },
    /// Answer a task's open question.
    Answer {
        task_id: String,
        clarification_id: String,
        answer: String,
    },
    /// Report progress.
    Progress {
        task_id: String,
        /// result_data, JSON.
        #[arg(long)]
        data: Option<String>,
    },
    /// Report success.
    Complete {
        task_id: String,
        #[arg(long)]
        data: Option<String>,
    },
    /// Report failure.
    Fail {
        task_id: String,
        #[arg(long)]
        data: Option<String>,
    },
    /// Cancel a task you submitted.
    Cancel {
        task_id: String,
        #[arg(long)]
        reason: Option<String>,
    },
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
}

#[derive(Debug, Subcommand)]
pub enum TeamCommand {
    /// Create a team; prints its key (shown once).
    Create {
        name: String,
        #[arg(long)]
        team_id: Option<String>,
    },
}

#[derive(Debug, Subcommand)]
pub enum AdminAgentCommand {
    /// Register an agent; prints its token (shown once).
    Register {
        #[arg(long)]
        team: String,
        agent_id: String,
        #[arg(long, default_value = "agent")]
        role: String,
        #[arg(long, value_delimiter = ',')]
        capabilities: Vec<String>,
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
            eprintln!("error: {why}");
            ExitCode::from(2)
        }
        Err(Failure::Client(err @ ClientError::Server { .. })) => {
            eprintln!("error: {err}");
            if let Some(action) = err.server_error().map(|e| e.suggested_action.clone()) {
                eprintln!("hint: {action}");
            }
            ExitCode::from(1)
        }
        Err(Failure::Client(err)) => {
            eprintln!("error: {err}");
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
        println!(
            "{}",
            serde_json::to_string(answer).unwrap_or_else(|_| "{}".to_owned())
        );
    } else {
        println!("{}", summary());
    }
}

/// Runs `switchboard agent …`.
pub async fn run_agent(args: AgentArgs) -> ExitCode {
    finish(agent(args).await)
}

/// Runs `switchboard admin …`.
pub async fn run_admin(args: AdminArgs) -> ExitCode {
    finish(admin(args).await)
}

async fn agent(args: AgentArgs) -> Result<(), Failure> {
    let c = &args.connection;
    let token = token(c)?;
    if let AgentCommand::Listen { since, count } = args.command {
        let client = Client::websocket(&c.url, token).await?;
        let mut incoming = match since {
            Some(after) => client.incoming_after(after),
            None => client.incoming(),
        };
        let mut seen = 0;
        while let Some(entry) = incoming.recv().await {
            println!("{}", entry.frame);
            seen += 1;
            if count.is_some_and(|n| seen >= n) {
                break;
            }
        }
        return Ok(());
    }
    let client = Client::http(&c.url, token).await?;
    let me = client.agent_id().to_owned();
    match args.command {
        AgentCommand::Listen { .. } => Ok(()),
        AgentCommand::Send {
            to,
            text,
            message_type,
            priority,
            requires_response,
            data,
        } => {
            let input = SendMessage {
                priority: parse::<Priority>("priority", &priority)?,
                requires_response,
                content: Content {
                    text,
                    data: json_object("data", data.as_deref())?,
                    attachments: Vec::new(),
                },
                ..SendMessage::new(
                    &me,
                    &to.iter().map(String::as_str).collect::<Vec<_>>(),
                    parse::<MessageType>("message type", &message_type)?,
                    "",
                )
            };
            let sent = client.send_message(input, None).await?;
            show(c.json, &sent, || {
                let d = &sent.delivery_status;
                format!(
                    "sent {} — delivered: [{}] pending: [{}] failed: [{}]",
                    sent.message_id,
                    d.delivered_to.join(", "),
                    d.pending_delivery.join(", "),
                    d.failed_delivery.join(", ")
                )
            });
            Ok(())
        }
        AgentCommand::Inbox {
            unread,
            limit,
            oldest_first,
        } => {
            let page = client
                .get_messages(InboxQuery {
                    unread_only: Some(unread),
                    limit: Some(limit),
                    sort_order: Some(if oldest_first {
                        SortOrder::OldestFirst
                    } else {
                        SortOrder::NewestFirst
                    }),
                    ..InboxQuery::default()
                })
                .await?;
            show(c.json, &page, || {
                let mut out = format!(
                    "{} messages ({} unread)",
                    page.total_count, page.unread_count
                );
                for m in &page.messages {
                    out.push_str(&format!(
                        "\n{} {} #{} {} from {}: {}",
                        if m.read_status { " " } else { "*" },
                        m.timestamp,
                        m.seq.unwrap_or(0),
                        m.message_id,
                        m.sender_agent_id,
                        m.content.text
                    ));
                }
                out
            });
            Ok(())
        }
        AgentCommand::Read { message_ids } => {
            let ids: Vec<&str> = message_ids.iter().map(String::as_str).collect();
            let marked = client.mark_read(&ids).await?;
            show(c.json, &marked, || {
                format!(
                    "marked read: [{}] already read: [{}] not found: [{}]",
                    marked.marked_read.join(", "),
                    marked.already_read.join(", "),
                    marked.not_found.join(", ")
                )
            });
            Ok(())
        }
        AgentCommand::Respond {
            message_id,
            text,
            status,
        } => {
            let input = RespondToMessage {
                responder_agent_id: me,
                original_message_id: None,
                response_content: ResponseContent {
                    text,
                    data: Map::new(),
                    status: parse::<ResponseStatus>("status", &status)?,
                },
                additional_recipients: Vec::new(),
            };
            let answer = client.respond(&message_id, input, None).await?;
            show(c.json, &answer, || {
                format!("responded with {}", answer.response_message_id)
            });
            Ok(())
        }
        AgentCommand::Broadcast {
            summary,
            update_type,
            urgency,
            details,
        } => {
            let input = BroadcastUpdate {
                sender_agent_id: me,
                update_type: parse::<UpdateType>("update type", &update_type)?,
                urgency: parse::<Urgency>("urgency", &urgency)?,
                content: BroadcastContent {
                    summary,
                    details,
                    impact: String::new(),
                    action_required: false,
                },
            };
            let answer = client.broadcast(input, None).await?;
            show(c.json, &answer, || {
                format!(
                    "broadcast {} to [{}]",
                    answer.broadcast_id,
                    answer.recipients.join(", ")
                )
            });
            Ok(())
        }
        AgentCommand::Assist {
            description,
            assistance_type,
            capabilities,
        } => {
            let input = RequestAssistance {
                requester_agent_id: me,
                assistance_type: parse::<AssistanceType>("assistance type", &assistance_type)?,
                required_capabilities: capabilities,
                request_details: RequestDetails {
                    description,
                    context: String::new(),
                    deadline: None,
                    priority: Priority::Normal,
                },
                target_agents: Vec::new(),
            };
            let answer = client.request_assistance(input, None).await?;
            show(c.json, &answer, || {
                let who: Vec<String> = answer
                    .potential_responders
                    .iter()
                    .map(|r| format!("{} ({:.2})", r.agent_id, r.capability_match))
                    .collect();
                format!(
                    "assistance request {} — can help: {}",
                    answer.request_id,
                    who.join(", ")
                )
            });
            Ok(())
        }
        AgentCommand::Task(command) => task(&client, c.json, command).await,
    }
}

async fn task(client: &Client, json: bool, command: TaskCommand) -> Result<(), Failure> {
    let me = client.agent_id().to_owned();
    let updated = |answer: crate::core::tasks::TaskUpdated| {
        show(json, &answer, || {
            let t = &answer.task;
            let mut line = format!(
                "task {} is {} (assignee {})",
                t.task_id,
                t.status.as_str(),
                t.assignee_agent_id.as_deref().unwrap_or("-")
            );
            if let Some(q) = &t.open_clarification {
                line.push_str(&format!(
                    "; open question {}: {}",
                    q.clarification_id, q.question
                ));
            }
            line
        });
    };
    let result = |status, data: Option<String>| -> Result<TaskResult, Failure> {
        Ok(TaskResult {
            status,
            result_data: json_value(data.as_deref())?,
        })
    };
    match command {
        TaskCommand::Submit {
            description,
            task_id,
            capabilities,
            target,
            callback_url,
            data,
        } => {
            let input = TaskRequest {
                task_id,
                description,
                data: json_object("data", data.as_deref())?,
                originating_agent_id: me,
                callback_url,
                priority: None,
                required_capabilities: capabilities,
                target_agent_id: target,
            };
            let answer = client.submit_task(input).await?;
            show(json, &answer, || {
                let r = &answer.task_response;
                match &answer.error_message {
                    Some(e) => format!(
                        "task {} failed: {} ({})",
                        r.task_id, e.error_message, e.error_code
                    ),
                    None => format!(
                        "task {} is {} (agent {}): {}",
                        r.task_id,
                        serde_json::to_value(r.status)
                            .ok()
                            .and_then(|v| v.as_str().map(str::to_owned))
                            .unwrap_or_default(),
                        r.agent_id,
                        r.result_data
                    ),
                }
            });
            match answer.error_message {
                None => Ok(()),
                // A stored but failed task (or a refused registry request) is still a
                // failure for the shell, with the code the server gave.
                Some(e) => {
                    let code = serde_json::from_value(Value::String(e.error_code))
                        .unwrap_or(crate::core::ErrorCode::InternalError);
                    Err(Failure::Client(ClientError::Server {
                        status: None,
                        error: Box::new(crate::core::CoreError::new(code, e.error_message)),
                    }))
                }
            }
        }
        TaskCommand::Show { task_id } => {
            let detail = client.get_task(&task_id).await?;
            show(json, &detail, || {
                let t = &detail.task;
                let mut out = format!(
                    "task {} — {} — {} (originator {}, assignee {})",
                    t.task_id,
                    t.description,
                    t.status.as_str(),
                    t.originating_agent_id,
                    t.assignee_agent_id.as_deref().unwrap_or("-")
                );
                for e in &detail.events {
                    out.push_str(&format!(
                        "\n  {} {} by {} → {} {}",
                        e.seq,
                        e.kind,
                        e.agent_id.as_deref().unwrap_or("-"),
                        e.status.as_str(),
                        Value::Object(e.data.clone())
                    ));
                }
                out
            });
            Ok(())
        }
        TaskCommand::Handoff {
            task_id,
            to,
            reason,
        } => {
            let answer = client
                .handoff(
                    &task_id,
                    Handoff {
                        new_agent_id: to,
                        reason,
                        current_agent_id: None,
                    },
                )
                .await?;
            updated(answer);
            Ok(())
        }
        TaskCommand::Clarify { task_id, question } => {
            updated(client.clarify(&task_id, Clarify { question }).await?);
            Ok(())
        }
        TaskCommand::Answer {
            task_id,
            clarification_id,
            answer,
        } => {
            updated(
                client
                    .answer(&task_id, &clarification_id, Answer { answer })
                    .await?,
            );
            Ok(())
        }
        TaskCommand::Progress { task_id, data } => {
            let input = result(TaskResponseStatus::InProgress, data)?;
            updated(client.report(&task_id, input).await?);
            Ok(())
        }
        TaskCommand::Complete { task_id, data } => {
            let input = result(TaskResponseStatus::Success, data)?;
            updated(client.report(&task_id, input).await?);
            Ok(())
        }
        TaskCommand::Fail { task_id, data } => {
            let input = result(TaskResponseStatus::Failed, data)?;
            updated(client.report(&task_id, input).await?);
            Ok(())
        }
        TaskCommand::Cancel { task_id, reason } => {
            updated(client.cancel(&task_id, Cancel { reason }).await?);
            Ok(())
        }
    }
}

async fn admin(args: AdminArgs) -> Result<(), Failure> {
    let c = &args.connection;
    let token = token(c)?;
    let http = crate::client::HttpTransport::new(&c.url, token)?;
    let call = |path: String, body: Value| {
        let request = crate::client::Request {
            op: "admin",
            method: reqwest::Method::POST,
            path,
            query: None,
            body,
            frame_extra: Map::new(),
            idempotency_key: None,
        };
        crate::client::Transport::call(&http, request)
    };
    match args.command {
        AdminCommand::Team(TeamCommand::Create { name, team_id }) => {
            let answer = call(
                "/v1/teams".into(),
                json!({"name": name, "team_id": team_id}),
            )
            .await?;
            show(c.json, &answer, || {
                format!(
                    "team {} created; its key (shown once): {}",
                    answer["team_id"].as_str().unwrap_or("?"),
                    answer["team_key"].as_str().unwrap_or("?")
                )
            });
        }
        AdminCommand::Agent(AdminAgentCommand::Register {
            team,
            agent_id,
            role,
            capabilities,
        }) => {
            let answer = call(
                format!("/v1/teams/{team}/agents"),
                json!({"agent_id": agent_id, "role": role, "capabilities": capabilities}),
            )
            .await?;
            show(c.json, &answer, || {
                format!(
                    "agent {} registered; its token (shown once): {}",
                    answer["agent"]["agent_id"].as_str().unwrap_or("?"),
                    answer["token"].as_str().unwrap_or("?")
                )
            });
        }
    }
    Ok(())
}
