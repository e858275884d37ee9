//! Inbox queries: one agent's entries, filtered and paged, and a team's counts.

use std::collections::HashMap;

use sqlx::{QueryBuilder, Row, Sqlite, SqliteExecutor};
use switchboard_types::ids::{AgentPk, TeamPk};
use switchboard_types::messages::SortOrder;
use switchboard_types::time::Timestamp;

use super::rows::{MESSAGE_COLUMNS, message_from_row};
use crate::store::StoreError;
use crate::store::records::{
    Counts, InboxCounts, InboxEntry, InboxFilter, InboxItem, InboxPageSpec, ResponseLatency,
};

/// Appends the filter's conditions (on `inbox i`, and `messages m` for the thread).
fn push_filter(q: &mut QueryBuilder<Sqlite>, agent: AgentPk, f: &InboxFilter) {
    q.push(" WHERE i.agent_pk = ").push_bind(agent.0);
    fn push_in<T: ToString>(q: &mut QueryBuilder<Sqlite>, column: &str, values: &[T]) {
        if values.is_empty() {
            // An empty allow-list matches nothing.
            q.push(" AND 0");
            return;
        }
        q.push(format_args!(" AND {column} IN ("));
        let mut list = q.separated(", ");
        for v in values {
            list.push_bind(v.to_string());
        }
        q.push(")");
    }
    if let Some(types) = &f.message_types {
        let names: Vec<&str> = types.iter().map(|t| t.as_str()).collect();
        push_in(q, "i.message_type", &names);
    }
    if let Some(kinds) = &f.kinds {
        let names: Vec<&str> = kinds.iter().map(|k| k.as_str()).collect();
        push_in(q, "i.kind", &names);
    }
    if let Some(senders) = &f.sender_pks {
        if senders.is_empty() {
            q.push(" AND 0");
        } else {
            q.push(" AND i.sender_pk IN (");
            let mut list = q.separated(", ");
            for pk in senders {
                list.push_bind(pk.0);
            }
            q.push(")");
        }
    }
    if let Some(priority) = f.priority {
        q.push(" AND i.priority = ").push_bind(priority.as_str());
    }
    if f.unread_only {
        q.push(" AND i.read_at IS NULL");
    }
    if let Some(since) = f.since {
        q.push(" AND i.created_at > ").push_bind(since.micros());
    }
    if let Some(thread) = &f.thread_id {
        q.push(" AND m.thread_id = ").push_bind(thread.clone());
    }
}

/// Most entries a filtered count looks at: past it, counting would cost as much as the
/// inbox is large, so the newest this many are counted and the answer says it is a
/// lower bound.
pub const COUNT_WINDOW: i64 = 10_000;

/// How many entries match (ignoring paging) and how many of those are unread.
///
/// The whole inbox, or only its unread part, is counted by the counters the triggers
/// keep (one row). Any other filter is counted over the inbox if it holds at most
/// [`COUNT_WINDOW`] entries, else over its newest [`COUNT_WINDOW`] (`exact: false`).
pub(super) async fn count_inbox<'e, E: SqliteExecutor<'e> + Copy>(
    ex: E,
    agent: AgentPk,
    f: &InboxFilter,
) -> Result<InboxCounts, StoreError> {
    let kept = sqlx::query("SELECT total, unread FROM inbox_counts WHERE agent_pk = ?")
        .bind(agent.0)
        .fetch_optional(ex)
        .await?;
    let (total, unread): (i64, i64) = match &kept {
        Some(row) => (row.try_get(0)?, row.try_get(1)?),
        None => (0, 0),
    };
    if f.is_everything() {
        return Ok(InboxCounts {
            total: if f.unread_only { unread } else { total },
            unread,
            exact: true,
        });
    }
    let mut q = QueryBuilder::<Sqlite>::new(
        "SELECT COUNT(*), COALESCE(SUM(i.read_at IS NULL), 0) FROM inbox i",
    );
    if f.thread_id.is_some() {
        q.push(" JOIN messages m ON m.pk = i.message_pk");
    }
    push_filter(&mut q, agent, f);
    let exact = total <= COUNT_WINDOW;
    if !exact {
        q.push(" AND i.seq > (SELECT MAX(seq) FROM inbox WHERE agent_pk = ")
            .push_bind(agent.0)
            .push(") - ")
            .push_bind(COUNT_WINDOW);
    }
    let row = q.build().fetch_one(ex).await?;
    Ok(InboxCounts {
        total: row.try_get(0)?,
        unread: row.try_get(1)?,
        exact,
    })
}

