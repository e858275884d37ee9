//! The server's model: teams, agents, messages, inbox entries, tasks, as the server holds
//! them. The core decides over these and the store reads and writes them; they live
//! here, with neither, so the core does not depend on the store for its own model. The
//! wire types (in `switchboard_types`) are built from them by the core.

use serde_json::Value;
use switchboard_types::ids::{AgentId, MessageId, TeamId};
use switchboard_types::ids::{AgentPk, MessagePk, TeamPk};
use switchboard_types::messages::{Content, MessageKind, MessageType, Priority, ResponseStatus};
use switchboard_types::routing::{Route, Via};
use switchboard_types::time::Timestamp;

mod chain;
mod tasks;
pub mod trace;
pub use chain::{Chain, TAIL as CHAIN_TAIL};
pub use tasks::*;
pub use trace::MessageTrace;

/// A SHA-256 digest of a token secret.
pub type SecretHash = [u8; 32];

/// The admin token as stored: its digest, and when it was set (unknown for a token set
/// by a version that did not record it), so that a start without `--admin-token` can
/// say which token is in force and how to replace a lost one.
#[derive(Debug, Clone, Copy)]
pub struct AdminTokenRecord {
    pub hash: SecretHash,
    pub set_at: Option<Timestamp>,
}

/// A team as stored.
#[derive(Debug, Clone)]
pub struct TeamRecord {
    pub pk: TeamPk,
    pub team_id: TeamId,
    pub name: String,
    pub key_id: String,
    pub key_hash: SecretHash,
    pub communication_enabled: bool,
    /// A STOMP team bridge registers unknown agents on their first subscription.
    pub stomp_auto_register: bool,
    /// The Wise Agents context a message without one is handed to Wise agents in.
    pub stomp_default_context: Option<String>,
    /// The team's own retention (each `None`: the server's).
    pub retention: switchboard_types::teams::Retention,
    pub loop_guard: switchboard_types::loops::LoopGuard,
    /// The team's own budgets (each `None`: the server's ceiling).
    pub budgets: switchboard_types::budgets::Budgets,
    /// Claims a task offered to a role gets before a lease that runs out fails it.
    pub max_attempts: i64,
    /// The agents (by id) that may decide the team's approvals besides the team key.
    pub approvers: Vec<switchboard_types::ids::AgentId>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

/// An agent as stored. A removed agent keeps its row (messages point at it) but has no
/// token and is no longer a member.
#[derive(Debug, Clone)]
pub struct AgentRecord {
    pub pk: AgentPk,
    pub team_pk: TeamPk,
    pub agent_id: AgentId,
    pub role: String,
    pub capabilities: Vec<String>,
    pub address: Option<String>,
    pub status: switchboard_types::agents::AgentStatus,
    pub communication_enabled: bool,
    pub token_id: Option<String>,
    pub token_hash: Option<SecretHash>,
    pub registered_at: Timestamp,
    pub updated_at: Timestamp,
    pub removed_at: Option<Timestamp>,
    /// Publish addresses as set; `None` is the default (its id and role), which follows
    /// a change of role.
    pub addresses: Option<Vec<String>>,
    /// `cause_by` tags it takes up as news (`prefix*` for a prefix).
    pub watch: Vec<String>,
    /// Served by the team's STOMP bridge: the team key may act for it there.
    pub stomp_bridge: bool,
}

impl AgentRecord {
    pub fn is_member(&self) -> bool {
        self.removed_at.is_none()
    }

    /// The addresses a publish's `send_to` is matched against.
    pub fn effective_addresses(&self) -> Vec<String> {
        match &self.addresses {
            Some(set) => set.clone(),
            None => vec![self.agent_id.to_string(), self.role.clone()],
        }
    }

    /// Whether one of its addresses is in `send_to` (stage 1 of a publish; no
    /// allocation, since it runs for every member on every publish).
    pub fn addressed_by(&self, send_to: &std::collections::HashSet<&str>) -> bool {
        match &self.addresses {
            Some(set) => set.iter().any(|a| send_to.contains(a.as_str())),
            None => {
                send_to.contains(self.agent_id.as_str()) || send_to.contains(self.role.as_str())
            }
        }
    }

