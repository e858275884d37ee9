//! Work offered to a role (`docs/tasks.md`, "Work any free agent can take"): a task
//! submitted with `assignee_role` waits, `open`, until an agent of that role claims it.
//! A claim is a lease: the claimer keeps the task by changing it (a progress report
//! starts the clock again) within `lease_seconds`; a lease that runs out puts the task
//! back for the next claimer, counting `attempts`, and after the team's `max_attempts`
//! fails it and tells the originator. An agent removed from the team gives its claims
//! back at once; one whose every connection ended gives them back after
//! `--claim-grace`, unless it renewed them since.
//!
//! Every one of these is an ordinary task change, decided by `TaskState::apply` and
//! written guarded by the task's version, so two claims of one task never both win, on
//! any node: the second finds the version moved and tries the next task.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use switchboard_types::ErrorCode;
use switchboard_types::claims::{ClaimTask, ExtendClaim, ReleaseTask, TaskClaimed, TaskOffer};
use switchboard_types::ids::{TaskPk, TaskRef};
use switchboard_types::task_state::{Action, Party, TaskStatus};
use switchboard_types::tasks::{
    CallbackStatus, ErrorMessage, SERVER_AGENT_ID, TaskEventKind, TaskFrame, TaskResponse,
    TaskResponseStatus, TaskUpdated,
};
use switchboard_types::time::Timestamp;

use super::commit::NotWritten;
use super::{Change, Loaded, Notice, accepts_tasks, map, refused};
use crate::core::assistance::capability_match;
use crate::core::{Caller, Core, CoreError, CoreResult};
use crate::model::{AgentRecord, TaskRecord, TeamRecord};

/// How many of a role's open tasks one claim looks at, at least.
const CANDIDATES: i64 = 32;
/// How many more than the claims deciding on this node a claim reads.
const SPARE_CANDIDATES: i64 = 8;
/// How many of its role's open tasks one look of a claim reads at most, looking for one
/// the claimer qualifies for (by capability).
const MAX_SCAN: i64 = 10_000;
/// The largest page a claim reads.
const MAX_PAGE: i64 = 1_024;
/// How often a waiting claim looks again without being woken (offers made on other
/// nodes wake nobody here).
const LOOK_AGAIN: Duration = Duration::from_secs(1);
/// The longest a claim that found every candidate being decided on by others waits for
/// one of those decisions before it reads again.
const CONTENDED_LOOK: Duration = Duration::from_millis(50);
/// How many lapsed claims one sweep step takes back.
const SWEEP_BATCH: i64 = 200;

impl Core {
    /// The first change of a task offered to `role`: open, nobody's, its role's online
    /// agents offered it, its originator told where it went.
    pub(super) fn offered(
        &self,
        mut task: TaskRecord,
        me: &Arc<AgentRecord>,
        role: String,
    ) -> CoreResult<(Change, TaskResponse, Option<ErrorMessage>)> {
        task.status = TaskStatus::Open;
        task.assignee_role = Some(role.clone());
        let response = TaskResponse {
            task_id: task.task_id.clone(),
            result_data: json!({
                "assignee_role": role,
                "message": format!("task {} is offered to the agents of role '{role}'", task.task_id),
            }),
            status: TaskResponseStatus::InProgress,
            agent_id: SERVER_AGENT_ID.to_owned().into(),
        };
        let details = json!({"assignee_role": role});
        let change = Change {
            event: self.event(&task, TaskEventKind::Submitted, me, map(details.clone())),
            callback: (CallbackStatus::InProgress, details),
            notices: vec![
                self.offer_notice(&task)?,
                Notice::new(
                    TaskFrame::TaskResponse,
                    &response,
                    self.originator_told(&task),
                )?,
            ],
            open_delta: Vec::new(),
            expected_version: None,
            actor: me.clone(),
            task,
        };
        Ok((change, response, None))
    }

