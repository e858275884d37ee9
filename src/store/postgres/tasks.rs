//! Tasks, their history and who was ever assigned them on PostgreSQL. A task and the rows
//! written with it are one statement (data-modifying `WITH` parts), so a change is one
//! round trip and all or nothing.

use sqlx::postgres::{PgConnection, PgExecutor};
use sqlx::{AssertSqlSafe, Postgres, QueryBuilder};
use switchboard_types::ids::{AgentPk, TaskPk, TeamPk};
use switchboard_types::tasks::TaskRole;

use crate::model::{TaskListSpec, TaskRecord, TaskWrite};
use crate::store::StoreError;
use crate::store::columns::{TASK_COLUMNS, task, to_json};
use crate::store::filters::push_task_page;

pub(crate) use crate::store::sql::tasks::postgres::*;

/// A new task with its assignee, its first event and, with a callback, that event's
/// CallbackNotification. A task id the originator already used fails the statement
/// ([`StoreError::Conflict`]) and nothing is written.
const INSERT_TASK: &str = "
    WITH t AS (
        INSERT INTO tasks (team_pk, task_id, description, data, originator_pk, assignee_pk,
                           callback_url, priority, required_capabilities, target_agent_id,
                           status, clarification_id, question, context, result_data,
                           callback_delivery, version, created_at, updated_at,
                           originator_inbox, chain, trace_id, trace, assignee_role)
        VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, NULL, $16,
                $17, $18, $27, $28, $29, $30, $31)
        RETURNING pk, team_pk, assignee_pk, created_at),
    a AS (INSERT INTO task_assignees (task_pk, agent_pk)
          SELECT pk, assignee_pk FROM t WHERE assignee_pk IS NOT NULL),
    e AS (INSERT INTO task_events (task_pk, seq, kind, actor_pk, status, data, created_at)
          SELECT pk, $19, $20, $21, $22, $23, $24 FROM t),
    c AS (INSERT INTO callbacks (task_pk, team_pk, url, event_seq, body, state, attempts,
                                 next_attempt_at, created_at)
          SELECT pk, team_pk, $25, $19, $26, 'pending', 0, created_at, created_at FROM t
          WHERE $25::text IS NOT NULL)
    SELECT pk FROM t";

pub(super) async fn insert(conn: &mut PgConnection, w: &TaskWrite) -> Result<TaskPk, StoreError> {
    let (t, e) = (&w.task, &w.event);
    let (clarification_id, question) = t.clarification.clone().unzip();
    let (url, body) = w.callback.clone().unzip();
    let pk: i64 = sqlx::query_scalar(INSERT_TASK)
        .bind(t.team_pk.0)
        .bind(&*t.task_id)
        .bind(&t.description)
        .bind(to_json(&t.data)?)
        .bind(t.originator_pk.0)
        .bind(t.assignee_pk.map(|a| a.0))
        .bind(&t.callback_url)
        .bind(t.priority.as_str())
        .bind(to_json(&t.required_capabilities)?)
        .bind(t.target_agent_id.as_deref())
        .bind(t.status.as_str())
        .bind(clarification_id.map(String::from))
        .bind(question)
        .bind(to_json(&t.context)?)
        .bind(to_json(&t.result_data)?)
        .bind(t.version)
        .bind(t.created_at.micros())
        .bind(t.updated_at.micros())
        .bind(e.seq)
        .bind(e.kind.as_str())
        .bind(e.actor_pk.map(|a| a.0))
        .bind(e.status.as_str())
        .bind(to_json(&e.data)?)
        .bind(e.created_at.micros())
        .bind(url)
        .bind(body)
        .bind(t.originator_inbox)
        .bind(t.chain.as_ref().map(to_json).transpose()?)
        .bind(t.trace.as_ref().map(|trace| trace.trace_id.as_str()))
        .bind(t.trace.as_ref().map(to_json).transpose()?)
        .bind(t.assignee_role.as_deref())
        .fetch_one(conn)
        .await?;
    Ok(TaskPk(pk))
}

/// A change: the version-checked `UPDATE`, and only if it applied, the event, the
/// CallbackNotification and a new assignee's right to read the task.
const UPDATE_TASK: &str = "
    WITH u AS (
        UPDATE tasks SET assignee_pk = $1, status = $2, clarification_id = $3, question = $4,
                         context = $5, result_data = $6, version = $7, updated_at = $8,
                         chain = COALESCE($19, chain), history_bytes = $20,
                         attempts = $21, lease_seconds = $22, lease_expires_at = $23
        WHERE pk = $9 AND version = $10
        RETURNING pk, team_pk),
    e AS (INSERT INTO task_events (task_pk, seq, kind, actor_pk, status, data, created_at)
          SELECT pk, $11, $12, $13, $14, $15, $16 FROM u),
    c AS (INSERT INTO callbacks (task_pk, team_pk, url, event_seq, body, state, attempts,
                                 next_attempt_at, created_at)
          SELECT pk, team_pk, $17, $11, $18, 'pending', 0, $8, $8 FROM u
          WHERE $17::text IS NOT NULL),
    a AS (INSERT INTO task_assignees (task_pk, agent_pk)
          SELECT pk, $1 FROM u WHERE $1::bigint IS NOT NULL
          ON CONFLICT DO NOTHING)
    SELECT COUNT(*) FROM u";

