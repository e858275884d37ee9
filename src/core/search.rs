//! Search over what a team said (`docs/search.md`): who may find what, and the paging.
//! An agent finds what it sent and what was addressed to it; the team key finds every
//! message of its team; nothing of another team, ever (the team is the caller's own,
//! never a parameter). The query's meaning is `SearchTerms::parse`'s, the SQL the store's.

use switchboard_types::inbox::page_size;
use switchboard_types::search::{MAX_RESULTS, SearchPage, SearchQuery, SearchSort, SearchTerms};
use switchboard_types::traffic::TrafficEntry;

use super::{Caller, Core, CoreError, CoreResult};
use crate::model::SearchSpec;

/// A page when the request names no `limit`.
const DEFAULT_LIMIT: i64 = 20;

/// Searches that read at once on a node; the others wait their turn. A search of a common
/// word ranks every match, and SQLite's read pool has four connections: eight searches
/// at once held all of them for seconds, and inbox reads, the health check and the
/// callback sender timed out behind them (seen in the `search` benchmark).
pub(super) const AT_ONCE: usize = 2;

impl Core {
    /// `GET /v1/search`.
    pub(super) async fn search(&self, caller: &Caller, q: SearchQuery) -> CoreResult<SearchPage> {
        let (team, me) = self.reader(caller)?;
        let terms = SearchTerms::parse(&q.q)?;
        let limit = page_size(Some(q.limit.unwrap_or(DEFAULT_LIMIT)))?;
        let sort = q.sort.unwrap_or(SearchSort::Relevance);
        let position = match &q.cursor {
            None => None,
            Some(c) => Some(c.parse::<i64>().ok().filter(|n| *n >= 0).ok_or_else(|| {
                CoreError::validation("cursor", "cursor is a next_cursor this search gave")
            })?),
        };
        let (before, offset) = match sort {
            SearchSort::Newest => (position, 0),
            SearchSort::Relevance => (None, position.unwrap_or(0)),
        };
        let member = |id: &Option<switchboard_types::ids::AgentId>| {
            id.as_ref()
                .map(|id| self.member_of(&team, id).map(|a| a.pk))
                .transpose()
        };
        let wanted = limit.min(MAX_RESULTS - offset);
        if wanted <= 0 {
            return Ok(SearchPage {
                success: true,
                results: Vec::new(),
                next_cursor: None,
            });
        }
        let spec = SearchSpec {
            team: team.pk,
            terms,
            viewer: me.as_ref().map(|m| m.pk),
            sender: member(&q.sender)?,
            recipient: member(&q.recipient)?,
            thread_id: q.thread_id,
            message_type: q.message_type,
            kind: q.kind,
            cause_by: q.cause_by,
            since: q.since_timestamp,
            until: q.until_timestamp,
            sort,
            before,
            offset,
            limit: wanted + 1,
        };
        let page = {
            let _turn = self
                .inner
                .searches
                .acquire()
                .await
                .map_err(|_| CoreError::internal("the searches' semaphore was closed"))?;
            self.store().search_messages(spec).await?
        };
        let mut rows = page.rows;
        let more = rows.len() as i64 > wanted || page.cut;
        rows.truncate(wanted as usize);
        let next_cursor = match (more, sort) {
            (false, _) => None,
            (true, SearchSort::Newest) => rows.last().map(|r| r.message.pk.0.to_string()),
            (true, SearchSort::Relevance) => Some(offset + rows.len() as i64)
                .filter(|n| *n < MAX_RESULTS)
                .map(|n| n.to_string()),
        };
        Ok(SearchPage {
            success: true,
            results: rows
                .into_iter()
                .map(|row| TrafficEntry {
                    position: row.message.pk.0,
                    message: self.view(row.message, None, false, None),
                    recipient_agent_ids: row.recipients,
                })
                .collect(),
            next_cursor,
        })
    }
}
