//! `switchboard agent task …`: the task protocol from a terminal.

use serde_json::Value;
use switchboard_client::{Client, ClientError};
use switchboard_types::claims::{ClaimTask, ExtendClaim, ReleaseTask, TaskClaimed};
use switchboard_types::tasks::{
    Answer, Cancel, Clarify, Handoff, TaskDetail, TaskRequest, TaskResponseStatus, TaskResult,
    TaskSubmitted, TaskUpdated,
};
use switchboard_types::{ErrorBody, ErrorCode};

use super::{Failure, SubmitTask, TaskCommand, inert, json_object, json_value, show};

pub(super) async fn task(client: &Client, json: bool, command: TaskCommand) -> Result<(), Failure> {
    let result = |status, data: Option<String>| -> Result<TaskResult, Failure> {
        Ok(TaskResult {
            status,
            result_data: json_value(data.as_deref())?,
        })
    };
    let updated = match command {
        TaskCommand::Submit(submit) => {
            return submitted(json, client.submit_task(request(client, submit)?).await?);
        }
        TaskCommand::Show { task_id } => {
            shown(json, &client.get_task(&task_id).await?);
            return Ok(());
        }
        TaskCommand::Handoff {
            task_id,
            to,
            reason,
        } => {
            let handoff = Handoff {
                new_agent_id: to.into(),
                reason,
                current_agent_id: None,
            };
            client.handoff(&task_id, handoff).await?
        }
        TaskCommand::Clarify { task_id, question } => {
            client.clarify(&task_id, Clarify { question }).await?
        }
        TaskCommand::Answer {
            task_id,
            clarification_id,
            answer,
        } => {
            client
                .answer(&task_id, &clarification_id, Answer { answer })
                .await?
        }
        TaskCommand::Progress { task_id, data } => {
            let input = result(TaskResponseStatus::InProgress, data)?;
            client.report(&task_id, input).await?
        }
        TaskCommand::Complete { task_id, data } => {
            let input = result(TaskResponseStatus::Success, data)?;
            client.report(&task_id, input).await?
        }
        TaskCommand::Fail { task_id, data } => {
            let input = result(TaskResponseStatus::Failed, data)?;
            client.report(&task_id, input).await?
        }
        TaskCommand::Cancel { task_id, reason } => {
            client.cancel(&task_id, Cancel { reason }).await?
        }
        TaskCommand::Claim { wait, lease } => {
            let claim = ClaimTask {
                wait_seconds: Some(wait),
                lease_seconds: lease,
            };
            claimed(json, &client.claim_task(claim).await?);
            return Ok(());
        }
        TaskCommand::Release { task_id, reason } => {
            client
                .release_task(&task_id, ReleaseTask { reason })
                .await?
        }
        TaskCommand::Extend { task_id, lease } => {
            let extend = ExtendClaim {
                lease_seconds: lease,
            };
            client.extend_claim(&task_id, extend).await?
        }
    };
    show_updated(json, &updated);
    Ok(())
}

/// The TaskRequest a `task submit` asks for, as the calling agent.
fn request(client: &Client, submit: SubmitTask) -> Result<TaskRequest, Failure> {
    let SubmitTask {
        description,
        task_id,
        capabilities,
        target,
        role,
        callback_url,
        data,
    } = submit;
    Ok(TaskRequest {
        task_id,
        description,
        data: json_object("data", data.as_deref())?,
        originating_agent_id: client.agent_id().into(),
        callback_url,
        priority: None,
        required_capabilities: capabilities,
        target_agent_id: target,
        parent_task_id: None,
        assignee_role: role,
    })
}

/// Shows what a claim got: the task (as `show` shows one), or that nothing came.
fn claimed(json: bool, answer: &TaskClaimed) {
    show(json, answer, || match &answer.task {
        Some(t) => format!(
            "claimed {} (attempt {}, lease until {}): {}",
            inert(&t.task_id),
            t.attempts,
            t.lease_expires_at
                .map(|at| at.to_string())
                .unwrap_or_default(),
            inert(&t.description)
        ),
        None => "nothing to do: no task is open for your role".to_owned(),
    });
}

/// Shows a submission; a stored but failed task (or a refused registry request) is a
/// failure for the shell, with the code the server gave, said once: on stderr for a
/// person (it was printed on stdout too), the server's JSON on stdout with `--json`.
fn submitted(json: bool, answer: TaskSubmitted) -> Result<(), Failure> {
    let r = &answer.task_response;
    if json || answer.error_message.is_none() {
        show(json, &answer, || {
            format!(
                "task {} is {} (agent {}): {}",
                inert(&r.task_id),
                r.status.as_str(),
                inert(&r.agent_id),
                inert(&r.result_data.to_string())
            )
        });
    }
    match answer.error_message {
        None => Ok(()),
        Some(e) => {
            let code = e
                .error_code
                .parse::<ErrorCode>()
                .unwrap_or(ErrorCode::InternalError);
            let why = format!("task {} failed: {}", r.task_id, e.error_message);
            Err(Failure::Client(ClientError::Server {
                status: None,
                error: Box::new(ErrorBody::new(code, why)),
            }))
        }
    }
}

fn shown(json: bool, detail: &TaskDetail) {
    show(json, detail, || {
        let t = &detail.task;
        let mut out = format!(
            "task {} — {} — {} (originator {}, assignee {})",
            inert(&t.task_id),
            inert(&t.description),
            t.status.as_str(),
            inert(&t.originating_agent_id),
            inert(t.assignee_agent_id.as_deref().unwrap_or("-"))
        );
        for e in &detail.events {
            out.push_str(&format!(
                "\n  {} {} by {} → {} {}",
                e.seq,
                e.kind.as_str(),
                inert(e.agent_id.as_deref().unwrap_or("-")),
                e.status.as_str(),
                inert(&Value::Object(e.data.clone()).to_string())
            ));
        }
        out
    });
}

fn show_updated(json: bool, answer: &TaskUpdated) {
    show(json, answer, || {
        let t = &answer.task;
        let mut line = format!(
            "task {} is {} (assignee {})",
            inert(&t.task_id),
            t.status.as_str(),
            inert(t.assignee_agent_id.as_deref().unwrap_or("-"))
        );
        if let Some(q) = &t.open_clarification {
            line.push_str(&format!(
                "; open question {}: {}",
                inert(&q.clarification_id),
                inert(&q.question)
            ));
        }
        line
    });
}
