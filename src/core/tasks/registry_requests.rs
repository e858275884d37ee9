//! The registry by message (`003_…`, Agent Management): a TaskRequest addressed to the
//! server itself — no target, no required capabilities — whose description contains
//! "register me as an agent" or "find an agent".
//!
//! The document extracts the details "from the task description"; here they are the
//! structured fields of the task's `data`, so nothing depends on parsing prose:
//!
//! * register: `agent_id` (defaults to `originating_agent_id`), `capabilities` (a list,
//!   required), and optionally `role` (default `agent`), `address`, `status`. Registering
//!   is a team-key action over REST as well, so it needs the team key here too; the
//!   success answer carries the new agent's token, once.
//! * find: `capabilities` (a list) or `capability` (one); any member or the team key.
//!
//! Answers are `TaskResponse`s with the document's texts; nothing is stored as a task.

use serde_json::{Value, json};
use switchboard_types::ErrorCode;
use switchboard_types::agents::{AgentStatus, RegisterAgent};
use switchboard_types::ids::TaskId;
use switchboard_types::tasks::{
    ErrorMessage, SERVER_AGENT_ID, TaskRequest, TaskResponse, TaskResponseStatus, TaskSubmitted,
};

use crate::core::{Caller, Core, CoreError, CoreResult};
use crate::model::TeamRecord;

/// Which registry request a description makes, if any.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum RegistryRequest {
    Register,
    Find,
}

impl RegistryRequest {
    pub(super) fn of(description: &str) -> Option<RegistryRequest> {
        let text = description.to_lowercase();
        if text.contains("register me as an agent") {
            Some(RegistryRequest::Register)
        } else if text.contains("find an agent") {
            Some(RegistryRequest::Find)
        } else {
            None
        }
    }
}

/// A list of strings in `data[field]`, if it is one and not empty.
fn strings(data: &serde_json::Map<String, Value>, field: &str) -> Option<Vec<String>> {
    let list: Vec<String> = match data.get(field)? {
        Value::Array(items) => items
            .iter()
            .map(|v| v.as_str().map(str::to_owned))
            .collect::<Option<_>>()?,
        Value::String(one) => vec![one.clone()],
        _ => return None,
    };
    (!list.is_empty()).then_some(list)
}

fn text(data: &serde_json::Map<String, Value>, field: &str) -> Option<String> {
    data.get(field).and_then(Value::as_str).map(str::to_owned)
}

/// Answers a registry request with the document's shapes: a `TaskResponse` from the
/// server, and an `ErrorMessage` when it failed.
struct Answers<'a> {
    task_id: TaskId,
    originating_agent_id: &'a str,
    team: &'a TeamRecord,
}

impl Answers<'_> {
    fn success(&self, result_data: Value) -> TaskSubmitted {
        self.answer(TaskResponseStatus::Success, result_data, None)
    }

    fn failed(&self, message: String, code: ErrorCode, detail: String) -> TaskSubmitted {
        tracing::info!(team_id = %self.team.team_id, "{message}");
        let data = json!({"message": message, "detail": detail});
        self.answer(TaskResponseStatus::Failed, data, Some((code, message)))
    }

    fn answer(
        &self,
        status: TaskResponseStatus,
        result_data: Value,
        error: Option<(ErrorCode, String)>,
    ) -> TaskSubmitted {
        TaskSubmitted {
            success: status == TaskResponseStatus::Success,
            task_response: TaskResponse {
                task_id: self.task_id.clone(),
                result_data,
                status,
                agent_id: SERVER_AGENT_ID.to_owned().into(),
            },
            error_message: error.map(|(code, message)| ErrorMessage {
                task_id: Some(self.task_id.clone()),
                error_code: code.as_str().to_owned(),
                error_message: message,
                originating_agent_id: self.originating_agent_id.into(),
            }),
            task: None,
        }
    }
}

impl Core {
    pub(super) async fn registry_request(
        &self,
        caller: &Caller,
        req: TaskRequest,
        kind: RegistryRequest,
    ) -> CoreResult<TaskSubmitted> {
        let team = match *caller {
            Caller::Team { team } => self.registry().team(team),
            Caller::Agent { .. } => {
                let (team, _) =
                    self.sender(caller, &req.originating_agent_id, "originating_agent_id")?;
                Some(team)
            }
            Caller::Admin => None,
        }
        .ok_or_else(|| {
            CoreError::forbidden(
                "the registry by message is used with a team key or an agent token",
            )
        })?;
        let task_id = match &req.task_id {
            Some(id) => {
                id.check("task_id")?;
                id.clone()
            }
            None => crate::core::ids::ordered_id("task").into(),
        };
        let answers = Answers {
            task_id: task_id.clone(),
            originating_agent_id: &req.originating_agent_id,
            team: &team,
        };
        match kind {
            RegistryRequest::Register => self.register_by_message(caller, &req, &answers).await,
            RegistryRequest::Find => Ok(self.find_by_message(&req, &answers)),
        }
    }

