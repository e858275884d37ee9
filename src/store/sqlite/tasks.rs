//! Tasks, their history and who was ever assigned them.

use sqlx::{QueryBuilder, Sqlite, SqliteConnection, SqliteExecutor};
use switchboard_types::ids::{AgentPk, TeamPk};
use switchboard_types::tasks::TaskRole;

use super::rows::{Col, Query};
use crate::model::{TaskEventRecord, TaskListSpec, TaskRecord, TaskWrite};
use crate::store::StoreError;
use crate::store::columns::{TASK_COLUMNS as COLUMNS, task as from_row, to_json};
use crate::store::filters::push_task_page;

pub(crate) use crate::store::sql::tasks::sqlite::*;

/// Why the task statements below insert with `VALUES`, never `INSERT … SELECT`, into
/// the tables that have triggers (`task_events`, `callbacks`): SQLite runs an
/// `INSERT … SELECT` into a table with triggers through a temporary table, which it opens
/// (a b-tree, a pager and its page cache, allocated) and drops again every time the
/// statement runs, even for one row or none. Three of them per task change were about a
/// tenth of the write connection's thread under the `tasks` benchmark (`perf`:
/// `pcache1Truncate`, `malloc` and `free` under `sqlite3BtreeClose`). (A macro, not a
/// `const`, so that the variant with a callback can extend the text with `concat!`.)
macro_rules! insert_task_sql {
    () => {
        "
    INSERT INTO tasks (team_pk, task_id, description, data, originator_pk, assignee_pk,
                       callback_url, priority, required_capabilities, target_agent_id,
                       status, clarification_id, question, context, result_data,
                       callback_delivery, version, created_at, updated_at, originator_inbox,
                       chain, trace_id, trace, assignee_role)
    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, NULL, ?, ?, ?, ?, ?, ?, ?, ?);
    INSERT INTO task_assignees (task_pk, agent_pk)
    SELECT pk, assignee_pk FROM tasks
    WHERE team_pk = ? AND originator_pk = ? AND task_id = ? AND assignee_pk IS NOT NULL;
    INSERT INTO task_events (task_pk, seq, kind, actor_pk, status, data, created_at)
    VALUES ((SELECT pk FROM tasks WHERE team_pk = ? AND originator_pk = ? AND task_id = ?),
            ?, ?, ?, ?, ?, ?);"
    };
}

/// A new task, its assignee and its first event.
const INSERT_TASK: &str = insert_task_sql!();

/// [`INSERT_TASK`] and the first event's CallbackNotification.
const INSERT_TASK_AND_CALLBACK: &str = concat!(
    insert_task_sql!(),
    "
    INSERT INTO callbacks (task_pk, team_pk, url, event_seq, body, state, attempts,
                           next_attempt_at, created_at)
    VALUES ((SELECT pk FROM tasks WHERE team_pk = ? AND originator_pk = ? AND task_id = ?),
            ?, ?, ?, ?, 'pending', 0, ?, ?);"
);

/// Inserts a new task with its first event (and its assignee, if it has one), in one
/// round trip; [`StoreError::Conflict`] when the team already has a task with this id
/// (the first statement fails then, so nothing is written).
///
/// With `callback` (`url`, `body`), the CallbackNotification of the event is queued in
/// the same round trip.
pub(super) async fn insert(conn: &mut SqliteConnection, w: &TaskWrite) -> Result<(), StoreError> {
    let (t, event) = (&w.task, &w.event);
    let sql = match w.callback {
        Some(_) => INSERT_TASK_AND_CALLBACK,
        None => INSERT_TASK,
    };
    let mut query = bind_new_task(sqlx::query(sql), t)?;
    query = by_key(query, t);
    query = bind_event(by_key(query, t), event)?;
    if let Some((url, body)) = &w.callback {
        query = by_key(query, t)
            .bind(t.team_pk.0)
            .bind(url.as_str())
            .bind(event.seq)
            .bind(body.as_str())
            .bind(t.created_at.micros())
            .bind(t.created_at.micros());
    }
    query.execute(conn).await?;
    Ok(())
}

/// Binds a new task's columns in the order every task insert names them: `team_pk`,
/// `task_id`, `description`, `data`, `originator_pk`, `assignee_pk`, `callback_url`,
/// `priority`, `required_capabilities`, `target_agent_id`, `status`, `clarification_id`,
/// `question`, `context`, `result_data`, `version`, `created_at`, `updated_at`,
/// `originator_inbox`, `chain`, `trace_id`, `trace`, `assignee_role`
/// ([`NEW_TASK_COLUMNS`]; `callback_delivery` starts NULL, a new task is not claimed).
pub(super) fn bind_new_task<'q>(
    query: Query<'q>,
    t: &'q TaskRecord,
) -> Result<Query<'q>, StoreError> {
    Ok(new_task_columns(t)?
        .into_iter()
        .fold(query, |q, col| col.bind(q)))
}