    /// A `TaskOffer` for the agents that may claim `task` and are listening: a live
    /// connection on this node or another, or an MCP listener here (an inbox entry, so
    /// every transport pushes it as it pushes any task notification). Agents not
    /// listening are not told: a backlog of offers would fill their inboxes for work
    /// they can take by claiming anyway.
    fn offer_notice(&self, task: &TaskRecord) -> CoreResult<Notice> {
        let hub = self.hub();
        let online: Vec<Arc<AgentRecord>> = self
            .registry()
            .members(task.team_pk)
            .into_iter()
            .filter(|a| {
                may_claim(a, task)
                    && (hub.is_connected(a.pk)
                        || hub.is_connected_elsewhere(a.pk, None)
                        || hub.is_watching_inbox(a.pk))
            })
            .collect();
        let offer = TaskOffer {
            task_id: task.task_id.clone(),
            originating_agent_id: self.agent_name(task.originator_pk),
            description: task.description.clone(),
            priority: task.priority,
            assignee_role: task.assignee_role.clone().unwrap_or_default(),
            required_capabilities: task.required_capabilities.clone(),
            attempts: task.attempts,
        };
        Notice::new(TaskFrame::TaskOffer, &offer, online)
    }

    /// After a commit: a task that is open now wakes this node's waiting claims.
    pub(super) fn note_offered(&self, task: &TaskRecord) {
        if task.status == TaskStatus::Open {
            self.inner.tasks.claiming.forget(task.pk);
            self.inner.tasks.offered.notify_waiters();
        }
    }

    /// `POST /v1/tasks/claim`: the next task offered to the caller's role that it may
    /// take — most urgent first, then oldest — now the caller's; waiting up to
    /// `wait_seconds` for one; `task: null` when none came.
    pub(in crate::core) async fn claim_task(
        &self,
        caller: &Caller,
        input: ClaimTask,
    ) -> CoreResult<TaskClaimed> {
        let (wait, lease) = input.validate()?;
        let (team, me) = self.identity().acting_agent(caller)?;
        self.check_can_send(&team, &me)?;
        // A claim that may wait is a waiting call: it takes one of the credential's
        // places for those, or is refused before it waits.
        let _place = match wait {
            0 => None,
            _ => Some(self.live().hold_wait(caller)?),
        };
        let deadline = Instant::now() + Duration::from_secs(wait);
        loop {
            // Armed before the read: an offer committed after it wakes this wait.
            let offered = self.inner.tasks.offered.notified();
            tokio::pin!(offered);
            offered.as_mut().enable();
            let decided = self.inner.tasks.claiming.decided.notified();
            tokio::pin!(decided);
            decided.as_mut().enable();
            let (claimed, contended) = self.try_claim(&team, &me, lease).await?;
            if let Some(task) = claimed {
                return Ok(TaskClaimed {
                    success: true,
                    task: Some(self.task_view(&task)),
                });
            }
            if contended {
                // Other claims here decide on every candidate left: look again once one
                // of them is decided (at once when this claim lost its own).
                tokio::select! {
                    () = &mut decided => {}
                    () = tokio::time::sleep(CONTENDED_LOOK) => {}
                }
                continue;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(TaskClaimed {
                    success: true,
                    task: None,
                });
            }
            tokio::select! {
                () = &mut offered => {}
                () = tokio::time::sleep(left.min(LOOK_AGAIN)) => {}
            }
        }
    }

    /// One look at the role's open tasks: the one claimed, or whether every candidate
    /// was taken by another claim meanwhile (then there may be more to look at).
    async fn try_claim(
        &self,
        team: &Arc<TeamRecord>,
        me: &Arc<AgentRecord>,
        lease: u64,
    ) -> CoreResult<(Option<TaskRecord>, bool)> {
        // Enough candidates for every claim deciding here to have one of its own, and a
        // few more (each candidate read costs: 64 claimers reading 96 rows each spent
        // more on reading than on deciding).
        let deciding = self.inner.tasks.claiming.deciding() as i64;
        let wanted = CANDIDATES.max(deciding + SPARE_CANDIDATES);
        let Some(mine) = self.qualifying(team, me, wanted).await? else {
            return Ok((None, false));
        };
        // In claim order, skipping what other claims of this node decide on (`Claiming`).
        let mut from = 0;
        let pks: Vec<TaskPk> = mine.iter().map(|t| t.pk).collect();
        while let Some((i, mut deciding)) = self.inner.tasks.claiming.pick(&pks, from) {
            from = i + 1;
            let loaded = Loaded {
                team: team.clone(),
                me: me.clone(),
                task: mine[i].clone(),
                party: Party {
                    claimant: true,
                    ..Party::default()
                },
            };
            match self.commit(self.plan_claim(&loaded, lease)?).await {
                Ok(task) => {
                    deciding.taken = true;
                    return Ok((Some(task), false));
                }
                // Taken by a claim of another node (or changed): remembered as taken.
                Err(NotWritten::Stale) => deciding.taken = true,
                Err(NotWritten::Failed(err)) => return Err(err),
            }
        }
        // Every candidate was taken, or is being decided on by another claim here: there
        // may be more to look at once those are decided.
        Ok((None, true))
    }

