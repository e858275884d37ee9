//! A team's lease events for the agents that watch them (`docs/leases.md`, "Watching
//! leases"): each grant, extension, release, conflict and end is published from the
//! lease's holder (for a conflict, from the agent that asked) under
//! [`LEASE_EVENTS_TAG`] to the team's agents that watch that tag.
//!
//! Why a publish and not a frame of its own: an inbox entry is stored, pushed on every
//! transport (WebSocket, STOMP, MCP listeners, A2A), crosses nodes and is replayed after
//! a disconnect, all by code that exists once; a frame would have had none of that. The
//! event is written after the lease change committed, never in its transaction: a crash
//! between the two loses the event, never the lease, and a grant nobody watches costs
//! one scan of the team's members.

use std::sync::Arc;

use serde_json::{Map, Value, json};
use switchboard_types::leases::{LEASE_EVENTS_TAG, LeaseConflict, LeaseEvent, LeaseEventKind};
use switchboard_types::messages::{Content, MessageKind, MessageType};
use switchboard_types::publish::{TO_ALL, watches};

use super::delivery::Outgoing;
use super::leases::Decision;
use super::{Core, ids};
use crate::model::{AgentRecord, LeaseRecord, NewMessage, PublishFields, TeamRecord};

impl Core {
    /// Tells the team's lease watchers what a decision did: `done` for a lease changed,
    /// a conflict for `asked` refused (nothing for other refusals, which changed nothing).
    pub(super) async fn announce_decision(
        &self,
        team: &TeamRecord,
        decision: &Decision,
        done: LeaseEventKind,
        asked: Option<&LeaseRecord>,
        reason: Option<String>,
    ) {
        let (kind, lease, conflicts) = match (decision, asked) {
            (Decision::Done(lease), _) => (done, lease, &[][..]),
            (Decision::Conflicts(held), Some(asked)) => {
                (LeaseEventKind::Conflict, asked, &held[..])
            }
            _ => return,
        };
        self.announce_lease(team, None, kind, lease, conflicts, reason)
            .await;
    }

    /// Publishes one lease event to the team's agents that watch [`LEASE_EVENTS_TAG`],
    /// from `holder` (by default the lease's holder, as the registry has it). Failures
    /// are logged: the lease change it tells of is committed either way.
    pub(super) async fn announce_lease(
        &self,
        team: &TeamRecord,
        holder: Option<Arc<AgentRecord>>,
        kind: LeaseEventKind,
        lease: &LeaseRecord,
        conflicts: &[LeaseRecord],
        reason: Option<String>,
    ) {
        let watchers: Vec<Arc<AgentRecord>> = self
            .registry()
            .members(team.pk)
            .into_iter()
            .filter(|a| watches(&a.watch, LEASE_EVENTS_TAG))
            .collect();
        if watchers.is_empty() {
            return;
        }
        let Some(from) = holder.or_else(|| self.registry().agent(lease.holder_pk)) else {
            return;
        };
        let event = LeaseEvent {
            event: kind,
            lease: self.lease_view(team, lease.clone()),
            conflicts: conflicts
                .iter()
                .map(|l| LeaseConflict::from(self.lease_view(team, l.clone())))
                .collect(),
            reason,
        };
        let message = match event_message(&from, &event) {
            Ok(message) => message,
            Err(err) => {
                tracing::error!(error = %err, "a lease event could not be rendered");
                return;
            }
        };
        let outgoing = Outgoing {
            message,
            recipients: watchers,
            response: None,
            spends_budget: false,
        };
        if let Err(err) = self.post(&from, None, outgoing, |_| Ok(()), |_| ()).await {
            tracing::warn!(error = %err, "a lease event was not published");
        }
    }
}

/// The publish carrying `event`: its text one line for people, its data and
/// `instruct_content` the event for programs.
fn event_message(from: &AgentRecord, event: &LeaseEvent) -> Result<NewMessage, serde_json::Error> {
    let lease = &event.lease;
    let text = format!(
        "lease {}: {} {} {}{}",
        event.event.name(),
        lease.resource,
        if lease.exclusive {
            "exclusive"
        } else {
            "shared"
        },
        lease.holder,
        match event.event {
            LeaseEventKind::Granted | LeaseEventKind::Extended => {
                format!(" until {}", lease.expires_at)
            }
            LeaseEventKind::Conflict => format!(" ({} held by others)", event.conflicts.len()),
            LeaseEventKind::Released | LeaseEventKind::Expired => String::new(),
        }
    );
    Ok(event_publish(
        from,
        (LEASE_EVENTS_TAG, "lease_event"),
        format!("lease:{}", lease.lease_id),
        text,
        serde_json::to_value(event)?,
    ))
}

/// A server-made event as a publish from `from` under `tag` to every address, on
/// `thread`: `text` one line for people, the event (`body`) as `instruct_content` and
/// again in `content.data` beside `"type": kind`. What lease and approval events share.
pub(super) fn event_publish(
    from: &AgentRecord,
    (tag, kind): (&str, &str),
    thread: String,
    text: String,
    body: Value,
) -> NewMessage {
    let mut data = Map::new();
    data.insert("type".into(), json!(kind));
    if let Value::Object(fields) = body.clone() {
        data.extend(fields);
    }
    NewMessage::new(
        ids::ordered_id("msg").into(),
        from,
        MessageKind::Publish,
        MessageType::Information,
        Content {
            text,
            data,
            attachments: Vec::new(),
        },
    )
    .thread(Some(thread), None)
    .published(PublishFields {
        cause_by: tag.to_owned(),
        send_to: vec![TO_ALL.to_owned()],
        instruct_content: Some(body),
        quiet: Vec::new(),
    })
}
