//! The writes that carry a caller's own types: a patch decided inside the transaction, a
//! value or a refusal handed back after the commit.
//!
//! They are generic over the caller's value and error types, which `engine::contract!`
//! does not spell, so this trait and [`Store`]'s forwards are written out here. Each
//! engine implements it once: the registry's four in `store/sql/registry.rs`, a post and
//! a task change in the engine's own batch insert path (`engine/messages.rs`,
//! `engine/tasks.rs`). The caller's closures run inside the group-commit writer's job, so
//! their values and refusals come back as themselves: nothing is boxed for them and
//! nothing is carried beside the engine.

use switchboard_types::ids::{AgentPk, TeamPk};

use super::{Store, StoreError};
use switchboard_types::time::Timestamp;

use crate::model::{
    AgentRecord, Decided, IdempotencyClaim, LeaseChange, LeaseScope, LeaseView, NewMessage,
    NewPost, PostContext, PostOutcome, PostResult, TaskWrite, TeamRecord,
};

/// The writes that carry a caller's decision.
#[allow(
    async_fn_in_trait,
    reason = "implemented by this crate's two engines and called on them directly, where \
              the futures' Send is known"
)]
pub trait DecidedWrites: Send + Sync {
    /// Inserts a team; `after` runs right after the commit, in commit order.
    /// [`StoreError::Conflict`] when the id is taken.
    async fn insert_team<R, A>(&self, team: TeamRecord, after: A) -> Result<R, StoreError>
    where
        R: Send + 'static,
        A: FnOnce(TeamRecord) -> R + Send + 'static;

    /// Changes a team as `patch` decides, on the row as the transaction sees it (so
    /// concurrent patches compose). With several nodes, answers once every live node has
    /// taken the change up: a switch turned off holds on every node from the answer on.
    async fn update_team<R, E, P, A>(&self, pk: TeamPk, patch: P, after: A) -> Result<R, E>
    where
        R: Send + 'static,
        E: From<StoreError> + Send + 'static,
        P: FnOnce(&mut TeamRecord) -> Result<(), E> + Send + 'static,
        A: FnOnce(TeamRecord) -> R + Send + 'static;

    /// Inserts an agent, taking over the row of a removed one with the same id
    /// ([`StoreError::Conflict`] when a member has the id).
    async fn insert_agent<R, A>(&self, agent: AgentRecord, after: A) -> Result<R, StoreError>
    where
        R: Send + 'static,
        A: FnOnce(AgentRecord) -> R + Send + 'static;

    /// Changes an agent (removal included) as `patch` decides, on the current row. With
    /// several nodes, answers once every live node has taken the change up: a removed
    /// agent's token is refused everywhere from the answer on.
    async fn update_agent<R, E, P, A>(&self, pk: AgentPk, patch: P, after: A) -> Result<R, E>
    where
        R: Send + 'static,
        E: From<StoreError> + Send + 'static,
        P: FnOnce(&mut AgentRecord) -> Result<(), E> + Send + 'static,
        A: FnOnce(AgentRecord) -> R + Send + 'static;

    /// Writes one message to its recipients as one job.
    ///
    /// With an idempotency claim whose key was used before, nothing is written and the
    /// stored answer comes back. Otherwise `decide` runs inside the transaction with the
    /// message's time (and, for a response, whether the responder already gave a final
    /// one): it may refuse, or return a value and the answer to store with the key.
    /// `after` gets the value and what the message became, after the commit.
    async fn post<T, R, E, D, A>(
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
        A: FnOnce(T, Result<PostResult, StoreError>) -> Result<R, E> + Send + 'static;

    /// Writes a task change (the task, its event, its callback) and its notices in one
    /// job. [`StoreError::Conflict`] when a new task's id is taken;
    /// [`StoreError::Stale`] when the task changed since `write.expected_version`.
    /// `decide` runs inside the transaction once the task is written (for work that must
    /// happen in commit order); `after` gets its value and what each notice became.
    async fn write_task<T, R, E, D, A>(
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
        A: FnOnce(T, Vec<Result<PostResult, StoreError>>) -> Result<R, E> + Send + 'static;

    /// Changes a team's leases as `decide` chooses, on the team's live leases in `scope`
    /// as of `now` as this transaction sees them (no other grant is decided meanwhile, on any
    /// node: PostgreSQL's batches that run statements hold the writers' advisory lock
    /// exclusively): a grant, an extension, a release, or a refusal.
    async fn change_leases<R, E, D>(
        &self,
        team: TeamPk,
        now: Timestamp,
        scope: LeaseScope,
        decide: D,
    ) -> Result<R, E>
    where
        R: Send + 'static,
        E: From<StoreError> + Send + 'static,
        D: FnOnce(LeaseView) -> Result<(LeaseChange, R), E> + Send + 'static;
}

/// The engine a [`Store`] holds, as `$engine` in `$body`.
macro_rules! on_engine {
    ($store:expr, |$engine:ident| $body:expr) => {
        match $store {
            Store::Sqlite($engine) => $body,
            Store::Postgres($engine) => $body,
        }
    };
}

/// The core's way in: the same writes, on whichever engine the store holds.
impl Store {
    /// See [`DecidedWrites::insert_team`].
    pub async fn insert_team<R, A>(&self, team: TeamRecord, after: A) -> Result<R, StoreError>
    where
        R: Send + 'static,
        A: FnOnce(TeamRecord) -> R + Send + 'static,
    {
        on_engine!(self, |e| e.insert_team(team, after).await)
    }

    /// See [`DecidedWrites::update_team`].
    pub async fn update_team<R, E, P, A>(&self, pk: TeamPk, patch: P, after: A) -> Result<R, E>
    where
        R: Send + 'static,
        E: From<StoreError> + Send + 'static,
        P: FnOnce(&mut TeamRecord) -> Result<(), E> + Send + 'static,
        A: FnOnce(TeamRecord) -> R + Send + 'static,
    {
        on_engine!(self, |e| e.update_team(pk, patch, after).await)
    }

    /// See [`DecidedWrites::insert_agent`].
    pub async fn insert_agent<R, A>(&self, agent: AgentRecord, after: A) -> Result<R, StoreError>
    where
        R: Send + 'static,
        A: FnOnce(AgentRecord) -> R + Send + 'static,
    {
        on_engine!(self, |e| e.insert_agent(agent, after).await)
    }

    /// See [`DecidedWrites::update_agent`].
    pub async fn update_agent<R, E, P, A>(&self, pk: AgentPk, patch: P, after: A) -> Result<R, E>
    where
        R: Send + 'static,
        E: From<StoreError> + Send + 'static,
        P: FnOnce(&mut AgentRecord) -> Result<(), E> + Send + 'static,
        A: FnOnce(AgentRecord) -> R + Send + 'static,
    {
        on_engine!(self, |e| e.update_agent(pk, patch, after).await)
    }

    /// See [`DecidedWrites::post`].
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
        on_engine!(self, |e| e.post(post, claim, decide, after).await)
    }

    /// See [`DecidedWrites::write_task`].
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
        on_engine!(self, |e| e.write_task(write, notices, decide, after).await)
    }

    /// See [`DecidedWrites::change_leases`].
    pub async fn change_leases<R, E, D>(
        &self,
        team: TeamPk,
        now: Timestamp,
        scope: LeaseScope,
        decide: D,
    ) -> Result<R, E>
    where
        R: Send + 'static,
        E: From<StoreError> + Send + 'static,
        D: FnOnce(LeaseView) -> Result<(LeaseChange, R), E> + Send + 'static,
    {
        on_engine!(self, |e| e.change_leases(team, now, scope, decide).await)
    }
}
