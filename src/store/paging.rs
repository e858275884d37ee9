//! How an inbox is counted and paged without costing as much as it is large, the same
//! on every engine: which filters the kept counters answer, the windows of sequence
//! numbers the others are counted and paged in, and the window of the team metrics.

use switchboard_types::messages::{MAX_PAGE_BYTES, SortOrder};

use switchboard_types::ids::AgentPk;

use crate::model::{InboxCounts, InboxFilter, InboxPageSpec, InboxSlice};
use crate::store::StoreError;

/// Which shapes of filter this schema answers from counters or its own index: the
/// rest is counted and paged within windows.
impl InboxFilter {
    /// Whether the filter keeps every entry (or every unread one): the cases the kept
    /// counters answer.
    pub(crate) fn is_everything(&self) -> bool {
        self.thread_id.is_none() && !self.news_only && self.only_read_state_besides()
    }

    /// Whether the filter is one thread (or its unread part) and nothing else: the case
    /// the thread index answers on its own.
    pub(crate) fn is_one_thread(&self) -> bool {
        self.thread_id.is_some() && !self.news_only && self.only_read_state_besides()
    }

    /// Whether the filter is `news_only` (or its unread part) and nothing else: counted
    /// by the kept counters too (entries that are not news are counted apart).
    pub(crate) fn is_news(&self) -> bool {
        self.thread_id.is_none() && self.news_only && self.only_read_state_besides()
    }

    /// Nothing but the read state, apart from a thread and `news_only`.
    fn only_read_state_besides(&self) -> bool {
        self.message_types.is_none()
            && self.sender_pks.is_none()
            && self.priority.is_none()
            && self.since.is_none()
            && self.kinds.is_none()
            && self.cause_by.is_none()
    }
}

/// Most entries a filtered count looks at: past it, counting would cost as much as the
/// inbox is large, so the newest this many are counted and the answer says it is a
/// lower bound.
pub const COUNT_WINDOW: i64 = 2_000;

/// Most sequence numbers one page of a filtered inbox walks. A filter other than
/// `unread_only` (which has its index) or one thread (which has its own) is checked
/// entry by entry; past this window the page ends early with a cursor to go on from,
/// so every page costs the same however large the inbox and however rare the match.
pub const PAGE_WINDOW: i64 = 2_000;

/// What the counters say about an inbox and, when asked, its oldest and newest
/// sequence numbers: one statement.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Ends {
    pub(crate) total: i64,
    pub(crate) unread: i64,
    /// Entries, and unread entries, that are not news.
    pub(crate) quiet_total: i64,
    pub(crate) quiet_unread: i64,
    pub(crate) oldest: i64,
    pub(crate) newest: i64,
}

impl Ends {
    /// The exact counts of a filter the counters answer: the whole inbox or its news,
    /// each with or without `unread_only`.
    pub(crate) fn counts(&self, f: &InboxFilter) -> InboxCounts {
        let (total, unread) = if f.news_only {
            (
                self.total - self.quiet_total,
                self.unread - self.quiet_unread,
            )
        } else {
            (self.total, self.unread)
        };
        InboxCounts {
            total: if f.unread_only { unread } else { total },
            unread,
            exact: true,
        }
    }
}

/// The sequence numbers a windowed page may look at, and where the next page starts
/// when the window ends before the inbox does.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Window {
    pub(crate) low: i64,
    pub(crate) high: i64,
    pub(crate) resume_after: Option<i64>,
}

impl Window {
    pub(crate) fn of(ends: &Ends, order: SortOrder, after: Option<i64>) -> Window {
        let Ends { oldest, newest, .. } = *ends;
        match order {
            SortOrder::NewestFirst => {
                let high = after.map_or(newest, |a| a.saturating_sub(1).min(newest));
                let low = high.saturating_sub(PAGE_WINDOW - 1);
                Window {
                    low,
                    high,
                    resume_after: (low > oldest).then_some(low),
                }
            }
            SortOrder::OldestFirst => {
                let low = after.map_or(oldest, |a| a.saturating_add(1).max(oldest));
                let high = low.saturating_add(PAGE_WINDOW - 1);
                Window {
                    low,
                    high,
                    resume_after: (high < newest).then_some(high),
                }
            }
        }
    }
}

/// Most responses the team metrics' response times are taken over (the newest).
pub const LATENCY_WINDOW: i64 = 10_000;

/// What keeps a page of the inbox within [`MAX_PAGE_BYTES`] while its rows are read one
/// at a time (never all of a page's rows in memory first: 100 messages of 1 MB each made
/// one answer of 100 MB, and eight such reads took 1.8 GB). A page holds at least one
/// entry, whatever it weighs.
#[derive(Default)]
pub(crate) struct PageBytes {
    bytes: usize,
    /// The page stopped for its weight with rows left.
    pub cut: bool,
}

