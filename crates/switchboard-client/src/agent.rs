//! [`Client`]: one agent's typed operations.

use std::sync::Arc;

use serde::de::DeserializeOwned;
use switchboard_types::agents::AgentEnvelope;
use switchboard_types::approvals::{
    ApprovalEnvelope, ApprovalList, ApprovalQuery, ApprovalWait, DecideApproval, RequestApproval,
};
use switchboard_types::assistance::{AssistanceResult, RequestAssistance};
use switchboard_types::broadcasts::{BroadcastResult, BroadcastUpdate};
use switchboard_types::claims::{ClaimTask, ExtendClaim, ReleaseTask, TaskClaimed};
use switchboard_types::inbox::{InboxPage, InboxQuery};
use switchboard_types::leases::{AcquireLease, ExtendLease, LeaseEnvelope, LeaseList, LeaseQuery};
use switchboard_types::messages::{
    MarkRead, MarkReadResult, MessageDetail, RespondResult, RespondToMessage, SendMessage,
    SendResult,
};
use switchboard_types::publish::{Publish, PublishResult, SetWatch, TeamActivity};
use switchboard_types::tasks::{
    Answer, Cancel, Clarify, Handoff, TaskDetail, TaskList, TaskQuery, TaskRequest, TaskResult,
    TaskSubmitted, TaskUpdated,
};
use switchboard_types::teams::WhoAmI;
use switchboard_types::{AgentOp, ApprovalOp, LeaseOp, MessageOp, Operation, TaskOp, TeamOp};
use tokio::sync::mpsc;

use crate::{ClientError, HttpTransport, Incoming, Transport, WsTransport, decode};

/// A client acting as one agent.
#[derive(Clone)]
pub struct Client {
    agent_id: String,
    team_id: String,
    transport: Arc<dyn Transport>,
}

fn key(key: Option<&str>) -> Option<String> {
    key.map(str::to_owned)
}

impl Client {
    /// Over HTTP: one request per operation; incoming entries by polling the inbox.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), switchboard_client::ClientError> {
    /// use switchboard_client::Client;
    /// use switchboard_types::tasks::{TaskRequest, TaskResponseStatus, TaskResult};
    ///
    /// let worker = Client::http("http://127.0.0.1:8080", "sb_agent_…").await?;
    /// let mut incoming = worker.incoming();
    /// while let Some(entry) = incoming.recv().await {
    ///     if entry.kind() == "TaskRequest" {
    ///         let request: TaskRequest = entry.task().expect("a TaskRequest frame");
    ///         let task_id = request.task_id.unwrap_or_default();
    ///         let done = TaskResult { status: TaskResponseStatus::Success, result_data: "ok".into() };
    ///         worker.report(&task_id, done).await?;
    ///     }
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn http(base: &str, token: &str) -> Result<Client, ClientError> {
        Client::with_transport(Arc::new(HttpTransport::new(base, token)?)).await
    }

    /// Over one WebSocket, reconnecting by itself.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), switchboard_client::ClientError> {
    /// use switchboard_client::Client;
    /// use switchboard_types::ErrorCode;
    /// use switchboard_types::messages::{MessageType, SendMessage};
    ///
    /// let client = Client::websocket("http://127.0.0.1:8080", "sb_agent_…").await?;
    /// let message = SendMessage::new(client.agent_id(), &["nobody"], MessageType::Information, "hi");
    /// match client.send_message(message, Some("retry-key-1")).await {
    ///     Err(err) if err.code() == Some(ErrorCode::InvalidRecipient) => println!("no such agent"),
    ///     other => println!("{:?}", other.map(|sent| sent.message_id)),
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn websocket(base: &str, token: &str) -> Result<Client, ClientError> {
        Client::with_transport(Arc::new(WsTransport::connect(base, token).await?)).await
    }

