//! Approval checkpoints (`docs/approvals.md`): an agent asks, a person decides. The
//! rules are here, once: who may ask, see and decide; the bounds; what an expiry means.
//!
//! The approval's row is the truth. A decision and an expiry are one conditional write
//! each (`status = 'pending'` and unexpired), so exactly one of them wins, on any node.
//! What follows a commit — the waiting reads woken, the asker and the team's approval
//! watchers told (`approval_events.rs`), the task's history entry — is done after it and
//! never undoes it: a crash in between loses a notification, never the decision, which
//! every read and every wait returns.

use std::sync::Arc;
use std::time::Duration;

use switchboard_types::approvals::{
    Approval, ApprovalEnvelope, ApprovalList, ApprovalQuery, ApprovalStatus, ApprovalWait,
    DecideApproval, DecidedWith, MAX_APPROVAL_PAGE, MAX_APPROVERS, MAX_PENDING_PER_AGENT,
    RequestApproval,
};
use switchboard_types::ids::{AgentId, ApprovalId};
use switchboard_types::tasks::TaskEventKind;
use switchboard_types::time::Timestamp;
use switchboard_types::{ApprovalOp, ErrorCode, Reply};
use tokio::time::Instant;

use super::{Caller, Core, CoreError, CoreResult, auth, ids};
use crate::model::{AgentRecord, ApprovalDecision, ApprovalListSpec, ApprovalRecord, TeamRecord};

/// How often a waiting read looks again without being woken (a decision made on
/// another node wakes nobody here).
const LOOK_AGAIN: Duration = Duration::from_secs(1);
/// How many expired approvals one sweep step ends.
const SWEEP_BATCH: i64 = 500;
/// A page when the request names no `limit`.
const DEFAULT_PAGE: i64 = 50;

/// Who is acting on the team's approvals.
enum Actor {
    /// The team key: sees and decides every approval of its team.
    TeamKey,
    /// An agent; `approver` when the team names it in `approvers`.
    Agent {
        me: Arc<AgentRecord>,
        approver: bool,
    },
}

impl Actor {
    /// Whether this actor may see `approval`: its asker, an approver, the team key.
    fn sees(&self, approval: &ApprovalRecord) -> bool {
        match self {
            Actor::TeamKey => true,
            Actor::Agent { me, approver } => *approver || me.pk == approval.asker_pk,
        }
    }
}

impl Core {
    /// One exhaustive handler for the approval operations.
    pub(super) async fn dispatch_approval(
        &self,
        caller: &Caller,
        op: ApprovalOp,
    ) -> CoreResult<Reply> {
        let envelope = |approval| {
            Reply::Approval(Box::new(ApprovalEnvelope {
                success: true,
                approval,
            }))
        };
        Ok(match op {
            ApprovalOp::RequestApproval(input) => {
                envelope(self.request_approval(caller, input).await?)
            }
            ApprovalOp::DecideApproval {
                approval_id,
                decision,
            } => envelope(self.decide_approval(caller, approval_id, decision).await?),
            ApprovalOp::GetApproval { approval_id, wait } => {
                envelope(self.get_approval(caller, approval_id, wait).await?)
            }
            ApprovalOp::ListApprovals(query) => {
                Reply::Approvals(self.list_approvals(caller, query).await?)
            }
        })
    }

    /// The caller's team and who it acts as there (the admin belongs to no team).
    fn approval_actor(&self, caller: &Caller) -> CoreResult<(Arc<TeamRecord>, Actor)> {
        match caller {
            Caller::Admin => Err(CoreError::forbidden(
                "approvals belong to a team: use the team key or an agent token",
            )),
            Caller::Team { team } => {
                let team = self
                    .registry()
                    .team(*team)
                    .ok_or_else(auth::invalid_token)?;
                Ok((team, Actor::TeamKey))
            }
            Caller::Agent { .. } => {
                let (team, me) = self.identity().acting_agent(caller)?;
                let approver = team.approvers.contains(&me.agent_id);
                Ok((team, Actor::Agent { me, approver }))
            }
        }
    }

