//! An approval's request, decision and expiry told to those who act on them: the asker
//! (its decision and its expiry, whether it watches or not) and the team's agents that
//! watch [`APPROVAL_EVENTS_TAG`] (an approver agent hears of every request).
//!
//! As lease events (`lease_events.rs`), a publish from the asker: stored, pushed on every
//! transport, replayed after a disconnect, crossing nodes, all by code that exists once.
//! Written after the approval's change committed: a crash between the two loses the
//! event, never the decision, which a read or a wait of the approval returns.

use std::sync::Arc;

use switchboard_types::approvals::{APPROVAL_EVENTS_TAG, Approval, ApprovalEvent, ApprovalStatus};
use switchboard_types::messages::Priority;
use switchboard_types::publish::watches;

use super::Core;
use super::delivery::Outgoing;
use super::lease_events::event_publish;
use crate::model::{AgentRecord, ApprovalRecord, NewMessage, TeamRecord};

impl Core {
    /// Publishes what happened to `approval` (`view`, as it now stands). Failures are
    /// logged: the change it tells of is committed either way.
    pub(super) async fn announce_approval(
        &self,
        team: &TeamRecord,
        approval: &ApprovalRecord,
        view: &Approval,
    ) {
        let Some(asker) = self.registry().agent(approval.asker_pk) else {
            return;
        };
        let asker_told = view.status != ApprovalStatus::Pending && asker.is_member();
        let recipients: Vec<Arc<AgentRecord>> = self
            .registry()
            .members(team.pk)
            .into_iter()
            .filter(|a| (asker_told && a.pk == asker.pk) || watches(&a.watch, APPROVAL_EVENTS_TAG))
            .collect();
        if recipients.is_empty() {
            return;
        }
        let event = ApprovalEvent {
            event: match view.status {
                ApprovalStatus::Pending => "requested",
                ApprovalStatus::Decided => "decided",
                ApprovalStatus::Expired => "expired",
            }
            .to_owned(),
            approval: view.clone(),
        };
        let message = match event_message(&asker, &event) {
            Ok(message) => message,
            Err(err) => {
                tracing::error!(error = %err, "an approval event could not be rendered");
                return;
            }
        };
        let outgoing = Outgoing {
            message,
            recipients,
            response: None,
            spends_budget: false,
        };
        if let Err(err) = self.post(&asker, None, outgoing, |_| Ok(()), |_| ()).await {
            tracing::warn!(error = %err, "an approval event was not published");
        }
    }
}

/// The publish carrying `event`: its text one line for people, its data and
/// `instruct_content` the event for programs.
fn event_message(
    from: &AgentRecord,
    event: &ApprovalEvent,
) -> Result<NewMessage, serde_json::Error> {
    let a = &event.approval;
    let text = match a.status {
        ApprovalStatus::Pending => format!(
            "approval {} asked by {}: {} ({})",
            a.approval_id,
            a.asked_by,
            a.summary,
            a.options.join(" / ")
        ),
        ApprovalStatus::Decided => format!(
            "approval {} decided: {}{}",
            a.approval_id,
            a.decision.as_deref().unwrap_or(""),
            a.comment
                .as_deref()
                .map(|c| format!(" — {c}"))
                .unwrap_or_default()
        ),
        ApprovalStatus::Expired => {
            format!(
                "approval {} expired undecided: {}",
                a.approval_id, a.summary
            )
        }
    };
    let mut message = event_publish(
        from,
        (APPROVAL_EVENTS_TAG, "approval_event"),
        format!("approval:{}", a.approval_id),
        text,
        serde_json::to_value(event)?,
    );
    // A request waits on a person: it is as urgent as anything the team sends.
    if a.status == ApprovalStatus::Pending {
        message.priority = Priority::High;
    }
    Ok(message)
}