    /// A client on any transport; asks the server who the token belongs to.
    pub async fn with_transport(transport: Arc<dyn Transport>) -> Result<Client, ClientError> {
        let me: WhoAmI = decode(transport.call(Operation::Agents(AgentOp::WhoAmI)).await?)?;
        match (me.agent_id, me.team_id) {
            (Some(agent_id), Some(team_id)) => Ok(Client {
                agent_id: agent_id.to_string(),
                team_id: team_id.to_string(),
                transport,
            }),
            _ => Err(ClientError::Decode(
                "the token is not an agent token".to_owned(),
            )),
        }
    }

    pub fn agent_id(&self) -> &str {
        &self.agent_id
    }

    pub fn team_id(&self) -> &str {
        &self.team_id
    }

    /// Incoming entries, from where the server's cursor for this agent is (over the
    /// WebSocket: after its last acknowledged entry; over HTTP: from the start).
    pub fn incoming(&self) -> mpsc::Receiver<Incoming> {
        self.transport.incoming(None)
    }

    /// Incoming entries after sequence number `after`.
    pub fn incoming_after(&self, after: i64) -> mpsc::Receiver<Incoming> {
        self.transport.incoming(Some(after))
    }

    /// Performs any operation and reads its answer as `T`.
    pub async fn call<T: DeserializeOwned>(&self, operation: Operation) -> Result<T, ClientError> {
        decode(self.transport.call(operation).await?)
    }

    /// SEND_MESSAGE.
    pub async fn send_message(
        &self,
        message: SendMessage,
        idempotency_key: Option<&str>,
    ) -> Result<SendResult, ClientError> {
        let idempotency_key = key(idempotency_key);
        self.call(Operation::Messages(MessageOp::SendMessage {
            message,
            idempotency_key,
        }))
        .await
    }

    /// GET_MESSAGES.
    pub async fn get_messages(&self, query: InboxQuery) -> Result<InboxPage, ClientError> {
        self.call(Operation::Messages(MessageOp::GetMessages(query)))
            .await
    }

    /// Finds messages this agent sent or received by the words in them (`docs/search.md`).
    pub async fn search_messages(
        &self,
        query: switchboard_types::search::SearchQuery,
    ) -> Result<switchboard_types::search::SearchPage, ClientError> {
        self.call(Operation::Messages(MessageOp::SearchMessages(query)))
            .await
    }

    /// Publishes under a tag to an address set (MetaGPT's `publish_message`).
    pub async fn publish(
        &self,
        publish: Publish,
        idempotency_key: Option<&str>,
    ) -> Result<PublishResult, ClientError> {
        let idempotency_key = key(idempotency_key);
        self.call(Operation::Messages(MessageOp::Publish {
            publish,
            idempotency_key,
        }))
        .await
    }

    /// Replaces this agent's watched tags and/or addresses (MetaGPT's `_watch` and
    /// `set_addresses`).
    pub async fn set_watch(&self, set: SetWatch) -> Result<AgentEnvelope, ClientError> {
        self.call(Operation::Agents(AgentOp::SetWatch(set))).await
    }

    /// The team's activity: per member, unread news and open tasks; whether it is idle.
    pub async fn team_activity(&self) -> Result<TeamActivity, ClientError> {
        self.call(Operation::Teams(TeamOp::GetActivity { team_id: None }))
            .await
    }

    /// One message the agent sent or received, with its responses.
    pub async fn get_message(&self, message_id: &str) -> Result<MessageDetail, ClientError> {
        let message_id = message_id.to_owned();
        self.call(Operation::Messages(MessageOp::GetMessage {
            message_id: message_id.into(),
        }))
        .await
    }

    /// MARK_MESSAGE_READ.
    pub async fn mark_read(&self, message_ids: &[&str]) -> Result<MarkReadResult, ClientError> {
        self.call(Operation::Messages(MessageOp::MarkMessageRead(MarkRead {
            agent_id: self.agent_id.clone().into(),
            message_ids: message_ids
                .iter()
                .map(|s| switchboard_types::ids::MessageId::from(*s))
                .collect(),
        })))
        .await
    }

