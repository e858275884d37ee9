//! The writes that carry a caller's own types, over the engine's boxed ones.
//!
//! An engine is a trait object, so its writes take boxed steps that speak only
//! [`StoreError`]; the core's steps return its own values and refusals. Each such value
//! is put in a [`Slot`] the caller holds, and the engine sees only that a step refused
//! ([`StoreError::Refused`]) or went through. Nothing is downcast: the slot is typed on
//! both sides.

use std::sync::{Arc, Mutex};

use switchboard_types::ids::{AgentPk, TeamPk};

use super::{Store, StoreError};
use crate::model::{
    AgentRecord, Decided, IdempotencyClaim, NewMessage, NewPost, PostContext, PostOutcome,
    PostResult, TaskWrite, TeamRecord,
};

/// A value a caller's step hands back across the engine.
struct Slot<T>(Arc<Mutex<Option<T>>>);

impl<T> Clone for Slot<T> {
    fn clone(&self) -> Self {
        Slot(self.0.clone())
    }
}

impl<T> Slot<T> {
    fn new() -> Self {
        Slot(Arc::new(Mutex::new(None)))
    }

    fn put(&self, value: T) {
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = Some(value);
    }

    /// Keeps a refusal for the caller; what the engine sees instead.
    fn refuse(&self, reason: T) -> StoreError {
        self.put(reason);
        StoreError::Refused
    }

    /// The value a step put. The engine answers only after it ran the step, so an empty
    /// slot means the step was dropped unrun.
    fn take(&self) -> Result<T, StoreError> {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
            .ok_or(StoreError::Dropped)
    }
}

/// The caller's error for an engine's: its own refusal if one of its steps refused, the
/// engine's error otherwise.
fn caller_error<E: From<StoreError>>(error: StoreError, refusal: &Slot<E>) -> E {
    match error {
        StoreError::Refused => refusal.take().unwrap_or_else(E::from),
        other => other.into(),
    }
}