/// One page of the inbox, after the cursor `after` (a sequence number) in `order`.
pub(super) async fn list_inbox<'e, E: SqliteExecutor<'e>>(
    ex: E,
    agent: AgentPk,
    f: &InboxFilter,
    page: InboxPageSpec,
) -> Result<Vec<InboxItem>, StoreError> {
    let InboxPageSpec {
        order,
        after,
        limit,
    } = page;
    let mut q = QueryBuilder::<Sqlite>::new(format!(
        "SELECT {MESSAGE_COLUMNS}, i.seq, i.read_at FROM inbox i JOIN messages m ON m.pk = i.message_pk"
    ));
    push_filter(&mut q, agent, f);
    match (order, after) {
        (SortOrder::NewestFirst, Some(seq)) => {
            q.push(" AND i.seq < ").push_bind(seq);
        }
        (SortOrder::OldestFirst, Some(seq)) => {
            q.push(" AND i.seq > ").push_bind(seq);
        }
        _ => {}
    }
    q.push(match order {
        SortOrder::NewestFirst => " ORDER BY i.seq DESC",
        SortOrder::OldestFirst => " ORDER BY i.seq ASC",
    });
    q.push(" LIMIT ").push_bind(limit);
    let rows = q.build().fetch_all(ex).await?;
    rows.iter()
        .map(|row| {
            Ok(InboxItem {
                entry: InboxEntry {
                    seq: row.try_get("seq")?,
                    read_at: row
                        .try_get::<Option<i64>, _>("read_at")?
                        .map(Timestamp::from_micros),
                },
                message: message_from_row(row)?,
            })
        })
        .collect()
}

/// Sent, received and unread counts of every agent of a team, by agent pk.
pub(super) async fn team_counts<'e, E: SqliteExecutor<'e> + Copy>(
    ex: E,
    team: TeamPk,
) -> Result<HashMap<AgentPk, Counts>, StoreError> {
    let mut counts: HashMap<AgentPk, Counts> = HashMap::new();
    let sent = sqlx::query(
        "SELECT sender_pk, COUNT(*) FROM messages WHERE team_pk = ? GROUP BY sender_pk",
    )
    .bind(team.0)
    .fetch_all(ex)
    .await?;
    for row in sent {
        counts.entry(AgentPk(row.try_get(0)?)).or_default().sent = row.try_get(1)?;
    }
    let received = sqlx::query(
        "SELECT c.agent_pk, c.total, c.unread
         FROM inbox_counts c JOIN agents a ON a.pk = c.agent_pk
         WHERE a.team_pk = ?",
    )
    .bind(team.0)
    .fetch_all(ex)
    .await?;
    for row in received {
        let c = counts.entry(AgentPk(row.try_get(0)?)).or_default();
        c.received = row.try_get(1)?;
        c.unread = row.try_get(2)?;
    }
    Ok(counts)
}

/// `(responder pk, microseconds from original to response)` for every response in a team.
pub(super) async fn response_latencies<'e, E: SqliteExecutor<'e>>(
    ex: E,
    team: TeamPk,
) -> Result<Vec<ResponseLatency>, StoreError> {
    let rows = sqlx::query(
        "SELECT r.responder_pk, r.created_at - o.created_at
         FROM responses r JOIN messages o ON o.pk = r.original_pk
         WHERE o.team_pk = ?",
    )
    .bind(team.0)
    .fetch_all(ex)
    .await?;
    rows.iter()
        .map(|r| {
            Ok(ResponseLatency {
                responder: AgentPk(r.try_get(0)?),
                micros: r.try_get(1)?,
            })
        })
        .collect()
}

/// The agent's newest sequence number (0 for an empty inbox).
pub(super) async fn newest_seq<'e, E: SqliteExecutor<'e>>(
    ex: E,
    agent: AgentPk,
) -> Result<i64, StoreError> {
    Ok(
        sqlx::query_scalar("SELECT COALESCE(MAX(seq), 0) FROM inbox WHERE agent_pk = ?")
            .bind(agent.0)
            .fetch_one(ex)
            .await?,
    )
}