    /// RESPOND_TO_MESSAGE.
    pub async fn respond(
        &self,
        message_id: &str,
        response: RespondToMessage,
        idempotency_key: Option<&str>,
    ) -> Result<RespondResult, ClientError> {
        self.call(Operation::Messages(MessageOp::RespondToMessage {
            message_id: message_id.into(),
            response,
            idempotency_key: key(idempotency_key),
        }))
        .await
    }

    /// BROADCAST_UPDATE.
    pub async fn broadcast(
        &self,
        update: BroadcastUpdate,
        idempotency_key: Option<&str>,
    ) -> Result<BroadcastResult, ClientError> {
        let idempotency_key = key(idempotency_key);
        self.call(Operation::Messages(MessageOp::BroadcastUpdate {
            update,
            idempotency_key,
        }))
        .await
    }

    /// REQUEST_ASSISTANCE.
    pub async fn request_assistance(
        &self,
        request: RequestAssistance,
        idempotency_key: Option<&str>,
    ) -> Result<AssistanceResult, ClientError> {
        let idempotency_key = key(idempotency_key);
        self.call(Operation::Messages(MessageOp::RequestAssistance {
            request,
            idempotency_key,
        }))
        .await
    }

    /// Submits a TaskRequest (`originating_agent_id` must be this agent).
    pub async fn submit_task(&self, request: TaskRequest) -> Result<TaskSubmitted, ClientError> {
        self.call(Operation::Tasks(TaskOp::SubmitTask(request)))
            .await
    }

    /// A task with its history.
    pub async fn get_task(&self, task_id: &str) -> Result<TaskDetail, ClientError> {
        let task_id = task_id.to_owned();
        self.call(Operation::Tasks(TaskOp::GetTask {
            task_id: task_id.into(),
        }))
        .await
    }

    /// The agent's tasks.
    pub async fn list_tasks(&self, query: TaskQuery) -> Result<TaskList, ClientError> {
        self.call(Operation::Tasks(TaskOp::ListTasks(query))).await
    }

    /// Hands a task to another agent.
    pub async fn handoff(
        &self,
        task_id: &str,
        handoff: Handoff,
    ) -> Result<TaskUpdated, ClientError> {
        let task_id = task_id.to_owned();
        self.call(Operation::Tasks(TaskOp::HandOff {
            task_id: task_id.into(),
            handoff,
        }))
        .await
    }

    /// Asks the originator a question (the assignee).
    pub async fn clarify(
        &self,
        task_id: &str,
        clarify: Clarify,
    ) -> Result<TaskUpdated, ClientError> {
        self.call(Operation::Tasks(TaskOp::Clarify {
            task_id: task_id.into(),
            clarify,
            requested_by: None,
        }))
        .await
    }

    /// Answers the open question (the originator).
    pub async fn answer(
        &self,
        task_id: &str,
        clarification_id: &str,
        answer: Answer,
    ) -> Result<TaskUpdated, ClientError> {
        self.call(Operation::Tasks(TaskOp::AnswerClarification {
            task_id: task_id.into(),
            clarification_id: clarification_id.into(),
            answer,
            response_provided_by: None,
        }))
        .await
    }

    /// Reports progress or the result (the assignee).
    pub async fn report(
        &self,
        task_id: &str,
        result: TaskResult,
    ) -> Result<TaskUpdated, ClientError> {
        self.call(Operation::Tasks(TaskOp::ReportTask {
            task_id: task_id.into(),
            result,
            agent_id: None,
        }))
        .await
    }

    /// Cancels a task (the originator).
    pub async fn cancel(&self, task_id: &str, cancel: Cancel) -> Result<TaskUpdated, ClientError> {
        let task_id = task_id.to_owned();
        self.call(Operation::Tasks(TaskOp::CancelTask {
            task_id: task_id.into(),
            cancel,
        }))
        .await
    }

