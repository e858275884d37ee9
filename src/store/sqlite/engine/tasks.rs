//! Tasks, their callbacks and webhooks on SQLite.

use std::time::Duration;

use async_trait::async_trait;
use switchboard_types::ids::{AgentPk, TaskPk, TeamPk};
use switchboard_types::time::Timestamp;

use super::super::message_row::RenderedMessage;
use super::super::message_staging::{PostSlot, StagedPost};
use super::super::{SqliteStore, budgets, callbacks, retention, tasks, webhooks};
use crate::model::{
    Attempt, DueCallback, NewMessage, NewPost, OpenTasks, TaskListSpec, TaskRecord, TaskSnapshot,
    TaskWrite, TeamSecret, WebhookRecord,
};
use crate::store::StoreError;
use crate::store::engine::{AfterTask, DecideTask, Tasks};
use crate::store::writer::{Isolation, Writes};

#[async_trait]
impl Tasks for SqliteStore {
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

    /// One read transaction: SQLite's snapshot is taken at its first read and held to
    /// its end, so no commit lands between the three reads.
    async fn task_snapshot(&self, task: TaskPk) -> Result<Option<TaskSnapshot>, StoreError> {
        let mut tx = self.read.begin().await?;
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
        self.write_then(
            move |tx| {
                Box::pin(
                    async move { callbacks::set_secret(tx.conn().await?, team, &secret, at).await },
                )
            },
            Ok,
        )
        .await
    }

    async fn due_callbacks(
        &self,
        now: Timestamp,
        limit: i64,
        _claim: Duration,
    ) -> Result<Vec<DueCallback>, StoreError> {
        // One process owns the file: there is no other sender to claim against.
        callbacks::due(&self.read, now, limit).await
    }

    async fn next_callback_due(&self) -> Result<Option<Timestamp>, StoreError> {
        callbacks::next_due(&self.read).await
    }

    /// Records the outcome of callback attempts (on each callback and its task).
    async fn record_attempts(&self, attempts: Vec<Attempt>) -> Result<(), StoreError> {
        self.write_then(
            move |tx| {
                Box::pin(async move {
                    let conn = tx.conn().await?;
                    for attempt in &attempts {
                        callbacks::record_attempt(&mut *conn, attempt).await?;
                    }
                    Ok(())
                })
            },
            Ok,
        )
        .await
    }

    /// Up to `limit` of the team's finished tasks last changed before `before`, removed.
    async fn expire_tasks(
        &self,
        team: TeamPk,
        before: Timestamp,
        limit: i64,
    ) -> Result<u64, StoreError> {
        self.write_then(
            move |tx| {
                Box::pin(async move {
                    retention::expire_tasks(tx.conn().await?, team, before.micros(), limit).await
                })
            },
            Ok,
        )
        .await
    }

    /// Up to `limit` callback records finished before `before`, removed.
    async fn expire_callbacks(&self, before: Timestamp, limit: i64) -> Result<u64, StoreError> {
        self.write_self_contained(
            move |tx| {
                Box::pin(async move {
                    retention::expire_callbacks(tx.conn().await?, before.micros(), limit).await
                })
            },
            Ok,
        )
        .await
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
        self.write_self_contained(
            move |tx| {
                Box::pin(
                    async move { webhooks::put(tx.conn().await?, &webhook, replay_after).await },
                )
            },
            Ok,
        )
        .await
    }

    async fn delete_webhook(&self, task: TaskPk, webhook_id: String) -> Result<bool, StoreError> {
        self.write_self_contained(
            move |tx| {
                Box::pin(async move { webhooks::delete(tx.conn().await?, task, &webhook_id).await })
            },
            Ok,
        )
        .await
    }

    /// Writes a task change (the task, its event, its callback) and its notices in one
    /// self-contained job. [`StoreError::Conflict`] when a new task's id is taken;
    /// [`StoreError::Stale`] when the task changed since `write.expected_version`.
    /// `decide` runs inside the transaction once the task is written (for work that must
    /// happen in commit order); `after` gets its value and what each notice became.
    async fn write_task_boxed(
        &self,
        write: TaskWrite,
        notices: Vec<NewPost>,
        decide: DecideTask,
        after: AfterTask,
    ) -> Result<(), StoreError> {
        let rendered = notices
            .into_iter()
            .map(|p| {
                Ok((
                    RenderedMessage::new(p.message, p.recipient_ids)?,
                    p.deliver_to,
                ))
            })
            .collect::<Result<Vec<_>, StoreError>>()?;
        let isolation = Isolation::for_charges(&write.charges);
        self.writer()
            .write_then(
                isolation,
                move |tx| {
                    Box::pin(async move {
                        if !write.charges.is_empty() {
                            budgets::spend(tx.conn_beside_posts().await?, &write.charges).await?;
                        }
                        let now = write.task.updated_at;
                        // A new task is staged and written by the flush with the batch's
                        // other new tasks (`task_staging`); a change runs its statement now,
                        // beside the staged posts: the task tables are disjoint from what
                        // posts touch, and a change cannot concern a task staged in this
                        // batch (the change was decided on the task as committed).
                        let task = match write.expected_version {
                            None => Some(tx.staging().stage_task(write)),
                            Some(version) => {
                                let conn = tx.conn_beside_posts().await?;
                                if !tasks::update(conn, &write, version).await? {
                                    return Err(StoreError::Stale);
                                }
                                None
                            }
                        };
                        let messages: Vec<&NewMessage> =
                            rendered.iter().map(|(r, _)| &r.message).collect();
                        decide(&messages);
                        let slots: Vec<PostSlot> = rendered
                            .into_iter()
                            .map(|(r, to)| {
                                let post = StagedPost::new(r, to, now, None, None);
                                let post = match &task {
                                    Some(task) => post.about(task),
                                    None => post,
                                };
                                tx.staging().stage(post)
                            })
                            .collect();
                        Ok((slots, task))
                    })
                },
                move |(slots, task)| {
                    // A new task whose insert failed (its id was taken) wrote nothing, not
                    // even its notices.
                    if let Some(task) = task {
                        task.outcome()?;
                    }
                    after(slots.iter().map(PostSlot::outcome).collect())
                },
            )
            .await
    }
}
