//! The tools: one per operation, each the REST operation it mirrors (for its input
//! schema) and the frame it decodes as (for its meaning), with what a model should know
//! to use it.

use rmcp::model::{CallToolResult, ContentBlock, JsonObject, Tool, ToolAnnotations};
use serde_json::Value;
use std::time::Duration;
use switchboard_types::AgentOp;

use switchboard_types::decode::decode_value;
use switchboard_types::frames::operation_of;
use switchboard_types::inbox::{DEFAULT_WAIT_MS, WaitForMessages};
use switchboard_types::{AgentOpName, ApprovalOpName, MessageOpName, OperationName, TaskOpName};
use switchboard_types::{ErrorBody, Operation, Reply};

use super::schema;

mod held;
use crate::core::{Caller, Core, CoreError};

/// What the server tells a model when it connects.
pub const INSTRUCTIONS: &str = "Switchboard connects you with the other agents of your team. \
Check your inbox with get_messages (unread_only=true) when you start and between steps; \
answer messages with requires_response=true using respond; use send_message for new \
conversations, find_agents to see who can do what, and the task tools (submit_task, \
get_task, report_progress, complete_task, fail_task, ask_clarification, \
answer_clarification, hand_off, cancel_task) for work with a lifecycle. \
Errors carry an error_code and a suggested_action: follow it.";

/// How a tool's arguments become an operation.
#[derive(Clone, Copy)]
enum Decode {
    /// The arguments are the fields of this WebSocket frame type.
    Frame(OperationName),
    /// Like `Frame`, with `status` fixed (the three task reports).
    Report(&'static str),
    /// LIST_AGENTS of the caller's own team (REST names the team in the path).
    FindAgents,
    /// A wait for new inbox entries (no REST operation: REST clients poll or hold a
    /// WebSocket).
    Wait,
    /// REGISTER_AGENT in the caller's own team (a team key's; an agent token is refused).
    Register,
    /// REQUEST_APPROVAL that waits for the decision ([`held::ASK_WAIT_SECONDS`] unless
    /// the call says otherwise): the one tool call a model makes to ask and be answered.
    Ask,
}

/// Where a tool's input schema comes from.
#[derive(Clone, Copy)]
pub enum Source {
    /// The REST operation (method, path): its path, query and body parameters.
    Rest(&'static str, &'static str),
    /// A component of the OpenAPI document.
    Component(&'static str),
}

/// One tool.
pub struct Spec {
    pub name: &'static str,
    decode: Decode,
    /// What the tool takes: a REST operation's parameters, or a component.
    pub source: Source,
    /// Path parameters that the frame knows by another name.
    pub renames: &'static [(&'static str, &'static str)],
    /// Fields naming the caller, filled in with its agent id (a model should not have
    /// to know its own id, and may not name another).
    pub caller_fields: &'static [&'static str],
    /// Fields the tool sets itself.
    pub fixed: &'static [&'static str],
    read_only: bool,
    description: &'static str,
}

const fn spec(name: &'static str, decode: Decode, rest: (&'static str, &'static str)) -> Spec {
    Spec {
        name,
        decode,
        source: Source::Rest(rest.0, rest.1),
        renames: &[],
        caller_fields: &[],
        fixed: &[],
        read_only: false,
        description: "",
    }
}

impl Spec {
    const fn about(mut self, description: &'static str) -> Spec {
        self.description = description;
        self
    }

    const fn reads(mut self) -> Spec {
        self.read_only = true;
        self
    }

    const fn caller(mut self, fields: &'static [&'static str]) -> Spec {
        self.caller_fields = fields;
        self
    }

    const fn renames(mut self, renames: &'static [(&'static str, &'static str)]) -> Spec {
        self.renames = renames;
        self
    }

    const fn fixes(mut self, fields: &'static [&'static str]) -> Spec {
        self.fixed = fields;
        self
    }
}

use Decode::{Ask, FindAgents, Frame, Register, Report, Wait};

const GET: &str = "get";
const POST: &str = "post";