    /// Takes the next task offered to this agent's role, waiting up to `wait_seconds`
    /// for one (`docs/tasks.md`, "Work any free agent can take"); `task: None` when none
    /// came. Keep it by reporting progress within the claim's lease.
    pub async fn claim_task(&self, claim: ClaimTask) -> Result<TaskClaimed, ClientError> {
        self.call(Operation::Tasks(TaskOp::ClaimTask(claim))).await
    }

    /// Gives a claimed task back to its role.
    pub async fn release_task(
        &self,
        task_id: &str,
        release: ReleaseTask,
    ) -> Result<TaskUpdated, ClientError> {
        self.call(Operation::Tasks(TaskOp::ReleaseTask {
            task_id: task_id.into(),
            release,
        }))
        .await
    }

    /// Renews the lease of a task this agent claimed without reporting progress.
    pub async fn extend_claim(
        &self,
        task_id: &str,
        extend: ExtendClaim,
    ) -> Result<TaskUpdated, ClientError> {
        self.call(Operation::Tasks(TaskOp::ExtendClaim {
            task_id: task_id.into(),
            extend,
        }))
        .await
    }

    /// Takes a lease on a resource (`docs/leases.md`): `LEASE_CONFLICT` names who holds
    /// what overlaps it.
    pub async fn acquire_lease(&self, lease: AcquireLease) -> Result<LeaseEnvelope, ClientError> {
        let team_id = Some(self.team_id.clone().into());
        self.call(Operation::Leases(LeaseOp::AcquireLease { team_id, lease }))
            .await
    }

    /// Renews a lease this agent holds.
    pub async fn extend_lease(
        &self,
        lease_id: &str,
        extend: ExtendLease,
    ) -> Result<LeaseEnvelope, ClientError> {
        self.call(Operation::Leases(LeaseOp::ExtendLease {
            team_id: Some(self.team_id.clone().into()),
            lease_id: lease_id.to_owned().into(),
            extend,
        }))
        .await
    }

    /// Gives a lease back.
    pub async fn release_lease(&self, lease_id: &str) -> Result<LeaseEnvelope, ClientError> {
        self.call(Operation::Leases(LeaseOp::ReleaseLease {
            team_id: Some(self.team_id.clone().into()),
            lease_id: lease_id.to_owned().into(),
        }))
        .await
    }

    /// The team's live leases, optionally one holder's or those overlapping a resource.
    pub async fn list_leases(&self, query: LeaseQuery) -> Result<LeaseList, ClientError> {
        let team_id = Some(self.team_id.clone().into());
        self.call(Operation::Leases(LeaseOp::ListLeases { team_id, query }))
            .await
    }

    /// Asks a person to decide (`docs/approvals.md`); the answer is the pending approval.
    pub async fn request_approval(
        &self,
        request: RequestApproval,
    ) -> Result<ApprovalEnvelope, ClientError> {
        self.call(Operation::Approvals(ApprovalOp::RequestApproval(request)))
            .await
    }

    /// One approval; with `wait_seconds` (at most 60), once decided or expired.
    pub async fn get_approval(
        &self,
        approval_id: &str,
        wait_seconds: Option<u64>,
    ) -> Result<ApprovalEnvelope, ClientError> {
        self.call(Operation::Approvals(ApprovalOp::GetApproval {
            approval_id: approval_id.to_owned().into(),
            wait: ApprovalWait { wait_seconds },
        }))
        .await
    }

    /// The approvals this agent may see, newest first.
    pub async fn list_approvals(&self, query: ApprovalQuery) -> Result<ApprovalList, ClientError> {
        self.call(Operation::Approvals(ApprovalOp::ListApprovals(query)))
            .await
    }

    /// Decides an approval, as an agent the team names in its `approvers`.
    pub async fn decide_approval(
        &self,
        approval_id: &str,
        decision: DecideApproval,
    ) -> Result<ApprovalEnvelope, ClientError> {
        self.call(Operation::Approvals(ApprovalOp::DecideApproval {
            approval_id: approval_id.to_owned().into(),
            decision,
        }))
        .await
    }
}
