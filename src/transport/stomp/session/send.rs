//! `SEND`: to a Wise Agents queue through the body gate, as the body's `_sender`; to a
//! plain queue or a topic with any body, as the connection's agent.

use std::collections::HashSet;
use switchboard_types::MessageOp;
use switchboard_types::ids::AgentId;

use switchboard_types::Operation;

use super::{End, Identity, Session, Wire, required, unknown_destination};
use crate::core::Caller;
use crate::core::queues::QueueName;
use crate::core::trace::traced;
use crate::transport::stomp::StompState;
use crate::transport::stomp::frame::Frame;
use crate::transport::stomp::queues::{
    self as queues, Destination, plain_content, to_plain_message, to_publish, to_send_message,
};
use crate::transport::stomp::wise;
use switchboard_types::trace::TraceContext;

impl<W: Wire> Session<'_, W> {
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
        let caller = sender_of(self.state, &self.identity, &self.agents, &sender).await?;
        let raw = String::from_utf8_lossy(&frame.body);
        let message = to_send_message(&sender, &to, &wise, &raw);
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
            .acting_agent(caller)
            .map_err(End::from_core)?;
        let content = plain_content(&to.to_header(), &frame.body, frame.get("content-type"));
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

/// The W3C trace context of a `SEND`: its `traceparent` and `tracestate` headers.
fn trace_of(frame: &Frame) -> TraceContext {
    TraceContext::from_values(frame.get("traceparent"), frame.get("tracestate"))
}

/// Who a `SEND` is from: the agent itself, or on a bridge an agent the connection
/// subscribed for. (A free function: a `&Session` held across an await would need the
/// wire to be `Sync`.)
async fn sender_of(
    state: &StompState,
    identity: &Identity,
    agents: &HashSet<String>,
    sender: &AgentId,
) -> Result<Caller, End> {
    match identity {
        Identity::Agent(caller) => state
            .core
            .act_as(caller, None, sender, None)
            .await
            .map_err(End::from_core),
        Identity::Bridge { caller, team_id } => {
            if !agents.contains(sender.as_str()) {
                return Err(End::error(format!(
                    "_sender '{sender}' is not an agent this connection subscribed for; a team bridge sends as the agents whose queues it subscribed to"
                )));
            }
            state
                .core
                .act_as(caller, Some(team_id), sender, None)
                .await
                .map_err(End::from_core)
        }
    }
}
