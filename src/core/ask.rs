//! Operations that say what they answer: a transport that renders an answer itself (A2A)
//! asks with one of these and gets that answer's type, checked by the compiler.
//!
//! [`Operation`] is an [`Ask`] too (its answer is the untyped [`Reply`] every other
//! transport encodes as JSON), so [`Core::dispatch`] is the one entry: the fence, the retry
//! after a registry miss and the activity touch are the same for both. Each typed ask
//! runs the very function the operation's dispatcher runs; nothing converts a `Reply`
//! back.

use std::future::Future;

use switchboard_types::agents::{AgentEnvelope, AgentList, AgentQuery};
use switchboard_types::ids::{AgentId, ClarificationId, TaskRef, TeamId};
use switchboard_types::inbox::{InboxPage, InboxQuery};
use switchboard_types::tasks::{Answer, Cancel, TaskDetail, TaskList, TaskQuery, TaskUpdated};
use switchboard_types::{AgentOpName, MessageOpName, Operation, OperationName, Reply, TaskOpName};

use super::{Caller, Core, CoreResult};

/// Something a caller asks the core, with the type of its answer. `Clone` because a
/// refusal for something this node does not know yet runs it once more (several nodes).
pub trait Ask: Clone + Send + Sync + 'static {
    /// What it answers.
    type Answer: Send;
    /// Its name, as the operation's ([`switchboard_types::OperationName::as_str`]).
    fn name(&self) -> &'static str;
    /// Performs it for `caller` (no fence, no retry: [`Core::dispatch`] adds them).
    fn run<'a>(
        self,
        core: &'a Core,
        caller: &'a Caller,
    ) -> impl Future<Output = CoreResult<Self::Answer>> + Send + 'a;
}

impl Ask for Operation {
    type Answer = Reply;

    fn name(&self) -> &'static str {
        Operation::name(self)
    }

    fn run<'a>(
        self,
        core: &'a Core,
        caller: &'a Caller,
    ) -> impl Future<Output = CoreResult<Reply>> + Send + 'a {
        core.dispatch_any(caller, self)
    }
}

/// Declares a typed ask: its fields, its answer, its operation's name and the core
/// function its dispatcher calls.
macro_rules! typed_asks {
    ($(
        $(#[$doc:meta])*
        $name:ident { $($field:ident: $ty:ty),* $(,)? } -> $answer:ty, $op:expr,
        |$core:ident, $caller:ident, $this:ident| $body:expr;
    )*) => {$(
        $(#[$doc])*
        #[derive(Debug, Clone)]
        pub struct $name { $(pub $field: $ty),* }

        impl Ask for $name {
            type Answer = $answer;

            fn name(&self) -> &'static str {
                OperationName::from($op).as_str()
            }

            fn run<'a>(
                self,
                $core: &'a Core,
                $caller: &'a Caller,
            ) -> impl Future<Output = CoreResult<$answer>> + Send + 'a {
                let $this = self;
                async move { $body }
            }
        }
    )*};
}

typed_asks! {
    /// `GetAgent`: one member of a team.
    GetAgent { team_id: TeamId, agent_id: AgentId } -> AgentEnvelope, AgentOpName::GetAgent,
        |core, caller, ask| core.get_agent(caller, &ask.team_id, &ask.agent_id);
    /// `ListAgents`: a team's members that match the query.
    ListAgents { team_id: TeamId, query: AgentQuery } -> AgentList, AgentOpName::ListAgents,
        |core, caller, ask| core.list_agents(caller, &ask.team_id, &ask.query);
    /// `WhoAmI`: who the token belongs to.
    WhoAmI {} -> switchboard_types::teams::WhoAmI, AgentOpName::WhoAmI,
        |core, caller, _ask| core.whoami(caller);
    /// `GetMessages`: a page of the caller's inbox.
    GetMessages { query: InboxQuery } -> InboxPage, MessageOpName::GetMessages,
        |core, caller, ask| core.get_messages(caller, ask.query).await;
    /// `GetTask`: a task the caller takes part in.
    GetTask { task_id: TaskRef } -> TaskDetail, TaskOpName::GetTask,
        |core, caller, ask| core.get_task(caller, &ask.task_id).await;
    /// `ListTasks`: the caller's tasks.
    ListTasks { query: TaskQuery } -> TaskList, TaskOpName::ListTasks,
        |core, caller, ask| core.list_tasks(caller, ask.query).await;
    /// `AnswerClarification`: the originator answers the open question.
    AnswerClarification {
        task_id: TaskRef,
        clarification_id: ClarificationId,
        answer: Answer,
    } -> TaskUpdated, TaskOpName::AnswerClarification,
        |core, caller, ask| core
            .answer_clarification(caller, &ask.task_id, &ask.clarification_id, ask.answer, None)
            .await;
    /// `CancelTask`: the originator calls a task off.
    CancelTask { task_id: TaskRef, cancel: Cancel } -> TaskUpdated, TaskOpName::CancelTask,
        |core, caller, ask| core.cancel_task(caller, &ask.task_id, ask.cancel).await;
}