    /// The first page of the role's open tasks, in claim order, that holds tasks `me` may
    /// claim: those (`None` when none of the first [`MAX_SCAN`] does). Pages after the
    /// first grow, so a claimer that qualifies only for tasks far down reads a few large
    /// pages, not many small ones.
    async fn qualifying(
        &self,
        team: &TeamRecord,
        me: &AgentRecord,
        first: i64,
    ) -> CoreResult<Option<Vec<TaskRecord>>> {
        let (mut after, mut page, mut scanned) = (None, first, 0);
        loop {
            let found = self
                .store()
                .offered_tasks(team.pk, me.role.clone(), after, page)
                .await?;
            let full = found.len() as i64 == page;
            scanned += found.len() as i64;
            let last = found.last().map(|t| (t.priority, t.pk));
            let mine: Vec<TaskRecord> = found.into_iter().filter(|t| may_claim(me, t)).collect();
            if !mine.is_empty() {
                return Ok(Some(mine));
            }
            match last {
                Some(last) if full && scanned < MAX_SCAN => after = Some(last),
                _ => return Ok(None),
            }
            page = (page * 4).min(MAX_PAGE);
        }
    }

    fn plan_claim(&self, l: &Loaded, lease: u64) -> CoreResult<Change> {
        let next = l
            .task_state()
            .apply(l.party, &Action::Claim, None)
            .map_err(|r| refused(r, &l.task))?;
        let mut task = l.next(next);
        task.assignee_pk = Some(l.me.pk);
        task.attempts += 1;
        task.start_lease(lease);
        let details = json!({
            "agent_id": l.me.agent_id,
            "attempt": task.attempts,
            "lease_expires_at": task.lease_expires_at,
        });
        let response = TaskResponse {
            task_id: task.task_id.clone(),
            result_data: json!({
                "assignee_agent_id": l.me.agent_id,
                "message": format!("task {} was claimed by {}", task.task_id, l.me.agent_id),
            }),
            status: TaskResponseStatus::InProgress,
            agent_id: l.me.agent_id.clone(),
        };
        let change = l.change(task, TaskEventKind::Claimed, map(details.clone()));
        Ok(Change {
            notices: vec![Notice::new(
                TaskFrame::TaskResponse,
                &response,
                self.originator_told(&change.task),
            )?],
            callback: (CallbackStatus::InProgress, details),
            open_delta: vec![(l.me.pk, 1)],
            ..change
        })
    }

    /// `POST /v1/tasks/{task_id}/release`: the claimer gives the task back to its role.
    pub(in crate::core) async fn release_task(
        &self,
        caller: &Caller,
        task_id: &TaskRef,
        input: ReleaseTask,
    ) -> CoreResult<TaskUpdated> {
        input.validate()?;
        let released = std::sync::atomic::AtomicI64::new(0);
        let updated = self
            .act(caller, task_id, |core, l| {
                released.store(l.task.pk.0, std::sync::atomic::Ordering::Relaxed);
                let details = json!({"agent_id": l.me.agent_id, "reason": input.reason});
                core.plan_give_back(l, TaskEventKind::Released, details)
            })
            .await?;
        let released = TaskPk(released.load(std::sync::atomic::Ordering::Relaxed));
        self.inner.tasks.claiming.forget(released);
        self.inner.tasks.offered.notify_waiters();
        Ok(updated)
    }

