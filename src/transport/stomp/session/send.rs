//! `SEND`: to a Wise Agents queue through the body gate, as the body's `_sender`; to a
//! plain queue or a topic with any body, as the connection's agent.

use switchboard_types::MessageOp;
use switchboard_types::ids::AgentId;
use switchboard_types::messages::{RespondToMessage, ResponseContent, ResponseStatus, SendMessage};

use switchboard_types::Operation;

use super::{End, Identity, Session, Wire, required, unknown_destination};
use crate::core::Caller;
use crate::core::queues::QueueName;
use crate::core::trace::traced;
use crate::transport::stomp::StompState;
use crate::transport::stomp::frame::Frame;
use crate::transport::stomp::queues::{
    self as queues, Destination, WISE_ROLE, plain_content, to_plain_message, to_publish,
    to_send_message,
};
use crate::transport::stomp::replies::Asked;
use crate::transport::stomp::wise;
use switchboard_types::trace::TraceContext;

impl<W: Wire> Session<'_, W> {
    /// A `SEND`, or its refusal: whether it was taken. A refused `SEND` (a body the gate
    /// will not relay, a contract rule, a destination this server lacks) gets an `ERROR`
    /// naming why — with `receipt-id` when it asked for a receipt, and no `RECEIPT` — and
    /// the connection goes on, as ActiveMQ Artemis (the broker Wise Agents is built for)
    /// does: closing it would leave a Wise Agents process mute on that connection and
    /// deaf on its subscription for good, for one message a broker would have taken.
    /// Only what breaks the conversation itself (a broken frame, a failed `CONNECT` or
    /// `SUBSCRIBE`, a limit of the connection) still ends it, as the specification asks.
    pub(super) async fn send_or_refuse(&mut self, frame: &Frame) -> Result<bool, End> {
        match self.send(frame).await {
            Ok(()) => Ok(true),
            Err(End::Error {
                message, detail, ..
            }) => {
                metrics::counter!("switchboard_stomp_refused_sends_total").increment(1);
                tracing::warn!(
                    session = %self.session_id,
                    destination = frame.get("destination").unwrap_or_default(),
                    reason = %message,
                    "STOMP SEND refused; the connection stays open"
                );
                let receipt = frame.get("receipt").map(str::to_owned);
                self.write(Some(super::end::error_frame(message, detail, receipt)))
                    .await?;
                Ok(false)
            }
            Err(end) => Err(end),
        }
    }

    /// `SEND`: to a Wise Agents queue, the body through the gate, then a stored message
    /// from its `_sender`; to a plain queue or a topic, any body, from the connection's
    /// agent.
    pub(super) async fn send(&mut self, frame: &Frame) -> Result<(), End> {
        let destination = required(frame, "destination")?;
        let Some(to) = Destination::parse(destination) else {
            return Err(unknown_destination(destination));
        };
        if !queues::is_wise(&to.queue) {
            return self.send_plain(frame, &to).await;
        }
        let limit = self.state.settings.limits.max_frame_bytes;
        let wise = wise::check(&frame.body, limit).map_err(|why| {
            metrics::counter!("switchboard_stomp_refused_bodies_total").increment(1);
            End::Error {
                message: format!("body refused: {why}"),
                detail: "Only a plain !wiseagents.WiseAgentMessage mapping of scalars is relayed to an agent's queue; nothing was sent.".into(),
                receipt: None,
            }
        })?;
        let sender = AgentId::from(wise.sender.clone().unwrap_or_default());
        let caller = sender_of(self.state, &self.identity, &sender).await?;
        if let (Identity::Bridge { caller, team_id }, Some(to)) = (&self.identity, &to.agent_id) {
            self.state
                .core
                .queues()
                .queue_to_wait_in(caller, team_id, &AgentId::from(to.as_str()), WISE_ROLE)
                .await
                .map_err(End::from_core)?;
        }
        let raw = String::from_utf8_lossy(&frame.body);
        let mut message = to_send_message(&sender, &to, wise, &raw);
        let asked = match (&caller, &to.queue, &to.agent_id, &message.thread_id) {
            (Caller::Agent { agent, .. }, QueueName::Response, Some(requester), None) => self
                .state
                .replies
                .answered(*agent, &AgentId::from(requester.as_str())),
            _ => None,
        };
        if let Some(asked) = asked {
            if asked.requires_response {
                let response = as_response(&message, &asked);
                let answered =
                    traced(trace_of(frame), self.state.core.dispatch(&caller, response)).await;
                // Refused as a response (answered already, past its deadline): it goes
                // in as a message in the original's thread instead.
                if answered.is_ok() {
                    return Ok(());
                }
            }
            message.in_reply_to = Some(asked.message_id);
        }
        let operation = Operation::Messages(MessageOp::SendMessage {
            message,
            idempotency_key: None,
        });
        traced(
            trace_of(frame),
            self.state.core.dispatch(&caller, operation),
        )
        .await
        .map_err(End::from_core)?;
        Ok(())
    }

    /// A `SEND` to `/queue/<agent>` (a plain message) or `/topic/<tag>` (a publish).
    async fn send_plain(&mut self, frame: &Frame, to: &Destination) -> Result<(), End> {
        let Identity::Agent(caller) = &self.identity else {
            return Err(End::error(
                "a team bridge sends Wise Agents messages to /queue/request/<agent> and \
                 /queue/response/<agent> only; connect with an agent token for other destinations",
            ));
        };
        let (_, me) = self
            .state
            .core
            .identity()
            .acting_agent(caller)
            .map_err(End::from_core)?;
        let content = plain_content(
            &to.to_header(),
            &frame.body,
            frame.get("content-type"),
            queues::own_headers(&frame.headers),
        );
        let operation = match (&to.queue, &to.agent_id) {
            (QueueName::Topic(tag), _) => Operation::Messages(MessageOp::Publish {
                publish: to_publish(tag, content),
                idempotency_key: None,
            }),
            (_, Some(agent)) => Operation::Messages(MessageOp::SendMessage {
                message: to_plain_message(&me.agent_id, agent, content),
                idempotency_key: None,
            }),
            (_, None) => return Err(unknown_destination(&to.to_header())),
        };
        traced(trace_of(frame), self.state.core.dispatch(caller, operation))
            .await
            .map_err(End::from_core)?;
        Ok(())
    }
}

