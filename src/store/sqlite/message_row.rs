//! A message row as the store writes it: its JSON columns rendered on the caller's
//! thread, the rest bound by the writer, in one column order for the batch's insert
//! (`message_staging`) and the one-by-one path (`message_staging_one`).

use switchboard_types::ids::AgentId;
use switchboard_types::time::Timestamp;

use super::rows::{Col, Query, StoredContent, to_json};
use crate::model::NewMessage;
use crate::store::StoreError;

/// A message with its JSON columns already rendered; the writer binds them with the
/// message's other columns and the two only it knows (`pk` and `created_at`).
///
/// Rendering the content as JSON is the costliest part of a row; done here, on the
/// caller's thread, it runs in parallel across requests instead of on the writer's
/// thread, where every microsecond is spent once per message in series.
pub(super) struct RenderedMessage {
    pub(super) message: NewMessage,
    /// `content` as stored.
    content: String,
    /// `recipient_ids` as stored (a JSON array).
    recipients: String,
    /// A publish's address set and structured output as stored; `None` for other kinds.
    send_to: Option<String>,
    instruct: Option<String>,
    /// The chain it extends as stored (`None`: it starts one).
    chain: Option<String>,
    /// The trace it joins as stored (`None`: it starts its own).
    trace: Option<String>,
}

impl RenderedMessage {
    pub(super) fn new(
        message: NewMessage,
        recipient_ids: Vec<AgentId>,
    ) -> Result<RenderedMessage, StoreError> {
        let published = message.published.as_ref();
        Ok(RenderedMessage {
            content: to_json(&StoredContent::of(&message.content))?,
            recipients: to_json(&recipient_ids)?,
            send_to: published.map(|p| to_json(&p.send_to)).transpose()?,
            instruct: published
                .and_then(|p| p.instruct_content.as_ref())
                .map(to_json)
                .transpose()?,
            chain: message.chain.as_ref().map(to_json).transpose()?,
            trace: message.trace.as_ref().map(to_json).transpose()?,
            message,
        })
    }

    /// The message's row but its pk: the 24 columns after `pk` in [`MESSAGE_ROW`]'s
    /// order, for the batch's insert (either driver, see `direct`) and
    /// [`message_staging_one`](super::message_staging_one::message_staging_one)'s.
    pub(super) fn columns(&self, created_at: Timestamp) -> [Col<'_>; MESSAGE_BINDS] {
        let m = &self.message;
        [
            Col::Text(&m.message_id),
            Col::Int(m.team_pk.0),
            Col::Text(m.kind.as_str()),
            Col::Int(m.sender_pk.0),
            Col::Text(&m.sender_role),
            Col::Text(m.message_type.as_str()),
            Col::Text(m.priority.as_str()),
            Col::Text(&self.content),
            Col::Int(i64::from(m.requires_response)),
            Col::int(m.response_deadline.map(Timestamp::micros)),
            Col::text(m.context_reference.as_deref()),
            Col::text(m.thread_id.as_deref()),
            Col::text(m.in_reply_to.as_deref()),
            Col::text(m.response_status.map(|s| s.as_str())),
            Col::Text(&self.recipients),
            Col::Int(created_at.micros()),
            Col::text(m.published.as_ref().map(|p| p.cause_by.as_str())),
            Col::text(self.send_to.as_deref()),
            Col::text(self.instruct.as_deref()),
            Col::text(m.via.map(|v| v.as_str())),
            Col::text(m.route.map(|r| r.as_str())),
            Col::text(self.chain.as_deref()),
            Col::text(m.trace.as_ref().map(|t| t.trace_id.as_str())),
            Col::text(self.trace.as_deref()),
        ]
    }

    /// Binds [`RenderedMessage::columns`] to a sqlx query.
    pub(super) fn bind_row<'q>(&'q self, q: Query<'q>, created_at: Timestamp) -> Query<'q> {
        self.columns(created_at)
            .into_iter()
            .fold(q, |q, col| col.bind(q))
    }
}

/// The columns of a message row as [`RenderedMessage::bind_row`] binds them.
pub(super) const MESSAGE_ROW: &str = "message_id, team_pk, kind, sender_pk, sender_role, \
    message_type, priority, content, requires_response, response_deadline, context_reference, \
    thread_id, in_reply_to, response_status, recipient_ids, created_at, cause_by, send_to, \
    instruct_content, via, route, chain, trace_id, trace";

/// Columns bound per message row by [`RenderedMessage::bind_row`]: those of
/// [`MESSAGE_ROW`].
pub(super) const MESSAGE_BINDS: usize = {
    let bytes = MESSAGE_ROW.as_bytes();
    let (mut i, mut commas) = (0, 0);
    while i < bytes.len() {
        if bytes[i] == b',' {
            commas += 1;
        }
        i += 1;
    }
    commas + 1
};