/// How many columns [`bind_new_task`] binds.
pub(super) const NEW_TASK_COLUMNS: usize = 23;

/// A new task's columns in [`bind_new_task`]'s order, for either driver.
pub(super) fn new_task_columns(t: &TaskRecord) -> Result<[Col<'_>; NEW_TASK_COLUMNS], StoreError> {
    let (clarification_id, question) = match &t.clarification {
        Some((id, question)) => (Col::Text(id), Col::Text(question)),
        None => (Col::Null, Col::Null),
    };
    Ok([
        Col::Int(t.team_pk.0),
        Col::Text(&t.task_id),
        Col::Text(&t.description),
        Col::Owned(to_json(&t.data)?),
        Col::Int(t.originator_pk.0),
        Col::int(t.assignee_pk.map(|a| a.0)),
        Col::text(t.callback_url.as_deref()),
        Col::Text(t.priority.as_str()),
        Col::Owned(to_json(&t.required_capabilities)?),
        Col::text(t.target_agent_id.as_deref()),
        Col::Text(t.status.as_str()),
        clarification_id,
        question,
        Col::Owned(to_json(&t.context)?),
        Col::Owned(to_json(&t.result_data)?),
        Col::Int(t.version),
        Col::Int(t.created_at.micros()),
        Col::Int(t.updated_at.micros()),
        Col::Int(i64::from(t.originator_inbox)),
        match &t.chain {
            Some(chain) => Col::Owned(to_json(chain)?),
            None => Col::Null,
        },
        Col::text(t.trace.as_ref().map(|trace| trace.trace_id.as_str())),
        match &t.trace {
            Some(trace) => Col::Owned(to_json(trace)?),
            None => Col::Null,
        },
        Col::text(t.assignee_role.as_deref()),
    ])
}

/// Binds an event's columns after its task: `seq`, `kind`, `actor_pk`, `status`,
/// `data`, `created_at`.
pub(super) fn bind_event<'q>(
    query: Query<'q>,
    event: &'q TaskEventRecord,
) -> Result<Query<'q>, StoreError> {
    Ok(event_columns(event)?
        .into_iter()
        .fold(query, |q, col| col.bind(q)))
}

/// An event's columns in [`bind_event`]'s order, for either driver.
pub(super) fn event_columns(event: &TaskEventRecord) -> Result<[Col<'_>; 6], StoreError> {
    Ok([
        Col::Int(event.seq),
        Col::Text(event.kind.as_str()),
        Col::int(event.actor_pk.map(|a| a.0)),
        Col::Text(event.status.as_str()),
        Col::Owned(to_json(&event.data)?),
        Col::Int(event.created_at.micros()),
    ])
}

/// Binds the task's key (team, originator, id): how the statements after the first
/// find the row the first inserted.
fn by_key<'q>(query: Query<'q>, t: &'q TaskRecord) -> Query<'q> {
    query
        .bind(t.team_pk.0)
        .bind(t.originator_pk.0)
        .bind(t.task_id.as_str())
}

/// The head of [`update`]'s statements: the version-checked `UPDATE` and its event. Each
/// statement after the `UPDATE` writes only if the one before it did (`changes()` counts
/// the statement before; the assignee row is REPLACEd so it always counts one), so
/// nothing at all changes exactly when the version check failed. The event row is
/// inserted with `VALUES` (see [`insert_task_sql`]): `OR IGNORE` with a `task_pk` of NULL
/// when the `UPDATE` changed nothing skips it (the column is NOT NULL), and [`update`]
/// checks that an applied `UPDATE` wrote its event.
macro_rules! update_task_sql {
    () => {
        "
    UPDATE tasks SET assignee_pk = ?, status = ?, clarification_id = ?, question = ?,
                     context = ?, result_data = ?, version = ?, updated_at = ?,
                     chain = COALESCE(?, chain), history_bytes = ?, attempts = ?,
                     lease_seconds = ?, lease_expires_at = ?
    WHERE pk = ? AND version = ?;
    INSERT OR IGNORE INTO task_events (task_pk, seq, kind, actor_pk, status, data, created_at)
    VALUES (IIF(changes() = 1, ?, NULL), ?, ?, ?, ?, ?, ?);"
    };
}