impl Store {
    /// Inserts a team; `after` runs right after the commit, in commit order.
    /// [`StoreError::Conflict`] when the id is taken.
    pub async fn insert_team<R: Send + 'static>(
        &self,
        team: TeamRecord,
        after: impl FnOnce(TeamRecord) -> R + Send + 'static,
    ) -> Result<R, StoreError> {
        let answer = Slot::new();
        let put = answer.clone();
        let after = Box::new(move |team| put.put(after(team)));
        self.engine.insert_team_boxed(team, after).await?;
        answer.take()
    }

    /// Changes a team as `patch` decides, on the row as the transaction sees it. With
    /// several nodes, answers once every live node has taken the change up.
    pub async fn update_team<R, E>(
        &self,
        pk: TeamPk,
        patch: impl FnOnce(&mut TeamRecord) -> Result<(), E> + Send + 'static,
        after: impl FnOnce(TeamRecord) -> R + Send + 'static,
    ) -> Result<R, E>
    where
        R: Send + 'static,
        E: From<StoreError> + Send + 'static,
    {
        let (refusal, answer) = (Slot::new(), Slot::new());
        let (refuse, put) = (refusal.clone(), answer.clone());
        let patch =
            Box::new(move |team: &mut TeamRecord| patch(team).map_err(|e| refuse.refuse(e)));
        let after = Box::new(move |team| put.put(after(team)));
        let written = self.engine.update_team_boxed(pk, patch, after).await;
        written.map_err(|e| caller_error(e, &refusal))?;
        Ok(answer.take()?)
    }

    /// Inserts an agent; [`StoreError::Conflict`] when a member has its id.
    pub async fn insert_agent<R: Send + 'static>(
        &self,
        agent: AgentRecord,
        after: impl FnOnce(AgentRecord) -> R + Send + 'static,
    ) -> Result<R, StoreError> {
        let answer = Slot::new();
        let put = answer.clone();
        let after = Box::new(move |agent| put.put(after(agent)));
        self.engine.insert_agent_boxed(agent, after).await?;
        answer.take()
    }

    /// Changes an agent (removal included) as `patch` decides, on the current row. With
    /// several nodes, answers once every live node has taken the change up.
    pub async fn update_agent<R, E>(
        &self,
        pk: AgentPk,
        patch: impl FnOnce(&mut AgentRecord) -> Result<(), E> + Send + 'static,
        after: impl FnOnce(AgentRecord) -> R + Send + 'static,
    ) -> Result<R, E>
    where
        R: Send + 'static,
        E: From<StoreError> + Send + 'static,
    {
        let (refusal, answer) = (Slot::new(), Slot::new());
        let (refuse, put) = (refusal.clone(), answer.clone());
        let patch =
            Box::new(move |agent: &mut AgentRecord| patch(agent).map_err(|e| refuse.refuse(e)));
        let after = Box::new(move |agent| put.put(after(agent)));
        let written = self.engine.update_agent_boxed(pk, patch, after).await;
        written.map_err(|e| caller_error(e, &refusal))?;
        Ok(answer.take()?)
    }

    /// Writes one message to its recipients as one job.
    ///
    /// With an idempotency claim whose key was used before, nothing is written and the
    /// stored answer comes back. Otherwise `decide` runs inside the transaction with the
    /// message's time (and, for a response, whether the responder already gave a final
    /// one): it may refuse, or return a value and the answer to store with the key.
    /// `after` gets the value and what the message became, after the commit.
    pub async fn post<T, R, E, D, A>(
        &self,
        post: NewPost,
        claim: Option<IdempotencyClaim>,
        decide: D,
        after: A,
    ) -> Result<PostOutcome<R>, E>
    where
        T: Send + 'static,
        R: Send + 'static,
        E: From<StoreError> + Send + 'static,
        D: FnOnce(&NewMessage, PostContext) -> Result<Decided<T>, E> + Send + 'static,
        A: FnOnce(T, Result<PostResult, StoreError>) -> Result<R, E> + Send + 'static,
    {
        let (value, refusal, answer) = (Slot::new(), Slot::new(), Slot::new());
        let (keep, refuse) = (value.clone(), refusal.clone());
        let decide = Box::new(move |message: &NewMessage, context| {
            let decided = decide(message, context).map_err(|e| refuse.refuse(e))?;
            keep.put(decided.value);
            Ok(Decided {
                value: (),
                answer: decided.answer,
            })
        });
        let (refuse, put) = (refusal.clone(), answer.clone());
        let after = Box::new(move |written| {
            let answered = after(value.take()?, written).map_err(|e| refuse.refuse(e))?;
            put.put(answered);
            Ok(())
        });
        let written = self.engine.post_boxed(post, claim, decide, after).await;
        match written.map_err(|e| caller_error(e, &refusal))? {
            PostOutcome::Replayed(stored) => Ok(PostOutcome::Replayed(stored)),
            PostOutcome::Written(()) => Ok(PostOutcome::Written(answer.take()?)),
        }
    }

    /// Writes a task change (the task, its event, its callback) and its notices in one
    /// job. [`StoreError::Conflict`] when a new task's id is taken;
    /// [`StoreError::Stale`] when the task changed since `write.expected_version`.
    /// `decide` runs inside the transaction once the task is written (for work that must
    /// happen in commit order); `after` gets its value and what each notice became.
    pub async fn write_task<T, R, E, D, A>(
        &self,
        write: TaskWrite,
        notices: Vec<NewPost>,
        decide: D,
        after: A,
    ) -> Result<R, E>
    where
        T: Send + 'static,
        R: Send + 'static,
        E: From<StoreError> + Send + 'static,
        D: FnOnce(&[&NewMessage]) -> T + Send + 'static,
        A: FnOnce(T, Vec<Result<PostResult, StoreError>>) -> Result<R, E> + Send + 'static,
    {
        let (value, refusal, answer) = (Slot::new(), Slot::new(), Slot::new());
        let keep = value.clone();
        let decide = Box::new(move |messages: &[&NewMessage]| keep.put(decide(messages)));
        let (refuse, put) = (refusal.clone(), answer.clone());
        let after = Box::new(move |written| {
            let answered = after(value.take()?, written).map_err(|e| refuse.refuse(e))?;
            put.put(answered);
            Ok(())
        });
        let written = self
            .engine
            .write_task_boxed(write, notices, decide, after)
            .await;
        written.map_err(|e| caller_error(e, &refusal))?;
        Ok(answer.take()?)
    }
}