    /// `POST /v1/tasks/{task_id}/extend`: the claimer renews its lease without a progress
    /// report, for `lease_seconds` from now (which stays the claim's lease) or the
    /// claim's own. Who may, and when, is progress's rule; a task given to a named agent
    /// has no lease to renew.
    pub(in crate::core) async fn extend_claim(
        &self,
        caller: &Caller,
        task_id: &TaskRef,
        input: ExtendClaim,
    ) -> CoreResult<TaskUpdated> {
        let lease = input.validate()?;
        self.act(caller, task_id, |_, l| {
            let next = l
                .task_state()
                .apply(l.party, &Action::Progress, None)
                .map_err(|r| refused(r, &l.task))?;
            if l.task.assignee_role.is_none() {
                return Err(CoreError::new(
                    ErrorCode::InvalidTaskTransition,
                    format!(
                        "task {} was given to an agent, not claimed: it has no lease to extend",
                        l.task.task_id
                    ),
                )
                .with("task_id", l.task.task_id.as_str()));
            }
            let mut task = l.next(next);
            if let Some(lease) = lease {
                task.start_lease(lease);
            }
            let details = json!({
                "agent_id": l.me.agent_id,
                "lease_seconds": task.lease_seconds,
                "lease_expires_at": task.lease_expires_at,
            });
            Ok(l.change(task, TaskEventKind::LeaseExtended, map(details)))
        })
        .await
    }

    /// The claim of `l.me` ends (`Released`, or `LeaseExpired`): the task is open again
    /// and offered, or — a lease that ran out on the team's last attempt — failed, its
    /// originator told why.
    fn plan_give_back(
        &self,
        l: &Loaded,
        kind: TaskEventKind,
        details: Value,
    ) -> CoreResult<Change> {
        let exhausted =
            kind == TaskEventKind::LeaseExpired && l.task.attempts >= l.team.max_attempts;
        let action = if exhausted {
            Action::Finish { success: false }
        } else {
            Action::Release
        };
        let next = l
            .task_state()
            .apply(l.party, &action, None)
            .map_err(|r| refused(r, &l.task))?;
        let mut task = l.next(next);
        let open_delta = vec![(l.me.pk, -1)];
        if !exhausted {
            task.assignee_pk = None;
            let change = l.change(task, kind, map(details.clone()));
            return Ok(Change {
                notices: vec![self.offer_notice(&change.task)?],
                callback: (CallbackStatus::InProgress, details),
                open_delta,
                ..change
            });
        }
        let why = format!(
            "the task's lease ran out on each of its {} claims (the team's max_attempts)",
            l.task.attempts
        );
        let failure = json!({"error_code": "LEASE_EXPIRED", "error_message": why});
        task.result_data = failure.clone();
        let response = TaskResponse {
            task_id: task.task_id.clone(),
            result_data: failure.clone(),
            status: TaskResponseStatus::Failed,
            agent_id: SERVER_AGENT_ID.to_owned().into(),
        };
        let error = ErrorMessage {
            task_id: Some(task.task_id.clone()),
            error_code: "LEASE_EXPIRED".into(),
            error_message: why,
            originating_agent_id: self.agent_name(task.originator_pk),
        };
        let told = self.originator_told(&task);
        let mut data = map(details);
        data.insert("error".into(), failure.clone());
        let change = l.change(task, kind, data);
        Ok(Change {
            notices: vec![
                Notice::new(TaskFrame::TaskResponse, &response, told.clone())?,
                Notice::new(TaskFrame::ErrorMessage, &error, told)?,
            ],
            callback: (CallbackStatus::Failed, failure),
            open_delta,
            ..change
        })
    }

    /// Ends the claim of `task` held by `holder` as `kind` says, unless the task changed
    /// since it was read (then whoever changed it decided, and the next sweep looks
    /// again). Whether it was written.
    async fn end_claim(
        &self,
        task: TaskRecord,
        holder: Arc<AgentRecord>,
        kind: TaskEventKind,
        details: Value,
    ) -> CoreResult<bool> {
        let Some(team) = self.registry().team(task.team_pk) else {
            return Ok(false);
        };
        let loaded = Loaded {
            team,
            me: holder,
            task,
            party: Party {
                assignee: true,
                ..Party::default()
            },
        };
        let change = self.plan_give_back(&loaded, kind, details)?;
        match self.commit(change).await {
            Ok(task) => {
                self.note_offered(&task);
                Ok(true)
            }
            Err(NotWritten::Stale) => Ok(false),
            Err(NotWritten::Failed(err)) => Err(err),
        }
    }
}