/// The tail of [`update`]'s statements: a new assignee may read the task from now on.
macro_rules! record_assignee_sql {
    () => {
        "
    INSERT OR REPLACE INTO task_assignees (task_pk, agent_pk)
    SELECT ?, ? WHERE changes() = 1 AND ? IS NOT NULL;"
    };
}

/// A change without a CallbackNotification.
const UPDATE_TASK: &str = concat!(update_task_sql!(), record_assignee_sql!());

/// A change and its event's CallbackNotification (written only if the event was, and,
/// like it, with `VALUES`).
const UPDATE_TASK_AND_CALLBACK: &str = concat!(
    update_task_sql!(),
    "
    INSERT OR IGNORE INTO callbacks (task_pk, team_pk, url, event_seq, body, state,
                                     attempts, next_attempt_at, created_at)
    VALUES (IIF(changes() = 1, ?, NULL), ?, ?, ?, ?, 'pending', 0, ?, ?);",
    record_assignee_sql!()
);

/// Writes the task's changeable state and its new event (recording a new assignee as
/// one that may read the task) if its version is still `expected_version`, in one
/// round trip; `false` when someone changed it first (nothing is written then).
///
/// With `callback` (`url`, `body`), the event's CallbackNotification is queued in the
/// same round trip.
pub(super) async fn update(
    conn: &mut SqliteConnection,
    w: &TaskWrite,
    expected_version: i64,
) -> Result<bool, StoreError> {
    let (t, event) = (&w.task, &w.event);
    let (clarification_id, question) = t.clarification.clone().unzip();
    let sql = match w.callback {
        Some(_) => UPDATE_TASK_AND_CALLBACK,
        None => UPDATE_TASK,
    };
    let mut query = sqlx::query(sql)
        .bind(t.assignee_pk.map(|a| a.0))
        .bind(t.status.as_str())
        .bind(clarification_id.map(String::from))
        .bind(question)
        .bind(to_json(&t.context)?)
        .bind(to_json(&t.result_data)?)
        .bind(t.version)
        .bind(t.updated_at.micros())
        .bind(t.chain.as_ref().map(to_json).transpose()?)
        .bind(t.history_bytes)
        .bind(t.attempts)
        .bind(t.lease_seconds)
        .bind(t.lease_expires_at.map(|at| at.micros()))
        .bind(t.pk.0)
        .bind(expected_version)
        .bind(t.pk.0);
    query = bind_event(query, event)?;
    if let Some((url, body)) = &w.callback {
        query = query
            .bind(t.pk.0)
            .bind(t.team_pk.0)
            .bind(url.as_str())
            .bind(event.seq)
            .bind(body.as_str())
            .bind(t.updated_at.micros())
            .bind(t.updated_at.micros());
    }
    let done = query
        .bind(t.pk.0)
        .bind(t.assignee_pk.map(|a| a.0))
        .bind(t.assignee_pk.map(|a| a.0))
        .execute(conn)
        .await?;
    // The UPDATE, the event, the CallbackNotification if any, the assignee if any.
    let applied = 2 + u64::from(w.callback.is_some()) + u64::from(t.assignee_pk.is_some());
    match done.rows_affected() {
        0 => Ok(false),
        n if n == applied => Ok(true),
        n => Err(StoreError::Corrupt(format!(
            "task {} changed with {n} of its {applied} rows: its event was not written",
            t.task_id
        ))),
    }
}

/// The task with this id that `viewer` may see: one it originated or is or was assigned.
/// Ids are unique per originator, so an agent may see two tasks with one id (its own
/// and one it was assigned): its own comes first, then the newest.
pub(crate) async fn find_visible<'e, E: SqliteExecutor<'e>>(
    ex: E,
    team: TeamPk,
    task_id: &str,
    viewer: Option<AgentPk>,
) -> Result<Vec<TaskRecord>, StoreError> {
    // Built from constants only. Without a viewer (a team key) every namesake counts.
    let viewer = viewer.map(|v| v.0);
    let rows = sqlx::query(sqlx::AssertSqlSafe(find_visible_sql("")))
        .bind(team.0)
        .bind(task_id)
        .bind(viewer)
        .bind(viewer)
        .bind(viewer)
        .fetch_all(ex)
        .await?;
    rows.iter().map(from_row).collect()
}