/// A Wise Agents reply to a request that wants a response, as RESPOND_TO_MESSAGE: the
/// same text and fields, so the original records it among its responses.
fn as_response(message: &SendMessage, asked: &Asked) -> Operation {
    Operation::Messages(MessageOp::RespondToMessage {
        message_id: asked.message_id.clone(),
        response: RespondToMessage {
            responder_agent_id: message.sender_agent_id.clone(),
            original_message_id: None,
            response_content: ResponseContent {
                text: message.content.text.clone(),
                data: message.content.data.clone(),
                status: ResponseStatus::Completed,
            },
            additional_recipients: Vec::new(),
            route: None,
        },
        idempotency_key: None,
    })
}

/// The W3C trace context of a `SEND`: its `traceparent` and `tracestate` headers.
fn trace_of(frame: &Frame) -> TraceContext {
    TraceContext::from_values(frame.get("traceparent"), frame.get("tracestate"))
}

/// Who a `SEND` is from: the agent itself; on a team bridge, the body's `_sender`, any
/// agent the bridge may act as — the same rule as for subscribing (`Core::act_as`), so
/// sending grants nothing a `SUBSCRIBE` on that connection would not. Wise Agents
/// reconnect a dropped connection without subscribing again and go on sending on it;
/// a rule tied to this connection's subscriptions made them mute for good. (A free
/// function: a `&Session` held across an await would need the wire to be `Sync`.)
async fn sender_of(
    state: &StompState,
    identity: &Identity,
    sender: &AgentId,
) -> Result<Caller, End> {
    match identity {
        Identity::Agent(caller) => state.core.queues().act_as(caller, None, sender, None).await,
        Identity::Bridge { caller, team_id } => {
            state
                .core
                .queues()
                .act_as(caller, Some(team_id), sender, Some(WISE_ROLE))
                .await
        }
    }
    .map_err(End::from_core)
}