/// Whether `agent` may claim `task`: of its role, accepting work, not its originator,
/// with a capability it asks for (any, as assignment matches).
fn may_claim(agent: &AgentRecord, task: &TaskRecord) -> bool {
    task.assignee_role.as_deref() == Some(agent.role.as_str())
        && agent.pk != task.originator_pk
        && accepts_tasks(agent).is_ok()
        && capability_match(agent, &task.required_capabilities) > 0.0
}

impl Core {
    /// Takes back the claims whose lease ran out by `now` (each open again, or failed
    /// after the team's `max_attempts`). Answers how many.
    pub(in crate::core) async fn sweep_claims(&self, now: Timestamp) -> CoreResult<u64> {
        let mut ended = 0;
        loop {
            let lapsed = self.store().lapsed_claims(now, SWEEP_BATCH).await?;
            let full = lapsed.len() as i64 == SWEEP_BATCH;
            let mut written = 0;
            for task in lapsed {
                let Some(holder) = task.assignee_pk.and_then(|pk| self.registry().agent(pk)) else {
                    continue;
                };
                let details = json!({"agent_id": holder.agent_id, "attempt": task.attempts});
                if self
                    .end_claim(task, holder, TaskEventKind::LeaseExpired, details)
                    .await?
                {
                    written += 1;
                }
            }
            ended += written;
            if !full || written == 0 {
                break;
            }
        }
        metrics::counter!("switchboard_claim_expiries_total").increment(ended);
        Ok(ended)
    }

    /// Gives back every claim of an agent that left its team, at once.
    pub(in crate::core) async fn give_back_claims_of(
        &self,
        agent: &AgentRecord,
    ) -> CoreResult<u64> {
        self.give_back(Arc::new(agent.clone()), "the agent was removed", None)
            .await
    }

    /// Gives back the claims of agents that went away: every live connection ended
    /// `--claim-grace` ago, none opened since on any node, and no claim of theirs
    /// renewed since they left (an agent still reporting progress over REST keeps its
    /// claims). An agent deaf on STOMP lost its subscription with its connection, so
    /// this covers it too. Answers how many.
    pub(in crate::core) async fn give_back_departed(&self, now: Timestamp) -> CoreResult<u64> {
        let grace =
            i64::try_from(self.inner.tasks.settings.claim_grace.as_micros()).unwrap_or(i64::MAX);
        let before = Timestamp::from_micros(now.micros().saturating_sub(grace));
        let mut given = 0;
        for (pk, left) in self.hub().take_departed(before) {
            if self.hub().is_connected_elsewhere(pk, None) {
                continue;
            }
            if let Some(agent) = self.registry().agent(pk) {
                let why = "every connection of the agent ended and it did not come back";
                given += self.give_back(agent, why, Some(left)).await?;
            }
        }
        metrics::counter!("switchboard_claim_departures_total").increment(given);
        Ok(given)
    }

    /// Gives back `agent`'s claims (only those not renewed since `left`, when given).
    async fn give_back(
        &self,
        agent: Arc<AgentRecord>,
        reason: &str,
        left: Option<Timestamp>,
    ) -> CoreResult<u64> {
        let held = self.store().claims_of(agent.team_pk, agent.pk).await?;
        let mut given = 0;
        for task in held {
            if left.is_some_and(|left| renewed_at(&task).is_none_or(|at| at > left)) {
                continue;
            }
            let details = json!({"agent_id": agent.agent_id, "reason": reason});
            if self
                .end_claim(task, agent.clone(), TaskEventKind::Released, details)
                .await?
            {
                given += 1;
            }
        }
        Ok(given)
    }
}

/// When a claim's lease last started (its claim or its latest progress).
fn renewed_at(task: &TaskRecord) -> Option<Timestamp> {
    let seconds = task.lease_seconds?;
    let end = task.lease_expires_at?;
    Some(Timestamp::from_micros(
        end.micros()
            .saturating_sub(seconds.saturating_mul(1_000_000)),
    ))
}
