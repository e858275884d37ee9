//! One live feed: an agent's inbox entries in sequence order, each exactly once, from a
//! cursor — what every transport that follows an inbox renders from (a WebSocket
//! session, a STOMP subscription, MCP's `wait_for_messages` and resource subscriptions,
//! an outside A2A agent's gateway).
//!
//! Why one: each of those used to follow the inbox with its own code (replay paging, gap
//! fill, the lag policy, news-only and route filters, "wait until something happens"),
//! and each copy could get one of them wrong — a follower that starts listening after the
//! event it waits for can already have happened waits for nothing. Here the rule is
//! written once: the wake-up is registered before storage is read, so a commit between
//! the two either is in what was read or wakes the feed; the cursor moves only past
//! entries handed out, so nothing is handed out twice; and a live push is used only when
//! it is the very next entry, otherwise storage fills the gap.
//!
//! A feed is woken one of two ways. A live connection's feed ([`Feed::live`]) gets the
//! hub's pushes, which carry the entry (no storage read while the connection keeps up).
//! A watch's feed ([`Feed::watch`]) is only told that the inbox changed and reads
//! storage; it counts as no connection (the agent is not "delivered to" by it).
//! A task's followers get the same promise from
//! [`TaskFeed`](crate::core::tasks::follow::TaskFeed).

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::Arc;

use switchboard_types::frames::push_frame;
use switchboard_types::ids::AgentPk;
use switchboard_types::messages::MessageView;
use switchboard_types::routing::Route;
use tokio::sync::futures::OwnedNotified;
use tokio::task::JoinHandle;

use super::Live;
use super::live::{Connection, LivePush};
use super::{Caller, Core, CoreError, CoreResult};
use crate::hub::Watch;

/// What a follower renders: the WebSocket frame text, or the message view (STOMP, MCP,
/// A2A write their own formats from it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Form {
    Frames,
    Views,
}

/// One entry of a feed, in the form the feed was made for.
pub enum FeedItem {
    /// The push frame text (with its `seq`).
    Frame(String),
    /// The message view, with `seq`, `read` and `news` when it came from storage.
    View(Arc<MessageView>),
    /// An entry this follower does not get (not news on a news-only feed, or routed to
    /// another transport): its seq still counts as handed out.
    Skipped,
}

/// An inbox entry handed out by a feed.
pub struct FeedEntry {
    pub seq: i64,
    pub item: FeedItem,
}

/// What [`Feed::ready`] saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ready {
    /// Entries may follow the cursor: call [`Feed::next_batch`].
    Entries,
    /// The connection's outbox overflowed: pushes were dropped. The follower either
    /// ends (a WebSocket client resumes from its cursor) or calls [`Feed::recover`].
    Lagged,
    /// The hub dropped the connection.
    Closed,
}

/// What wakes a feed.
enum Wake {
    /// A live connection: pushes in commit order, kept until used.
    Pushes {
        conn: Box<Connection>,
        pending: VecDeque<LivePush>,
    },
    /// A watch on the inbox: armed before each storage read.
    Commits {
        watch: Watch,
        armed: Option<Pin<Box<OwnedNotified>>>,
    },
}

/// Who a feed reads for and what it skips.
#[derive(Clone, Copy)]
struct Filter {
    agent: AgentPk,
    form: Form,
    news_only: bool,
    /// The follower's transport: entries routed to another one are skipped.
    route: Option<Route>,
}

type Page = (Vec<FeedEntry>, bool);

/// An agent's inbox from a cursor on; see the module documentation.
pub struct Feed {
    core: Core,
    filter: Filter,
    /// The last entry handed out.
    cursor: i64,
    /// Storage holds entries past the cursor that no push will bring (the feed is new, a
    /// page was full, a push was missing or unusable, or pushes were dropped).
    behind: bool,
    wake: Wake,
    /// The page after `.0`, being read while the follower writes the one before.
    prefetch: Option<Prefetch>,
    /// Reads in a row that left a push past a gap.
    rereads: u8,
}

/// A page being read ahead, with the wake-up armed before its read began: the read
/// and its arm go together, or a commit between the read and a later arm is missed.
struct Prefetch {
    after: i64,
    read: JoinHandle<CoreResult<Page>>,
    armed: Option<Pin<Box<OwnedNotified>>>,
}

/// How often storage is read again for a gap before a push past it is dropped.
const MAX_REREADS: u8 = 3;

impl Drop for Feed {
    fn drop(&mut self) {
        if let Some(prefetch) = self.prefetch.take() {
            prefetch.read.abort();
        }
    }
}

impl Feed {
    fn new(core: &Core, filter: Filter, after: i64, wake: Wake) -> Feed {
        Feed {
            core: core.clone(),
            filter,
            cursor: after,
            behind: true,
            wake,
            prefetch: None,
            rereads: 0,
        }
    }