/// Writes a change if the task's version is still `expected_version`; `false` when
/// someone changed it first (nothing is written then).
pub(super) async fn update(
    conn: &mut PgConnection,
    w: &TaskWrite,
    expected_version: i64,
) -> Result<bool, StoreError> {
    let (t, e) = (&w.task, &w.event);
    let (clarification_id, question) = t.clarification.clone().unzip();
    let (url, body) = w.callback.clone().unzip();
    let applied: i64 = sqlx::query_scalar(UPDATE_TASK)
        .bind(t.assignee_pk.map(|a| a.0))
        .bind(t.status.as_str())
        .bind(clarification_id.map(String::from))
        .bind(question)
        .bind(to_json(&t.context)?)
        .bind(to_json(&t.result_data)?)
        .bind(t.version)
        .bind(t.updated_at.micros())
        .bind(t.pk.0)
        .bind(expected_version)
        .bind(e.seq)
        .bind(e.kind.as_str())
        .bind(e.actor_pk.map(|a| a.0))
        .bind(e.status.as_str())
        .bind(to_json(&e.data)?)
        .bind(e.created_at.micros())
        .bind(url)
        .bind(body)
        .bind(t.chain.as_ref().map(to_json).transpose()?)
        .bind(t.history_bytes)
        .bind(t.attempts)
        .bind(t.lease_seconds)
        .bind(t.lease_expires_at.map(|at| at.micros()))
        .fetch_one(conn)
        .await?;
    Ok(applied == 1)
}

/// The task with this id that `viewer` may see (its own first, then the newest).
pub(crate) async fn find_visible<'e>(
    ex: impl PgExecutor<'e>,
    team: TeamPk,
    task_id: &str,
    viewer: Option<AgentPk>,
) -> Result<Vec<TaskRecord>, StoreError> {
    // Without a viewer (a team key) every namesake counts. Ordered by an expression, so
    // that the planner searches the id's index rather than walk `tasks_by_team` in key
    // order (SQLite did, see its `find_visible_sql`).
    let viewer = viewer.map(|v| v.0);
    let sql = format!(
        "SELECT {TASK_COLUMNS} FROM tasks t
         WHERE t.team_pk = $1 AND t.task_id = $2
           AND ($3::BIGINT IS NULL OR t.originator_pk = $3
                OR EXISTS (SELECT 1 FROM task_assignees a
                           WHERE a.agent_pk = $3 AND a.task_pk = t.pk))
         ORDER BY t.pk + 0 LIMIT 16"
    );
    let rows = sqlx::query(AssertSqlSafe(sql))
        .bind(team.0)
        .bind(task_id)
        .bind(viewer)
        .fetch_all(ex)
        .await?;
    rows.iter().map(task).collect()
}

/// One page of the agent's tasks, newest first: each role an ordered walk of its own
/// index that stops after `limit` rows, both roles the union of the two walks.
pub(crate) async fn list<'e>(
    ex: impl PgExecutor<'e>,
    agent: AgentPk,
    spec: &TaskListSpec,
) -> Result<crate::model::Bounded<TaskRecord>, StoreError> {
    let mut q =
        QueryBuilder::<Postgres>::new(format!("SELECT {TASK_COLUMNS} FROM tasks WHERE pk IN ("));
    let originated = |q: &mut QueryBuilder<Postgres>| {
        q.push("SELECT pk FROM (SELECT pk FROM tasks WHERE originator_pk = ")
            .push_bind(agent.0);
        push_task_page(q, spec, "pk", "");
        q.push(" AS o");
    };
    let assigned = |q: &mut QueryBuilder<Postgres>| {
        q.push(
            "SELECT task_pk FROM (SELECT a.task_pk FROM task_assignees a \
             JOIN tasks x ON x.pk = a.task_pk WHERE a.agent_pk = ",
        )
        .push_bind(agent.0);
        push_task_page(q, spec, "a.task_pk", "x.");
        q.push(" AS s");
    };
    match spec.role {
        Some(TaskRole::Originated) => originated(&mut q),
        Some(TaskRole::Assigned) => assigned(&mut q),
        None => {
            q.push("(");
            originated(&mut q);
            q.push(") UNION (");
            assigned(&mut q);
            q.push(")");
        }
    }
    q.push(") ORDER BY pk DESC LIMIT ").push_bind(spec.limit);
    let rows = q.build().fetch(ex);
    crate::store::paging::bounded(rows, crate::store::columns::task_weight, task).await
}
