//! RESPOND_TO_MESSAGE: answer a message that requires a response.
//!
//! The responder must be a recipient of the original (`INVALID_RECIPIENT`), the original
//! must require a response (`RESPONSE_NOT_REQUIRED`), before its deadline
//! (`RESPONSE_DEADLINE_PASSED`). The response reaches the original's sender and
//! `additional_recipients`; `partial` responses may be followed by more, and after a
//! final one the responder gets `CONFLICT`.

use std::sync::Arc;
use switchboard_types::ids::AgentId;
use switchboard_types::ids::MessageId;

use switchboard_types::ErrorCode;
use switchboard_types::messages::{
    Content, MessageKind, MessageType, RespondResult, RespondToMessage, ResponseContent,
    ResponseStatus,
};
use switchboard_types::time::Timestamp;

use super::delivery::{Outgoing, Posted, SendRequest, Sending};
use super::loops::Links;
use super::messages::message_not_found;
use super::{Caller, Core, CoreError, CoreResult, ids};
use crate::model::{AgentRecord, MessageRecord, NewMessage, ResponseLink, TeamRecord};
use std::ops::ControlFlow;
use switchboard_types::MessageOpName;

impl Core {
    /// RESPOND_TO_MESSAGE.
    pub(super) async fn respond(
        &self,
        caller: &Caller,
        message_id: &MessageId,
        input: RespondToMessage,
        idempotency_key: Option<&str>,
    ) -> CoreResult<RespondResult> {
        let keyed = (message_id, &input);
        let request = SendRequest::new(MessageOpName::RespondToMessage, idempotency_key, &keyed)
            .claimed(&input.responder_agent_id, "responder_agent_id");
        let Sending {
            team,
            sender: me,
            idem,
        } = match self.start_sending(caller, request).await? {
            ControlFlow::Break(answer) => return Ok(answer),
            ControlFlow::Continue(sending) => sending,
        };
        input.validate(message_id)?;
        let original = self.original_for(&team, &me, message_id).await?;
        let chain = self.guard(&team, &me, Some(original.chain()), Links::Messages)?;
        let (recipients, failed_extra) = self.response_recipients(&team, &me, &original, &input)?;
        let (status, content) = body_of(input.response_content);
        let message = NewMessage::new(
            ids::ordered_id("msg").into(),
            &me,
            MessageKind::Response,
            MessageType::Response,
            content,
        )
        .priority(original.priority)
        .context_reference(original.context_reference.clone())
        .thread(
            Some(thread_of(&original)),
            Some(original.message_id.clone()),
        )
        .response_status(status)
        .chain(chain)
        .traced(self.trace_for(Some(&original)))
        .routed(
            caller.via(),
            self.route_for(input.route, Some(&original), &recipients),
        );
        let link = ResponseLink {
            original: original.pk,
            responder: me.pk,
            status,
        };
        let responder_id = me.agent_id.clone();
        let outgoing = Outgoing {
            message,
            recipients,
            response: Some(link),
            spends_budget: true,
        };
        // Checked inside the transaction, so two racing responses cannot both pass: the
        // second sees the first.
        let check = move |context: crate::model::PostContext| {
            if context.final_response_given {
                return Err(already_final(&responder_id, &original));
            }
            check_deadline(&original, context.now)
        };
        self.post(&me, idem, outgoing, check, move |p: &Posted| {
            let mut delivery = p.delivery.clone();
            delivery.failed_delivery.extend(failed_extra);
            RespondResult {
                success: true,
                response_message_id: p.message_id.clone(),
                original_message_updated: true,
                timestamp: p.timestamp,
                delivery_status: delivery,
                error: None,
            }
        })
        .await
    }

    /// The original of a response: one the responder received, that wants a response
    /// and is not past its deadline. To an agent that is no party to it (neither its
    /// sender nor a recipient) a message answers as a missing one: whether an id exists
    /// is not for it to learn. Its sender, who can read it, is told it was no recipient.
    async fn original_for(
        &self,
        team: &TeamRecord,
        responder: &AgentRecord,
        message_id: &MessageId,
    ) -> CoreResult<MessageRecord> {
        let store = self.store();
        let original = store
            .find_message(team.pk, message_id)
            .await?
            .ok_or_else(|| message_not_found(message_id))?;
        if store
            .inbox_entry(responder.pk, original.pk)
            .await?
            .is_none()
        {
            if original.sender_pk != responder.pk {
                return Err(message_not_found(message_id));
            }
            return Err(CoreError::new(
                ErrorCode::InvalidRecipient,
                format!(
                    "'{}' was not a recipient of message {message_id}",
                    responder.agent_id
                ),
            )
            .with("invalid_ids", vec![responder.agent_id.clone()])
            .suggest("Only recipients of a message can respond to it."));
        }
        if !original.requires_response {
            return Err(CoreError::new(
                ErrorCode::ResponseNotRequired,
                format!("message {message_id} does not require a response"),
            )
            .with("message_id", message_id));
        }
        check_deadline(&original, Timestamp::now())?;
        Ok(original)
    }

    /// The original's sender (if still a member) and the additional recipients; the
    /// second list names a sender that was removed (it cannot receive).
    fn response_recipients(
        &self,
        team: &TeamRecord,
        responder: &AgentRecord,
        original: &MessageRecord,
        input: &RespondToMessage,
    ) -> CoreResult<(Vec<Arc<AgentRecord>>, Vec<AgentId>)> {
        let mut recipients: Vec<Arc<AgentRecord>> = Vec::new();
        let mut failed = Vec::new();
        match self.registry().agent(original.sender_pk) {
            Some(sender) if sender.is_member() => recipients.push(sender),
            Some(gone) => failed.push(gone.agent_id.clone()),
            None => {}
        }
        let extra = self.resolve_recipients(
            team,
            responder,
            &input.additional_recipients,
            "additional_recipients",
        )?;
        for agent in extra {
            if !recipients.iter().any(|r| r.pk == agent.pk) {
                recipients.push(agent);
            }
        }
        Ok((recipients, failed))
    }
}

/// A response's status and its message content.
fn body_of(response: ResponseContent) -> (ResponseStatus, Content) {
    let content = Content {
        text: response.text,
        data: response.data,
        attachments: Vec::new(),
    };
    (response.status, content)
}

/// The thread a response joins: its original's, or the original itself as the thread's
/// start.
fn thread_of(original: &MessageRecord) -> String {
    original
        .thread_id
        .clone()
        .unwrap_or_else(|| original.message_id.to_string())
}

fn already_final(responder_id: &str, original: &MessageRecord) -> CoreError {
    CoreError::new(
        ErrorCode::Conflict,
        format!(
            "'{responder_id}' already gave a final response to {}",
            original.message_id
        ),
    )
    .with("message_id", original.message_id.as_str())
    .suggest("Only 'partial' responses may be followed by more; send a new message instead.")
}

fn check_deadline(original: &MessageRecord, now: Timestamp) -> CoreResult<()> {
    match original.response_deadline {
        Some(deadline) if now > deadline => Err(CoreError::new(
            ErrorCode::ResponseDeadlinePassed,
            format!(
                "the response deadline of {} was {deadline}",
                original.message_id
            ),
        )
        .with("message_id", original.message_id.as_str())
        .with("response_deadline", deadline.to_string())),
        _ => Ok(()),
    }
}
