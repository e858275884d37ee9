//! Reading tasks, and the team's callback signing key.

use crate::core::Tasks;
use std::time::Duration;
use switchboard_types::ids::{TaskPk, TaskRef, TeamId};

use switchboard_types::inbox::page_size;
use switchboard_types::tasks::{CallbackSecret, TaskDetail, TaskEvent, TaskList, TaskQuery};
use switchboard_types::time::Timestamp;
use switchboard_types::traffic::TeamTaskQuery;

use crate::core::{Caller, Core, CoreError, CoreResult, Need, cursor};
use crate::model::{TaskEventRecord, TaskListSpec, TaskRecord};

impl Core {
    /// A task with its history, for its originator, anyone ever assigned it, and its
    /// team's key (which sees every task of the team).
    pub(in crate::core) async fn get_task(
        &self,
        caller: &Caller,
        task_id: &TaskRef,
    ) -> CoreResult<TaskDetail> {
        let (team, me) = self.reader(caller)?;
        let task = self.find_one_task(&team, me.map(|m| m.pk), task_id).await?;
        // The row, history and callbacks of one moment: a status never older than the
        // history beside it (a follower takes the newest entry as its cursor).
        let snapshot = self
            .store()
            .task_snapshot(task.pk)
            .await?
            .ok_or_else(|| super::task_not_found(task_id))?;
        let now = switchboard_types::time::Timestamp::now();
        let approvals = self
            .store()
            .task_approvals(task.pk)
            .await?
            .iter()
            .map(|a| self.approval_view(&team, a, now))
            .collect();
        Ok(TaskDetail {
            success: true,
            approvals,
            task: self.task_view(&snapshot.task),
            events: snapshot
                .events
                .into_iter()
                .map(|e| self.event_view(e))
                .collect(),
            callbacks: snapshot.callbacks,
        })
    }

    /// A history entry as clients see it.
    pub(super) fn event_view(&self, e: TaskEventRecord) -> TaskEvent {
        TaskEvent {
            seq: e.seq,
            kind: e.kind,
            agent_id: e.actor_pk.map(|pk| self.agent_name(pk)),
            status: e.status,
            data: e.data,
            timestamp: e.created_at,
        }
    }

    /// The caller's tasks, newest first.
    pub(in crate::core) async fn list_tasks(
        &self,
        caller: &Caller,
        query: TaskQuery,
    ) -> CoreResult<TaskList> {
        let (_, me) = self.identity().acting_agent(caller)?;
        query.validate()?;
        let (limit, before) = page_start(query.limit, query.cursor.as_deref())?;
        let spec = TaskListSpec {
            role: query.role,
            statuses: query.status.map(|s| s.0).unwrap_or_default(),
            before,
            target: query.target_agent_id,
            assignee_role: query.assignee_role,
            limit: limit + 1,
        };
        let page = self.store().list_tasks(me.pk, &spec).await?;
        Ok(self.task_page(page, limit))
    }

    /// The team's tasks, newest first (team key or admin): the operator's board.
    pub(in crate::core) async fn team_tasks(
        &self,
        caller: &Caller,
        team_id: &TeamId,
        query: TeamTaskQuery,
    ) -> CoreResult<TaskList> {
        let team = self.team_for(caller, team_id, Need::Manage)?;
        let (limit, before) = page_start(query.limit, query.cursor.as_deref())?;
        let spec = TaskListSpec {
            role: None,
            statuses: query.status.map(|s| s.0).unwrap_or_default(),
            before,
            target: None,
            assignee_role: None,
            limit: limit + 1,
        };
        let page = self.store().team_tasks(team.pk, &spec).await?;
        Ok(self.task_page(page, limit))
    }

    /// A page of tasks read one past `limit`: the first `limit`, and a cursor when there
    /// were more — or when the page was cut short by the byte bound.
    fn task_page(&self, page: crate::model::Bounded<TaskRecord>, limit: i64) -> TaskList {
        let mut tasks = page.rows;
        let more = tasks.len() as i64 > limit || page.cut;
        tasks.truncate(limit as usize);
        let next_cursor = more
            .then(|| tasks.last().map(|t| cursor::encode_task(t.pk)))
            .flatten();
        TaskList {
            success: true,
            tasks: tasks.iter().map(|t| self.task_view(t)).collect(),
            next_cursor,
        }
    }

    /// The team's callback signing key (team key or admin).
    pub(in crate::core) async fn callback_secret(
        &self,
        caller: &Caller,
        team_id: &TeamId,
    ) -> CoreResult<CallbackSecret> {
        let team = self.team_for(caller, team_id, Need::Manage)?;
        let stored = self
            .store()
            .callback_secret(team.pk)
            .await?
            .ok_or_else(|| CoreError::internal("the team has no callback secret"))?;
        Ok(CallbackSecret {
            success: true,
            team_id: team.team_id.clone(),
            secret: stored.secret,
            rotated_at: stored.rotated_at,
        })
    }

    /// Replaces the team's callback signing key; callbacks sent from now on use the new
    /// one.
    pub(in crate::core) async fn rotate_callback_secret(
        &self,
        caller: &Caller,
        team_id: &TeamId,
    ) -> CoreResult<CallbackSecret> {
        let team = self.team_for(caller, team_id, Need::Manage)?;
        let bytes: [u8; 32] = rand::random();
        let secret = format!("whsec_{}", hex::encode(bytes));
        let now = Timestamp::now();
        self.store()
            .set_callback_secret(team.pk, secret.clone(), now)
            .await?;
        tracing::info!(team_id = %team.team_id, "callback secret rotated");
        Ok(CallbackSecret {
            success: true,
            team_id: team.team_id.clone(),
            secret,
            rotated_at: now,
        })
    }
}

/// A task list's page size and where it starts: `cursor=` (empty) is no cursor, the
/// first page.
fn page_start(limit: Option<i64>, cursor: Option<&str>) -> CoreResult<(i64, Option<TaskPk>)> {
    let limit = page_size(limit)?;
    let before = cursor
        .filter(|c| !c.is_empty())
        .map(cursor::decode_task)
        .transpose()?;
    Ok((limit, before))
}

impl<'a> Tasks<'a> {
    /// The task with its history once it has an event after `after_seq`, or once
    /// `timeout` passed (then as it is): one step of a task's feed, for a follower that
    /// asks once. A finished task answers at once.
    pub async fn wait_for_task(
        self,
        caller: &Caller,
        task_id: &TaskRef,
        after_seq: i64,
        timeout: Duration,
    ) -> CoreResult<TaskDetail> {
        let mut feed = self
            .core
            .tasks()
            .feed_task(caller, task_id, after_seq)
            .await?;
        Ok(feed.next(timeout).await?.detail)
    }
}