    /// Records that everything up to `seq` reached the agent (the cursor never moves
    /// back). An ack beyond the last entry this feed handed out is refused and changes
    /// nothing: stored as the cursor, it would make the agent skip entries not yet
    /// committed.
    pub fn ack(&self, seq: i64) -> CoreResult<()> {
        let sent_up_to = self.cursor;
        if seq > sent_up_to {
            return Err(CoreError::validation(
                "seq",
                format!(
                    "seq {seq} was not sent on this connection (the last one sent is \
                     {sent_up_to}); acknowledge only entries that arrived"
                ),
            )
            .with("seq", seq)
            .with("last_sent", sent_up_to));
        }
        self.core.hub().ack(self.agent(), seq);
        Ok(())
    }

    /// Notes activity of the agent (a frame arrived).
    pub fn seen(&self) {
        self.core.hub().seen(self.agent());
    }

    /// The last entry handed out: where a follower resumes.
    pub fn cursor(&self) -> i64 {
        self.cursor
    }

    /// Whether storage holds entries the feed has not handed out and no push will
    /// bring: a follower replaying from storage goes on while this holds.
    pub fn is_behind(&self) -> bool {
        self.behind
    }

    /// The agent whose inbox this is.
    pub fn agent(&self) -> AgentPk {
        self.filter.agent
    }

    /// Whether the connection's outbox overflowed (pushes were dropped).
    pub fn lagged(&self) -> bool {
        match &self.wake {
            Wake::Pushes { conn, .. } => conn.lag().is_raised(),
            Wake::Commits { .. } => false,
        }
    }

    /// Waits until entries may follow the cursor. Cancel-safe: a push received here is
    /// kept, and a wake-up lost to cancellation is not needed (the watch stays armed).
    pub async fn ready(&mut self) -> Ready {
        if self.behind {
            return Ready::Entries;
        }
        match &mut self.wake {
            Wake::Pushes { conn, pending } => {
                if !pending.is_empty() {
                    return Ready::Entries;
                }
                let (lag, recheck) = (conn.lag().clone(), conn.recheck().clone());
                tokio::select! {
                    biased;
                    () = lag.raised() => Ready::Lagged,
                    () = recheck.taken() => {
                        self.behind = true;
                        Ready::Entries
                    }
                    push = conn.next_push() => match push {
                        Some(push) => {
                            pending.push_back(push);
                            Ready::Entries
                        }
                        None => Ready::Closed,
                    },
                }
            }
            Wake::Commits { armed, .. } => {
                if let Some(armed) = armed {
                    armed.as_mut().await;
                }
                // Fired, or never armed: storage is read next either way.
                self.behind = true;
                Ready::Entries
            }
        }
    }

    /// After [`Ready::Lagged`]: drops the pushes waiting and reads on from storage,
    /// where every one of them is.
    pub fn recover(&mut self) {
        if let Wake::Pushes { conn, pending } = &mut self.wake {
            conn.lag().clear();
            conn.drain();
            pending.clear();
        }
        self.behind = true;
    }

    /// The next entries after the cursor, oldest first, at most `limit`, and moves the
    /// cursor past them; none when nothing new was there (a push already handed out, a
    /// wake-up for an entry read before). Not cancel-safe: call it outside `select!`.
    pub async fn next_batch(&mut self, limit: i64) -> CoreResult<Vec<FeedEntry>> {
        if !self.behind {
            if let Some(entry) = self.next_pushed() {
                return Ok(vec![entry]);
            }
            // No push waiting, or one that needs storage (`next_pushed` set `behind`).
            if !self.behind {
                return Ok(Vec::new());
            }
        }
        let (entries, more) = self.read_page(limit).await?;
        if let Some(last) = entries.last() {
            self.cursor = last.seq;
        }
        self.behind = more;
        if let Wake::Pushes { pending, .. } = &mut self.wake {
            let cursor = self.cursor;
            pending.retain(|p| p.seq() > cursor);
            // A push past a gap: the entries between committed after the read began (one
            // routed elsewhere has no push of its own). Storage is read again; a gap that
            // stays after a few reads (it cannot: a push follows its commit) is left to
            // the next push rather than read for ever.
            if !more && pending.front().is_some_and(|p| p.seq() != cursor + 1) {
                if self.rereads < MAX_REREADS {
                    self.rereads += 1;
                    self.behind = true;
                } else {
                    tracing::warn!(cursor, "a push past a gap storage did not fill was dropped");
                    pending.clear();
                    self.rereads = 0;
                }
            } else {
                self.rereads = 0;
            }
        }
        if more {
            self.start_prefetch(limit);
        }
        Ok(entries)
    }

