//! A message row as the store writes it: its JSON columns rendered on the caller's
//! thread, the rest bound by the writer, in one column order for the batch's insert
//! (`posts`) and the one-by-one path (`post_one`).

use switchboard_types::time::Timestamp;

use super::rows::{Query, StoredContent, to_json};
use crate::store::StoreError;
use crate::store::records::NewMessage;

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
}

impl RenderedMessage {
    pub(super) fn new(
        message: NewMessage,
        recipient_ids: Vec<String>,
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
            message,
        })
    }

    /// Binds the message's row but its pk: the 21 columns after `pk` in
    /// [`MESSAGE_ROW`]'s order (shared by the batch's insert and
    /// [`post_one`](super::post_one::post_one)'s).
    pub(super) fn bind_row<'q>(&'q self, q: Query<'q>, created_at: Timestamp) -> Query<'q> {
        let m = &self.message;
        q.bind(&m.message_id)
            .bind(m.team_pk.0)
            .bind(m.kind.as_str())
            .bind(m.sender_pk.0)
            .bind(&m.sender_role)
            .bind(m.message_type.as_str())
            .bind(m.priority.as_str())
            .bind(self.content.as_str())
            .bind(m.requires_response)
            .bind(m.response_deadline.map(Timestamp::micros))
            .bind(&m.context_reference)
            .bind(&m.thread_id)
            .bind(&m.in_reply_to)
            .bind(m.response_status.map(|s| s.as_str()))
            .bind(self.recipients.as_str())
            .bind(created_at.micros())
            .bind(m.published.as_ref().map(|p| p.cause_by.as_str()))
            .bind(self.send_to.as_deref())
            .bind(self.instruct.as_deref())
            .bind(m.via.map(|v| v.as_str()))
            .bind(m.route.map(|r| r.as_str()))
    }
}

/// The columns of a message row as [`RenderedMessage::bind_row`] binds them.
pub(super) const MESSAGE_ROW: &str = "message_id, team_pk, kind, sender_pk, sender_role, \
    message_type, priority, content, requires_response, response_deadline, context_reference, \
    thread_id, in_reply_to, response_status, recipient_ids, created_at, cause_by, send_to, \
    instruct_content, via, route";

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
