//! The filters of an inbox read and a task page, written once over the few query pieces
//! whose SQL differs between the engines ([`Dialect`]).
//!
//! What differs is small and named here: how a column is tested against a list (SQLite
//! `IN (?, ?, …)`, PostgreSQL `= ANY($1)` with one array), how a text is tested for a
//! prefix (`substr` against `left`), and how a boolean column reads as a condition. The
//! conditions themselves — which filter adds which test on which column — are one list.

use sqlx::{Database, Encode, Postgres, QueryBuilder, Sqlite, Type};
use switchboard_types::ids::{AgentPk, TeamPk};

use crate::model::{InboxFilter, TaskListSpec, TrafficSpec};
use crate::store::columns::{MESSAGE_COLUMNS, TASK_COLUMNS};
use crate::store::paging::{COUNT_WINDOW, Ends};

/// The pieces of a filter whose SQL is the engine's own.
pub(crate) trait Dialect: Database
where
    i64: for<'t> Encode<'t, Self> + Type<Self>,
    String: for<'t> Encode<'t, Self> + Type<Self>,
{
    /// `AND column` is one of `values`; an empty list matches nothing.
    fn push_any_text(q: &mut QueryBuilder<Self>, column: &str, values: Vec<String>);
    /// `AND column` is one of `values`; an empty list matches nothing.
    fn push_any_int(q: &mut QueryBuilder<Self>, column: &str, values: Vec<i64>);
    /// `AND column` begins with `prefix`, compared byte for byte: not `LIKE`, which gives
    /// `%` and `_` meaning (and on SQLite ignores case).
    fn push_starts_with(q: &mut QueryBuilder<Self>, column: &str, prefix: &str);
    /// `AND column` holds true (a boolean column: SQLite stores 0 or 1).
    fn push_true(q: &mut QueryBuilder<Self>, column: &str);
    /// How many of the rows counted are unread (`i.read_at IS NULL`), 0 over none.
    const UNREAD_COUNT: &'static str;
    /// What makes the planner read a thread's entries from the thread index (SQLite
    /// needs telling; PostgreSQL's planner finds it).
    const BY_THREAD: &'static str;
}

impl Dialect for Sqlite {
    const UNREAD_COUNT: &'static str = "COALESCE(SUM(i.read_at IS NULL), 0)";
    const BY_THREAD: &'static str = " INDEXED BY inbox_by_thread";

    fn push_any_text(q: &mut QueryBuilder<Self>, column: &str, values: Vec<String>) {
        sqlite_in(q, column, values);
    }

    fn push_any_int(q: &mut QueryBuilder<Self>, column: &str, values: Vec<i64>) {
        sqlite_in(q, column, values);
    }

    fn push_starts_with(q: &mut QueryBuilder<Self>, column: &str, prefix: &str) {
        q.push(format_args!(" AND substr({column}, 1, "))
            .push_bind(prefix.chars().count() as i64)
            .push(") = ")
            .push_bind(prefix.to_owned());
    }

    fn push_true(q: &mut QueryBuilder<Self>, column: &str) {
        q.push(format_args!(" AND {column} = 1"));
    }
}

/// `AND column IN (?, ?, …)`: SQLite binds no arrays. An empty list matches nothing.
fn sqlite_in<T>(q: &mut QueryBuilder<Sqlite>, column: &str, values: Vec<T>)
where
    T: for<'t> Encode<'t, Sqlite> + Type<Sqlite>,
{
    if values.is_empty() {
        q.push(" AND 0");
        return;
    }
    q.push(format_args!(" AND {column} IN ("));
    let mut list = q.separated(", ");
    for v in values {
        list.push_bind(v);
    }
    q.push(")");
}

impl Dialect for Postgres {
    const UNREAD_COUNT: &'static str = "COUNT(*) FILTER (WHERE i.read_at IS NULL)";
    const BY_THREAD: &'static str = "";

    fn push_any_text(q: &mut QueryBuilder<Self>, column: &str, values: Vec<String>) {
        // `= ANY` of an empty array matches nothing, as the contract wants.
        q.push(format_args!(" AND {column} = ANY("))
            .push_bind(values)
            .push(")");
    }

    fn push_any_int(q: &mut QueryBuilder<Self>, column: &str, values: Vec<i64>) {
        q.push(format_args!(" AND {column} = ANY("))
            .push_bind(values)
            .push(")");
    }

    fn push_starts_with(q: &mut QueryBuilder<Self>, column: &str, prefix: &str) {
        q.push(format_args!(" AND left({column}, "))
            .push_bind(i32::try_from(prefix.chars().count()).unwrap_or(i32::MAX))
            .push(") = ")
            .push_bind(prefix.to_owned());
    }

    fn push_true(q: &mut QueryBuilder<Self>, column: &str) {
        q.push(format_args!(" AND {column}"));
    }
}

