//! A task change on PostgreSQL, in one job. The rest of the `Tasks` storage:
//! `store/sql/tasks.rs`.

use super::super::messages::{self, Post};
use super::super::{PgStore, budgets, tasks};
use crate::model::{NewMessage, NewPost, TaskWrite};
use crate::store::StoreError;
use crate::store::engine::{AfterTask, DecideTask};
use crate::store::writer::Writes;

impl PgStore {
    /// PostgreSQL's path for a task change and its notices, in one job.
    pub(crate) async fn stage_task_write(
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