    /// "Register me as an agent": the team key registers the agent `data` describes.
    async fn register_by_message(
        &self,
        caller: &Caller,
        req: &TaskRequest,
        answers: &Answers<'_>,
    ) -> CoreResult<TaskSubmitted> {
        let invalid = "Invalid registration request.";
        let agent_id = text(&req.data, "agent_id").unwrap_or(req.originating_agent_id.to_string());
        let status = match text(&req.data, "status").map(|s| s.parse::<AgentStatus>()) {
            None => Ok(None),
            Some(Ok(status)) => Ok(Some(status)),
            Some(Err(_)) => Err(()),
        };
        let (Some(capabilities), Ok(status)) = (strings(&req.data, "capabilities"), status) else {
            return Ok(answers.failed(
                invalid.into(),
                ErrorCode::ValidationError,
                "data needs capabilities (a list of strings), and optionally agent_id, role, address and status (available, busy or unavailable)".into(),
            ));
        };
        if !matches!(caller, Caller::Team { .. }) {
            return Ok(answers.failed(
                invalid.into(),
                ErrorCode::Forbidden,
                "registering an agent needs the team key, as over REST".into(),
            ));
        }
        let input = RegisterAgent {
            agent_id: agent_id.clone().into(),
            role: text(&req.data, "role").unwrap_or_else(|| "agent".into()),
            capabilities,
            address: text(&req.data, "address"),
            status,
            addresses: None,
            watch: None,
            stomp_bridge: None,
        };
        match self
            .register_agent(caller, &answers.team.team_id, input)
            .await
        {
            Ok(registered) => {
                let message = format!(
                    "Agent {} registered successfully with capabilities: {}.",
                    registered.agent.agent_id,
                    registered.agent.capabilities.join(", ")
                );
                tracing::info!(team_id = %answers.team.team_id, "{message}");
                Ok(answers.success(json!({
                    "message": message,
                    "agent": registered.agent,
                    "token": registered.token,
                })))
            }
            Err(err) if err.code() == ErrorCode::AgentAlreadyRegistered => Ok(answers.failed(
                format!("Error: Agent with ID {agent_id} is already registered."),
                ErrorCode::AgentAlreadyRegistered,
                err.into_body().error_message,
            )),
            Err(err) if err.code() == ErrorCode::ValidationError => Ok(answers.failed(
                invalid.into(),
                ErrorCode::ValidationError,
                err.into_body().error_message,
            )),
            Err(err) => Err(err),
        }
    }

    /// "Find an agent": available members with every capability `data` names.
    fn find_by_message(&self, req: &TaskRequest, answers: &Answers<'_>) -> TaskSubmitted {
        let wanted =
            strings(&req.data, "capabilities").or_else(|| strings(&req.data, "capability"));
        let Some(wanted) = wanted else {
            return answers.failed(
                "Invalid lookup request.".into(),
                ErrorCode::ValidationError,
                "data needs capabilities (a list of strings) or capability (a string)".into(),
            );
        };
        let found: Vec<Value> = self
            .registry()
            .members(answers.team.pk)
            .iter()
            .filter(|a| a.status == AgentStatus::Available)
            .filter(|a| wanted.iter().all(|w| a.has_capability(w)))
            .map(|a| {
                tracing::info!(
                    "Found agent {} with capabilities: {}, address: {}.",
                    a.agent_id,
                    a.capabilities.join(", "),
                    a.address.as_deref().unwrap_or("-")
                );
                json!({
                    "agent_id": a.agent_id,
                    "role": a.role,
                    "capabilities": a.capabilities,
                    "address": a.address,
                    "status": a.status,
                    "connected": self.hub().is_connected(a.pk),
                })
            })
            .collect();
        if found.is_empty() {
            return answers.failed(
                "No available agents found.".into(),
                ErrorCode::AgentNotFound,
                format!(
                    "No available agents found for the requested capabilities: {}.",
                    wanted.join(", ")
                ),
            );
        }
        answers.success(
            json!({"message": format!("Found {} available agent(s).", found.len()), "agents": found}),
        )
    }
}