/// Appends `WHERE` and the filter's conditions on `inbox i` for `agent`'s entries.
pub(crate) fn push_inbox_filter<DB: Dialect>(
    q: &mut QueryBuilder<DB>,
    agent: AgentPk,
    f: &InboxFilter,
) where
    i64: for<'t> Encode<'t, DB> + Type<DB>,
    String: for<'t> Encode<'t, DB> + Type<DB>,
{
    q.push(" WHERE i.agent_pk = ").push_bind(agent.0);
    if let Some(types) = &f.message_types {
        let names = types.iter().map(|t| t.as_str().to_owned()).collect();
        DB::push_any_text(q, "i.message_type", names);
    }
    if let Some(kinds) = &f.kinds {
        let names = kinds.iter().map(|k| k.as_str().to_owned()).collect();
        DB::push_any_text(q, "i.kind", names);
    }
    if let Some(senders) = &f.sender_pks {
        DB::push_any_int(q, "i.sender_pk", senders.iter().map(|a| a.0).collect());
    }
    if let Some(priority) = f.priority {
        q.push(" AND i.priority = ")
            .push_bind(priority.as_str().to_owned());
    }
    if f.unread_only {
        q.push(" AND i.read_at IS NULL");
    }
    if let Some(since) = f.since {
        q.push(" AND i.created_at > ").push_bind(since.micros());
    }
    if let Some(thread) = &f.thread_id {
        q.push(" AND i.thread_id = ").push_bind(thread.clone());
    }
    if f.news_only {
        DB::push_true(q, "i.news");
    }
    match f.cause_by.as_deref().map(|c| (c, c.strip_suffix('*'))) {
        None => {}
        Some((_, Some(prefix))) => DB::push_starts_with(q, "i.cause_by", prefix),
        Some((tag, None)) => {
            q.push(" AND i.cause_by = ").push_bind(tag.to_owned());
        }
    }
}

/// One thread (or its unread part) counted over its newest [`COUNT_WINDOW`] entries:
/// `SELECT total, unread`; the count is exact when `total` stays under the window.
pub(crate) fn count_thread_query<DB: Dialect>(agent: AgentPk, f: &InboxFilter) -> QueryBuilder<DB>
where
    i64: for<'t> Encode<'t, DB> + Type<DB>,
    String: for<'t> Encode<'t, DB> + Type<DB>,
{
    let mut q = QueryBuilder::<DB>::new(format!(
        "SELECT COUNT(*), {} FROM (SELECT i.read_at FROM inbox i{}",
        DB::UNREAD_COUNT,
        DB::BY_THREAD
    ));
    push_inbox_filter(&mut q, agent, f);
    q.push(" ORDER BY i.seq DESC LIMIT ")
        .push_bind(COUNT_WINDOW)
        .push(") i");
    q
}

/// Any other filter counted over the whole inbox while it is small, else over its newest
/// [`COUNT_WINDOW`] sequence numbers: `SELECT total, unread`, and whether that is exact.
pub(crate) fn count_filtered_query<DB: Dialect>(
    agent: AgentPk,
    f: &InboxFilter,
    ends: &Ends,
) -> (QueryBuilder<DB>, bool)
where
    i64: for<'t> Encode<'t, DB> + Type<DB>,
    String: for<'t> Encode<'t, DB> + Type<DB>,
{
    let mut q = QueryBuilder::<DB>::new(format!(
        "SELECT COUNT(*), {} FROM inbox i",
        DB::UNREAD_COUNT
    ));
    push_inbox_filter(&mut q, agent, f);
    let exact = ends.total <= COUNT_WINDOW;
    if !exact {
        q.push(" AND i.seq BETWEEN ")
            .push_bind(ends.newest - COUNT_WINDOW + 1)
            .push(" AND ")
            .push_bind(ends.newest);
    }
    (q, exact)
}

/// Appends a task page's conditions, order and limit, closing the parenthesis the caller
/// opened: `pk` is the column pages are cut on, `tasks` what the query puts before the
/// task's columns (`x.`, or nothing).
pub(crate) fn push_task_page<DB: Dialect>(
    q: &mut QueryBuilder<DB>,
    spec: &TaskListSpec,
    pk: &str,
    tasks: &str,
) where
    i64: for<'t> Encode<'t, DB> + Type<DB>,
    String: for<'t> Encode<'t, DB> + Type<DB>,
{
    if let Some(agent_id) = &spec.target {
        q.push(format_args!(" AND {tasks}target_agent_id = "))
            .push_bind(agent_id.to_string());
    }
    if let Some(role) = &spec.assignee_role {
        q.push(format_args!(" AND {tasks}assignee_role = "))
            .push_bind(role.clone());
    }
    if !spec.statuses.is_empty() {
        let names = spec
            .statuses
            .iter()
            .map(|s| s.as_str().to_owned())
            .collect();
        DB::push_any_text(q, &format!("{tasks}status"), names);
    }
    if let Some(before) = spec.before {
        q.push(format_args!(" AND {pk} < ")).push_bind(before.0);
    }
    q.push(format_args!(" ORDER BY {pk} DESC LIMIT "))
        .push_bind(spec.limit)
        .push(")");
}

