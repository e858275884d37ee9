//! Where each operation lives in the REST API: the client side of the server's routes.

use reqwest::Method;
use serde::Serialize;
use serde_json::{Map, Value};
use switchboard_types::ids::TeamId;
use switchboard_types::{AgentOp, ApprovalOp, LeaseOp, MessageOp, Operation, TaskOp, TeamOp};

use crate::ClientError;

/// One REST request.
#[derive(Debug, Clone)]
pub struct RestCall {
    pub method: Method,
    /// The path, with ids as escaped segments, e.g. `/v1/tasks/t%2F1/result`.
    pub path: String,
    /// The query string (without `?`), for reads.
    pub query: Option<String>,
    /// The JSON body, for writes.
    pub body: Option<Value>,
    pub idempotency_key: Option<String>,
}

impl RestCall {
    fn new(method: Method, path: String) -> RestCall {
        RestCall {
            method,
            path,
            query: None,
            body: None,
            idempotency_key: None,
        }
    }

    fn get(path: String) -> Result<RestCall, ClientError> {
        Ok(RestCall::new(Method::GET, path))
    }

    fn read(path: String, query: &impl Serialize) -> Result<RestCall, ClientError> {
        Ok(RestCall {
            query: Some(query_string(&to_value(query)?)),
            ..RestCall::new(Method::GET, path)
        })
    }

    fn write(method: Method, path: String, body: &impl Serialize) -> Result<RestCall, ClientError> {
        Ok(RestCall {
            body: Some(to_value(body)?),
            ..RestCall::new(method, path)
        })
    }

    fn post(path: String, body: &impl Serialize) -> Result<RestCall, ClientError> {
        RestCall::write(Method::POST, path, body)
    }
}

/// `POST /v1/teams/{team_id}/a2a-agents`: registering an outside A2A agent is the A2A
/// layer's, not an operation of the core, so it is not an [`Operation`].
pub fn register_remote_agent(
    team_id: &str,
    body: &switchboard_types::agents::RegisterRemoteAgent,
) -> Result<RestCall, ClientError> {
    RestCall::post(format!("/v1/teams/{}/a2a-agents", seg(team_id)), body)
}

/// Adds an `Idempotency-Key` to a call.
fn keyed(
    call: Result<RestCall, ClientError>,
    key: &Option<String>,
) -> Result<RestCall, ClientError> {
    call.map(|call| RestCall {
        idempotency_key: key.clone(),
        ..call
    })
}

fn to_value(body: &impl Serialize) -> Result<Value, ClientError> {
    serde_json::to_value(body).map_err(|e| ClientError::Decode(format!("encoding a body: {e}")))
}

/// An id as one path segment.
fn seg(id: &str) -> String {
    form_urlencoded::byte_serialize(id.as_bytes()).collect()
}

/// `a=1&b=x,y` from an object's non-null fields (lists comma-joined).
fn query_string(value: &Value) -> String {
    let mut out = form_urlencoded::Serializer::new(String::new());
    if let Value::Object(fields) = value {
        for (k, v) in fields {
            let text = match v {
                Value::Null => continue,
                Value::String(s) => s.clone(),
                Value::Array(items) => items
                    .iter()
                    .map(|i| i.as_str().map_or_else(|| i.to_string(), str::to_owned))
                    .collect::<Vec<_>>()
                    .join(","),
                other => other.to_string(),
            };
            out.append_pair(k, &text);
        }
    }
    out.finish()
}

/// The REST request of a lease operation: on the team's path, so the team is named.
fn lease_call(op: &LeaseOp) -> Result<RestCall, ClientError> {
    let team = |team_id: &Option<TeamId>| match team_id {
        Some(team_id) => Ok(format!("/v1/teams/{}/leases", seg(team_id))),
        None => Err(ClientError::Transport(
            "a lease operation over REST names its team_id".into(),
        )),
    };
    match op {
        LeaseOp::AcquireLease { team_id, lease } => {
            RestCall::write(Method::PUT, team(team_id)?, lease)
        }
        LeaseOp::ListLeases { team_id, query } => RestCall::read(team(team_id)?, query),
        LeaseOp::ExtendLease {
            team_id,
            lease_id,
            extend,
        } => RestCall::post(
            format!("{}/{}/extend", team(team_id)?, seg(lease_id)),
            extend,
        ),
        LeaseOp::ReleaseLease { team_id, lease_id } => Ok(RestCall::new(
            Method::DELETE,
            format!("{}/{}", team(team_id)?, seg(lease_id)),
        )),
    }
}

