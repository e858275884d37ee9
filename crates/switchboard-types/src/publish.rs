//! Publish and watch, as MetaGPT teams work: a message names the action that produced
//! it (`cause_by`, a tag) and a set of addresses (`send_to`); agents keep a set of
//! addresses and a set of watched tags, and take up as news what they watch.
//!
//! Delivery has MetaGPT's two stages: (1) the recipients are the members, sender
//! excluded, whose addresses meet `send_to` (all of them for `<all>`; the sender too
//! for `<self>`); (2) an entry is *news* for its recipient when `cause_by` matches its
//! watch or `send_to` names its agent id. Every other inbox entry (a message, a
//! response, a task, …) was addressed to its recipient by name, so it counts as news.

use crate::ids::{AgentId, MessageId, TeamId};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::ErrorBody;
use crate::messages::{Content, DeliveryStatus, MAX_REFERENCE};
use crate::time::Timestamp;
use crate::validate::{check_optional, check_text};

/// The `send_to` address meaning every member but the sender (MetaGPT's
/// `MESSAGE_ROUTE_TO_ALL`), and the default `send_to`.
pub const TO_ALL: &str = "<all>";
/// The `send_to` address meaning the sender itself (MetaGPT's `MESSAGE_ROUTE_TO_SELF`).
pub const TO_SELF: &str = "<self>";
/// Most addresses an agent may have.
pub const MAX_ADDRESSES: usize = 32;
/// Most tags (or prefixes) an agent may watch.
pub const MAX_WATCH: usize = 64;
/// Most addresses in one `send_to`.
pub const MAX_SEND_TO: usize = 64;
/// Longest address, tag or watch entry, in characters.
pub const MAX_TAG: usize = 200;

/// Checks a set of addresses or tags: at most `max` entries, each 1–[`MAX_TAG`]
/// characters and not blank; duplicates collapse (first one kept). Entries are kept as
/// given (matching is exact).
pub fn clean_tags(field: &str, tags: &[String], max: usize) -> Result<Vec<String>, ErrorBody> {
    if tags.len() > max {
        return Err(ErrorBody::validation(
            field,
            format!("{field}: at most {max} entries (got {})", tags.len()),
        )
        .with("max", max));
    }
    let mut out: Vec<String> = Vec::with_capacity(tags.len());
    for (i, tag) in tags.iter().enumerate() {
        check_text(&format!("{field}[{i}]"), tag, MAX_TAG)?;
        if !out.contains(tag) {
            out.push(tag.clone());
        }
    }
    Ok(out)
}

/// Tags only the server publishes under (`leases::LEASE_EVENTS_TAG`): a publish of a
/// client's under one is refused, so an event under it is the server's word.
pub const RESERVED_TAG_PREFIX: &str = "switchboard.";

/// Whether a watch list takes `cause_by` up as news: an entry matches exactly, and an
/// entry ending in `*` matches every tag that starts with what precedes it (`review.*`
/// watches `review.code` and `review.docs`; ours, beyond MetaGPT).
pub fn watches(watch: &[String], cause_by: &str) -> bool {
    watch.iter().any(|w| match w.strip_suffix('*') {
        Some(prefix) => cause_by.starts_with(prefix),
        None => w == cause_by,
    })
}

/// Body of a publish (`POST /v1/publish`, frame `publish`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Publish {
    /// When given, must be the calling agent (MetaGPT's `sent_from`).
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(example = "architect"))]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>))]
    pub sender_agent_id: Option<AgentId>,
    /// The action that produced the message: the tag watchers match (1–200 characters).
    #[cfg_attr(feature = "openapi", schema(example = "WriteDesign"))]
    pub cause_by: String,
    /// As SEND_MESSAGE's `content`.
    pub content: Content,
    /// Structured output of the action (any JSON), MetaGPT's `instruct_content`.
    #[serde(default)]
    pub instruct_content: Option<Value>,
    /// Addresses (agent ids, roles, or any address an agent took); `<all>` for every
    /// member but the sender (the default), `<self>` for the sender. At most 64.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(example = json!(["<all>"])))]
    pub send_to: Option<Vec<String>>,
    /// Groups a conversation (at most 256 characters).
    #[serde(default)]
    pub thread_id: Option<String>,
}

impl Publish {
    /// A publish of `text` under `cause_by` to everyone.
    pub fn new(cause_by: &str, text: &str) -> Publish {
        Publish {
            sender_agent_id: None,
            cause_by: cause_by.to_owned(),
            content: Content::text(text),
            instruct_content: None,
            send_to: None,
            thread_id: None,
        }
    }

    /// The value rules; returns `send_to` cleaned (`["<all>"]` when not given).
    pub fn validate(&self) -> Result<Vec<String>, ErrorBody> {
        check_text("cause_by", &self.cause_by, MAX_TAG)?;
        if self.cause_by.starts_with(RESERVED_TAG_PREFIX) {
            return Err(ErrorBody::validation(
                "cause_by",
                format!(
                    "tags starting with '{RESERVED_TAG_PREFIX}' are the server's own (lease \
                     events): a watcher must be able to trust them"
                ),
            )
            .with("reserved_prefix", RESERVED_TAG_PREFIX));
        }
        self.content.validate()?;
        check_optional("thread_id", &self.thread_id, MAX_REFERENCE)?;
        match &self.send_to {
            None => Ok(vec![TO_ALL.to_owned()]),
            Some(to) if to.is_empty() => Err(ErrorBody::validation(
                "send_to",
                "send_to must name at least one address (or leave it out for <all>)",
            )),
            Some(to) => clean_tags("send_to", to, MAX_SEND_TO),
        }
    }
}