/// Every tool, in the order a model sees them.
static TOOLS: [Spec; 20] = [
    spec(
        "whoami",
        Frame(OperationName::Agents(AgentOpName::WhoAmI)),
        (GET, "/v1/whoami"),
    )
    .reads()
    .about(
        "Who you are in Switchboard: your agent id, your team, your role. Call it first if \
         you do not know your agent id.",
    ),
    spec(
        "find_agents",
        FindAgents,
        (GET, "/v1/teams/{team_id}/agents"),
    )
    .reads()
    .about(
        "List your team's agents, optionally only those with given capabilities \
         (comma-separated) or a given status. Use it to find someone to ask or to give a \
         task to. Returns each agent's id, role, capabilities, status and whether it is \
         connected.",
    ),
    spec(
        "send_message",
        Frame(OperationName::Messages(MessageOpName::SendMessage)),
        (POST, "/v1/messages"),
    )
    .caller(&["sender_agent_id"])
    .about(
        "Send a message to one or more agents of your team (recipient_agent_ids, or \
             [\"ALL\"]). Set requires_response=true when you need an answer; use \
             in_reply_to to follow up on a message. Returns the message id and who got it \
             live (delivered_to) or will find it in their inbox (pending_delivery).",
    ),
    spec(
        "get_messages",
        Frame(OperationName::Messages(MessageOpName::GetMessages)),
        (GET, "/v1/messages"),
    )
    .reads()
    .about(
        "Read your inbox, newest first: messages, responses, broadcasts, assistance \
             requests and task notifications. Filter with unread_only, message_types, \
             senders, priority, since_timestamp, thread_id; page with cursor (the \
             next_cursor of the previous page). Returns the messages with total_count and \
             unread_count.",
    ),
    spec(
        "get_message",
        Frame(OperationName::Messages(MessageOpName::GetMessage)),
        (GET, "/v1/messages/{message_id}"),
    )
    .reads()
    .about(
        "One message you sent or received, with its recipients and the responses it \
             got.",
    ),
    spec(
        "mark_read",
        Frame(OperationName::Messages(MessageOpName::MarkMessageRead)),
        (POST, "/v1/messages/read"),
    )
    .caller(&["agent_id"])
    .about(
        "Mark messages of your inbox as read (message_ids), so unread_only shows only \
             what is left to handle.",
    ),
    spec(
        "respond",
        Frame(OperationName::Messages(MessageOpName::RespondToMessage)),
        (POST, "/v1/messages/{message_id}/responses"),
    )
    .caller(&["responder_agent_id"])
    .renames(&[("message_id", "original_message_id")])
    .about(
        "Answer a message that requires a response (original_message_id), with a text \
             and a status: completed, partial (more will follow), unable or delegated. The \
             answer goes to the message's sender (and additional_recipients).",
    ),
    spec(
        "broadcast",
        Frame(OperationName::Messages(MessageOpName::BroadcastUpdate)),
        (POST, "/v1/broadcasts"),
    )
    .caller(&["sender_agent_id"])
    .about(
        "Tell every member of your team about a change (update_type, content with a \
             summary, urgency). Use it sparingly: everyone gets it.",
    ),
    spec(
        "request_assistance",
        Frame(OperationName::Messages(MessageOpName::RequestAssistance)),
        (POST, "/v1/assistance-requests"),
    )
    .caller(&["requester_agent_id"])
    .about(
        "Ask for help with something you cannot do (assistance_type, description, \
             required_capabilities): it goes to the agents that match best, or to \
             target_agents. Returns the potential responders; their answers arrive as \
             responses in your inbox.",
    ),
    spec(
        "publish",
        Frame(OperationName::Messages(MessageOpName::Publish)),
        (POST, "/v1/publish"),
    )
    .caller(&["sender_agent_id"])
    .about(
        "Publish the output of an action (cause_by = the action's name) to your team or to \
         the addresses in send_to; agents that watch cause_by see it as news.",
    ),
    spec(
        "set_watch",
        Frame(OperationName::Agents(AgentOpName::SetWatch)),
        ("put", "/v1/watch"),
    )
    .caller(&["agent_id"])
    .about(
        "Choose which actions' publishes are news for you (watch) and the addresses you \
         answer to (addresses); each list replaces the previous one.",
    ),
    spec(
        "submit_task",
        Frame(OperationName::Tasks(TaskOpName::SubmitTask)),
        (POST, "/v1/tasks"),
    )
    .caller(&["originating_agent_id"])
    .about(
        "Give work to another agent: a task with a description and either target_agent_id \
         or required_capabilities (the best available match gets it). Returns the task id; \
         follow it with get_task, and the result arrives in your inbox.",
    ),
    spec(
        "get_task",
        Frame(OperationName::Tasks(TaskOpName::GetTask)),
        (GET, "/v1/tasks/{task_id}"),
    )
    .reads()
    .about("A task you gave or work on: its status, assignee, result and history."),
    spec(
        "list_tasks",
        Frame(OperationName::Tasks(TaskOpName::ListTasks)),
        (GET, "/v1/tasks"),
    )
    .reads()
    .about(
        "Tasks you gave (role=originated) or work on (role=assigned), optionally by status; \
         page with cursor.",
    ),
    spec(
        "report_progress",
        Report("in-progress"),
        (POST, "/v1/tasks/{task_id}/result"),
    )
    .caller(&["agent_id"])
    .fixes(&["status"])
    .about(
        "Tell the originator how a task you work on is going (result_data: anything \
             useful so far). The task stays open.",
    ),
    spec(
        "complete_task",
        Report("success"),
        (POST, "/v1/tasks/{task_id}/result"),
    )
    .caller(&["agent_id"])
    .fixes(&["status"])
    .about("Finish a task you work on successfully, with its result in result_data."),
    spec(
        "fail_task",
        Report("failed"),
        (POST, "/v1/tasks/{task_id}/result"),
    )
    .caller(&["agent_id"])
    .fixes(&["status"])
    .about(
        "End a task you work on as failed, saying why in result_data, when it cannot be \
             done (hand_off instead if someone else could).",
    ),
    spec(
        "ask_clarification",
        Frame(OperationName::Tasks(TaskOpName::Clarify)),
        (POST, "/v1/tasks/{task_id}/clarifications"),
    )
    .caller(&["requested_by"])
    .about(
        "Ask the originator of a task you work on a question; the answer arrives in your \
         inbox.",
    ),
    spec(
        "answer_clarification",
        Frame(OperationName::Tasks(TaskOpName::AnswerClarification)),
        (
            POST,
            "/v1/tasks/{task_id}/clarifications/{clarification_id}/answer",
        ),
    )
    .caller(&["response_provided_by"])
    .about("Answer a question the assignee of your task asked (clarification_id)."),
    spec(
        "hand_off",
        Frame(OperationName::Tasks(TaskOpName::HandOff)),
        (POST, "/v1/tasks/{task_id}/handoff"),
    )
    .about(
        "Pass a task to another agent (new_agent_id) with the reason, when it fits them \
         better.",
    ),
];