/// The REST request of an approval operation.
fn approval_call(op: &ApprovalOp) -> Result<RestCall, ClientError> {
    match op {
        ApprovalOp::RequestApproval(body) => RestCall::post("/v1/approvals".into(), body),
        ApprovalOp::ListApprovals(query) => RestCall::read("/v1/approvals".into(), query),
        ApprovalOp::GetApproval { approval_id, wait } => {
            RestCall::read(format!("/v1/approvals/{}", seg(approval_id)), wait)
        }
        ApprovalOp::DecideApproval {
            approval_id,
            decision,
        } => RestCall::post(
            format!("/v1/approvals/{}/decision", seg(approval_id)),
            decision,
        ),
    }
}

/// The REST request that performs `op`.
pub fn rest_call(op: &Operation) -> Result<RestCall, ClientError> {
    match op {
        Operation::Teams(TeamOp::CreateTeam(body)) => RestCall::post("/v1/teams".into(), body),
        Operation::Teams(TeamOp::ListTeams) => RestCall::get("/v1/teams".into()),
        Operation::Teams(TeamOp::GetTeam { team_id }) => {
            RestCall::get(format!("/v1/teams/{}", seg(team_id)))
        }
        Operation::Teams(TeamOp::UpdateTeam { team_id, patch }) => {
            RestCall::write(Method::PATCH, format!("/v1/teams/{}", seg(team_id)), patch)
        }
        Operation::Teams(TeamOp::TeamMetrics { team_id }) => {
            RestCall::get(format!("/v1/teams/{}/metrics", seg(team_id)))
        }
        Operation::Teams(TeamOp::CallbackSecret { team_id }) => {
            RestCall::get(format!("/v1/teams/{}/callback-secret", seg(team_id)))
        }
        Operation::Teams(TeamOp::RotateCallbackSecret { team_id }) => RestCall::post(
            format!("/v1/teams/{}/callback-secret", seg(team_id)),
            &Map::new(),
        ),
        Operation::Agents(AgentOp::RegisterAgent { team_id, agent }) => {
            RestCall::post(format!("/v1/teams/{}/agents", seg(team_id)), agent)
        }
        Operation::Agents(AgentOp::ListAgents { team_id, query }) => {
            RestCall::read(format!("/v1/teams/{}/agents", seg(team_id)), query)
        }
        Operation::Agents(AgentOp::GetAgent { team_id, agent_id }) => {
            RestCall::get(agent_path(team_id, agent_id))
        }
        Operation::Agents(AgentOp::UpdateAgent {
            team_id,
            agent_id,
            patch,
        }) => RestCall::write(Method::PATCH, agent_path(team_id, agent_id), patch),
        Operation::Agents(AgentOp::RemoveAgent { team_id, agent_id }) => {
            Ok(RestCall::new(Method::DELETE, agent_path(team_id, agent_id)))
        }
        Operation::Agents(AgentOp::RotateAgentToken { team_id, agent_id }) => RestCall::post(
            format!("{}/token", agent_path(team_id, agent_id)),
            &Map::new(),
        ),
        Operation::Teams(TeamOp::RotateTeamKey { team_id }) => {
            RestCall::post(format!("/v1/teams/{}/key", seg(team_id)), &Map::new())
        }
        Operation::Agents(AgentOp::WhoAmI) => RestCall::get("/v1/whoami".into()),
        messaging => messaging_call(messaging),
    }
}

fn agent_path(team_id: &str, agent_id: &str) -> String {
    format!("/v1/teams/{}/agents/{}", seg(team_id), seg(agent_id))
}

