//! Inbox queries, the same on both engines: one agent's entries, filtered and paged
//! (the reads the shared strategy in `store::paging` runs), and a team's counts. The
//! kept counters answer the whole inbox, a thread is counted over its newest
//! [`COUNT_WINDOW`] entries, and any other filter is counted and paged within windows of
//! sequence numbers, so no request costs as much as the inbox is large. SQLite is told
//! the index where its planner chose worse (`INDEXED BY`, the dialect's constants).

use crate::store::paging::PageBytes;
use futures_util::TryStreamExt;
use std::collections::HashMap;

use sqlx::{QueryBuilder, Row};
use switchboard_types::ids::{AgentPk, TeamPk};
use switchboard_types::messages::SortOrder;

use crate::model::{
    ActivityCounts, Counts, InboxCounts, InboxEntry, InboxFilter, InboxItem, InboxPageSpec,
    InboxSlice, ResponseLatency,
};
use crate::store::StoreError;
use crate::store::columns::{Columns, MESSAGE_COLUMNS, message};
use crate::store::filters::{count_filtered_query, count_thread_query, push_inbox_filter};
use crate::store::paging::{COUNT_WINDOW, Ends, InboxReads, LATENCY_WINDOW, Window};

for_each_engine! {
    /// The reads the shared inbox strategy (`store::paging`) runs, in this engine's SQL.
    impl InboxReads for Conn {
        async fn ends(&mut self, agent: AgentPk, with_seqs: bool) -> Result<Ends, StoreError> {
            let conn = self;
            // One row whether or not the counters exist (LEFT JOIN). MIN and MAX as separate
            // subqueries: SQLite finds a lone MIN or MAX at the end of the index, but walks
            // every entry for both in one SELECT.
            let sql = if with_seqs {
                "SELECT c.total, c.unread, c.quiet_total, c.quiet_unread,
                        (SELECT MIN(seq) FROM inbox WHERE agent_pk = $1),
                        (SELECT MAX(seq) FROM inbox WHERE agent_pk = $1)
                 FROM (SELECT 1) AS one LEFT JOIN inbox_counts c ON c.agent_pk = $1"
            } else {
                "SELECT c.total, c.unread, c.quiet_total, c.quiet_unread,
                        CAST(0 AS BIGINT), CAST(0 AS BIGINT)
                 FROM (SELECT 1) AS one LEFT JOIN inbox_counts c ON c.agent_pk = $1"
            };
            let row = sqlx::query::<Db>(sql)
                .bind(agent.0)
                .fetch_one(&mut *conn)
                .await?;
            let at = |i: usize| -> Result<i64, StoreError> { Ok(row.opt_int(i)?.unwrap_or(0)) };
            Ok(Ends {
                total: at(0)?,
                unread: at(1)?,
                quiet_total: at(2)?,
                quiet_unread: at(3)?,
                oldest: at(4)?,
                newest: at(5)?,
            })
        }

        /// One thread (or its unread part), over its newest [`COUNT_WINDOW`] entries.
        async fn count_thread(
            &mut self,
            agent: AgentPk,
            f: &InboxFilter,
        ) -> Result<InboxCounts, StoreError> {
            let row = count_thread_query::<Db>(agent, f)
                .build()
                .fetch_one(self)
                .await?;
            let total: i64 = row.try_get(0)?;
            Ok(InboxCounts {
                total,
                unread: row.try_get(1)?,
                exact: total < COUNT_WINDOW,
            })
        }

        /// Any other filter: over the whole inbox while it is small, else over its newest
        /// [`COUNT_WINDOW`] sequence numbers.
        async fn count_filtered(
            &mut self,
            agent: AgentPk,
            f: &InboxFilter,
            ends: &Ends,
        ) -> Result<InboxCounts, StoreError> {
            let (mut q, exact) = count_filtered_query::<Db>(agent, f, ends);
            let row = q.build().fetch_one(self).await?;
            Ok(InboxCounts {
                total: row.try_get(0)?,
                unread: row.try_get(1)?,
                exact,
            })
        }

        /// The page itself, within `window` when the filter is checked entry by entry.
        async fn page_of(
            &mut self,
            agent: AgentPk,
            f: &InboxFilter,
            page: InboxPageSpec,
            window: Option<Window>,
        ) -> Result<InboxSlice, StoreError> {
            let conn = self;
            let InboxPageSpec {
                order,
                after,
                limit,
            } = page;
            // SQLite is told the index a page walks: by thread, the index holds the entry's
            // columns a page returns, in page order.
            let hint = if f.is_one_thread() {
                INBOX_BY_THREAD
            } else if f.unread_only && window.is_none() {
                INBOX_UNREAD
            } else {
                ""
            };
            let mut q = QueryBuilder::<Db>::new(format!(
                "SELECT {MESSAGE_COLUMNS}, i.seq, i.read_at, i.news
                 FROM inbox i{hint} JOIN messages m ON m.pk = i.message_pk"
            ));
            push_inbox_filter(&mut q, agent, f);
            match (order, after) {
                (SortOrder::NewestFirst, Some(seq)) => {
                    q.push(" AND i.seq < ").push_bind(seq);
                }
                (SortOrder::OldestFirst, Some(seq)) => {
                    q.push(" AND i.seq > ").push_bind(seq);
                }
                _ => {}
            }
            if let Some(w) = window {
                q.push(" AND i.seq BETWEEN ")
                    .push_bind(w.low)
                    .push(" AND ")
                    .push_bind(w.high);
            }
            q.push(match order {
                SortOrder::NewestFirst => " ORDER BY i.seq DESC",
                SortOrder::OldestFirst => " ORDER BY i.seq ASC",
            });
            q.push(" LIMIT ").push_bind(limit);
            let mut rows = q.build().fetch(&mut *conn);
            let mut items = Vec::new();
            let mut bytes = PageBytes::default();
            while let Some(row) = rows.try_next().await? {
                let weight = row.try_get::<&str, _>("content")?.len()
                    + row
                        .try_get::<Option<&str>, _>("instruct_content")?
                        .map_or(0, str::len);
                if !bytes.admit(weight, items.len()) {
                    break;
                }
                items.push(InboxItem {
                    entry: InboxEntry {
                        seq: row.int("seq")?,
                        read_at: row.opt_time("read_at")?,
                        news: row.flag("news")?,
                    },
                    message: message(&row)?,
                });
            }
            Ok(InboxSlice {
                items,
                resume_after: window.and_then(|w| w.resume_after),
                cut: bytes.cut,
            })
        }
    }

    /// Sent, received and unread counts of every agent of a team, by agent pk.
    pub(crate) async fn team_counts<'e>(
        ex: impl sqlx::Executor<'e, Database = Db>,
        team: TeamPk,
    ) -> Result<HashMap<AgentPk, Counts>, StoreError> {
        let rows = sqlx::query::<Db>(
            "SELECT c.agent_pk, c.sent, c.total, c.unread, c.responded
             FROM inbox_counts c JOIN agents a ON a.pk = c.agent_pk
             WHERE a.team_pk = $1",
        )
        .bind(team.0)
        .fetch_all(ex)
        .await?;
        let mut counts: HashMap<AgentPk, Counts> = HashMap::new();
        for row in rows {
            let c = counts.entry(AgentPk(row.try_get(0)?)).or_default();
            c.sent = row.try_get(1)?;
            c.received = row.try_get(2)?;
            c.unread = row.try_get(3)?;
            c.responded = row.try_get(4)?;
        }
        Ok(counts)
    }

    /// Unread news and open tasks of every agent of a team: its counters, and its open tasks
    /// through the partial index `tasks_open` (finished tasks are never walked).
    pub(crate) async fn team_activity(
        pool: &Pool,
        team: TeamPk,
    ) -> Result<HashMap<AgentPk, ActivityCounts>, StoreError> {
        let mut counts: HashMap<AgentPk, ActivityCounts> = HashMap::new();
        let news = sqlx::query::<Db>(
            "SELECT c.agent_pk, c.unread - c.quiet_unread
             FROM inbox_counts c JOIN agents a ON a.pk = c.agent_pk
             WHERE a.team_pk = $1 AND a.removed_at IS NULL",
        )
        .bind(team.0)
        .fetch_all(pool)
        .await?;
        for row in news {
            let c = counts.entry(AgentPk(row.try_get(0)?)).or_default();
            c.unread_news = u64::try_from(row.try_get::<i64, _>(1)?).unwrap_or(0);
        }
        let open = sqlx::query::<Db>(sqlx::AssertSqlSafe(format!(
            "SELECT assignee_pk, COUNT(*) FROM tasks{TASKS_OPEN}
             WHERE team_pk = $1 AND assignee_pk IS NOT NULL
               AND (status = 'in-progress' OR status = 'input-required')
             GROUP BY assignee_pk"
        )))
        .bind(team.0)
        .fetch_all(pool)
        .await?;
        for row in open {
            let c = counts.entry(AgentPk(row.try_get(0)?)).or_default();
            c.open_tasks = u64::try_from(row.try_get::<i64, _>(1)?).unwrap_or(0);
        }
        Ok(counts)
    }

    /// `(responder, microseconds from original to response)` for the team's newest
    /// [`LATENCY_WINDOW`] responses.
    pub(crate) async fn response_latencies<'e>(
        ex: impl sqlx::Executor<'e, Database = Db>,
        team: TeamPk,
    ) -> Result<Vec<ResponseLatency>, StoreError> {
        // The team's newest responses first, through its messages: a team's metrics cost
        // the same however many responses it (or any other team) has given.
        let rows = sqlx::query::<Db>(sqlx::AssertSqlSafe(format!(
            "SELECT r.responder_pk, r.created_at - o.created_at
             FROM (SELECT pk FROM messages{MESSAGES_BY_TEAM}
                   WHERE team_pk = $1 AND kind = 'response'
                   ORDER BY pk DESC LIMIT $2) m
             JOIN responses r ON r.response_pk = m.pk
             JOIN messages o ON o.pk = r.original_pk"
        )))
        .bind(team.0)
        .bind(LATENCY_WINDOW)
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

    /// The agent's newest sequence number (0 for an empty inbox): the counter, which never
    /// goes back even when retention emptied the inbox.
    pub(crate) async fn newest_seq<'e>(
        ex: impl sqlx::Executor<'e, Database = Db>,
        agent: AgentPk,
    ) -> Result<i64, StoreError> {
        let seq: Option<i64> = sqlx::query_scalar::<Db, Option<i64>>(
            "SELECT COALESCE(MAX(seq), 0) FROM inbox WHERE agent_pk = $1",
        )
        .bind(agent.0)
        .fetch_one(ex)
        .await?;
        Ok(seq.unwrap_or(0))
    }
}