/// The lookup of [`find_visible`], after `prefix` (`EXPLAIN QUERY PLAN ` in a test). The
/// order is `+t.pk`, an expression: ordered by the column, SQLite walked `tasks_by_team`
/// (which is in `pk` order) through every task of the team instead of searching the one
/// id in the unique index — the `tasks` benchmark fell from 2,760 to 656 tasks/s.
fn find_visible_sql(prefix: &str) -> String {
    format!(
        "{prefix}SELECT {COLUMNS} FROM tasks t
         WHERE t.team_pk = ? AND t.task_id = ?
           AND (? IS NULL OR t.originator_pk = ?
                OR EXISTS (SELECT 1 FROM task_assignees a
                           WHERE a.agent_pk = ? AND a.task_pk = t.pk))
         ORDER BY +t.pk LIMIT {VISIBLE_NAMESAKES}"
    )
}

/// Most tasks of one id a viewer is told about when the id alone is ambiguous.
const VISIBLE_NAMESAKES: usize = 16;

/// One page of the agent's tasks, newest first, before the task `before` (a pk).
///
/// Each role is an ordered walk of its own index (`tasks_by_originator`, and the
/// assignees' primary key `(agent_pk, task_pk)`) that stops after `limit` rows; both
/// roles are the union of the two walks. Written as one `OR`, SQLite fetched and sorted
/// every task the agent ever originated or was assigned, on every page.
pub(crate) async fn list<'e, E: SqliteExecutor<'e>>(
    ex: E,
    agent: AgentPk,
    spec: &TaskListSpec,
) -> Result<crate::model::Bounded<TaskRecord>, StoreError> {
    let mut query = list_query("", agent, spec);
    let rows = query.build().fetch(ex);
    crate::store::paging::bounded(rows, crate::store::columns::task_weight, from_row).await
}

/// The query of [`list`], after `prefix` (`EXPLAIN QUERY PLAN ` in a test).
fn list_query(prefix: &str, agent: AgentPk, spec: &TaskListSpec) -> QueryBuilder<Sqlite> {
    let mut q =
        QueryBuilder::<Sqlite>::new(format!("{prefix}SELECT {COLUMNS} FROM tasks WHERE pk IN ("));
    let originated = |q: &mut QueryBuilder<Sqlite>| {
        q.push("SELECT pk FROM (SELECT pk FROM tasks WHERE originator_pk = ")
            .push_bind(agent.0);
        push_task_page(q, spec, "pk", "");
    };
    let assigned = |q: &mut QueryBuilder<Sqlite>| {
        q.push(
            "SELECT task_pk FROM (SELECT a.task_pk FROM task_assignees a \
             CROSS JOIN tasks x ON x.pk = a.task_pk WHERE a.agent_pk = ",
        )
        .push_bind(agent.0);
        push_task_page(q, spec, "a.task_pk", "x.");
    };
    match spec.role {
        Some(TaskRole::Originated) => originated(&mut q),
        Some(TaskRole::Assigned) => assigned(&mut q),
        None => {
            originated(&mut q);
            q.push(" UNION ");
            assigned(&mut q);
        }
    }
    q.push(") ORDER BY pk DESC LIMIT ").push_bind(spec.limit);
    q
}

#[cfg(test)]
mod tests {
    use sqlx::{Row, SqliteConnection};
    use switchboard_types::ids::{AgentId, AgentPk, TaskPk, TeamPk};
    use switchboard_types::task_state::TaskStatus;
    use switchboard_types::tasks::{TaskEventKind, TaskRole};
    use switchboard_types::time::Timestamp;

    use crate::model::{TaskEventRecord, TaskListSpec, TaskRecord, TaskWrite};

    /// A change of task 1 to `version`, by the task's originator, perhaps to a new
    /// assignee and with a CallbackNotification.
    fn change(version: i64, assignee: Option<i64>, callback: bool) -> TaskWrite {
        let now = Timestamp::now();
        TaskWrite {
            task: TaskRecord {
                pk: TaskPk(1),
                team_pk: TeamPk(1),
                task_id: "t".into(),
                description: "d".into(),
                data: Default::default(),
                originator_pk: AgentPk(1),
                assignee_pk: assignee.map(AgentPk),
                callback_url: None,
                priority: Default::default(),
                required_capabilities: Vec::new(),
                target_agent_id: None,
                status: TaskStatus::InProgress,
                originator_inbox: true,
                clarification: None,
                context: Vec::new(),
                result_data: serde_json::Value::Null,
                callback_delivery: None,
                version,
                created_at: now,
                updated_at: now,
                chain: None,
                trace: None,
                history_bytes: 0,
                assignee_role: None,
                attempts: 0,
                lease_seconds: None,
                lease_expires_at: None,
            },
            expected_version: (version > 1).then_some(version - 1),
            event: TaskEventRecord {
                seq: version,
                kind: TaskEventKind::Progress,
                actor_pk: Some(AgentPk(1)),
                status: TaskStatus::InProgress,
                data: Default::default(),
                created_at: now,
            },
            callback: callback.then(|| ("http://hook".to_owned(), "{}".to_owned())),
            charges: Vec::new(),
        }
    }