    /// The next entry from the pushes, when the first one waiting is the very next
    /// entry and usable as it is; otherwise storage is to be read (`behind`).
    fn next_pushed(&mut self) -> Option<FeedEntry> {
        let Wake::Pushes { pending, .. } = &mut self.wake else {
            return None;
        };
        while pending.front().is_some_and(|p| p.seq() <= self.cursor) {
            pending.pop_front();
        }
        let push = pending.front()?;
        let seq = push.seq();
        if seq != self.cursor + 1 || push.is_stored() {
            self.behind = true;
            return None;
        }
        let item = if self.filter.news_only && !push.is_news() {
            FeedItem::Skipped
        } else {
            match self.filter.form {
                Form::Frames => match push.frame() {
                    Ok(frame) => FeedItem::Frame(frame),
                    Err(why) => {
                        tracing::error!(seq, error = %why, "a push could not be rendered; reading it from storage");
                        self.behind = true;
                        return None;
                    }
                },
                Form::Views => match push.message() {
                    Some(view) => FeedItem::View(view.clone()),
                    // A task notification: storage has it as a view.
                    None => {
                        self.behind = true;
                        return None;
                    }
                },
            }
        };
        pending.pop_front();
        self.cursor = seq;
        Some(FeedEntry { seq, item })
    }

    /// The page after the cursor: the one prefetched for it, or read now. A watch's
    /// feed takes the wake-up armed before that read began: a commit from then on
    /// either is in the page or wakes the feed.
    async fn read_page(&mut self, limit: i64) -> CoreResult<Page> {
        if let Some(prefetch) = self.prefetch.take() {
            if prefetch.after == self.cursor {
                if let Wake::Commits { armed, .. } = &mut self.wake {
                    *armed = prefetch.armed;
                }
                return prefetch
                    .read
                    .await
                    .map_err(|e| CoreError::internal(format!("an inbox read failed: {e}")))?;
            }
            prefetch.read.abort();
        }
        if let Wake::Commits { watch, armed } = &mut self.wake {
            *armed = Some(watch.arm());
        }
        read(self.core.clone(), self.filter, self.cursor, limit).await
    }

    /// Starts reading the page after the cursor, so storage works while the follower
    /// writes what it has; a watch's feed arms a wake-up for it first.
    fn start_prefetch(&mut self, limit: i64) {
        let armed = match &self.wake {
            Wake::Commits { watch, .. } => Some(watch.arm()),
            Wake::Pushes { .. } => None,
        };
        let read = tokio::spawn(read(self.core.clone(), self.filter, self.cursor, limit));
        self.prefetch = Some(Prefetch {
            after: self.cursor,
            read,
            armed,
        });
    }
}

/// The entries after `after`, oldest first, at most `limit`, in the feed's form, and
/// whether more follow.
async fn read(core: Core, filter: Filter, after: i64, limit: i64) -> CoreResult<Page> {
    let page = core.inbox_items_after(filter.agent, after, limit).await?;
    let entries = page
        .items
        .into_iter()
        .map(|item| {
            let seq = item.entry.seq;
            let routed_elsewhere = item
                .message
                .route
                .is_some_and(|route| filter.route.is_some_and(|mine| route != mine));
            if routed_elsewhere || (filter.news_only && !item.entry.news) {
                return Ok(FeedEntry {
                    seq,
                    item: FeedItem::Skipped,
                });
            }
            let read = item.entry.read_at.is_some();
            let news = Some(item.entry.news);
            let item = match filter.form {
                Form::Frames => {
                    let view = core.view(item.message, None, read, news);
                    let frame = push_frame(seq, &view).map_err(|e| {
                        CoreError::internal(format!("rendering inbox entry {seq}: {e}"))
                    })?;
                    FeedItem::Frame(frame)
                }
                Form::Views => {
                    FeedItem::View(Arc::new(core.view(item.message, Some(seq), read, news)))
                }
            };
            Ok(FeedEntry { seq, item })
        })
        .collect::<CoreResult<Vec<_>>>()?;
    Ok((entries, page.more))
}

impl<'a> Live<'a> {
    /// A feed of a live connection's entries after `after`, in `form`; the connection's
    /// `news_only` and route apply. The connection was registered before this, so
    /// nothing committed since can be missed.
    pub fn feed_live(self, conn: Connection, after: i64, form: Form) -> Feed {
        let filter = Filter {
            agent: conn.agent(),
            form,
            news_only: conn.news_only,
            route: Some(conn.route),
        };
        Feed::new(
            self.core,
            filter,
            after,
            Wake::Pushes {
                conn: Box::new(conn),
                pending: VecDeque::new(),
            },
        )
    }

    /// A feed of the calling agent's entries after `after` (after its newest entry when
    /// `None`), as views, woken by commits: for a follower that holds no connection.
    pub async fn feed_watch(self, caller: &Caller, after: Option<i64>) -> CoreResult<Feed> {
        let (_, me) = self.core.identity().acting_agent(caller)?;
        if after.is_some_and(|a| a < 0) {
            return Err(CoreError::validation(
                "after_seq",
                "after_seq is a sequence number, 0 or more",
            ));
        }
        // Watching before the newest seq is read: an entry committed in between wakes it.
        let watch = self.core.hub().watch_inbox(me.pk);
        let after = match after {
            Some(after) => after,
            None => self.core.store().newest_seq(me.pk).await?,
        };
        let filter = Filter {
            agent: me.pk,
            form: Form::Views,
            news_only: false,
            route: None,
        };
        Ok(Feed::new(
            self.core,
            filter,
            after,
            Wake::Commits { watch, armed: None },
        ))
    }
}