    /// Applies a cleaned subscription: each set given replaces the current one, and an
    /// empty address set restores the default.
    pub fn subscribe(&mut self, subscription: switchboard_types::publish::Subscription) {
        if let Some(addresses) = subscription.addresses {
            self.addresses = (!addresses.is_empty()).then_some(addresses);
        }
        if let Some(watch) = subscription.watch {
            self.watch = watch;
        }
    }

    /// Case-insensitive capability check.
    pub fn has_capability(&self, wanted: &str) -> bool {
        let wanted = wanted.to_lowercase();
        self.capabilities.iter().any(|c| c.to_lowercase() == wanted)
    }
}

/// An agent's acknowledged cursor and last activity, kept in memory by the hub and
/// saved once a second.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PresenceRow {
    pub agent: AgentPk,
    pub acked_seq: i64,
    pub last_seen_at: Option<Timestamp>,
}

/// One page of a list, read within the page byte bound: `cut` when rows were left for
/// their weight (the page says there is more even when it is short).
#[derive(Debug, Clone)]
pub struct Bounded<T> {
    pub rows: Vec<T>,
    pub cut: bool,
}

/// Where one of an agent's STOMP queues stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueCursorRow {
    pub agent: AgentPk,
    /// The queue's name inside the agent (`request`, `response`).
    pub queue: String,
    pub acked_seq: i64,
    /// The agent lost its subscription to this queue without unsubscribing.
    pub deaf: bool,
}

/// A message about to be written (before its key and time are known).
#[derive(Debug, Clone)]
pub struct NewMessage {
    pub message_id: MessageId,
    pub team_pk: TeamPk,
    pub kind: MessageKind,
    pub sender_pk: AgentPk,
    pub sender_role: String,
    pub message_type: MessageType,
    pub priority: Priority,
    pub content: Content,
    pub requires_response: bool,
    pub response_deadline: Option<Timestamp>,
    pub context_reference: Option<String>,
    pub thread_id: Option<String>,
    pub in_reply_to: Option<MessageId>,
    pub response_status: Option<ResponseStatus>,
    pub published: Option<PublishFields>,
    /// The transport it arrived by (`None` for messages the server writes itself).
    pub via: Option<Via>,
    /// The only live transport it is pushed by, if any.
    pub route: Option<Route>,
    /// The causal chain it extends (`None`: it starts one).
    pub chain: Option<Chain>,
    /// The trace it joins (`None`: it starts its own).
    pub trace: Option<MessageTrace>,
}

/// What a publish stores beyond a message: its tag, address set and structured output,
/// and the recipients for whom it is not news.
#[derive(Debug, Clone)]
pub struct PublishFields {
    pub cause_by: String,
    pub send_to: Vec<String>,
    pub instruct_content: Option<Value>,
    /// Recipients that get the entry without it being news (their inbox entry has
    /// `news = 0`), sorted: looked up once per recipient, on the writer's thread too.
    pub quiet: Vec<AgentPk>,
}

/// The publish part of a stored message.
#[derive(Debug, Clone)]
pub struct PublishedRecord {
    pub cause_by: String,
    pub send_to: Vec<String>,
    pub instruct_content: Option<Value>,
}

impl NewMessage {
    /// A message of `kind` from `sender` with every optional part empty; the setters
    /// below fill what an operation has.
    pub fn new(
        message_id: MessageId,
        sender: &AgentRecord,
        kind: MessageKind,
        message_type: MessageType,
        content: Content,
    ) -> NewMessage {
        NewMessage {
            message_id,
            team_pk: sender.team_pk,
            kind,
            sender_pk: sender.pk,
            sender_role: sender.role.clone(),
            message_type,
            priority: Priority::Normal,
            content,
            requires_response: false,
            response_deadline: None,
            context_reference: None,
            thread_id: None,
            in_reply_to: None,
            response_status: None,
            published: None,
            via: None,
            route: None,
            chain: None,
            trace: None,
        }
    }

    /// Records the transport it came by and the route it goes by.
    pub fn routed(mut self, via: Option<Via>, route: Option<Route>) -> Self {
        self.via = via;
        self.route = route;
        self
    }

    /// Makes it a publish.
    pub fn published(mut self, fields: PublishFields) -> Self {
        self.published = Some(fields);
        self
    }

