//! SEND_MESSAGE, MARK_MESSAGE_READ and reading one message.
//!
//! A message is stored once; each recipient gets an inbox entry with its own sequence
//! number and read flag. Broadcasts, responses, assistance requests and task
//! notifications are messages too (`kind` tells them apart), so an agent's inbox shows
//! everything it received, in order.

use std::collections::HashSet;
use switchboard_types::ids::MessageId;

use switchboard_types::ErrorCode;
use switchboard_types::messages::{
    MarkRead, MarkReadResult, MessageDetail, MessageKind, MessageView, ResponseRecord, SendMessage,
    SendResult,
};
use switchboard_types::time::Timestamp;

use super::delivery::{Outgoing, Posted, SendRequest, Sending};
use super::loops::Links;
use super::{Caller, Core, CoreError, CoreResult, ids};
use crate::model::{AgentRecord, MessageRecord, NewMessage, TeamRecord};
use std::ops::ControlFlow;
use switchboard_types::MessageOpName;

/// A reply's thread and context: the ones it names, else its original's (its thread, or
/// the original itself as the thread's start; its context — as RESPOND_TO_MESSAGE's
/// response has — which a Wise Agents receiver needs to take it).
fn in_reply(
    original: Option<&MessageRecord>,
    thread_id: Option<String>,
    context_reference: Option<String>,
) -> (Option<String>, Option<String>) {
    let Some(original) = original else {
        return (thread_id, context_reference);
    };
    let thread = thread_id.or_else(|| {
        Some(
            original
                .thread_id
                .clone()
                .unwrap_or_else(|| original.message_id.to_string()),
        )
    });
    let context = context_reference.or_else(|| original.context_reference.clone());
    (thread, context)
}

impl Core {
    /// SEND_MESSAGE.
    pub(super) async fn send_message(
        &self,
        caller: &Caller,
        input: SendMessage,
        idempotency_key: Option<&str>,
    ) -> CoreResult<SendResult> {
        let request = SendRequest::new(MessageOpName::SendMessage, idempotency_key, &input)
            .claimed(&input.sender_agent_id, "sender_agent_id");
        let Sending { team, sender, idem } = match self.start_sending(caller, request).await? {
            ControlFlow::Break(answer) => return Ok(answer),
            ControlFlow::Continue(sending) => sending,
        };
        let recipients = if input.validate_recipients()? {
            self.others(&team, &sender)
        } else {
            self.resolve_recipients(
                &team,
                &sender,
                &input.recipient_agent_ids,
                "recipient_agent_ids",
            )?
        };
        input.validate_fields(Timestamp::now())?;
        let original = match &input.in_reply_to {
            Some(reply_to) => Some(self.visible_message(&team, &sender, reply_to).await?),
            None => None,
        };
        let (thread_id, context_reference) =
            in_reply(original.as_ref(), input.thread_id, input.context_reference);
        let parent = self
            .message_parent(&sender, original.as_ref(), thread_id.as_deref())
            .await?;
        let chain = self.guard(&team, &sender, parent, Links::Messages)?;
        let route = self.route_for(input.route, original.as_ref(), &recipients);
        let message = NewMessage::new(
            ids::ordered_id("msg").into(),
            &sender,
            MessageKind::Message,
            input.message_type,
            input.content,
        )
        .priority(input.priority)
        .requires_response(input.requires_response, input.response_deadline)
        .context_reference(context_reference)
        .thread(thread_id, input.in_reply_to)
        .chain(chain)
        .traced(self.trace_for(original.as_ref()))
        .routed(caller.via(), route);
        let outgoing = Outgoing {
            message,
            recipients,
            response: None,
            spends_budget: true,
        };
        self.post(
            &sender,
            idem,
            outgoing,
            |_| Ok(()),
            |p: &Posted| SendResult {
                success: true,
                message_id: p.message_id.clone(),
                timestamp: p.timestamp,
                delivery_status: p.delivery.clone(),
                error: None,
            },
        )
        .await
    }

