//! A task change on PostgreSQL, in one job. The rest of the `Tasks` storage:
//! `store/sql/tasks.rs`.

use super::super::messages::{self, Post};
use super::super::{PgStore, budgets, tasks};
use crate::model::{NewMessage, NewPost, PostResult, TaskWrite};
use crate::store::StoreError;
use crate::store::writer::Writes;

impl PgStore {
    /// PostgreSQL's path for a task change and its notices, in one job.
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
                                return Err(StoreError::Stale.into());
                            }
                            write.task.pk
                        }
                    };
                    let messages: Vec<&NewMessage> = notices.iter().map(|p| &p.message).collect();
                    let value = decide(&messages);
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
                    Ok((value, written.into_iter().map(Ok).collect::<Vec<_>>()))
                })
            },
            move |(value, written)| after(value, written),
        )
        .await
    }
}