impl PageBytes {
    /// Whether a row of `weight` bytes still fits after `taken` rows; once one does not,
    /// the page ends there.
    pub fn admit(&mut self, weight: usize, taken: usize) -> bool {
        if taken > 0 && self.bytes.saturating_add(weight) > MAX_PAGE_BYTES {
            self.cut = true;
            return false;
        }
        self.bytes = self.bytes.saturating_add(weight);
        true
    }
}

/// Reads a list's rows one at a time into a page within [`MAX_PAGE_BYTES`] (at least one
/// row): every list a client pages through (the team's traffic, task lists) keeps the
/// inbox's bound, on every transport, without holding a page's rows in memory first.
pub(crate) async fn bounded<R, T, S>(
    mut rows: S,
    weigh: impl Fn(&R) -> Result<usize, StoreError>,
    map: impl Fn(&R) -> Result<T, StoreError>,
) -> Result<crate::model::Bounded<T>, StoreError>
where
    S: futures_util::Stream<Item = Result<R, sqlx::Error>> + Unpin,
{
    use futures_util::TryStreamExt;
    let mut out = Vec::new();
    let mut bytes = PageBytes::default();
    while let Some(row) = rows.try_next().await? {
        if !bytes.admit(weigh(&row)?, out.len()) {
            break;
        }
        out.push(map(&row)?);
    }
    Ok(crate::model::Bounded {
        rows: out,
        cut: bytes.cut,
    })
}

/// The four reads an engine answers an inbox query with, in its own SQL. Which filter is
/// counted how and which window is paged ([`read_inbox`], [`list_inbox`]) is the same on
/// every engine, and written once here.
pub(crate) trait InboxReads: Send {
    /// The kept counters, and with `with_seqs` the inbox's lowest and highest seq.
    fn ends(
        &mut self,
        agent: AgentPk,
        with_seqs: bool,
    ) -> impl Future<Output = Result<Ends, StoreError>> + Send;
    /// A thread's entries counted from the thread index, over its newest
    /// [`COUNT_WINDOW`].
    fn count_thread(
        &mut self,
        agent: AgentPk,
        f: &InboxFilter,
    ) -> impl Future<Output = Result<InboxCounts, StoreError>> + Send;
    /// Any other filter counted over the inbox's newest [`COUNT_WINDOW`] seqs.
    fn count_filtered(
        &mut self,
        agent: AgentPk,
        f: &InboxFilter,
        ends: &Ends,
    ) -> impl Future<Output = Result<InboxCounts, StoreError>> + Send;
    /// One page after the cursor, within `window` when one is given.
    fn page_of(
        &mut self,
        agent: AgentPk,
        f: &InboxFilter,
        page: InboxPageSpec,
        window: Option<Window>,
    ) -> impl Future<Output = Result<InboxSlice, StoreError>> + Send;
}

/// A GET_MESSAGES: how many entries match and one page of them, on one connection.
///
/// One connection, not one per statement: a pool pings a connection on its way back and
/// spawns a task to do it (on SQLite a round trip to its thread), so each statement on
/// the pool cost two more thread switches than the statement itself; under a writer and
/// 8 readers those switches were what kept the slower filters above 10 ms at p99.
///
/// The whole inbox or its news, each alone or with `unread_only`, is counted by the
/// counters the triggers keep (one row). A thread is counted from the thread index (no
/// table row is read): exactly if it holds fewer than [`COUNT_WINDOW`] entries, else its
/// newest [`COUNT_WINDOW`] (`exact: false`). Any other filter is counted over the inbox if
/// it holds at most [`COUNT_WINDOW`] entries, else over its newest [`COUNT_WINDOW`]
/// sequence numbers (`exact: false`).
pub(crate) async fn read_inbox<R: InboxReads>(
    conn: &mut R,
    agent: AgentPk,
    f: &InboxFilter,
    page: InboxPageSpec,
) -> Result<(InboxCounts, InboxSlice), StoreError> {
    if f.is_one_thread() {
        let counts = conn.count_thread(agent, f).await?;
        let slice = conn.page_of(agent, f, page, None).await?;
        return Ok((counts, slice));
    }
    if f.is_everything() {
        let ends = conn.ends(agent, false).await?;
        let slice = conn.page_of(agent, f, page, None).await?;
        return Ok((ends.counts(f), slice));
    }
    let ends = conn.ends(agent, true).await?;
    let counts = if f.is_news() {
        ends.counts(f)
    } else {
        conn.count_filtered(agent, f, &ends).await?
    };
    let window = Window::of(&ends, page.order, page.after);
    let slice = conn.page_of(agent, f, page, Some(window)).await?;
    Ok((counts, slice))
}

/// One page of the inbox, after the cursor `after` (a sequence number) in `order`.
pub(crate) async fn list_inbox<R: InboxReads>(
    conn: &mut R,
    agent: AgentPk,
    f: &InboxFilter,
    page: InboxPageSpec,
) -> Result<InboxSlice, StoreError> {
    let window = if f.is_everything() || f.is_one_thread() {
        None
    } else {
        let ends = conn.ends(agent, true).await?;
        Some(Window::of(&ends, page.order, page.after))
    };
    conn.page_of(agent, f, page, window).await
}