/// Answer of a publish.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PublishResult {
    pub success: bool,
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub message_id: MessageId,
    pub cause_by: String,
    /// `send_to` as applied (`["<all>"]` by default).
    pub send_to: Vec<String>,
    /// Every member it went to (stage 1), by agent id.
    #[cfg_attr(feature = "openapi", schema(value_type = Vec<String>))]
    pub recipients: Vec<AgentId>,
    /// The recipients for whom it is news (stage 2).
    #[cfg_attr(feature = "openapi", schema(value_type = Vec<String>))]
    pub news_for: Vec<AgentId>,
    /// True when `send_to` met nobody: the message is stored (the sender can read it
    /// with `GET /v1/messages/{id}`) but no inbox got it. Counted in `/metrics`.
    pub no_recipients: bool,
    pub timestamp: Timestamp,
    pub delivery_status: DeliveryStatus,
}

/// Body of `PUT /v1/watch` and the `set_watch` frame: the calling agent's addresses and
/// watched tags, either or both, each replaced whole.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SetWatch {
    /// When given, must be the calling agent.
    #[serde(
        default,
        deserialize_with = "crate::decode::no_null",
        skip_serializing_if = "Option::is_none"
    )]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>))]
    pub agent_id: Option<AgentId>,
    /// The addresses `send_to` is matched against (at most 32; each 1–200 characters).
    /// An empty list restores the default: the agent id and its role.
    #[serde(
        default,
        deserialize_with = "crate::decode::no_null",
        skip_serializing_if = "Option::is_none"
    )]
    #[cfg_attr(feature = "openapi", schema(nullable = false, example = json!(["engineer", "Alex"])))]
    pub addresses: Option<Vec<String>>,
    /// The `cause_by` tags taken up as news (at most 64); `prefix*` watches a prefix.
    #[serde(
        default,
        deserialize_with = "crate::decode::no_null",
        skip_serializing_if = "Option::is_none"
    )]
    #[cfg_attr(feature = "openapi", schema(nullable = false, example = json!(["WriteDesign", "review.*"])))]
    pub watch: Option<Vec<String>>,
}

/// Cleaned subscription sets, as an agent keeps them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Subscription {
    /// `None`: the default (agent id and role), which follows a change of role.
    pub addresses: Option<Vec<String>>,
    pub watch: Option<Vec<String>>,
}

/// Validates the optional `addresses` and `watch` of a registration, an update or a
/// `set_watch`.
pub fn clean_subscription(
    addresses: &Option<Vec<String>>,
    watch: &Option<Vec<String>>,
) -> Result<Subscription, ErrorBody> {
    Ok(Subscription {
        addresses: addresses
            .as_ref()
            .map(|a| clean_tags("addresses", a, MAX_ADDRESSES))
            .transpose()?,
        watch: watch
            .as_ref()
            .map(|w| clean_tags("watch", w, MAX_WATCH))
            .transpose()?,
    })
}

/// One agent in a team's activity.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AgentActivity {
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub agent_id: AgentId,
    /// Unread inbox entries that are news for it.
    pub unread_news: u64,
    /// Open tasks (in progress or waiting for input) assigned to it.
    pub open_tasks: u64,
    /// Nothing unread that is news and no open task.
    pub idle: bool,
}

/// `GET /v1/teams/{team_id}/activity`, and the `team_activity` frame: whether the team
/// is idle, the way a MetaGPT environment decides to stop.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TeamActivity {
    pub success: bool,
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub team_id: TeamId,
    /// Nobody has unread news and no task of the team is open.
    pub idle: bool,
    /// Open tasks of the team (in progress or waiting for input).
    pub open_tasks: u64,
    /// Every member, by agent id.
    pub agents: Vec<AgentActivity>,
    pub as_of: Timestamp,
    /// Set on the frame pushed when the loop guard stopped a chain of the team (the
    /// first refusal of each chain in the guard's window); never on `GET`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loop_stopped: Option<crate::loops::LoopStopped>,
    /// Set on the frame pushed when a budget of the team refused a send (the first
    /// refusal of each budget, agent or thread in its window); never on `GET`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget_exhausted: Option<crate::budgets::BudgetExhausted>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn watch_matches_exact_tags_and_prefixes() {
        let watch = vec!["WriteCode".to_owned(), "review.*".to_owned()];
        assert!(watches(&watch, "WriteCode"));
        assert!(!watches(&watch, "WriteCodeReview"));
        assert!(watches(&watch, "review.docs"));
        assert!(!watches(&watch, "review"));
        assert!(!watches(&[], "WriteCode"));
        assert!(watches(&["*".to_owned()], "anything"));
    }

    #[test]
    fn sets_are_bounded_and_deduplicated() {
        let tags = |n: usize| (0..n).map(|i| format!("t{i}")).collect::<Vec<_>>();
        assert_eq!(
            clean_tags("watch", &tags(64), MAX_WATCH).map(|t| t.len()),
            Ok(64)
        );
        let err = clean_tags("watch", &tags(65), MAX_WATCH).expect_err("too many");
        assert_eq!(err.details["field"], "watch");
        let err = clean_tags("watch", &["a".into(), " ".into()], MAX_WATCH).expect_err("blank");
        assert_eq!(err.details["field"], "watch[1]");
        let long = "x".repeat(MAX_TAG + 1);
        let err = clean_tags("send_to", &[long], MAX_SEND_TO).expect_err("long");
        assert_eq!(err.details["field"], "send_to[0]");
        assert_eq!(
            clean_tags("watch", &["a".into(), "a".into()], MAX_WATCH),
            Ok(vec!["a".to_owned()])
        );
    }
}