    /// Rows of the task's history, assignees and callbacks, and its version.
    async fn written(conn: &mut SqliteConnection) -> [i64; 4] {
        let row = sqlx::query(
            "SELECT (SELECT COUNT(*) FROM task_events), (SELECT COUNT(*) FROM task_assignees),
                    (SELECT COUNT(*) FROM callbacks), (SELECT version FROM tasks WHERE pk = 1)",
        )
        .fetch_one(conn)
        .await
        .expect("counts");
        [row.get(0), row.get(1), row.get(2), row.get(3)]
    }

    /// The event and the callback are written with `VALUES` and `OR IGNORE`: an applied
    /// change writes every row it carries, a stale one (its version taken) writes none.
    #[tokio::test]
    async fn a_task_change_writes_all_of_its_rows_or_none() {
        let mut conn = super::super::memory_database().await;
        // No team or agent rows: the keys are what is under test, not the references.
        sqlx::raw_sql("PRAGMA foreign_keys = OFF")
            .execute(&mut conn)
            .await
            .expect("pragma");
        super::insert(&mut conn, &change(1, Some(2), true))
            .await
            .expect("insert");
        assert_eq!(written(&mut conn).await, [1, 1, 1, 1]);
        let steps = [
            // (change, expected_version's outcome, rows after it)
            (change(2, Some(3), true), true, [2, 2, 2, 2]),
            (change(2, Some(4), true), false, [2, 2, 2, 2]),
            (change(3, None, false), true, [3, 2, 2, 3]),
            (change(3, None, true), false, [3, 2, 2, 3]),
            (change(4, Some(3), false), true, [4, 2, 2, 4]),
            (change(4, Some(5), false), false, [4, 2, 2, 4]),
        ];
        for (i, (write, applied, rows)) in steps.into_iter().enumerate() {
            let version = write.expected_version.expect("a change");
            let outcome = super::update(&mut conn, &write, version)
                .await
                .expect("update");
            assert_eq!(outcome, applied, "step {i}");
            assert_eq!(written(&mut conn).await, rows, "step {i}");
        }
    }

    /// A task is found by its id in the unique index, for an agent and for a team key,
    /// not by walking the team's tasks in key order.
    #[tokio::test]
    async fn a_task_is_looked_up_by_its_id() {
        let mut conn = super::super::memory_database().await;
        let rows = sqlx::query(sqlx::AssertSqlSafe(super::find_visible_sql(
            "EXPLAIN QUERY PLAN ",
        )))
        .bind(1_i64)
        .bind("t1")
        .bind(None::<i64>)
        .bind(None::<i64>)
        .bind(None::<i64>)
        .fetch_all(&mut conn)
        .await
        .expect("explain");
        let plan: Vec<String> = rows.iter().map(|r| r.get("detail")).collect();
        let plan = plan.join("\n");
        assert!(plan.contains("task_id=?"), "{plan}");
        assert!(!plan.contains("tasks_by_team"), "{plan}");
    }

    /// Every role and filter walks its index in order and stops at the limit: no plan
    /// sorts the agent's tasks or gathers them with a multi-index OR.
    #[tokio::test]
    async fn a_page_of_tasks_never_sorts_all_of_them() {
        let mut conn = super::super::memory_database().await;
        for role in [None, Some(TaskRole::Originated), Some(TaskRole::Assigned)] {
            for (statuses, target, assignee_role) in [
                (vec![], None, None),
                (vec![TaskStatus::Success], None, None),
                (vec![], Some(AgentId::from("coder")), None),
                (vec![], None, Some("coder".to_owned())),
            ] {
                let spec = TaskListSpec {
                    role,
                    statuses,
                    before: Some(TaskPk(100)),
                    target,
                    assignee_role,
                    limit: 21,
                };
                let rows = super::list_query("EXPLAIN QUERY PLAN ", AgentPk(1), &spec)
                    .build()
                    .fetch_all(&mut conn)
                    .await
                    .expect("explain");
                let plan: Vec<String> = rows.iter().map(|r| r.get("detail")).collect();
                let plan = plan.join("\n");
                assert!(
                    !plan.contains("TEMP B-TREE FOR ORDER BY"),
                    "{role:?}: {plan}"
                );
                assert!(!plan.contains("MULTI-INDEX OR"), "{role:?}: {plan}");
            }
        }
    }
}