    /// Whether the entry of `agent` is news for it.
    pub fn is_news_for(&self, agent: AgentPk) -> bool {
        self.published
            .as_ref()
            .is_none_or(|p| p.quiet.binary_search(&agent).is_err())
    }

    pub fn priority(mut self, priority: Priority) -> Self {
        self.priority = priority;
        self
    }

    /// Asks for a response, due by `deadline` if one is given.
    pub fn requires_response(mut self, required: bool, deadline: Option<Timestamp>) -> Self {
        self.requires_response = required;
        self.response_deadline = deadline;
        self
    }

    pub fn context_reference(mut self, reference: Option<String>) -> Self {
        self.context_reference = reference;
        self
    }

    /// Places the message in a conversation, after the message it follows up on.
    pub fn thread(mut self, thread_id: Option<String>, in_reply_to: Option<MessageId>) -> Self {
        self.thread_id = thread_id;
        self.in_reply_to = in_reply_to;
        self
    }

    /// The trace it joins (`None`: it starts its own).
    pub fn traced(mut self, trace: Option<MessageTrace>) -> Self {
        self.trace = trace;
        self
    }

    /// The chain it extends (`None`, or a first hop: it starts one, stored as none).
    pub fn chain(mut self, chain: Option<Chain>) -> Self {
        self.chain = chain.filter(|c| !c.is_first());
        self
    }

    pub fn response_status(mut self, status: ResponseStatus) -> Self {
        self.response_status = Some(status);
        self
    }
}

/// A message as stored, without per-recipient state.
#[derive(Debug, Clone)]
pub struct MessageRecord {
    pub pk: MessagePk,
    pub message_id: MessageId,
    pub team_pk: TeamPk,
    pub kind: MessageKind,
    pub sender_pk: AgentPk,
    pub sender_role: String,
    pub message_type: MessageType,
    pub priority: Priority,
    pub content: Content,
    pub requires_response: bool,
    pub response_deadline: Option<Timestamp>,
    pub context_reference: Option<String>,
    pub thread_id: Option<String>,
    pub in_reply_to: Option<MessageId>,
    pub response_status: Option<ResponseStatus>,
    pub created_at: Timestamp,
    pub published: Option<PublishedRecord>,
    pub via: Option<Via>,
    pub route: Option<Route>,
    /// The causal chain it extends (`None`: it started one).
    pub chain: Option<Chain>,
    /// The trace it joined (`None`: it started its own).
    pub trace: Option<MessageTrace>,
}

impl MessageRecord {
    /// Its chain: the stored one, or itself when it started one.
    pub fn chain(&self) -> Chain {
        self.chain.clone().unwrap_or_else(|| {
            Chain::first(self.message_id.as_str(), self.sender_pk, self.created_at)
        })
    }
}

/// Which page of a team's traffic to read (see `TrafficQuery`).
#[derive(Debug, Clone, Copy)]
pub struct TrafficSpec {
    /// After this message key, oldest first; without it the newest, newest first.
    pub after: Option<i64>,
    pub limit: i64,
}

/// A search of a team's messages (`store/search.rs`): the terms, who reads (`None`: the
/// team key, every message), the filters and the page.
#[derive(Debug, Clone)]
pub struct SearchSpec {
    pub team: TeamPk,
    pub terms: switchboard_types::search::SearchTerms,
    pub viewer: Option<AgentPk>,
    pub sender: Option<AgentPk>,
    pub recipient: Option<AgentPk>,
    pub thread_id: Option<String>,
    pub message_type: Option<MessageType>,
    pub kind: Option<MessageKind>,
    pub cause_by: Option<String>,
    pub since: Option<Timestamp>,
    pub until: Option<Timestamp>,
    pub sort: switchboard_types::search::SearchSort,
    /// Older than this message key (newest first).
    pub before: Option<i64>,
    /// Skip this many of the ranking (relevance).
    pub offset: i64,
    pub limit: i64,
}

/// A message of a team's traffic with the agents it was addressed to.
#[derive(Debug, Clone)]
pub struct TrafficRow {
    pub message: MessageRecord,
    pub recipients: Vec<AgentId>,
}

/// One recipient's entry of a message: its sequence number, read time, and whether it
/// is news for the recipient (false only for a publish it does not watch).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InboxEntry {
    pub seq: i64,
    pub read_at: Option<Timestamp>,
    pub news: bool,
}