    async fn request_approval(
        &self,
        caller: &Caller,
        input: RequestApproval,
    ) -> CoreResult<Approval> {
        let (team, me) = self.identity().acting_agent(caller)?;
        self.check_can_send(&team, &me)?;
        let (options, ttl, wait) = input.validate()?;
        // A request that will wait takes its place among the credential's waiting calls
        // before anything is written: refused, it leaves no approval behind (as a
        // blocking A2A send leaves no task).
        let _place = match wait {
            0 => None,
            _ => Some(self.live().hold_wait(caller)?),
        };
        let task = self
            .approval_task(&team, &me, input.task_id.as_ref())
            .await?;
        let pending = self
            .store()
            .pending_approvals_of(me.pk, Timestamp::now())
            .await?;
        if pending >= MAX_PENDING_PER_AGENT {
            return Err(CoreError::new(
                ErrorCode::RateLimited,
                format!("an agent has at most {MAX_PENDING_PER_AGENT} approvals pending"),
            )
            .with("max", MAX_PENDING_PER_AGENT)
            .suggest("Wait for a decision on the ones pending, or let them expire."));
        }
        let now = Timestamp::now();
        let record = ApprovalRecord {
            pk: 0,
            team_pk: team.pk,
            approval_id: ApprovalId::from(ids::ordered_id("appr")),
            asker_pk: me.pk,
            task_pk: task.as_ref().map(|t| t.pk),
            task_id: task.as_ref().map(|t| t.task_id.to_string()),
            summary: input.summary,
            details: input.details,
            options,
            status: ApprovalStatus::Pending,
            decision: None,
            comment: None,
            decider_pk: None,
            decided_with: None,
            created_at: now,
            // At most seven days (`validate`): no overflow.
            expires_at: now.plus_millis(i64::try_from(ttl * 1_000).unwrap_or(i64::MAX)),
            decided_at: None,
        };
        self.store().insert_approval(record.clone()).await?;
        self.approval_committed(
            &team,
            &record,
            TaskEventKind::ApprovalRequested,
            Some(me.pk),
        )
        .await;
        if wait == 0 {
            return Ok(self.approval_view(&team, &record, now));
        }
        self.wait_for_decision(&team, &record.approval_id, wait)
            .await
    }

    /// The task an approval is asked about: one the asker takes part in, not finished.
    async fn approval_task(
        &self,
        team: &TeamRecord,
        me: &AgentRecord,
        reference: Option<&switchboard_types::ids::TaskRef>,
    ) -> CoreResult<Option<crate::model::TaskRecord>> {
        let Some(reference) = reference else {
            return Ok(None);
        };
        let task = self.find_one_task(team, Some(me.pk), reference).await?;
        if task.status.is_final() {
            return Err(CoreError::new(
                ErrorCode::InvalidTaskTransition,
                format!(
                    "task '{}' is {}: nothing is left to approve",
                    task.task_id,
                    task.status.as_str()
                ),
            )
            .with("task_id", task.task_id.as_str())
            .with("status", task.status.as_str()));
        }
        Ok(Some(task))
    }

    async fn decide_approval(
        &self,
        caller: &Caller,
        approval_id: ApprovalId,
        input: DecideApproval,
    ) -> CoreResult<Approval> {
        let (team, actor) = self.approval_actor(caller)?;
        input.validate()?;
        let found = self.visible_approval(&team, &actor, &approval_id).await?;
        let (decider_pk, decided_with) = match &actor {
            Actor::TeamKey => (None, DecidedWith::TeamKey),
            Actor::Agent { me, .. } if me.pk == found.asker_pk => {
                return Err(CoreError::forbidden(
                    "an agent cannot decide an approval it asked for",
                )
                .with("approval_id", approval_id.as_str()));
            }
            Actor::Agent {
                approver: false, ..
            } => {
                return Err(CoreError::forbidden(
                    "only the team key, or an agent the team names in its approvers, decides",
                )
                .with("approval_id", approval_id.as_str()));
            }
            Actor::Agent { me, .. } => (Some(me.pk), DecidedWith::Approver),
        };
        let now = Timestamp::now();
        closed_check(&found, now)?;
        if !found.options.contains(&input.decision) {
            return Err(CoreError::validation(
                "decision",
                format!(
                    "decision is one of the approval's options: {}",
                    found.options.join(", ")
                ),
            )
            .with("options", found.options.clone()));
        }
        let decision = ApprovalDecision {
            pk: found.pk,
            decision: input.decision,
            comment: input.comment,
            decider_pk,
            decided_with,
            at: now,
        };
        let Some(decided) = self.store().decide_approval(decision).await? else {
            // Decided or expired between the read and the write: say which.
            let now = Timestamp::now();
            let current = self
                .store()
                .approval(team.pk, approval_id.clone())
                .await?
                .unwrap_or(found);
            closed_check(&current, now)?;
            return Err(closed(&current, now));
        };
        self.approval_committed(&team, &decided, TaskEventKind::ApprovalDecided, decider_pk)
            .await;
        Ok(self.approval_view(&team, &decided, now))
    }

