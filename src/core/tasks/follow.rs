//! A task's history from a cursor on: the feed's promise for a task's followers (an A2A
//! stream, a blocking `SendMessage`, an outside agent's follow). The task's watch stays
//! registered for the whole follow and is armed before every read, so a change between
//! a read and the wait wakes the follower; the cursor moves only past entries handed
//! out, so none is handed out twice.

use crate::core::Tasks;
use std::time::Duration;
use switchboard_types::ids::TaskRef;

use switchboard_types::tasks::{TaskDetail, TaskEvent};
use tokio_util::sync::CancellationToken;

use crate::core::{Caller, Core, CoreResult};
use crate::hub::Watch;

/// A task followed from a cursor.
pub struct TaskFeed {
    core: Core,
    caller: Caller,
    task_id: TaskRef,
    watch: Watch,
    removed: CancellationToken,
    /// The newest history entry handed out.
    cursor: i64,
}

/// The task as one read saw it, and which of its history entries are new to the
/// follower.
pub struct TaskStep {
    pub detail: TaskDetail,
    /// Index of the first entry of `detail.events` past the previous cursor.
    fresh_from: usize,
}

impl TaskStep {
    /// The history entries past the previous cursor, oldest first.
    pub fn fresh(&self) -> &[TaskEvent] {
        &self.detail.events[self.fresh_from..]
    }
}

impl TaskFeed {
    /// The newest history entry handed out.
    pub fn cursor(&self) -> i64 {
        self.cursor
    }

    /// The task once it has history past the cursor (which then moves to its newest
    /// entry) or is finished, or as it is once `timeout` passed. Cancel-safe: the cursor
    /// moves only when the step is returned.
    pub async fn next(&mut self, timeout: Duration) -> CoreResult<TaskStep> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            // Armed before the read: a change from here on wakes it.
            let mut woken = self.watch.arm();
            let detail = self.core.get_task(&self.caller, &self.task_id).await?;
            let fresh_from = detail.events.partition_point(|e| e.seq <= self.cursor);
            let fresh = fresh_from < detail.events.len();
            let finished = detail.task.status.is_final();
            if fresh || finished || tokio::time::Instant::now() >= deadline {
                if let Some(newest) = detail.events.last().filter(|_| fresh) {
                    self.cursor = newest.seq;
                }
                return Ok(TaskStep { detail, fresh_from });
            }
            tokio::select! {
                () = woken.as_mut() => {}
                // Its caller's token no longer counts: the follow ends now, not at the
                // task's next change.
                () = self.removed.cancelled() => return Err(crate::core::waiting::agent_removed()),
                () = tokio::time::sleep_until(deadline) => {}
            }
        }
    }
}

impl<'a> Tasks<'a> {
    /// Follows a task the caller may read, from history entry `after` on.
    pub async fn feed_task(
        self,
        caller: &Caller,
        task_id: &TaskRef,
        after: i64,
    ) -> CoreResult<TaskFeed> {
        let (team, me) = self.core.identity().acting_agent(caller)?;
        let task_pk = self.core.load_task(team, me, task_id).await?.task.pk;
        let watch = self.core.hub().watch_task(task_pk);
        let removed = self.core.live().removal_signal(caller)?;
        Ok(TaskFeed {
            core: self.core.clone(),
            caller: *caller,
            task_id: task_id.clone(),
            watch,
            removed,
            cursor: after,
        })
    }
}