/// One inbox entry with its message.
#[derive(Debug, Clone)]
pub struct InboxItem {
    pub entry: InboxEntry,
    pub message: MessageRecord,
}

/// The store's form of an inbox query: ids resolved to keys.
#[derive(Debug, Clone, Default)]
pub struct InboxFilter {
    pub message_types: Option<Vec<MessageType>>,
    pub sender_pks: Option<Vec<AgentPk>>,
    pub priority: Option<Priority>,
    pub unread_only: bool,
    pub since: Option<Timestamp>,
    pub kinds: Option<Vec<MessageKind>>,
    pub thread_id: Option<String>,
    /// Only entries that are news.
    pub news_only: bool,
    /// Only publishes with this tag (`prefix*`: starting with `prefix`).
    pub cause_by: Option<String>,
}

/// A page of inbox entries as the store found them.
#[derive(Debug, Clone, Default)]
pub struct InboxSlice {
    pub items: Vec<InboxItem>,
    /// Set when the page stopped at the end of its window of sequence numbers before the
    /// inbox ended: the next page starts after this sequence number, even if this one
    /// holds fewer entries than asked for (or none).
    pub resume_after: Option<i64>,
    /// Set when the page stopped at `MAX_PAGE_BYTES` with entries left: more follow
    /// after its last entry.
    pub cut: bool,
}

/// Where to start a page of the inbox and which way to go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InboxPageSpec {
    pub order: switchboard_types::messages::SortOrder,
    /// Entries after this sequence number in `order` (a cursor).
    pub after: Option<i64>,
    pub limit: i64,
}

/// How many entries of an inbox match a filter (ignoring paging), and how many of them
/// are unread: exact, or (`exact: false`) lower bounds counted over the newest entries.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct InboxCounts {
    pub total: i64,
    pub unread: i64,
    pub exact: bool,
}

/// How long a responder took to answer a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResponseLatency {
    pub responder: AgentPk,
    /// From the original's commit to the response's, in microseconds.
    pub micros: i64,
}

/// How many open tasks (in progress or waiting for input) an agent is assigned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpenTasks {
    pub agent: AgentPk,
    pub open: i64,
}

/// A team's callback signing key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TeamSecret {
    pub secret: String,
    pub rotated_at: Timestamp,
}

/// Per-agent counts of a team.
#[derive(Debug, Clone, Copy, Default)]
pub struct Counts {
    pub sent: i64,
    pub received: i64,
    pub unread: i64,
    /// Responses given.
    pub responded: i64,
}

/// One agent's part of its team's activity.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ActivityCounts {
    /// Unread entries that are news.
    pub unread_news: u64,
    /// Open tasks assigned to it.
    pub open_tasks: u64,
}

/// A response recorded on an original message.
#[derive(Debug, Clone)]
pub struct ResponseRow {
    pub response_message_id: MessageId,
    pub responder: AgentPk,
    pub status: ResponseStatus,
    pub created_at: Timestamp,
}

/// One batch of the retention pass over a team's messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MessageSweepSpec {
    pub team: TeamPk,
    /// Start after this message pk (0: from the oldest).
    pub after: i64,
    /// Messages sent before this (microseconds) that nobody has unread go.
    pub read_before: Option<i64>,
    /// Messages sent before this go, read or not.
    pub any_before: Option<i64>,
    /// Most messages looked at.
    pub limit: i64,
}

/// What one batch of the retention pass did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MessageSweep {
    pub removed: u64,
    /// Where the next batch starts; `None` when this one reached messages too young to
    /// go (or the end).
    pub next_after: Option<i64>,
}

mod approvals;
mod leases;
mod nodes;
mod posts;
mod remotes;
mod webhooks;
pub use approvals::{ApprovalDecision, ApprovalListSpec, ApprovalRecord};
pub use leases::{LeaseChange, LeaseRecord, LeaseScope, LeaseView};
pub use nodes::{Change, NodeConnections};
pub use posts::{
    Charge, Decided, IdempotencyClaim, MarkOutcome, NewPost, PostContext, PostOutcome, PostResult,
    ResponseLink, StoredAnswer,
};
pub use remotes::RemoteAgentRecord;
pub use webhooks::WebhookRecord;
