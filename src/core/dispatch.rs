//! The one entry every transport calls: an operation and who asks, to its answer.

use switchboard_types::tasks::{TaskRequest, TaskSubmitted};
use switchboard_types::{AgentOp, MessageOp, Operation, Reply, TaskOp, TeamOp};

use super::Tasks;
use super::tasks::Following;
use switchboard_types::ErrorCode;

use super::ask::Ask;
use super::{Caller, Core, CoreError, CoreResult};

impl Core {
    /// Performs what `caller` asks. Every transport (REST, WebSocket, STOMP, MCP, A2A)
    /// calls this with an [`Operation`] (answered by a [`Reply`]), or with a typed
    /// [`Ask`](super::ask::Ask) when it renders the answer itself, so the same input
    /// gets the same answer or the same error code everywhere.
    ///
    /// Each operation's future is boxed (see [`boxed`]): as one state machine over every
    /// operation, this future would be as large as the largest (kilobytes), and every
    /// layer of the HTTP stack moved it (callgrind: a third more `memcpy` per request,
    /// about 13% of send throughput).
    pub async fn dispatch<A: Ask>(&self, caller: &Caller, ask: A) -> CoreResult<A::Answer> {
        // With several nodes, a refusal for something unknown here may be about what
        // another node committed a moment ago: the registry catches up and the operation
        // runs once more. Such refusals come before anything is written.
        self.fence().await?;
        let again = self.store().shared().then(|| ask.clone());
        let mut answer = ask.run(self, caller).await;
        if let (Err(err), Some(ask)) = (&answer, again)
            && unknown_here(err)
        {
            // Taken at the refusal: at worst one reload more, never one too few.
            self.registry_current_since(std::time::Instant::now()).await;
            answer = ask.run(self, caller).await;
        }
        if answer.is_ok() {
            self.touched(caller);
        }
        answer
    }

    /// Whatever changed a team may have changed whether it is idle.
    fn touched(&self, caller: &Caller) {
        if let Caller::Agent { team, .. } | Caller::Team { team } = caller {
            self.touch_activity(*team);
        }
    }

    /// One exhaustive handler per resource: an operation added to a resource's enum
    /// does not compile until its handler says what it does.
    pub(super) async fn dispatch_any(
        &self,
        caller: &Caller,
        operation: Operation,
    ) -> CoreResult<Reply> {
        match operation {
            Operation::Teams(op) => self.dispatch_team(caller, op).await,
            Operation::Agents(op) => self.dispatch_agent(caller, op).await,
            Operation::Messages(op) => self.dispatch_message(caller, op).await,
            Operation::Tasks(op) => self.dispatch_task(caller, op).await,
            Operation::Leases(op) => boxed(self.dispatch_lease(caller, op)).await,
            Operation::Approvals(op) => boxed(self.dispatch_approval(caller, op)).await,
        }
    }

    async fn dispatch_team(&self, caller: &Caller, operation: TeamOp) -> CoreResult<Reply> {
        use TeamOp as Op;
        Ok(match operation {
            Op::CreateTeam(input) => {
                Reply::TeamCreated(boxed(self.create_team(caller, input)).await?)
            }
            Op::ListTeams => Reply::Teams(self.list_teams(caller)?),
            Op::GetTeam { team_id } => Reply::Team(self.get_team(caller, &team_id)?),
            Op::UpdateTeam { team_id, patch } => {
                Reply::Team(boxed(self.update_team(caller, &team_id, patch)).await?)
            }
            Op::TeamMetrics { team_id } => {
                Reply::TeamMetrics(boxed(self.team_metrics(caller, &team_id)).await?)
            }
            Op::CallbackSecret { team_id } => {
                Reply::CallbackSecret(boxed(self.callback_secret(caller, &team_id)).await?)
            }
            Op::RotateCallbackSecret { team_id } => {
                Reply::CallbackSecret(boxed(self.rotate_callback_secret(caller, &team_id)).await?)
            }
            Op::RotateTeamKey { team_id } => {
                Reply::TeamKeyRotated(boxed(self.rotate_team_key(caller, &team_id)).await?)
            }
            Op::GetActivity { team_id } => {
                Reply::Activity(boxed(self.team_activity(caller, team_id.as_ref())).await?)
            }
            Op::Traffic { team_id, query } => {
                Reply::Traffic(boxed(self.team_traffic(caller, &team_id, query)).await?)
            }
            Op::TeamTasks { team_id, query } => {
                Reply::Tasks(boxed(self.team_tasks(caller, &team_id, query)).await?)
            }
        })
    }

    async fn dispatch_agent(&self, caller: &Caller, operation: AgentOp) -> CoreResult<Reply> {
        use AgentOp as Op;
        Ok(match operation {
            Op::RegisterAgent { team_id, agent } => {
                Reply::AgentRegistered(boxed(self.register_agent(caller, &team_id, agent)).await?)
            }
            Op::ListAgents { team_id, query } => {
                Reply::Agents(self.list_agents(caller, &team_id, &query)?)
            }
            Op::GetAgent { team_id, agent_id } => {
                Reply::Agent(self.get_agent(caller, &team_id, &agent_id)?)
            }
            Op::UpdateAgent {
                team_id,
                agent_id,
                patch,
            } => Reply::Agent(boxed(self.update_agent(caller, &team_id, &agent_id, patch)).await?),
            Op::RemoveAgent { team_id, agent_id } => {
                Reply::AgentRemoved(boxed(self.remove_agent(caller, &team_id, &agent_id)).await?)
            }
            Op::RotateAgentToken { team_id, agent_id } => Reply::AgentRegistered(
                boxed(self.rotate_agent_token(caller, &team_id, &agent_id)).await?,
            ),
            Op::WhoAmI => Reply::WhoAmI(self.whoami(caller)?),
            Op::SetWatch(input) => Reply::Agent(boxed(self.set_watch(caller, input)).await?),
        })
    }

