//! Publish and watch (MetaGPT's `publish_message` and `_watch`): a message goes to the
//! members whose addresses meet its `send_to`, and is news for those that watch its
//! `cause_by` or whom `send_to` names. See `switchboard_types::publish` for the rules
//! as the client sees them.

use std::collections::HashSet;
use std::sync::Arc;
use switchboard_types::ids::AgentId;

use switchboard_types::agents::AgentEnvelope;
use switchboard_types::messages::{MessageKind, MessageType};
use switchboard_types::publish::{
    Publish, PublishResult, SetWatch, TO_ALL, TO_SELF, clean_subscription, watches,
};
use switchboard_types::time::Timestamp;

use super::delivery::{Outgoing, SendRequest, Sending};
use super::loops::Links;
use super::{Caller, Core, CoreError, CoreResult, ids};
use crate::model::{AgentRecord, NewMessage, PublishFields};
use std::ops::ControlFlow;
use switchboard_types::MessageOpName;

/// Who a publish reaches, and for whom it is news.
struct Audience {
    recipients: Vec<Arc<AgentRecord>>,
    /// Recipients for whom it is not news.
    quiet: Vec<Arc<AgentRecord>>,
}

impl Core {
    /// Publishes a message under a tag to an address set.
    pub(super) async fn publish(
        &self,
        caller: &Caller,
        input: Publish,
        idempotency_key: Option<&str>,
    ) -> CoreResult<PublishResult> {
        let mut request = SendRequest::new(MessageOpName::Publish, idempotency_key, &input);
        if let Some(id) = &input.sender_agent_id {
            request = request.claimed(id, "sender_agent_id");
        }
        let Sending { team, sender, idem } = match self.start_sending(caller, request).await? {
            ControlFlow::Break(answer) => return Ok(answer),
            ControlFlow::Continue(sending) => sending,
        };
        let send_to = input.validate()?;
        let parent = self
            .message_parent(&sender, None, input.thread_id.as_deref())
            .await?;
        let chain = self.guard(&team, &sender, parent, Links::Messages)?;
        let audience = self.audience(&team.pk, &sender, &input.cause_by, &send_to);
        let names: Vec<AgentId> = audience
            .recipients
            .iter()
            .map(|a| a.agent_id.clone())
            .collect();
        let mut quiet: Vec<_> = audience.quiet.iter().map(|a| a.pk).collect();
        quiet.sort_unstable();
        let news_for: Vec<AgentId> = audience
            .recipients
            .iter()
            .filter(|a| quiet.binary_search(&a.pk).is_err())
            .map(|a| a.agent_id.clone())
            .collect();
        let no_recipients = counted_if_unheard(names.is_empty());
        let message = NewMessage::new(
            ids::ordered_id("msg").into(),
            &sender,
            MessageKind::Publish,
            MessageType::Information,
            input.content,
        )
        .thread(input.thread_id, None)
        .chain(chain)
        .traced(self.trace_for(None))
        .routed(caller.via(), None)
        .published(PublishFields {
            cause_by: input.cause_by.clone(),
            send_to: send_to.clone(),
            instruct_content: input.instruct_content,
            quiet,
        });
        let outgoing = Outgoing {
            message,
            recipients: audience.recipients,
            response: None,
            spends_budget: true,
        };
        let cause_by = input.cause_by;
        self.post(
            &sender,
            idem,
            outgoing,
            |_| Ok(()),
            move |p| PublishResult {
                success: true,
                message_id: p.message_id.clone(),
                cause_by,
                send_to,
                recipients: names,
                news_for,
                no_recipients,
                timestamp: p.timestamp,
                delivery_status: p.delivery.clone(),
            },
        )
        .await
    }

    /// MetaGPT's two stages over the team's members.
    fn audience(
        &self,
        team: &switchboard_types::ids::TeamPk,
        sender: &AgentRecord,
        cause_by: &str,
        send_to: &[String],
    ) -> Audience {
        let to_all = send_to.iter().any(|a| a == TO_ALL);
        let to_self = send_to.iter().any(|a| a == TO_SELF);
        let named: HashSet<&str> = send_to.iter().map(String::as_str).collect();
        let mut audience = Audience {
            recipients: Vec::new(),
            quiet: Vec::new(),
        };
        for agent in self.registry().members(*team) {
            let (addressed, named_here) = if agent.pk == sender.pk {
                (to_self, to_self)
            } else {
                let addressed = to_all || agent.addressed_by(&named);
                (addressed, named.contains(agent.agent_id.as_str()))
            };
            if !addressed {
                continue;
            }
            if !(named_here || watches(&agent.watch, cause_by)) {
                audience.quiet.push(agent.clone());
            }
            audience.recipients.push(agent);
        }
        audience
    }

    /// Replaces the caller's addresses and/or watched tags (`set_watch`).
    pub(super) async fn set_watch(
        &self,
        caller: &Caller,
        input: SetWatch,
    ) -> CoreResult<AgentEnvelope> {
        let (team, me) = self.identity().acting_agent(caller)?;
        self.check_claimed(caller, input.agent_id.as_ref(), "agent_id")?;
        if input.addresses.is_none() && input.watch.is_none() {
            return Err(CoreError::validation(
                "body",
                "give addresses, watch or both",
            ));
        }
        let subscription = clean_subscription(&input.addresses, &input.watch)?;
        self.change_agent(&team, me.pk, move |agent| {
            agent.subscribe(subscription);
            agent.updated_at = Timestamp::now();
        })
        .await
    }
}

/// Counts a publish nobody's inbox got (stored and answered: MetaGPT loses these
/// silently; here the operator can see them); `unheard` back.
fn counted_if_unheard(unheard: bool) -> bool {
    if unheard {
        metrics::counter!("switchboard_publish_no_recipients_total").increment(1);
    }
    unheard
}
