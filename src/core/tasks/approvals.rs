//! An approval that belongs to a task is part of the task's story: its request and its
//! outcome are entries of the task's history (`approval_requested`,
//! `approval_decided`), so whoever follows the task — its originator's callback, its
//! webhooks, A2A's `input-required` — sees the task wait on a person and go on.

use std::sync::Arc;

use serde_json::{Map, Value, json};
use switchboard_types::approvals::Approval;
use switchboard_types::ids::AgentPk;
use switchboard_types::task_state::Party;
use switchboard_types::tasks::TaskEventKind;
use switchboard_types::time::Timestamp;

use super::commit::NotWritten;
use super::{ATTEMPTS, Loaded};
use crate::core::Core;
use crate::model::ApprovalRecord;

impl Core {
    /// Writes `kind` for `approval` (as `view` has it) into its task's history, by
    /// `actor` (`None`: the team key or the server's expiry). Best effort after the
    /// approval's own commit: a finished task takes no entry, and a failure is logged.
    pub(in crate::core) async fn note_approval(
        &self,
        approval: &ApprovalRecord,
        view: &Approval,
        kind: TaskEventKind,
        actor: Option<AgentPk>,
    ) {
        let (Some(task_pk), Some(task_id)) = (approval.task_pk, &approval.task_id) else {
            return;
        };
        let Some(asker) = self.registry().agent(approval.asker_pk) else {
            return;
        };
        let data = approval_data(view);
        for _ in 0..ATTEMPTS {
            let found = match self
                .store()
                .find_task(approval.team_pk, task_id, None)
                .await
            {
                Ok(found) => found,
                Err(err) => {
                    tracing::warn!(error = %err, "an approval's task entry was not written");
                    return;
                }
            };
            let Some(current) = found.into_iter().find(|t| t.pk == task_pk) else {
                return;
            };
            if current.status.is_final() {
                return;
            }
            // The task as it is, one version on: an approval changes no status and
            // renews no claim (so not `Loaded::next`, which renews a claim's lease).
            let mut task = current.clone();
            task.version += 1;
            task.updated_at = Timestamp::now().max(current.updated_at);
            let party = Party {
                originator: current.originator_pk == asker.pk,
                assignee: current.assignee_pk == Some(asker.pk),
                claimant: false,
            };
            let Some(team) = self.registry().team(approval.team_pk) else {
                return;
            };
            let loaded = Loaded {
                team,
                me: Arc::clone(&asker),
                task: current,
                party,
            };
            let mut change = loaded.change(task, kind, data.clone());
            // By the approver, or nobody (the team key, the expiry), not by the asker.
            change.event.actor_pk = actor;
            match self.commit(change).await {
                Ok(_) => return,
                Err(NotWritten::Stale) => continue,
                Err(NotWritten::Failed(err)) => {
                    tracing::warn!(error = %err, "an approval's task entry was not written");
                    return;
                }
            }
        }
    }
}

/// What a task's history entry holds of an approval: enough to read without a lookup.
fn approval_data(a: &Approval) -> Map<String, Value> {
    let mut data = Map::new();
    data.insert("approval_id".into(), json!(a.approval_id));
    data.insert("summary".into(), json!(a.summary));
    data.insert("options".into(), json!(a.options));
    data.insert("approval_status".into(), json!(a.status));
    if let Some(decision) = &a.decision {
        data.insert("decision".into(), json!(decision));
    }
    if let Some(comment) = &a.comment {
        data.insert("comment".into(), json!(comment));
    }
    if let Some(with) = a.decided_with {
        data.insert("decided_with".into(), json!(with));
    }
    data
}
