//! Tasks, their callbacks and webhooks on PostgreSQL.

use std::time::Duration;

use async_trait::async_trait;
use switchboard_types::ids::{AgentPk, TaskPk, TeamPk};
use switchboard_types::time::Timestamp;

use super::super::messages::{self, Post};
use super::super::{PgStore, budgets, callbacks, retention, tasks, webhooks};
use super::write;
use crate::model::{
    Attempt, DueCallback, NewMessage, NewPost, OpenTasks, TaskListSpec, TaskRecord, TaskSnapshot,
    TaskWrite, TeamSecret, WebhookRecord,
};
use crate::store::StoreError;
use crate::store::engine::{AfterTask, DecideTask, Tasks};
use crate::store::writer::Writes;

#[async_trait]
impl Tasks for PgStore {
    async fn open_task_counts(&self) -> Result<Vec<OpenTasks>, StoreError> {
        tasks::open_counts(&self.read).await
    }

    async fn find_task(
        &self,
        team: TeamPk,
        task_id: &str,
        viewer: Option<AgentPk>,
    ) -> Result<Vec<TaskRecord>, StoreError> {
        tasks::find_visible(&self.read, team, task_id, viewer).await
    }

    /// One REPEATABLE READ transaction: the three reads see one snapshot.
    async fn task_snapshot(&self, task: TaskPk) -> Result<Option<TaskSnapshot>, StoreError> {
        let mut tx = self.read.begin().await?;
        sqlx::raw_sql("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            .execute(&mut *tx)
            .await?;
        let Some(record) = tasks::by_pk(&mut *tx, task).await? else {
            return Ok(None);
        };
        let events = tasks::events(&mut *tx, task).await?;
        let callbacks = callbacks::callbacks_of(&mut *tx, task).await?;
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
        tasks::list(&self.read, agent, spec).await
    }

    async fn team_tasks(
        &self,
        team: TeamPk,
        spec: &TaskListSpec,
    ) -> Result<crate::model::Bounded<TaskRecord>, StoreError> {
        tasks::team_page(&self.read, team, spec).await
    }

    async fn callback_secret(&self, team: TeamPk) -> Result<Option<TeamSecret>, StoreError> {
        callbacks::secret(&self.read, team).await
    }

    async fn set_callback_secret(
        &self,
        team: TeamPk,
        secret: String,
        at: Timestamp,
    ) -> Result<(), StoreError> {
        write!(self, |conn| callbacks::set_secret(conn, team, &secret, at)
            .await)
    }

    async fn due_callbacks(
        &self,
        now: Timestamp,
        limit: i64,
        claim: Duration,
    ) -> Result<Vec<DueCallback>, StoreError> {
        callbacks::due(&self.read, now, limit, claim).await
    }

    async fn next_callback_due(&self) -> Result<Option<Timestamp>, StoreError> {
        callbacks::next_due(&self.read).await
    }

    async fn record_attempts(&self, attempts: Vec<Attempt>) -> Result<(), StoreError> {
        write!(self, |conn| {
            for attempt in &attempts {
                callbacks::record_attempt(&mut *conn, attempt).await?;
            }
            Ok(())
        })
    }

    async fn expire_tasks(
        &self,
        team: TeamPk,
        before: Timestamp,
        limit: i64,
    ) -> Result<u64, StoreError> {
        write!(self, |conn| {
            retention::expire_tasks(conn, team, before.micros(), limit).await
        })
    }

    async fn expire_callbacks(&self, before: Timestamp, limit: i64) -> Result<u64, StoreError> {
        write!(self, |conn| {
            retention::expire_callbacks(conn, before.micros(), limit).await
        })
    }

    async fn task_webhooks(&self, task: TaskPk) -> Result<Vec<WebhookRecord>, StoreError> {
        webhooks::of_task(&self.read, task).await
    }

    async fn webhook(&self, pk: i64) -> Result<Option<WebhookRecord>, StoreError> {
        webhooks::by_pk(&self.read, pk).await
    }

    async fn put_webhook(
        &self,
        webhook: WebhookRecord,
        replay_after: Option<i64>,
    ) -> Result<(), StoreError> {
        write!(self, |conn| {
            webhooks::put(conn, &webhook, replay_after).await
        })
    }

    async fn delete_webhook(&self, task: TaskPk, webhook_id: String) -> Result<bool, StoreError> {
        write!(self, |conn| {
            webhooks::delete(conn, task, &webhook_id).await
        })
    }

    /// Writes a task change (the task, its event, its callback) and its notices in one
    /// job: [`StoreError::Conflict`] when a new task's id is taken, [`StoreError::Stale`]
    /// when the task changed since `write.expected_version`. A notice that cannot be
    /// written fails the whole job (nothing of the change is kept).
    async fn write_task_boxed(
        &self,
        write: TaskWrite,
        notices: Vec<NewPost>,
        decide: DecideTask,
        after: AfterTask,
    ) -> Result<(), StoreError> {
        self.write_then(
            move |tx| {
                Box::pin(async move {
                    let conn = tx.conn().await?;
                    budgets::spend(&mut *conn, &write.charges).await?;
                    let now = write.task.updated_at;
                    let task = match write.expected_version {
                        None => tasks::insert(&mut *conn, &write).await?,
                        Some(version) => {
                            if !tasks::update(&mut *conn, &write, version).await? {
                                return Err(StoreError::Stale);
                            }
                            write.task.pk
                        }
                    };
                    let messages: Vec<&NewMessage> = notices.iter().map(|p| &p.message).collect();
                    decide(&messages);
                    let mut written = Vec::with_capacity(notices.len());
                    for p in &notices {
                        let post = Post {
                            message: &p.message,
                            recipient_ids: &p.recipient_ids,
                            deliver_to: &p.deliver_to,
                            created_at: now,
                            response: None,
                            key: None,
                        };
                        written.push(messages::insert_post(&mut *conn, &post).await?);
                    }
                    tx.note_task(task);
                    for result in &written {
                        tx.note_entries(result);
                    }
                    Ok(written.into_iter().map(Ok).collect::<Vec<_>>())
                })
            },
            after,
        )
        .await
    }
}
