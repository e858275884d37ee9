//! GET_MESSAGES: the filters of an inbox query and one page of the answer.

use crate::ids::AgentId;
use serde::{Deserialize, Serialize};

use crate::decode::CommaList;
use crate::error::ErrorBody;
use crate::messages::{MessageKind, MessageType, MessageView, Priority, SortOrder};
use crate::time::Timestamp;

/// Largest page of GET_MESSAGES (and of the task list).
pub const MAX_PAGE: i64 = 100;
/// Page size when none is asked for.
pub const DEFAULT_PAGE: i64 = 50;

/// Filters of GET_MESSAGES. Lists are comma-separated in a query string and arrays in
/// JSON (WebSocket frames).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "openapi", derive(utoipa::IntoParams, utoipa::ToSchema))]
#[cfg_attr(feature = "openapi", into_params(parameter_in = Query))]
pub struct InboxQuery {
    /// The contract's `agent_id`: optional here (the token names the caller); when
    /// given it must be the caller.
    #[cfg_attr(feature = "openapi", param(value_type = Option<String>))]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>))]
    pub agent_id: Option<AgentId>,
    /// Only these message types, e.g. `request,coordination`.
    #[cfg_attr(feature = "openapi", param(value_type = Option<String>, example = "request,coordination"))]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Vec<MessageType>>))]
    pub message_types: Option<CommaList<MessageType>>,
    /// Only from these agents, e.g. `planner,coder`.
    #[cfg_attr(feature = "openapi", param(value_type = Option<String>))]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Vec<String>>))]
    pub senders: Option<CommaList<AgentId>>,
    /// Only this priority.
    pub priority: Option<Priority>,
    /// Only messages the caller has not marked read.
    pub unread_only: Option<bool>,
    /// Only messages sent after this time (RFC 3339).
    #[cfg_attr(feature = "openapi", param(value_type = Option<String>))]
    pub since_timestamp: Option<Timestamp>,
    /// Page size, 1–100 (default 50).
    pub limit: Option<i64>,
    /// `newest_first` (default) or `oldest_first`.
    pub sort_order: Option<SortOrder>,
    /// `next_cursor` of the previous page; continues that walk with the same filters.
    pub cursor: Option<String>,
    /// Only these kinds, e.g. `broadcast,response` (ours, beyond the contract).
    #[cfg_attr(feature = "openapi", param(value_type = Option<String>))]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Vec<MessageKind>>))]
    pub kinds: Option<CommaList<MessageKind>>,
    /// Only this conversation.
    pub thread_id: Option<String>,
    /// Only entries after this sequence number (the `seq` of the last entry already
    /// handled), oldest first: how a polling client continues where it stopped, also
    /// past the last page. Oldest first when `sort_order` is left out; refused with
    /// `sort_order=newest_first` and with `cursor`.
    pub after_seq: Option<i64>,
    /// Only news: publishes the caller watches or that name it, and every entry of
    /// another kind (those were addressed to it by name).
    pub news_only: Option<bool>,
    /// Only publishes with this `cause_by`; `prefix*` for every tag starting with
    /// `prefix`.
    pub cause_by: Option<String>,
}

impl InboxQuery {
    /// The page size asked for, checked (1–100, default 50).
    pub fn page_size(&self) -> Result<i64, ErrorBody> {
        page_size(self.limit)
    }
}

/// A page size, checked: 1–[`MAX_PAGE`], [`DEFAULT_PAGE`] when not given.
pub fn page_size(limit: Option<i64>) -> Result<i64, ErrorBody> {
    let limit = limit.unwrap_or(DEFAULT_PAGE);
    if !(1..=MAX_PAGE).contains(&limit) {
        return Err(ErrorBody::validation(
            "limit",
            format!("limit must be between 1 and {MAX_PAGE}"),
        )
        .with("value", limit));
    }
    Ok(limit)
}

/// Answer of GET_MESSAGES.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct InboxPage {
    pub success: bool,
    pub messages: Vec<MessageView>,
    /// Every entry matching the filters, ignoring `limit` and `cursor`. Always exact
    /// for the whole inbox and for `news_only`, each alone or with `unread_only` (kept
    /// counters); for one thread while it holds fewer than 2,000 entries; for any other
    /// filter on an inbox of at most 2,000 entries. Otherwise counted over the newest
    /// 2,000 (see `counts_exact`).
    pub total_count: i64,
    /// The unread ones among them.
    pub unread_count: i64,
    /// False when the counts are lower bounds: counted over the newest 2,000 entries
    /// (of the inbox, or of the thread), so that the answer costs the same whatever
    /// the inbox's size.
    pub counts_exact: bool,
    /// Pass as `cursor` to get the next page; null on the last page.
    pub next_cursor: Option<String>,
    pub error: Option<String>,
}

/// Answer of a wait for new inbox entries (MCP's `wait_for_messages`): what arrived
/// after the cursor, oldest first.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct InboxWait {
    pub success: bool,
    /// The entries after the cursor, oldest first (empty when the wait timed out).
    pub messages: Vec<crate::messages::MessageView>,
    /// Pass it back as `after_seq` to wait for what comes next.
    pub next_after_seq: i64,
    /// Nothing arrived before the timeout.
    pub timed_out: bool,
}

/// The longest one wait for new inbox entries may block, in milliseconds; a client waits
/// longer by calling again.
pub const MAX_WAIT_MS: u64 = 60_000;
/// How long a wait blocks when the client does not say.
pub const DEFAULT_WAIT_MS: u64 = 30_000;

/// Arguments of a wait for new inbox entries (MCP's `wait_for_messages`).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct WaitForMessages {
    /// Return entries after this sequence number (the `next_after_seq` of the previous
    /// wait, or a message's `seq`); without it, only entries that arrive from now on.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(minimum = 0))]
    pub after_seq: Option<i64>,
    /// How long to wait for the first entry, in milliseconds (default 30000, at most
    /// 60000); 0 answers at once.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(maximum = 60000))]
    pub timeout_ms: Option<u64>,
    /// Most entries to return (1–100, default 50).
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 100))]
    pub limit: Option<i64>,
}
