//! BROADCAST_UPDATE: an update to every other member of the team.
//!
//! A broadcast is an inbox entry of `kind: broadcast` for each recipient: its
//! `content.text` is the summary and `content.data` carries `update_type`, `urgency`,
//! `details`, `impact` and `action_required`. Urgency sets the inbox priority
//! ([`Urgency::priority`](switchboard_types::broadcasts::Urgency::priority)), so
//! priority filters work across kinds.

use serde_json::{Map, Value, json};
use switchboard_types::broadcasts::{BroadcastResult, BroadcastUpdate};
use switchboard_types::ids::AgentId;
use switchboard_types::messages::{Content, MessageKind, MessageType};

use super::delivery::{Outgoing, SendRequest, Sending};
use super::{Caller, Core, CoreResult, ids};
use crate::model::NewMessage;
use std::ops::ControlFlow;
use switchboard_types::MessageOpName;

impl Core {
    /// BROADCAST_UPDATE.
    pub(super) async fn broadcast(
        &self,
        caller: &Caller,
        input: BroadcastUpdate,
        idempotency_key: Option<&str>,
    ) -> CoreResult<BroadcastResult> {
        let request = SendRequest::new(MessageOpName::BroadcastUpdate, idempotency_key, &input)
            .claimed(&input.sender_agent_id, "sender_agent_id");
        let Sending { team, sender, idem } = match self.start_sending(caller, request).await? {
            ControlFlow::Break(answer) => return Ok(answer),
            ControlFlow::Continue(sending) => sending,
        };
        input.validate()?;
        let recipients = self.others(&team, &sender);
        let names: Vec<AgentId> = recipients.iter().map(|a| a.agent_id.clone()).collect();
        let mut data = Map::new();
        data.insert("update_type".into(), json!(input.update_type));
        data.insert("urgency".into(), json!(input.urgency));
        data.insert("details".into(), Value::String(input.content.details));
        data.insert("impact".into(), Value::String(input.content.impact));
        data.insert(
            "action_required".into(),
            Value::Bool(input.content.action_required),
        );
        let content = Content {
            text: input.content.summary,
            data,
            attachments: Vec::new(),
        };
        let message = NewMessage::new(
            ids::ordered_id("msg").into(),
            &sender,
            MessageKind::Broadcast,
            MessageType::Information,
            content,
        )
        .priority(input.urgency.priority())
        .traced(self.trace_for(None))
        .routed(caller.via(), None);
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
            move |p| BroadcastResult {
                success: true,
                broadcast_id: p.message_id.clone(),
                recipients: names,
                timestamp: p.timestamp,
                delivery_status: p.delivery.clone(),
                error: None,
            },
        )
        .await
    }
}