/// Tools kept apart only to keep [`TOOLS`] under the line bound.
static MORE: [Spec; 6] = [
    spec(
        "cancel_task",
        Frame(OperationName::Tasks(TaskOpName::CancelTask)),
        (POST, "/v1/tasks/{task_id}/cancel"),
    )
    .about("Cancel a task you gave, with an optional reason."),
    spec(
        "claim_task",
        Frame(OperationName::Tasks(TaskOpName::ClaimTask)),
        (POST, "/v1/tasks/claim"),
    )
    .about(
        "Take the next task offered to your role (most urgent, then oldest), waiting up \
         to wait_seconds (at most 60) for one; task is null when none came. It is yours \
         for lease_seconds (default 300): report progress (report_progress) \
         before that runs out, or it goes back to the next agent of your role.",
    ),
    spec(
        "release_task",
        Frame(OperationName::Tasks(TaskOpName::ReleaseTask)),
        (POST, "/v1/tasks/{task_id}/release"),
    )
    .about("Give a task you claimed back to your role, with an optional reason."),
    spec(
        "extend_claim",
        Frame(OperationName::Tasks(TaskOpName::ExtendClaim)),
        (POST, "/v1/tasks/{task_id}/extend"),
    )
    .about(
        "Keep a task you claimed without reporting progress: its lease ends lease_seconds \
         from now (at most 3600; default the claim's own lease).",
    ),
    Spec {
        source: Source::Component("WaitForMessages"),
        ..spec("wait_for_messages", Wait, ("", ""))
    }
    .reads()
    .about(
        "Wait until something arrives in your inbox, instead of polling get_messages: \
         returns at once with what came after after_seq, or as soon as a new entry \
         arrives, or empty with timed_out=true after timeout_ms (default 30 s, at most \
         60 s). Pass the answer's next_after_seq back as after_seq to wait for what comes \
         next. Sends progress notifications while it waits if you gave a progress token.",
    ),
    spec(
        "register_agent",
        Register,
        (POST, "/v1/teams/{team_id}/agents"),
    )
    .about(
        "Add an agent to your team (agent_id, role, capabilities) and get its token, to \
         hand to the helper you start. Only with the team key (a lead's connection); an \
         agent token is refused.",
    ),
];

fn all() -> impl Iterator<Item = &'static Spec> {
    TOOLS.iter().chain(MORE.iter()).chain(held::HELD.iter())
}

/// The tool named `name`.
impl Spec {
    /// Whether the tool waits (and may report progress while it does).
    pub fn waits(&self) -> bool {
        matches!(self.decode, Wait)
    }
}

pub fn find(name: &str) -> Option<&'static Spec> {
    all().find(|t| t.name == name)
}

/// Every tool as MCP lists it.
pub fn list(doc: &utoipa::openapi::OpenApi) -> Vec<Tool> {
    let doc = serde_json::to_value(doc).unwrap_or(Value::Null);
    all()
        .map(|spec| {
            let mut tool = Tool::new(spec.name, spec.description, schema::input(&doc, spec));
            let mut hints = ToolAnnotations::new().read_only(spec.read_only);
            if !spec.read_only {
                hints = hints.destructive(false);
            }
            tool.annotations = Some(hints);
            tool
        })
        .collect()
}

