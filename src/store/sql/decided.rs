//! The writes that carry a caller's decision ([`DecidedWrites`]), one implementation for
//! both engines. A change of a team or an agent is noted for the other nodes with its
//! commit and answered once every live node has taken it up (`note_registry` and
//! `registry_barrier`: PostgreSQL's; on SQLite the process is the only node and both do
//! nothing). A post and a task change go down each engine's own batch insert path
//! (`stage_post`, `stage_task_write` in its `engine/` folder).

use futures_util::future::BoxFuture;
use switchboard_types::ids::{AgentPk, TeamPk};
use switchboard_types::time::Timestamp;

use crate::model::{
    AgentRecord, Decided, IdempotencyClaim, LeaseChange, LeaseScope, LeaseView, NewMessage,
    NewPost, PostContext, PostOutcome, PostResult, TaskWrite, TeamRecord,
};
use crate::store::typed::DecidedWrites;
use crate::store::writer::Writes;
use crate::store::{NODE_EXPIRY, StoreError};

for_each_engine! {
    impl DecidedWrites for Store {
        async fn insert_team<R, A>(&self, team: TeamRecord, after: A) -> Result<R, StoreError>
        where
            R: Send + 'static,
            A: FnOnce(TeamRecord) -> R + Send + 'static,
        {
            self.change_registry(
                move |tx| {
                    Box::pin(async move {
                        let pk = engine::teams::insert(tx.conn().await?, &team).await?;
                        Ok(TeamRecord { pk, ..team })
                    })
                },
                after,
            )
            .await
        }

        async fn update_team<R, E, P, A>(&self, pk: TeamPk, patch: P, after: A) -> Result<R, E>
        where
            R: Send + 'static,
            E: From<StoreError> + Send + 'static,
            P: FnOnce(&mut TeamRecord) -> Result<(), E> + Send + 'static,
            A: FnOnce(TeamRecord) -> R + Send + 'static,
        {
            self.change_registry(
                move |tx| {
                    Box::pin(async move {
                        let conn = tx.conn().await?;
                        let mut team = engine::teams::get(&mut *conn, pk).await?;
                        patch(&mut team)?;
                        engine::teams::update(conn, &team).await?;
                        Ok(team)
                    })
                },
                after,
            )
            .await
        }

        async fn insert_agent<R, A>(&self, agent: AgentRecord, after: A) -> Result<R, StoreError>
        where
            R: Send + 'static,
            A: FnOnce(AgentRecord) -> R + Send + 'static,
        {
            self.change_registry(
                move |tx| {
                    Box::pin(async move {
                        let pk = engine::agents::insert(tx.conn().await?, &agent).await?;
                        Ok(AgentRecord { pk, ..agent })
                    })
                },
                after,
            )
            .await
        }

        async fn update_agent<R, E, P, A>(&self, pk: AgentPk, patch: P, after: A) -> Result<R, E>
        where
            R: Send + 'static,
            E: From<StoreError> + Send + 'static,
            P: FnOnce(&mut AgentRecord) -> Result<(), E> + Send + 'static,
            A: FnOnce(AgentRecord) -> R + Send + 'static,
        {
            self.change_registry(
                move |tx| {
                    Box::pin(async move {
                        let conn = tx.conn().await?;
                        let mut agent = engine::agents::get(&mut *conn, pk).await?;
                        patch(&mut agent)?;
                        engine::agents::update(conn, &agent).await?;
                        Ok(agent)
                    })
                },
                after,
            )
            .await
        }

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
            A: FnOnce(T, Result<PostResult, StoreError>) -> Result<R, E> + Send + 'static,
        {
            self.stage_post(post, claim, decide, after).await
        }

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
            A: FnOnce(T, Vec<Result<PostResult, StoreError>>) -> Result<R, E> + Send + 'static,
        {
            self.stage_task_write(write, notices, decide, after).await
        }

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
            D: FnOnce(LeaseView) -> Result<(LeaseChange, R), E> + Send + 'static,
        {
            self.write_then(
                move |tx: &mut Tx| -> BoxFuture<'_, Result<R, E>> {
                    Box::pin(async move {
                        let conn = tx.conn().await?;
                        let view = engine::leases::scoped(conn, team, now, &scope).await?;
                        let (change, answer) = decide(view)?;
                        engine::leases::apply(conn, &change).await?;
                        Ok(answer)
                    })
                },
                Ok,
            )
            .await
        }
    }

    impl Store {
        /// A change of a team or an agent: `job` writes its row in the batch, the change
        /// is noted for the other nodes with the commit, `after` gets the row right after
        /// it, and the answer waits until every live node holds it — an addition too, as
        /// a lookup that misses reloads on its own but a list cannot tell what it misses
        /// (`nodes::read_your_writes`).
        async fn change_registry<T, R, E, J, A>(&self, job: J, after: A) -> Result<R, E>
        where
            T: Send + 'static,
            R: Send + 'static,
            E: From<StoreError> + Send + 'static,
            J: for<'c> FnOnce(&'c mut Tx) -> BoxFuture<'c, Result<T, E>> + Send + 'static,
            A: FnOnce(T) -> R + Send + 'static,
        {
            let answer = self
                .write_then(
                    move |tx: &mut Tx| -> BoxFuture<'_, Result<T, E>> {
                        Box::pin(async move {
                            let row = job(&mut *tx).await?;
                            tx.note_registry();
                            Ok(row)
                        })
                    },
                    move |row| Ok(after(row)),
                )
                .await?;
            self.registry_barrier(NODE_EXPIRY).await?;
            Ok(answer)
        }
    }
}