/// One page of a team's tasks, newest first (the operator's board): a walk of
/// `tasks_by_team` that stops after `limit` rows.
pub(crate) fn team_tasks_query<DB: Dialect>(team: TeamPk, spec: &TaskListSpec) -> QueryBuilder<DB>
where
    i64: for<'t> Encode<'t, DB> + Type<DB>,
    String: for<'t> Encode<'t, DB> + Type<DB>,
{
    let mut q = QueryBuilder::new(format!(
        "SELECT {TASK_COLUMNS} FROM tasks WHERE pk IN \
         (SELECT pk FROM (SELECT pk FROM tasks WHERE team_pk = "
    ));
    q.push_bind(team.0);
    push_task_page(&mut q, spec, "pk", "");
    q.push(" AS page) ORDER BY pk DESC LIMIT ")
        .push_bind(spec.limit);
    q
}

/// One page of a team's messages in the order of their keys, with their recipients (the
/// operator's timeline): after `spec.after`, oldest first; without it the newest, newest
/// first. A walk of `messages_by_team`.
pub(crate) fn traffic_query<DB: Dialect>(team: TeamPk, spec: TrafficSpec) -> QueryBuilder<DB>
where
    i64: for<'t> Encode<'t, DB> + Type<DB>,
    String: for<'t> Encode<'t, DB> + Type<DB>,
{
    let mut q = QueryBuilder::new(format!(
        "SELECT {MESSAGE_COLUMNS}, m.recipient_ids FROM messages m WHERE m.team_pk = "
    ));
    q.push_bind(team.0);
    match spec.after {
        Some(after) => q
            .push(" AND m.pk > ")
            .push_bind(after)
            .push(" ORDER BY m.pk LIMIT "),
        None => q.push(" ORDER BY m.pk DESC LIMIT "),
    };
    q.push_bind(spec.limit);
    q
}

/// The messages of a trace, oldest first, with their recipients: those that joined it
/// (`messages_by_trace`), and the one that started it when it is a message of this team
/// (its id is `msg_<trace id>`, and it stored no trace of its own).
pub(crate) fn trace_query<DB: Dialect>(
    team: TeamPk,
    trace_id: String,
    limit: i64,
) -> QueryBuilder<DB>
where
    i64: for<'t> Encode<'t, DB> + Type<DB>,
    String: for<'t> Encode<'t, DB> + Type<DB>,
{
    let select = format!("SELECT {MESSAGE_COLUMNS}, m.recipient_ids FROM messages m");
    trace_rows(&select, ("m", "message_id", "msg"), team, trace_id, limit)
}

/// The tasks of a trace in the order they were submitted: as [`trace_query`], those that
/// joined it (`tasks_by_trace`) and the one that started it (`task_<trace id>`).
pub(crate) fn trace_tasks_query<DB: Dialect>(
    team: TeamPk,
    trace_id: String,
    limit: i64,
) -> QueryBuilder<DB>
where
    i64: for<'t> Encode<'t, DB> + Type<DB>,
    String: for<'t> Encode<'t, DB> + Type<DB>,
{
    let select = format!("SELECT {TASK_COLUMNS} FROM tasks t");
    trace_rows(&select, ("t", "task_id", "task"), team, trace_id, limit)
}

/// `select`'s rows (aliased `alias`) of a trace, in key order: those that joined it
/// (their `trace_id`), then the one that started it (its `id_column` is
/// `<prefix>_<trace id>` and it stores no trace).
fn trace_rows<DB: Dialect>(
    select: &str,
    (alias, id_column, prefix): (&str, &str, &str),
    team: TeamPk,
    trace_id: String,
    limit: i64,
) -> QueryBuilder<DB>
where
    i64: for<'t> Encode<'t, DB> + Type<DB>,
    String: for<'t> Encode<'t, DB> + Type<DB>,
{
    let root = format!("{prefix}_{trace_id}");
    let mut q = QueryBuilder::new(format!("{select} WHERE {alias}.team_pk = "));
    q.push_bind(team.0)
        .push(format!(" AND {alias}.trace_id = "))
        .push_bind(trace_id)
        .push(format!(" UNION ALL {select} WHERE {alias}.team_pk = "))
        .push_bind(team.0)
        .push(format!(" AND {alias}.{id_column} = "))
        .push_bind(root)
        .push(format!(" AND {alias}.trace IS NULL ORDER BY 1 LIMIT "))
        .push_bind(limit);
    q
}
