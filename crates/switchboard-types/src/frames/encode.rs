//! A client frame's fields from its operation (the other way round from decoding):
//! what `ClientFrame::encode` writes, for clients written in Rust.

use serde::Serialize;
use serde_json::{Value, json};

use super::Fields;
use crate::operation::{AgentOp, ApprovalOp, LeaseOp, MessageOp, Operation, TaskOp, TeamOp};

/// An operation's frame fields (without `type` and `request_id`); `None` for the
/// operations the socket does not carry.
pub(super) fn operation_fields(op: &Operation) -> Result<Option<Fields>, serde_json::Error> {
    let mut f = Fields::new();
    let mut put = |name: &str, value: Value| {
        if !value.is_null() {
            f.insert(name.to_owned(), value);
        }
    };
    match op {
        Operation::Messages(MessageOp::SendMessage {
            message,
            idempotency_key,
        }) => {
            put("idempotency_key", json!(idempotency_key));
            return merged(f, message);
        }
        Operation::Messages(MessageOp::GetMessages(query)) => return merged(f, query),
        Operation::Messages(MessageOp::GetMessage { message_id }) => {
            put("message_id", json!(message_id))
        }
        Operation::Messages(MessageOp::GetTrace { trace_id }) => put("trace_id", json!(trace_id)),
        Operation::Messages(MessageOp::MarkMessageRead(mark)) => return merged(f, mark),
        Operation::Messages(MessageOp::SearchMessages(query)) => return merged(f, query),
        Operation::Messages(MessageOp::RespondToMessage {
            message_id,
            response,
            idempotency_key,
        }) => {
            put("idempotency_key", json!(idempotency_key));
            put("original_message_id", json!(message_id));
            return merged(f, response);
        }
        Operation::Messages(MessageOp::BroadcastUpdate {
            update,
            idempotency_key,
        }) => {
            put("idempotency_key", json!(idempotency_key));
            return merged(f, update);
        }
        Operation::Messages(MessageOp::RequestAssistance {
            request,
            idempotency_key,
        }) => {
            put("idempotency_key", json!(idempotency_key));
            return merged(f, request);
        }
        Operation::Agents(AgentOp::WhoAmI) => {}
        Operation::Messages(MessageOp::Publish {
            publish,
            idempotency_key,
        }) => {
            put("idempotency_key", json!(idempotency_key));
            return merged(f, publish);
        }
        Operation::Agents(AgentOp::SetWatch(set)) => return merged(f, set),
        Operation::Teams(TeamOp::GetActivity { team_id }) => put("team_id", json!(team_id)),
        other => return task_operation_fields(other),
    }
    Ok(Some(f))
}

fn task_operation_fields(op: &Operation) -> Result<Option<Fields>, serde_json::Error> {
    let mut f = Fields::new();
    let mut put = |name: &str, value: Value| {
        if !value.is_null() {
            f.insert(name.to_owned(), value);
        }
    };
    match op {
        Operation::Tasks(TaskOp::SubmitTask(request)) => return merged(f, request),
        Operation::Tasks(TaskOp::ReportTask {
            task_id,
            result,
            agent_id,
        }) => {
            put("task_id", json!(task_id));
            put("agent_id", json!(agent_id));
            return merged(f, result);
        }
        Operation::Tasks(TaskOp::ReportCallback(report)) => return merged(f, report),
        Operation::Tasks(TaskOp::ReportError(report)) => return merged(f, report),
        Operation::Tasks(TaskOp::HandOff { task_id, handoff }) => {
            put("task_id", json!(task_id));
            return merged(f, handoff);
        }
        Operation::Tasks(TaskOp::Clarify {
            task_id,
            clarify,
            requested_by,
        }) => {
            put("task_id", json!(task_id));
            put("requested_by", json!(requested_by));
            return merged(f, clarify);
        }
        Operation::Tasks(TaskOp::AnswerClarification {
            task_id,
            clarification_id,
            answer,
            response_provided_by,
        }) => {
            put("task_id", json!(task_id));
            put("clarification_id", json!(clarification_id));
            put("response_provided_by", json!(response_provided_by));
            return merged(f, answer);
        }
        Operation::Tasks(TaskOp::CancelTask { task_id, cancel }) => {
            put("task_id", json!(task_id));
            return merged(f, cancel);
        }
        Operation::Tasks(TaskOp::GetTask { task_id }) => put("task_id", json!(task_id)),
        Operation::Tasks(TaskOp::ListTasks(query)) => return merged(f, query),
        Operation::Tasks(TaskOp::ClaimTask(claim)) => return merged(f, claim),
        Operation::Tasks(TaskOp::ReleaseTask { task_id, release }) => {
            put("task_id", json!(task_id));
            return merged(f, release);
        }
        Operation::Tasks(TaskOp::ExtendClaim { task_id, extend }) => {
            put("task_id", json!(task_id));
            return merged(f, extend);
        }
        Operation::Leases(op) => return lease_operation_fields(f, op),
        Operation::Approvals(op) => return approval_operation_fields(f, op),
        _ => return Ok(None),
    }
    Ok(Some(f))
}

fn lease_operation_fields(
    mut f: Fields,
    op: &LeaseOp,
) -> Result<Option<Fields>, serde_json::Error> {
    let team_id = match op {
        LeaseOp::AcquireLease { team_id, .. }
        | LeaseOp::ExtendLease { team_id, .. }
        | LeaseOp::ReleaseLease { team_id, .. }
        | LeaseOp::ListLeases { team_id, .. } => team_id,
    };
    if let Some(team_id) = team_id {
        f.insert("team_id".into(), json!(team_id));
    }
    match op {
        LeaseOp::AcquireLease { lease, .. } => merged(f, lease),
        LeaseOp::ExtendLease {
            lease_id, extend, ..
        } => {
            f.insert("lease_id".into(), json!(lease_id));
            merged(f, extend)
        }
        LeaseOp::ReleaseLease { lease_id, .. } => {
            f.insert("lease_id".into(), json!(lease_id));
            Ok(Some(f))
        }
        LeaseOp::ListLeases { query, .. } => merged(f, query),
    }
}

fn approval_operation_fields(
    mut f: Fields,
    op: &ApprovalOp,
) -> Result<Option<Fields>, serde_json::Error> {
    match op {
        ApprovalOp::RequestApproval(request) => merged(f, request),
        ApprovalOp::DecideApproval {
            approval_id,
            decision,
        } => {
            f.insert("approval_id".into(), json!(approval_id));
            merged(f, decision)
        }
        ApprovalOp::GetApproval { approval_id, wait } => {
            f.insert("approval_id".into(), json!(approval_id));
            merged(f, wait)
        }
        ApprovalOp::ListApprovals(query) => merged(f, query),
    }
}

/// `fields` with the non-null fields of `body` (an object) added.
fn merged(mut fields: Fields, body: &impl Serialize) -> Result<Option<Fields>, serde_json::Error> {
    if let Value::Object(body) = serde_json::to_value(body)? {
        fields.extend(body.into_iter().filter(|(_, v)| !v.is_null()));
    }
    Ok(Some(fields))
}
