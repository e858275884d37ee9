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

use super::{
    ErrorMessage, SERVER_AGENT_ID, TaskRequest, TaskResponse, TaskResponseStatus, TaskSubmitted,
};
use crate::core::agents::RegisterAgent;
use crate::core::registry::{AgentStatus, Caller};
use crate::core::{Core, CoreError, CoreResult, ErrorCode};

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
        let task_id = super::ops::task_id_or_new(req.task_id.as_deref())?;
        let answer =
            |status, result_data: Value, error: Option<(ErrorCode, String)>| TaskSubmitted {
                success: status == TaskResponseStatus::Success,
                task_response: TaskResponse {
                    task_id: task_id.clone(),
                    result_data,
                    status,
                    agent_id: SERVER_AGENT_ID.to_owned(),
                },
                error_message: error.map(|(code, message)| ErrorMessage {
                    task_id: Some(task_id.clone()),
                    error_code: code.as_text(),
                    error_message: message,
                    originating_agent_id: req.originating_agent_id.clone(),
                }),
                task: None,
            };
        let failed = |message: String, code: ErrorCode, detail: String| {
            tracing::info!(team_id = %team.team_id, "{message}");
            answer(
                TaskResponseStatus::Failed,
                json!({"message": message, "detail": detail}),
                Some((code, message)),
            )
        };
        match kind {
            RegistryRequest::Register => {
                let agent_id =
                    text(&req.data, "agent_id").unwrap_or(req.originating_agent_id.clone());
                let status = match text(&req.data, "status").map(|s| s.parse::<AgentStatus>()) {
                    None => Ok(None),
                    Some(Ok(status)) => Ok(Some(status)),
                    Some(Err(())) => Err(()),
                };
                let (Some(capabilities), Ok(status)) = (strings(&req.data, "capabilities"), status)
                else {
                    return Ok(failed(
                        "Invalid registration request.".into(),
                        ErrorCode::ValidationError,
                        "data needs capabilities (a list of strings), and optionally agent_id, role, address and status (available, busy or unavailable)".into(),
                    ));
                };
                if !matches!(caller, Caller::Team { .. }) {
                    return Ok(failed(
                        "Invalid registration request.".into(),
                        ErrorCode::Forbidden,
                        "registering an agent needs the team key, as over REST".into(),
                    ));
                }
                let input = RegisterAgent {
                    agent_id: agent_id.clone(),
                    role: text(&req.data, "role").unwrap_or_else(|| "agent".into()),
                    capabilities,
                    address: text(&req.data, "address"),
                    status,
                };
                match self.register_agent(caller, &team.team_id, input).await {
                    Ok(registered) => {
                        let message = format!(
                            "Agent {} registered successfully with capabilities: {}.",
                            registered.agent.agent_id,
                            registered.agent.capabilities.join(", ")
                        );
                        tracing::info!(team_id = %team.team_id, "{message}");
                        Ok(answer(
                            TaskResponseStatus::Success,
                            json!({
                                "message": message,
                                "agent": registered.agent,
                                "token": registered.token,
                            }),
                            None,
                        ))
                    }
                    Err(err) if err.error_code == ErrorCode::AgentAlreadyRegistered => Ok(failed(
                        format!("Error: Agent with ID {agent_id} is already registered."),
                        ErrorCode::AgentAlreadyRegistered,
                        err.error_message,
                    )),
                    Err(err) if err.error_code == ErrorCode::ValidationError => Ok(failed(
                        "Invalid registration request.".into(),
                        ErrorCode::ValidationError,
                        err.error_message,
                    )),
                    Err(err) => Err(err),
                }
            }
            RegistryRequest::Find => {
                let wanted =
                    strings(&req.data, "capabilities").or_else(|| strings(&req.data, "capability"));
                let Some(wanted) = wanted else {
                    return Ok(failed(
                        "Invalid lookup request.".into(),
                        ErrorCode::ValidationError,
                        "data needs capabilities (a list of strings) or capability (a string)"
                            .into(),
                    ));
                };
                let found: Vec<Value> = self
                    .registry()
                    .members(team.pk)
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
                    return Ok(failed(
                        "No available agents found.".into(),
                        ErrorCode::AgentNotFound,
                        format!(
                            "No available agents found for the requested capabilities: {}.",
                            wanted.join(", ")
                        ),
                    ));
                }
                Ok(answer(
                    TaskResponseStatus::Success,
                    json!({"message": format!("Found {} available agent(s).", found.len()), "agents": found}),
                    None,
                ))
            }
        }
    }
}