    async fn dispatch_message(&self, caller: &Caller, operation: MessageOp) -> CoreResult<Reply> {
        use MessageOp as Op;
        Ok(match operation {
            Op::SendMessage {
                message,
                idempotency_key,
            } => Reply::Sent(
                boxed(self.send_message(caller, message, idempotency_key.as_deref())).await?,
            ),
            Op::GetMessages(query) => Reply::Inbox(boxed(self.get_messages(caller, query)).await?),
            Op::GetMessage { message_id } => Reply::Message(Box::new(
                boxed(self.get_message(caller, &message_id)).await?,
            )),
            Op::GetTrace { trace_id } => {
                Reply::Trace(boxed(self.get_trace(caller, &trace_id)).await?)
            }
            Op::MarkMessageRead(input) => {
                Reply::MarkedRead(boxed(self.mark_read(caller, input)).await?)
            }
            Op::SearchMessages(query) => Reply::Search(boxed(self.search(caller, query)).await?),
            Op::RespondToMessage {
                message_id,
                response,
                idempotency_key,
            } => Reply::Responded(
                boxed(self.respond(caller, &message_id, response, idempotency_key.as_deref()))
                    .await?,
            ),
            Op::BroadcastUpdate {
                update,
                idempotency_key,
            } => Reply::Broadcast(
                boxed(self.broadcast(caller, update, idempotency_key.as_deref())).await?,
            ),
            Op::RequestAssistance {
                request,
                idempotency_key,
            } => Reply::Assistance(
                boxed(self.request_assistance(caller, request, idempotency_key.as_deref())).await?,
            ),
            Op::Publish {
                publish,
                idempotency_key,
            } => Reply::Published(
                boxed(self.publish(caller, publish, idempotency_key.as_deref())).await?,
            ),
        })
    }

    async fn dispatch_task(&self, caller: &Caller, operation: TaskOp) -> CoreResult<Reply> {
        use TaskOp as Op;
        let updated = |task| Reply::TaskUpdated(Box::new(task));
        Ok(match operation {
            Op::SubmitTask(request) => Reply::TaskSubmitted(Box::new(
                boxed(self.submit_task(caller, request, Following::Inbox)).await?,
            )),
            Op::GetTask { task_id } => {
                Reply::Task(Box::new(boxed(self.get_task(caller, &task_id)).await?))
            }
            Op::ListTasks(query) => Reply::Tasks(boxed(self.list_tasks(caller, query)).await?),
            Op::ReportTask {
                task_id,
                result,
                agent_id,
            } => {
                updated(boxed(self.report_task(caller, &task_id, result, agent_id.as_ref())).await?)
            }
            Op::ReportCallback(report) => {
                updated(boxed(self.report_callback(caller, report)).await?)
            }
            Op::ReportError(report) => updated(boxed(self.report_error(caller, report)).await?),
            Op::HandOff { task_id, handoff } => {
                updated(boxed(self.handoff_task(caller, &task_id, handoff)).await?)
            }
            Op::Clarify {
                task_id,
                clarify,
                requested_by,
            } => updated(
                boxed(self.request_clarification(caller, &task_id, clarify, requested_by.as_ref()))
                    .await?,
            ),
            Op::AnswerClarification {
                task_id,
                clarification_id,
                answer,
                response_provided_by,
            } => updated(
                boxed(self.answer_clarification(
                    caller,
                    &task_id,
                    &clarification_id,
                    answer,
                    response_provided_by.as_ref(),
                ))
                .await?,
            ),
            Op::CancelTask { task_id, cancel } => {
                updated(boxed(self.cancel_task(caller, &task_id, cancel)).await?)
            }
            Op::ClaimTask(claim) => {
                Reply::TaskClaimed(Box::new(boxed(self.claim_task(caller, claim)).await?))
            }
            Op::ReleaseTask { task_id, release } => {
                updated(boxed(self.release_task(caller, &task_id, release)).await?)
            }
            Op::ExtendClaim { task_id, extend } => {
                updated(boxed(self.extend_claim(caller, &task_id, extend)).await?)
            }
        })
    }
}

/// Boxes an operation's future, so that the dispatchers above hold a pointer to it
/// rather than its whole state (see [`Core::dispatch`]).
fn boxed<'a, T>(
    future: impl std::future::Future<Output = T> + Send + 'a,
) -> std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send + 'a>> {
    Box::pin(future)
}

/// A refusal that says "no such agent or team" (or "nobody can take it"), which a node
/// whose registry lags another node's commit may give wrongly.
fn unknown_here(err: &CoreError) -> bool {
    matches!(
        err.code(),
        ErrorCode::InvalidRecipient
            | ErrorCode::AgentNotFound
            | ErrorCode::NotFound
            | ErrorCode::NoSuitableAgent
    )
}

impl<'a> Tasks<'a> {
    /// A TaskRequest submitted over a transport whose caller follows the task there
    /// rather than in its inbox (A2A): `SubmitTask`, without the originator's
    /// notifications (see [`Following::Transport`]).
    pub async fn submit_followed_task(
        self,
        caller: &Caller,
        request: TaskRequest,
    ) -> CoreResult<TaskSubmitted> {
        let submitted = boxed(self.core.submit_task(caller, request, Following::Transport)).await;
        if submitted.is_ok() {
            self.core.touched(caller);
        }
        submitted
    }
}
