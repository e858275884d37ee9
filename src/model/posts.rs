//! A post on its way through the store: what the core hands over (the message, its
//! recipients, its idempotency claim, its charges), what it decides inside the
//! transaction, and what comes back.

use super::*;

/// The first answer to a request sent with an idempotency key.
#[derive(Debug, Clone)]
pub struct StoredAnswer {
    pub operation: String,
    pub request_hash: Vec<u8>,
    /// The answer, as JSON text.
    pub answer: String,
}

/// An idempotency key a post claims: if the key was used, the stored answer comes back
/// instead of a write; otherwise the answer is stored with the message.
#[derive(Debug, Clone)]
pub struct IdempotencyClaim {
    pub agent: AgentPk,
    pub key: String,
    pub operation: &'static str,
    pub request_hash: [u8; 32],
}

/// Records a post as a response to another message.
#[derive(Debug, Clone, Copy)]
pub struct ResponseLink {
    pub original: MessagePk,
    pub responder: AgentPk,
    pub status: ResponseStatus,
}

/// A message and where it goes, ready to be written in one job of the group commit.
#[derive(Debug, Clone)]
pub struct NewPost {
    pub message: NewMessage,
    /// Who it was addressed to (shown when the message is read).
    pub recipient_ids: Vec<AgentId>,
    /// Who gets an inbox entry (addressed members whose communication is on).
    pub deliver_to: Vec<AgentPk>,
    pub response: Option<ResponseLink>,
    /// The budgets the send spends from, checked and counted in its transaction.
    pub charges: Vec<Charge>,
}

/// One budget count a write spends from: `used` of `key` in the window starting at
/// `window_start` goes up by one, and the write is refused
/// ([`crate::store::StoreError::OverBudget`]) when that passes `limit`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Charge {
    pub team: TeamPk,
    /// The budget's name, and the agent or thread it counts for (`…:<id>`).
    pub key: String,
    /// Epoch seconds.
    pub window_start: i64,
    pub limit: u32,
}

/// What a written post became: its key and the `(agent, seq)` of its inbox entries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PostResult {
    pub pk: MessagePk,
    pub entries: Vec<(AgentPk, i64)>,
}

impl PostResult {
    /// The sequence number `agent` got.
    pub fn seq_of(&self, agent: AgentPk) -> Option<i64> {
        self.entries
            .iter()
            .find(|(pk, _)| *pk == agent)
            .map(|(_, seq)| *seq)
    }
}

/// What a post's decision inside the transaction can see.
#[derive(Debug, Clone, Copy)]
pub struct PostContext {
    /// The message's time (the transaction's).
    pub now: Timestamp,
    /// With a [`ResponseLink`]: whether the responder already gave a final response to
    /// the original (checked inside the transaction, so two racing responses cannot
    /// both pass).
    pub final_response_given: bool,
}

/// What a post's decision inside the transaction returns: a value for after the commit,
/// and the answer to store with the idempotency key (when the post claims one).
#[derive(Debug)]
pub struct Decided<T> {
    pub value: T,
    pub answer: Option<String>,
}

/// What MARK_MESSAGE_READ found, each list in the order the ids were given.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MarkOutcome {
    pub marked: Vec<MessageId>,
    pub already_read: Vec<MessageId>,
    /// Unknown, or not addressed to the agent (and untouched).
    pub not_found: Vec<MessageId>,
}

impl MarkOutcome {
    /// The ids as given, sorted by what the agent's entries were: `read` holds, per id
    /// found, whether its entry was read before this mark.
    pub fn of(
        message_ids: &[MessageId],
        read: &std::collections::HashMap<MessageId, bool>,
    ) -> MarkOutcome {
        let mut outcome = MarkOutcome::default();
        for id in message_ids {
            match read.get(id) {
                Some(false) => outcome.marked.push(id.clone()),
                Some(true) => outcome.already_read.push(id.clone()),
                None => outcome.not_found.push(id.clone()),
            }
        }
        outcome
    }
}

/// Whether a post was written, or answered from an earlier request with its key.
#[derive(Debug)]
pub enum PostOutcome<R> {
    Written(R),
    Replayed(StoredAnswer),
}

impl<R> PostOutcome<R> {
    /// What a written post's value becomes (a replayed answer stays as it is): how an
    /// engine turns a staged post into what its caller gets, after the commit.
    pub fn and_then_written<T, E>(
        self,
        then: impl FnOnce(R) -> Result<T, E>,
    ) -> Result<PostOutcome<T>, E> {
        match self {
            PostOutcome::Written(value) => then(value).map(PostOutcome::Written),
            PostOutcome::Replayed(stored) => Ok(PostOutcome::Replayed(stored)),
        }
    }
}
