//! The `Tasks` storage, one implementation for both engines, and the task reads it runs
//! the same way on both: by key, a task's history, a team's page,
//! the open count per assignee. Finding a task by id and an agent's page stay each
//! engine's (`tasks.rs`): each is written for its planner, and SQLite's plans are checked
//! by its tests.

use std::time::Duration;

use sqlx::Row;
use switchboard_types::ids::{AgentPk, TaskPk, TeamPk};
use switchboard_types::time::Timestamp;

use crate::model::{
    Attempt, DueCallback, OpenTasks, TaskEventRecord, TaskListSpec, TaskRecord, TaskSnapshot,
    TeamSecret, WebhookRecord,
};
use crate::store::StoreError;
use crate::store::columns::{TASK_COLUMNS, TASK_EVENT_COLUMNS, task, task_event};
use crate::store::engine::Tasks;
use crate::store::filters::team_tasks_query;
use crate::store::writer::Writes;

for_each_engine! {
    /// One page of the team's tasks, newest first.
    pub(crate) async fn team_page<'e>(
        ex: impl sqlx::Executor<'e, Database = Db>,
        team: TeamPk,
        spec: &TaskListSpec,
    ) -> Result<crate::model::Bounded<TaskRecord>, StoreError> {
        let mut query = team_tasks_query::<Db>(team, spec);
        let rows = query.build().fetch(ex);
        crate::store::paging::bounded(rows, crate::store::columns::task_weight, task).await
    }

    /// The task with this key (for work queued about it, such as a webhook delivery).
    pub(crate) async fn by_pk<'e>(
        ex: impl sqlx::Executor<'e, Database = Db>,
        pk: TaskPk,
    ) -> Result<Option<TaskRecord>, StoreError> {
        let sql = format!("SELECT {TASK_COLUMNS} FROM tasks WHERE pk = $1");
        let row = sqlx::query::<Db>(sqlx::AssertSqlSafe(sql))
            .bind(pk.0)
            .fetch_optional(ex)
            .await?;
        row.as_ref().map(task).transpose()
    }

    /// The task's history, oldest first.
    pub(crate) async fn events<'e>(
        ex: impl sqlx::Executor<'e, Database = Db>,
        pk: TaskPk,
    ) -> Result<Vec<TaskEventRecord>, StoreError> {
        let sql =
            format!("SELECT {TASK_EVENT_COLUMNS} FROM task_events WHERE task_pk = $1 ORDER BY seq");
        let rows = sqlx::query::<Db>(sqlx::AssertSqlSafe(sql))
            .bind(pk.0)
            .fetch_all(ex)
            .await?;
        rows.iter().map(task_event).collect()
    }

    /// Open (in-progress or input-required) tasks per assignee, read at start-up from the
    /// index that holds only open tasks (finished ones are not walked).
    pub(crate) async fn open_counts<'e>(
        ex: impl sqlx::Executor<'e, Database = Db>,
    ) -> Result<Vec<OpenTasks>, StoreError> {
        let rows = sqlx::query::<Db>(sqlx::AssertSqlSafe(format!(
            "SELECT assignee_pk, COUNT(*) FROM tasks{TASKS_OPEN}
             WHERE (status = 'in-progress' OR status = 'input-required') AND assignee_pk IS NOT NULL
             GROUP BY assignee_pk"
        )))
        .fetch_all(ex)
        .await?;
        rows.iter()
            .map(|row| {
                Ok(OpenTasks {
                    agent: AgentPk(row.try_get(0)?),
                    open: row.try_get(1)?,
                })
            })
            .collect()
    }

    impl Tasks for Store {
        async fn open_task_counts(&self) -> Result<Vec<OpenTasks>, StoreError> {
            engine::tasks::open_counts(&self.read).await
        }

        async fn find_task(
            &self,
            team: TeamPk,
            task_id: &str,
            viewer: Option<AgentPk>,
        ) -> Result<Vec<TaskRecord>, StoreError> {
            engine::tasks::find_visible(&self.read, team, task_id, viewer).await
        }

        /// One read transaction whose three reads see one snapshot: SQLite's is taken at its
        /// first read and held to its end; PostgreSQL's needs REPEATABLE READ.
        async fn task_snapshot(&self, task: TaskPk) -> Result<Option<TaskSnapshot>, StoreError> {
            let mut tx = self.read.begin().await?;
            if !ONE_SNAPSHOT.is_empty() {
                sqlx::raw_sql(ONE_SNAPSHOT).execute(&mut *tx).await?;
            }
            let Some(record) = engine::tasks::by_pk(&mut *tx, task).await? else {
                return Ok(None);
            };
            let events = engine::tasks::events(&mut *tx, task).await?;
            let callbacks = engine::callbacks::callbacks_of(&mut *tx, task).await?;
            tx.commit().await?;
            Ok(Some(TaskSnapshot {
                task: record,
                events,
                callbacks,
            }))
        }

        async fn list_tasks(
            &self,
            agent: AgentPk,
            spec: &TaskListSpec,
        ) -> Result<crate::model::Bounded<TaskRecord>, StoreError> {
            engine::tasks::list(&self.read, agent, spec).await
        }

        async fn team_tasks(
            &self,
            team: TeamPk,
            spec: &TaskListSpec,
        ) -> Result<crate::model::Bounded<TaskRecord>, StoreError> {
            engine::tasks::team_page(&self.read, team, spec).await
        }

        async fn callback_secret(&self, team: TeamPk) -> Result<Option<TeamSecret>, StoreError> {
            engine::callbacks::secret(&self.read, team).await
        }

        async fn set_callback_secret(
            &self,
            team: TeamPk,
            secret: String,
            at: Timestamp,
        ) -> Result<(), StoreError> {
            on_conn!(self, write_then, |conn| engine::callbacks::set_secret(
                conn, team, &secret, at
            )
            .await)
        }

        async fn due_callbacks(
            &self,
            now: Timestamp,
            limit: i64,
            claim: Duration,
        ) -> Result<Vec<DueCallback>, StoreError> {
            engine::callbacks::due(&self.read, now, limit, claim).await
        }

        async fn next_callback_due(&self) -> Result<Option<Timestamp>, StoreError> {
            engine::callbacks::next_due(&self.read).await
        }

        /// Records the outcome of callback attempts (on each callback and its task).
        async fn record_attempts(&self, attempts: Vec<Attempt>) -> Result<(), StoreError> {
            on_conn!(self, write_then, |conn| {
                for attempt in &attempts {
                    engine::callbacks::record_attempt(&mut *conn, attempt).await?;
                }
                Ok(())
            })
        }

        /// Up to `limit` of the team's finished tasks last changed before `before`, removed.
        async fn expire_tasks(
            &self,
            team: TeamPk,
            before: Timestamp,
            limit: i64,
        ) -> Result<u64, StoreError> {
            on_conn!(self, write_then, |conn| engine::retention::expire_tasks(
                conn,
                team,
                before.micros(),
                limit
            )
            .await)
        }

        /// Up to `limit` callback records finished before `before`, removed.
        async fn expire_callbacks(&self, before: Timestamp, limit: i64) -> Result<u64, StoreError> {
            on_conn!(self, write_self_contained, |conn| {
                engine::retention::expire_callbacks(conn, before.micros(), limit).await
            })
        }

        async fn task_webhooks(&self, task: TaskPk) -> Result<Vec<WebhookRecord>, StoreError> {
            engine::webhooks::of_task(&self.read, task).await
        }

        async fn webhook(&self, pk: i64) -> Result<Option<WebhookRecord>, StoreError> {
            engine::webhooks::by_pk(&self.read, pk).await
        }

        async fn put_webhook(
            &self,
            webhook: WebhookRecord,
            replay_after: Option<i64>,
        ) -> Result<(), StoreError> {
            // Three statements: in a savepoint of its own, so a failure leaves none of them.
            on_conn!(self, write_then, |conn| engine::webhooks::put(
                conn,
                &webhook,
                replay_after
            )
            .await)
        }

        async fn delete_webhook(
            &self,
            task: TaskPk,
            webhook_id: String,
        ) -> Result<bool, StoreError> {
            on_conn!(self, write_then, |conn| engine::webhooks::delete(
                conn,
                task,
                &webhook_id
            )
            .await)
        }
    }
}