    async fn get_approval(
        &self,
        caller: &Caller,
        approval_id: ApprovalId,
        wait: ApprovalWait,
    ) -> CoreResult<Approval> {
        let (team, actor) = self.approval_actor(caller)?;
        let wait = wait.validate()?;
        let found = self.visible_approval(&team, &actor, &approval_id).await?;
        let now = Timestamp::now();
        if wait == 0 || found.status != ApprovalStatus::Pending || found.expires_at <= now {
            return Ok(self.approval_view(&team, &found, now));
        }
        // A waiting call takes one of the credential's places for those.
        let _place = self.live().hold_wait(caller)?;
        self.wait_for_decision(&team, &approval_id, wait).await
    }

    /// The approval once it is decided or expired, or as it stands after `wait` seconds.
    /// The caller holds a place among the credential's waiting calls (`Live::hold_wait`).
    async fn wait_for_decision(
        &self,
        team: &TeamRecord,
        approval_id: &ApprovalId,
        wait: u64,
    ) -> CoreResult<Approval> {
        let deadline = Instant::now() + Duration::from_secs(wait);
        loop {
            // Armed before the read: a decision committed after it wakes this wait.
            let changed = self.inner.approvals.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            let current = self
                .store()
                .approval(team.pk, approval_id.clone())
                .await?
                .ok_or_else(|| approval_not_found(approval_id))?;
            let now = Timestamp::now();
            let left = deadline.saturating_duration_since(Instant::now());
            if current.status != ApprovalStatus::Pending
                || current.expires_at <= now
                || left.is_zero()
            {
                return Ok(self.approval_view(team, &current, now));
            }
            tokio::select! {
                () = &mut changed => {}
                () = tokio::time::sleep(left.min(LOOK_AGAIN)) => {}
            }
        }
    }

    async fn list_approvals(&self, caller: &Caller, q: ApprovalQuery) -> CoreResult<ApprovalList> {
        let (team, actor) = self.approval_actor(caller)?;
        let limit = q.limit.unwrap_or(DEFAULT_PAGE);
        if !(1..=MAX_APPROVAL_PAGE).contains(&limit) {
            return Err(CoreError::validation(
                "limit",
                format!("limit is 1 to {MAX_APPROVAL_PAGE}"),
            )
            .with("max", MAX_APPROVAL_PAGE));
        }
        let before = match &q.cursor {
            None => None,
            Some(c) => Some(c.parse::<i64>().ok().filter(|pk| *pk > 0).ok_or_else(|| {
                CoreError::validation("cursor", "cursor is a next_cursor this list gave")
            })?),
        };
        let mut asker = match &q.asked_by {
            None => None,
            Some(id) => Some(self.member_of(&team, id)?.pk),
        };
        if let Actor::Agent {
            me,
            approver: false,
        } = &actor
        {
            // An agent that is not an approver sees the approvals it asked, no others.
            if asker.is_some_and(|a| a != me.pk) {
                return Err(CoreError::forbidden(
                    "an agent lists only the approvals it asked (approvers and the team key list all)",
                ));
            }
            asker = Some(me.pk);
        }
        let task = match &q.task_id {
            None => None,
            Some(reference) => {
                let viewer = match &actor {
                    Actor::Agent {
                        me,
                        approver: false,
                    } => Some(me.pk),
                    _ => None,
                };
                Some(self.find_one_task(&team, viewer, reference).await?.pk)
            }
        };
        let rows = self
            .store()
            .list_approvals(
                team.pk,
                ApprovalListSpec {
                    status: q.status,
                    asker,
                    task,
                    before,
                    limit: limit + 1,
                    now: Timestamp::now(),
                },
            )
            .await?;
        let now = Timestamp::now();
        let more = rows.len() as i64 > limit;
        let page: Vec<&ApprovalRecord> = rows.iter().take(limit as usize).collect();
        Ok(ApprovalList {
            success: true,
            next_cursor: if more {
                page.last().map(|a| a.pk.to_string())
            } else {
                None
            },
            approvals: page
                .into_iter()
                .map(|a| self.approval_view(&team, a, now))
                .collect(),
        })
    }

    /// The approval if the actor may see it; `APPROVAL_NOT_FOUND` alike when it does not
    /// exist and when it is not the caller's to see (nothing learnt by guessing ids).
    async fn visible_approval(
        &self,
        team: &TeamRecord,
        actor: &Actor,
        approval_id: &ApprovalId,
    ) -> CoreResult<ApprovalRecord> {
        self.store()
            .approval(team.pk, approval_id.clone())
            .await?
            .filter(|a| actor.sees(a))
            .ok_or_else(|| approval_not_found(approval_id))
    }