/// Runs a tool for `caller`: the operation's answer as structured content with a short
/// text, or its error body as a tool error. `on_tick` hears that a wait goes on.
pub async fn call(
    core: &Core,
    caller: &Caller,
    spec: &Spec,
    arguments: JsonObject,
    on_tick: impl FnMut(Duration) + Send,
) -> CallToolResult {
    if matches!(spec.decode, Wait) {
        return match wait(core, caller, arguments, on_tick).await {
            Ok(value) => structured(value),
            Err(err) => refusal(err),
        };
    }
    match operation(core, caller, spec, arguments) {
        Ok(operation) => match core.dispatch(caller, operation).await {
            Ok(reply) => answer(&reply),
            Err(err) => refusal(err),
        },
        Err(err) => refusal(err),
    }
}

fn operation(
    core: &Core,
    caller: &Caller,
    spec: &Spec,
    mut fields: JsonObject,
) -> Result<Operation, CoreError> {
    if !spec.caller_fields.is_empty() || matches!(spec.decode, FindAgents) {
        let (team, me) = core.identity().acting_agent(caller)?;
        for field in spec.caller_fields {
            fields
                .entry(field.to_string())
                .or_insert_with(|| Value::String(me.agent_id.to_string()));
        }
        if matches!(spec.decode, FindAgents) {
            let query = decode_value(Value::Object(fields))?;
            return Ok(Operation::Agents(AgentOp::ListAgents {
                team_id: team.team_id.clone(),
                query,
            }));
        }
    }
    match spec.decode {
        Frame(name) => Ok(operation_of(name, fields)?),
        Report(status) => {
            if fields.contains_key("status") {
                return Err(ErrorBody::validation(
                    "status",
                    format!("{} sets status itself; leave it out", spec.name),
                )
                .into());
            }
            fields.insert("status".into(), Value::String(status.into()));
            Ok(operation_of(
                OperationName::Tasks(TaskOpName::ReportTask),
                fields,
            )?)
        }
        Ask => {
            fields
                .entry("wait_seconds")
                .or_insert_with(|| Value::from(held::ASK_WAIT_SECONDS));
            Ok(operation_of(
                OperationName::Approvals(ApprovalOpName::RequestApproval),
                fields,
            )?)
        }
        Register => Ok(Operation::Agents(AgentOp::RegisterAgent {
            team_id: core.identity().own_team_id(caller)?,
            agent: decode_value(Value::Object(fields))?,
        })),
        FindAgents | Wait => Err(CoreError::internal("decoded elsewhere")),
    }
}

async fn wait(
    core: &Core,
    caller: &Caller,
    arguments: JsonObject,
    on_tick: impl FnMut(Duration) + Send,
) -> Result<Value, CoreError> {
    let args: WaitForMessages = decode_value(Value::Object(arguments))?;
    let timeout = Duration::from_millis(args.timeout_ms.unwrap_or(DEFAULT_WAIT_MS));
    // A place among the credential's waiting calls, held until the answer.
    let _place = core.live().hold_wait(caller)?;
    let waited = core
        .live()
        .wait_for_inbox(caller, args.after_seq, args.limit, timeout, on_tick)
        .await?;
    serde_json::to_value(waited).map_err(|e| CoreError::internal(format!("encoding: {e}")))
}

fn answer(reply: &Reply) -> CallToolResult {
    match serde_json::to_value(reply) {
        Ok(value) => structured(value),
        Err(e) => refusal(CoreError::internal(format!("encoding the answer: {e}"))),
    }
}

/// The answer twice: as `structuredContent`, and serialized in a text block, as the MCP
/// specification (2025-06-18 on) asks of a tool with structured output. Agno's,
/// LangChain's and CrewAI's MCP adapters hand a model only the text blocks: with a
/// placeholder there, their agents could call every tool and read none of the answers.
fn structured(value: Value) -> CallToolResult {
    let text = value.to_string();
    let mut result = CallToolResult::structured(value);
    result.content = vec![ContentBlock::text(text)];
    result
}

/// A refusal: a line a model reads at a glance, then the whole error body (its code,
/// `details`, `suggested_action`) as JSON, as in [`structured`].
fn refusal(err: CoreError) -> CallToolResult {
    let body = err.into_body();
    let value = serde_json::to_value(&body).unwrap_or(Value::Null);
    let text = format!(
        "{}: {} — {}\n{value}",
        body.error_code.as_str(),
        body.error_message,
        body.suggested_action
    );
    let mut result = CallToolResult::structured_error(value);
    result.content = vec![ContentBlock::text(text)];
    result
}

/// How long a wait asked for lasts, in milliseconds (the `total` of its progress).
pub fn wait_total(arguments: &JsonObject) -> Option<f64> {
    let asked = arguments.get("timeout_ms").and_then(Value::as_u64);
    Some(asked.unwrap_or(DEFAULT_WAIT_MS) as f64)
}