fn messaging_call(op: &Operation) -> Result<RestCall, ClientError> {
    match op {
        Operation::Messages(MessageOp::SendMessage {
            message,
            idempotency_key,
        }) => keyed(
            RestCall::post("/v1/messages".into(), message),
            idempotency_key,
        ),
        Operation::Messages(MessageOp::GetMessages(query)) => {
            RestCall::read("/v1/messages".into(), query)
        }
        Operation::Messages(MessageOp::GetMessage { message_id }) => {
            RestCall::get(format!("/v1/messages/{}", seg(message_id)))
        }
        Operation::Messages(MessageOp::GetTrace { trace_id }) => {
            RestCall::get(format!("/v1/traces/{}", seg(trace_id)))
        }
        Operation::Messages(MessageOp::SearchMessages(query)) => {
            RestCall::read("/v1/search".into(), query)
        }
        Operation::Messages(MessageOp::MarkMessageRead(mark)) => {
            RestCall::post("/v1/messages/read".into(), mark)
        }
        Operation::Messages(MessageOp::RespondToMessage {
            message_id,
            response,
            idempotency_key,
        }) => keyed(
            RestCall::post(
                format!("/v1/messages/{}/responses", seg(message_id)),
                response,
            ),
            idempotency_key,
        ),
        Operation::Messages(MessageOp::BroadcastUpdate {
            update,
            idempotency_key,
        }) => keyed(
            RestCall::post("/v1/broadcasts".into(), update),
            idempotency_key,
        ),
        Operation::Messages(MessageOp::RequestAssistance {
            request,
            idempotency_key,
        }) => keyed(
            RestCall::post("/v1/assistance-requests".into(), request),
            idempotency_key,
        ),
        Operation::Messages(MessageOp::Publish {
            publish,
            idempotency_key,
        }) => keyed(
            RestCall::post("/v1/publish".into(), publish),
            idempotency_key,
        ),
        Operation::Teams(TeamOp::GetActivity {
            team_id: Some(team_id),
        }) => RestCall::get(format!("/v1/teams/{}/activity", seg(team_id))),
        Operation::Teams(TeamOp::GetActivity { team_id: None }) => {
            RestCall::get("/v1/activity".into())
        }
        Operation::Teams(TeamOp::Traffic { team_id, query }) => {
            RestCall::read(format!("/v1/teams/{}/messages", seg(team_id)), query)
        }
        Operation::Teams(TeamOp::TeamTasks { team_id, query }) => {
            RestCall::read(format!("/v1/teams/{}/tasks", seg(team_id)), query)
        }
        Operation::Agents(AgentOp::SetWatch(set)) => {
            RestCall::write(Method::PUT, "/v1/watch".into(), set)
        }
        tasks => task_call(tasks),
    }
}

/// `POST /v1/tasks/{task_id}/{action}` with `body`.
fn action(task_id: &str, action: &str, body: &impl Serialize) -> Result<RestCall, ClientError> {
    RestCall::post(format!("/v1/tasks/{}/{action}", seg(task_id)), body)
}

fn task_call(op: &Operation) -> Result<RestCall, ClientError> {
    match op {
        Operation::Tasks(TaskOp::SubmitTask(request)) => {
            RestCall::post("/v1/tasks".into(), request)
        }
        Operation::Tasks(TaskOp::GetTask { task_id }) => {
            RestCall::get(format!("/v1/tasks/{}", seg(task_id)))
        }
        Operation::Tasks(TaskOp::ListTasks(query)) => RestCall::read("/v1/tasks".into(), query),
        Operation::Tasks(TaskOp::ReportTask {
            task_id, result, ..
        }) => action(task_id, "result", result),
        Operation::Tasks(TaskOp::HandOff { task_id, handoff }) => {
            action(task_id, "handoff", handoff)
        }
        Operation::Tasks(TaskOp::Clarify {
            task_id, clarify, ..
        }) => action(task_id, "clarifications", clarify),
        Operation::Tasks(TaskOp::AnswerClarification {
            task_id,
            clarification_id,
            answer,
            ..
        }) => action(
            task_id,
            &format!("clarifications/{}/answer", seg(clarification_id)),
            answer,
        ),
        Operation::Tasks(TaskOp::CancelTask { task_id, cancel }) => {
            action(task_id, "cancel", cancel)
        }
        Operation::Tasks(TaskOp::ClaimTask(claim)) => {
            RestCall::post("/v1/tasks/claim".into(), claim)
        }
        Operation::Tasks(TaskOp::ReleaseTask { task_id, release }) => {
            action(task_id, "release", release)
        }
        Operation::Tasks(TaskOp::ExtendClaim { task_id, extend }) => {
            action(task_id, "extend", extend)
        }
        Operation::Leases(op) => lease_call(op),
        Operation::Approvals(op) => approval_call(op),
        other => Err(ClientError::Transport(format!(
            "{} exists only as a WebSocket frame; over REST report with TaskResponse (`report`)",
            other.name()
        ))),
    }
}
