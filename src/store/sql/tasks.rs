//! Reading tasks the same way on both engines: by key, a task's history, a team's page,
//! the open count per assignee. Finding a task by id and an agent's page stay each
//! engine's (`tasks.rs`): each is written for its planner, and SQLite's plans are checked
//! by its tests.

use sqlx::Row;
use switchboard_types::ids::{AgentPk, TaskPk, TeamPk};

use crate::model::{OpenTasks, TaskEventRecord, TaskListSpec, TaskRecord};
use crate::store::StoreError;
use crate::store::columns::{TASK_COLUMNS, TASK_EVENT_COLUMNS, task, task_event};
use crate::store::filters::team_tasks_query;

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
    pub(crate) async fn open_counts<'e>(ex: impl sqlx::Executor<'e, Database = Db>) -> Result<Vec<OpenTasks>, StoreError> {
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
}