    /// Reads one message: its sender or a recipient (others get `MESSAGE_NOT_FOUND`).
    pub(super) async fn get_message(
        &self,
        caller: &Caller,
        message_id: &MessageId,
    ) -> CoreResult<MessageDetail> {
        // The team key sees every message of its team, with its read marks.
        let (team, me) = self.reader(caller)?;
        let store = self.store();
        let message = store
            .find_message(team.pk, message_id)
            .await?
            .ok_or_else(|| message_not_found(message_id))?;
        let (entry, sees_reads) = match &me {
            Some(me) => {
                let entry = store.inbox_entry(me.pk, message.pk).await?;
                if entry.is_none() && message.sender_pk != me.pk {
                    return Err(message_not_found(message_id));
                }
                (entry, message.sender_pk == me.pk)
            }
            None => (None, true),
        };
        let recipient_agent_ids = match store.recipient_ids(message.pk).await {
            // Retention removed it between the two reads: it is gone, not a failure.
            Err(crate::store::StoreError::Missing) => return Err(message_not_found(message_id)),
            other => other?,
        };
        let read_by = if sees_reads {
            let pks = store.read_by(message.pk).await?;
            Some(pks.into_iter().map(|pk| self.agent_name(pk)).collect())
        } else {
            None
        };
        let responses = store
            .responses_to(message.pk)
            .await?
            .into_iter()
            .map(|r| ResponseRecord {
                response_message_id: r.response_message_id.clone(),
                responder_agent_id: self.agent_name(r.responder),
                status: r.status,
                timestamp: r.created_at,
            })
            .collect();
        let (seq, read) = entry.map_or((None, false), |e| (Some(e.seq), e.read_at.is_some()));
        Ok(MessageDetail {
            success: true,
            message: self.view(message, seq, read, entry.map(|e| e.news)),
            recipient_agent_ids,
            read_by,
            responses,
        })
    }

    /// MARK_MESSAGE_READ.
    pub(super) async fn mark_read(
        &self,
        caller: &Caller,
        input: MarkRead,
    ) -> CoreResult<MarkReadResult> {
        let (_team, me) = self.identity().acting_agent(caller)?;
        if input.agent_id != me.agent_id {
            return Err(CoreError::forbidden(
                "agent_id must be the calling agent: agents mark only their own messages",
            ));
        }
        input.validate()?;
        let mut seen = HashSet::new();
        let ids: Vec<MessageId> = input
            .message_ids
            .into_iter()
            .filter(|id| seen.insert(id.clone()))
            .collect();
        let outcome = self.store().mark_read(me.pk, ids, Timestamp::now()).await?;
        Ok(MarkReadResult {
            success: true,
            marked_read: outcome.marked,
            not_found: outcome.not_found,
            already_read: outcome.already_read,
            error: None,
        })
    }

    /// A message the agent may refer to (it sent or received it), or `MESSAGE_NOT_FOUND`.
    pub(super) async fn visible_message(
        &self,
        team: &TeamRecord,
        agent: &AgentRecord,
        message_id: &MessageId,
    ) -> CoreResult<MessageRecord> {
        let message = self
            .store()
            .find_message(team.pk, message_id)
            .await?
            .ok_or_else(|| message_not_found(message_id))?;
        if message.sender_pk == agent.pk
            || self
                .store()
                .inbox_entry(agent.pk, message.pk)
                .await?
                .is_some()
        {
            Ok(message)
        } else {
            Err(message_not_found(message_id))
        }
    }

    /// A stored message as a recipient sees it (`news`: whether its entry is news for
    /// the caller, `None` for a sender reading its own message).
    pub(super) fn view(
        &self,
        m: MessageRecord,
        seq: Option<i64>,
        read: bool,
        news: Option<bool>,
    ) -> MessageView {
        let sender_agent_id = self.agent_name(m.sender_pk);
        let (cause_by, sent_from, send_to, instruct_content, news) = match m.published {
            Some(p) => (
                Some(p.cause_by),
                Some(sender_agent_id.clone()),
                Some(p.send_to),
                p.instruct_content,
                news,
            ),
            None => (None, None, None, None, None),
        };
        MessageView {
            sender_agent_id,
            message_id: m.message_id.clone(),
            kind: m.kind,
            seq,
            sender_role: m.sender_role,
            message_type: m.message_type,
            content: m.content,
            priority: m.priority,
            timestamp: m.created_at,
            read_status: read,
            requires_response: m.requires_response,
            response_deadline: m.response_deadline,
            context_reference: m.context_reference,
            thread_id: m.thread_id,
            in_reply_to: m.in_reply_to,
            response_status: m.response_status,
            cause_by,
            sent_from,
            send_to,
            instruct_content,
            news,
            route: m.route,
            traceparent: Some(crate::model::trace::traceparent(
                &m.message_id,
                m.trace.as_ref(),
            )),
            tracestate: m.trace.and_then(|t| t.state),
        }
    }
}

pub(super) fn message_not_found(message_id: &MessageId) -> CoreError {
    CoreError::new(
        ErrorCode::MessageNotFound,
        format!("message '{message_id}' does not exist"),
    )
    .with("message_id", message_id)
}
