//! A task change on SQLite: its notices rendered on the caller's thread and staged with
//! the batch. The rest of the `Tasks` storage: `store/sql/tasks.rs`.

use super::super::message_row::RenderedMessage;
use super::super::message_staging::{PostSlot, StagedPost};
use super::super::{SqliteStore, budgets, tasks};
use crate::model::{NewMessage, NewPost, PostResult, TaskWrite};
use crate::store::StoreError;
use crate::store::writer::{Isolation, Writes};

impl SqliteStore {
    /// SQLite's path for a task change and its notices: rendered on the caller's thread,
    /// staged, written with the batch.
    pub(crate) async fn stage_task_write<T, R, E, D, A>(
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
                                    return Err(StoreError::Stale.into());
                                }
                                None
                            }
                        };
                        let messages: Vec<&NewMessage> =
                            rendered.iter().map(|(r, _)| &r.message).collect();
                        let value = decide(&messages);
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
                        Ok((slots, task, value))
                    })
                },
                move |(slots, task, value)| {
                    // A new task whose insert failed (its id was taken) wrote nothing, not
                    // even its notices.
                    if let Some(task) = task {
                        task.outcome()?;
                    }
                    after(value, slots.iter().map(PostSlot::outcome).collect())
                },
            )
            .await
    }
}