    /// Ends the approvals whose time ran out by `now`: each expired, its asker and
    /// watchers told, its task's history written. Answers how many.
    pub(super) async fn expire_approvals(&self, now: Timestamp) -> CoreResult<u64> {
        let mut ended = 0;
        loop {
            let batch = self.store().expire_approvals(now, SWEEP_BATCH).await?;
            let n = batch.len();
            for approval in batch {
                if let Some(team) = self.registry().team(approval.team_pk) {
                    self.approval_committed(&team, &approval, TaskEventKind::ApprovalDecided, None)
                        .await;
                }
            }
            ended += n as u64;
            if (n as i64) < SWEEP_BATCH {
                return Ok(ended);
            }
        }
    }

    /// After an approval's change committed: waiting reads woken, the asker and the
    /// team's watchers told, the task's history written.
    async fn approval_committed(
        &self,
        team: &TeamRecord,
        approval: &ApprovalRecord,
        kind: TaskEventKind,
        actor: Option<switchboard_types::ids::AgentPk>,
    ) {
        self.inner.approvals.notify_waiters();
        let view = self.approval_view(team, approval, Timestamp::now());
        self.announce_approval(team, approval, &view).await;
        self.note_approval(approval, &view, kind, actor).await;
    }

    /// An approval as clients see it; a pending one past its time reads as expired
    /// even before the sweep reaches it.
    pub(in crate::core) fn approval_view(
        &self,
        team: &TeamRecord,
        a: &ApprovalRecord,
        now: Timestamp,
    ) -> Approval {
        let expired = a.status == ApprovalStatus::Pending && a.expires_at <= now;
        Approval {
            approval_id: a.approval_id.clone(),
            team_id: team.team_id.clone(),
            asked_by: self.agent_name(a.asker_pk),
            summary: a.summary.clone(),
            details: a.details.clone(),
            options: a.options.clone(),
            task_id: a.task_id.clone(),
            status: if expired {
                ApprovalStatus::Expired
            } else {
                a.status
            },
            decision: a.decision.clone(),
            comment: a.comment.clone(),
            decided_by: a.decider_pk.map(|pk| self.agent_name(pk)),
            decided_with: a.decided_with,
            created_at: a.created_at,
            expires_at: a.expires_at,
            decided_at: if expired {
                Some(a.expires_at)
            } else {
                a.decided_at
            },
        }
    }
}

/// Checks a team's `approvers` (a team setting): members' ids, at most [`MAX_APPROVERS`].
pub(super) fn check_approvers(
    core: &Core,
    team: &TeamRecord,
    approvers: &[AgentId],
) -> CoreResult<()> {
    if approvers.len() > MAX_APPROVERS {
        return Err(CoreError::validation(
            "approvers",
            format!("a team names at most {MAX_APPROVERS} approvers"),
        ));
    }
    for id in approvers {
        core.member_of(team, id).map_err(|_| {
            CoreError::validation("approvers", format!("'{id}' is not a member of the team"))
        })?;
    }
    Ok(())
}

/// Refuses a decision on an approval that is no longer pending.
fn closed_check(a: &ApprovalRecord, now: Timestamp) -> CoreResult<()> {
    if a.status == ApprovalStatus::Pending && a.expires_at > now {
        return Ok(());
    }
    Err(closed(a, now))
}

fn closed(a: &ApprovalRecord, now: Timestamp) -> CoreError {
    let status = if a.status == ApprovalStatus::Pending && a.expires_at <= now {
        ApprovalStatus::Expired
    } else {
        a.status
    };
    let status_word: &'static str = status.into();
    let mut err = CoreError::new(
        ErrorCode::ApprovalClosed,
        match status {
            ApprovalStatus::Expired => format!("approval '{}' expired undecided", a.approval_id),
            _ => format!("approval '{}' was decided already", a.approval_id),
        },
    )
    .with("approval_id", a.approval_id.as_str())
    .with("status", status_word);
    if let Some(decision) = &a.decision {
        err = err.with("decision", decision.as_str());
    }
    err
}

fn approval_not_found(approval_id: &ApprovalId) -> CoreError {
    CoreError::new(
        ErrorCode::ApprovalNotFound,
        format!("approval '{approval_id}' does not exist"),
    )
    .with("approval_id", approval_id.as_str())
}
