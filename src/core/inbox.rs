//! GET_MESSAGES and the replay a reconnecting connection starts with: an agent's inbox,
//! filtered, a page at a time.

use switchboard_types::decode::CommaList;
use switchboard_types::ids::AgentPk;
use switchboard_types::inbox::{InboxPage, InboxQuery};
use switchboard_types::messages::SortOrder;
use switchboard_types::publish::MAX_TAG;
use switchboard_types::validate::check_text;

use super::cursor;
use super::{Caller, Core, CoreError, CoreResult};
use crate::model::{InboxFilter, InboxItem, InboxPageSpec};

impl Core {
    /// GET_MESSAGES: the caller's inbox, filtered, one page at a time.
    pub(super) async fn get_messages(
        &self,
        caller: &Caller,
        query: InboxQuery,
    ) -> CoreResult<InboxPage> {
        let (team, me) = self.identity().acting_agent(caller)?;
        if let Some(agent_id) = &query.agent_id
            && *agent_id != me.agent_id
        {
            return Err(CoreError::forbidden(
                "agent_id must be the calling agent: an inbox is read by its owner",
            ));
        }
        let limit = query.page_size()?;
        if let Some(tag) = &query.cause_by {
            check_text("cause_by", tag, MAX_TAG)?;
        }
        let order = order_of(&query);
        let after = start_of_page(&query, order)?;
        let sender_pks = query.senders.map(|CommaList(ids)| {
            ids.iter()
                .filter_map(|id| self.registry().agent_pk_by_id(team.pk, id))
                .collect::<Vec<_>>()
        });
        let filter = InboxFilter {
            message_types: query.message_types.map(|l| l.0),
            sender_pks,
            priority: query.priority,
            unread_only: query.unread_only.unwrap_or(false),
            since: query.since_timestamp,
            kinds: query.kinds.map(|l| l.0),
            thread_id: query.thread_id,
            news_only: query.news_only.unwrap_or(false),
            cause_by: query.cause_by,
        };
        let store = self.store();
        let page = InboxPageSpec {
            order,
            after,
            limit: limit + 1,
        };
        let (counts, slice) = store.read_inbox(me.pk, &filter, page).await?;
        let mut items = slice.items;
        // More follow when the page read past `limit`, or stopped at its byte bound.
        let next_cursor = if items.len() as i64 > limit || slice.cut {
            items.truncate(limit as usize);
            items
                .last()
                .map(|last| cursor::encode_inbox(order, last.entry.seq))
        } else {
            // A filtered page that reached the end of its window goes on from there.
            slice
                .resume_after
                .map(|seq| cursor::encode_inbox(order, seq))
        };
        Ok(InboxPage {
            success: true,
            messages: items
                .into_iter()
                .map(|item| {
                    let read = item.entry.read_at.is_some();
                    self.view(
                        item.message,
                        Some(item.entry.seq),
                        read,
                        Some(item.entry.news),
                    )
                })
                .collect(),
            total_count: counts.total,
            unread_count: counts.unread,
            counts_exact: counts.exact,
            next_cursor,
            error: None,
        })
    }
}

/// A page of a replay, and whether entries follow it.
pub struct ReplayPage<T> {
    pub items: Vec<T>,
    pub more: bool,
}

impl Core {
    /// The agent's inbox entries after sequence number `after`, oldest first, at most
    /// `limit` (fewer when their weight reached `MAX_PAGE_BYTES`), unfiltered: what every
    /// replay (WebSocket, STOMP) reads. `more` says whether entries follow: a replay goes
    /// on until it is false, never judging by the page's length.
    pub(super) async fn inbox_items_after(
        &self,
        agent: AgentPk,
        after: i64,
        limit: i64,
    ) -> CoreResult<ReplayPage<InboxItem>> {
        let page = InboxPageSpec {
            order: SortOrder::OldestFirst,
            after: Some(after),
            limit: limit + 1,
        };
        let slice = self
            .store()
            .list_inbox(agent, &InboxFilter::default(), page)
            .await?;
        let mut items = slice.items;
        let more = slice.cut || items.len() as i64 > limit;
        items.truncate(usize::try_from(limit).unwrap_or(0));
        Ok(ReplayPage { items, more })
    }
}

/// The page's order: as asked; without one, oldest first for `after_seq` (it reads
/// forward), otherwise the default.
fn order_of(query: &InboxQuery) -> SortOrder {
    query.sort_order.unwrap_or(if query.after_seq.is_some() {
        SortOrder::OldestFirst
    } else {
        SortOrder::default()
    })
}

/// Where a page starts: after `after_seq` (oldest first only) or a cursor, not both.
fn start_of_page(query: &InboxQuery, order: SortOrder) -> CoreResult<Option<i64>> {
    // `cursor=` (empty) is no cursor: the first page.
    match (
        query.after_seq,
        query.cursor.as_deref().filter(|c| !c.is_empty()),
    ) {
        (Some(_), Some(_)) => Err(CoreError::validation(
            "after_seq",
            "give after_seq or cursor, not both",
        )),
        (Some(seq), None) => {
            if seq < 0 {
                return Err(CoreError::validation(
                    "after_seq",
                    "after_seq must not be negative",
                ));
            }
            if order != SortOrder::OldestFirst {
                return Err(CoreError::validation(
                    "after_seq",
                    "after_seq reads oldest first; leave sort_order out or make it oldest_first",
                ));
            }
            Ok(Some(seq))
        }
        (None, cursor) => cursor.map(|c| cursor::decode_inbox(c, order)).transpose(),
    }
}
