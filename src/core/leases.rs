//! Leases on named resources (`docs/leases.md`): an agent says "I am working on this —
//! keep off" for a while. The rules are here, once: who may take, renew and release; the
//! limits; and when two leases conflict (`Pattern::overlaps`, with one holder never in
//! conflict with itself and shared leases coexisting). The decision runs inside the
//! store's transaction on the team's live leases (`Store::change_leases`), so two
//! overlapping exclusive leases are never both granted, on any node.

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use switchboard_types::ErrorCode;
use switchboard_types::ids::{AgentPk, LeaseId, TeamId};
use switchboard_types::leases::{
    AcquireLease, DEFAULT_TTL_SECONDS, ExtendLease, Lease, LeaseConflict, LeaseEnvelope,
    LeaseEventKind, LeaseList, LeaseQuery, MAX_LEASES_PER_AGENT, MAX_LEASES_PER_TEAM,
    MAX_REASON_CHARS, MAX_TTL_SECONDS, Pattern,
};
use switchboard_types::time::Timestamp;
use switchboard_types::{LeaseOp, Reply};

use super::{Caller, Core, CoreError, CoreResult, Need};
use crate::model::{AgentRecord, LeaseChange, LeaseRecord, LeaseScope, LeaseView, TeamRecord};

/// How many ended leases one sweep step removes.
const SWEEP_BATCH: i64 = 500;

/// What a decision on the team's leases found, before it becomes an answer.
pub(super) enum Decision {
    Done(LeaseRecord),
    Conflicts(Vec<LeaseRecord>),
    TooMany { limit: &'static str, max: usize },
    NotFound,
    NotYours,
}

impl Core {
    /// One exhaustive handler for the lease operations.
    pub(super) async fn dispatch_lease(&self, caller: &Caller, op: LeaseOp) -> CoreResult<Reply> {
        Ok(match op {
            LeaseOp::AcquireLease { team_id, lease } => {
                Reply::Lease(self.acquire_lease(caller, team_id.as_ref(), lease).await?)
            }
            LeaseOp::ExtendLease {
                team_id,
                lease_id,
                extend,
            } => Reply::Lease(
                self.extend_lease(caller, team_id.as_ref(), lease_id, extend)
                    .await?,
            ),
            LeaseOp::ReleaseLease { team_id, lease_id } => Reply::Lease(
                self.release_lease(caller, team_id.as_ref(), lease_id)
                    .await?,
            ),
            LeaseOp::ListLeases { team_id, query } => {
                Reply::Leases(self.list_leases(caller, team_id.as_ref(), query).await?)
            }
        })
    }

    /// The team a lease operation is about: the one named (which must be the caller's),
    /// or the caller's own.
    fn lease_team(&self, caller: &Caller, team_id: Option<&TeamId>) -> CoreResult<Arc<TeamRecord>> {
        match team_id {
            Some(team_id) => self.team_for(caller, team_id, Need::Read),
            None => {
                let own = self.identity().own_team_id(caller)?;
                self.team_for(caller, &own, Need::Read)
            }
        }
    }

    async fn acquire_lease(
        &self,
        caller: &Caller,
        team_id: Option<&TeamId>,
        input: AcquireLease,
    ) -> CoreResult<LeaseEnvelope> {
        let team = self.lease_team(caller, team_id)?;
        let (_, me) = self.identity().acting_agent(caller)?;
        let pattern = Pattern::parse("resource", &input.resource)?;
        let ttl = ttl("ttl_seconds", input.ttl_seconds)?;
        if let Some(reason) = &input.reason
            && reason.chars().count() > MAX_REASON_CHARS
        {
            return Err(CoreError::validation(
                "reason",
                format!("reason is at most {MAX_REASON_CHARS} characters"),
            ));
        }
        let exclusive = input.exclusive.unwrap_or(true);
        let now = Timestamp::now();
        let asked = LeaseRecord {
            pk: 0,
            team_pk: team.pk,
            lease_id: LeaseId::from(super::ids::ordered_id("lease")),
            holder_pk: me.pk,
            resource: input.resource,
            exclusive,
            reason: input.reason,
            acquired_at: now,
            expires_at: later(now, ttl),
        };
        let scope = LeaseScope::Around {
            holder: me.pk,
            prefix: Pattern::literal_prefix(&asked.resource).to_owned(),
        };
        let refused = asked.clone();
        let decision = self
            .store()
            .change_leases(team.pk, now, scope, move |view: LeaseView| {
                Ok::<_, CoreError>(decide_grant(asked, &pattern, view))
            })
            .await?;
        self.announce_decision(
            &team,
            &decision,
            LeaseEventKind::Granted,
            Some(&refused),
            None,
        )
        .await;
        self.lease_answer(&team, decision, "granted")
    }

    async fn extend_lease(
        &self,
        caller: &Caller,
        team_id: Option<&TeamId>,
        lease_id: LeaseId,
        input: ExtendLease,
    ) -> CoreResult<LeaseEnvelope> {
        let team = self.lease_team(caller, team_id)?;
        let (_, me) = self.identity().acting_agent(caller)?;
        let ttl = ttl("ttl_seconds", input.ttl_seconds)?;
        let now = Timestamp::now();
        let holder = me.pk;
        let decision = self
            .store()
            .change_leases(
                team.pk,
                now,
                LeaseScope::Id(lease_id.clone()),
                move |view: LeaseView| {
                    Ok::<_, CoreError>(
                        match view.leases.into_iter().find(|l| l.lease_id == lease_id) {
                            None => (LeaseChange::Nothing, Decision::NotFound),
                            Some(l) if l.holder_pk != holder => {
                                (LeaseChange::Nothing, Decision::NotYours)
                            }
                            Some(mut l) => {
                                l.expires_at = later(now, ttl);
                                let change = LeaseChange::Extend {
                                    pk: l.pk,
                                    expires_at: l.expires_at,
                                };
                                (change, Decision::Done(l))
                            }
                        },
                    )
                },
            )
            .await?;
        self.announce_decision(&team, &decision, LeaseEventKind::Extended, None, None)
            .await;
        self.lease_answer(&team, decision, "extended")
    }

    async fn release_lease(
        &self,
        caller: &Caller,
        team_id: Option<&TeamId>,
        lease_id: LeaseId,
    ) -> CoreResult<LeaseEnvelope> {
        let team = self.lease_team(caller, team_id)?;
        // The holder releases its own; the team key (or the admin) any of the team's.
        let holder: Option<AgentPk> = match caller {
            Caller::Agent { .. } => Some(self.identity().acting_agent(caller)?.1.pk),
            Caller::Team { .. } | Caller::Admin => None,
        };
        let now = Timestamp::now();
        let decision = self
            .store()
            .change_leases(
                team.pk,
                now,
                LeaseScope::Id(lease_id.clone()),
                move |view: LeaseView| {
                    Ok::<_, CoreError>(
                        match view.leases.into_iter().find(|l| l.lease_id == lease_id) {
                            None => (LeaseChange::Nothing, Decision::NotFound),
                            Some(l) if holder.is_some_and(|h| h != l.holder_pk) => {
                                (LeaseChange::Nothing, Decision::NotYours)
                            }
                            Some(l) => (LeaseChange::Release { pk: l.pk }, Decision::Done(l)),
                        },
                    )
                },
            )
            .await?;
        let reason = holder
            .is_none()
            .then(|| "released by the team key".to_owned());
        self.announce_decision(&team, &decision, LeaseEventKind::Released, None, reason)
            .await;
        self.lease_answer(&team, decision, "released")
    }

    async fn list_leases(
        &self,
        caller: &Caller,
        team_id: Option<&TeamId>,
        query: LeaseQuery,
    ) -> CoreResult<LeaseList> {
        let team = self.lease_team(caller, team_id)?;
        let holder = match &query.holder {
            None => None,
            Some(id) => Some(self.registry().member(team.pk, id).ok_or_else(|| {
                CoreError::new(
                    ErrorCode::AgentNotFound,
                    format!("agent '{id}' is not a member of team '{}'", team.team_id),
                )
                .with("agent_id", id.as_str())
            })?),
        };
        let overlapping = match &query.resource {
            None => None,
            Some(resource) => Some(Pattern::parse("resource", resource)?),
        };
        let live = self.store().team_leases(team.pk, Timestamp::now()).await?;
        let leases = live
            .into_iter()
            .filter(|l| holder.as_ref().is_none_or(|h| h.pk == l.holder_pk))
            .filter(|l| {
                overlapping.as_ref().is_none_or(|p| {
                    Pattern::parse("resource", &l.resource).is_ok_and(|mine| mine.overlaps(p))
                })
            })
            .map(|l| self.lease_view(&team, l))
            .collect();
        Ok(LeaseList { leases })
    }

    /// A decision as the caller's answer (or refusal), counted.
    fn lease_answer(
        &self,
        team: &TeamRecord,
        decision: Decision,
        done: &'static str,
    ) -> CoreResult<LeaseEnvelope> {
        let outcome = match &decision {
            Decision::Done(_) => done,
            Decision::Conflicts(_) => "conflict",
            Decision::TooMany { .. } => "too_many",
            Decision::NotFound | Decision::NotYours => "refused",
        };
        metrics::counter!("switchboard_leases_total", "outcome" => outcome).increment(1);
        match decision {
            Decision::Done(lease) => Ok(LeaseEnvelope {
                lease: self.lease_view(team, lease),
            }),
            Decision::Conflicts(held) => {
                let conflicts: Vec<LeaseConflict> = held
                    .into_iter()
                    .map(|l| {
                        let view = self.lease_view(team, l);
                        LeaseConflict {
                            lease_id: view.lease_id,
                            holder: view.holder,
                            resource: view.resource,
                            exclusive: view.exclusive,
                            expires_at: view.expires_at,
                        }
                    })
                    .collect();
                Err(CoreError::new(
                    ErrorCode::LeaseConflict,
                    format!(
                        "{} lease(s) held by others overlap this resource",
                        conflicts.len()
                    ),
                )
                .with("conflicts", json!(conflicts)))
            }
            Decision::TooMany { limit, max } => Err(CoreError::new(
                ErrorCode::Conflict,
                format!("at most {max} live leases ({limit}); release one first"),
            )
            .with("limit", limit)
            .with("max", max)),
            Decision::NotFound => Err(CoreError::new(
                ErrorCode::LeaseNotFound,
                "no live lease of this team has this id (it may have ended)",
            )),
            Decision::NotYours => Err(CoreError::forbidden(
                "only the lease's holder (or the team key, to release) may change it",
            )),
        }
    }

    pub(super) fn lease_view(&self, team: &TeamRecord, l: LeaseRecord) -> Lease {
        let holder = self
            .registry()
            .agent(l.holder_pk)
            .map(|a| a.agent_id.clone())
            .unwrap_or_default();
        Lease {
            lease_id: l.lease_id,
            team_id: team.team_id.clone(),
            holder,
            resource: l.resource,
            exclusive: l.exclusive,
            reason: l.reason,
            acquired_at: l.acquired_at,
            expires_at: l.expires_at,
        }
    }
}

/// The grant rule: the caller's own lease on the same resource and kind is renewed; a
/// lease of someone else that overlaps conflicts when either is exclusive; the limits
/// hold. `view` holds every live lease that may overlap (`LeaseScope::Around`).
fn decide_grant(asked: LeaseRecord, pattern: &Pattern, view: LeaseView) -> (LeaseChange, Decision) {
    let live = view.leases;
    if let Some(mut same) = live
        .iter()
        .find(|l| {
            l.holder_pk == asked.holder_pk
                && l.resource == asked.resource
                && l.exclusive == asked.exclusive
        })
        .cloned()
    {
        same.expires_at = asked.expires_at;
        same.reason = asked.reason.or(same.reason);
        let change = LeaseChange::Extend {
            pk: same.pk,
            expires_at: same.expires_at,
        };
        return (change, Decision::Done(same));
    }
    let conflicts: Vec<LeaseRecord> = live
        .iter()
        .filter(|l| l.holder_pk != asked.holder_pk && (asked.exclusive || l.exclusive))
        .filter(|l| Pattern::parse("resource", &l.resource).is_ok_and(|p| p.overlaps(pattern)))
        .cloned()
        .collect();
    if !conflicts.is_empty() {
        return (LeaseChange::Nothing, Decision::Conflicts(conflicts));
    }
    if view.held_by_holder >= MAX_LEASES_PER_AGENT {
        let limit = "leases_per_agent";
        return (
            LeaseChange::Nothing,
            Decision::TooMany {
                limit,
                max: MAX_LEASES_PER_AGENT,
            },
        );
    }
    if view.held_in_team >= MAX_LEASES_PER_TEAM {
        let limit = "leases_per_team";
        return (
            LeaseChange::Nothing,
            Decision::TooMany {
                limit,
                max: MAX_LEASES_PER_TEAM,
            },
        );
    }
    (LeaseChange::Grant(asked.clone()), Decision::Done(asked))
}

/// A time to live as asked (default 300 s), within 1 s to a day.
fn ttl(field: &str, asked: Option<u64>) -> CoreResult<Duration> {
    let seconds = asked.unwrap_or(DEFAULT_TTL_SECONDS);
    if !(1..=MAX_TTL_SECONDS).contains(&seconds) {
        return Err(CoreError::validation(
            field,
            format!("{field} is 1 to {MAX_TTL_SECONDS} (a day)"),
        ));
    }
    Ok(Duration::from_secs(seconds))
}

fn later(now: Timestamp, ttl: Duration) -> Timestamp {
    let micros = i64::try_from(ttl.as_micros()).unwrap_or(i64::MAX);
    Timestamp::from_micros(now.micros().saturating_add(micros))
}

impl Core {
    /// Removes the leases that ended by `now` (they stopped counting at their end; this
    /// tells the metrics and keeps the table small) and sets the live-leases gauge from
    /// the store, so it counts every node's grants. Answers how many ended.
    pub(super) async fn sweep_leases(&self, now: Timestamp) -> CoreResult<u64> {
        let mut ended = 0;
        loop {
            let gone = self.store().expire_leases(now, SWEEP_BATCH).await?;
            ended += gone.len() as u64;
            let full = gone.len() >= SWEEP_BATCH as usize;
            self.announce_ended(gone, None, LeaseEventKind::Expired, None)
                .await;
            if !full {
                break;
            }
        }
        metrics::counter!("switchboard_lease_expiries_total").increment(ended);
        let live = self.store().count_live_leases(now).await?;
        metrics::gauge!("switchboard_leases_live").set(live as f64);
        Ok(ended)
    }

    /// Gives back every lease of an agent that left its team, at once.
    pub(super) async fn release_leases_of(&self, holder: &Arc<AgentRecord>) -> CoreResult<u64> {
        let gone = self.store().release_leases_of(holder.pk).await?;
        let count = gone.len() as u64;
        let why = Some("the holder was removed".to_owned());
        self.announce_ended(gone, Some(holder.clone()), LeaseEventKind::Released, why)
            .await;
        Ok(count)
    }

    /// Tells the lease watchers of each lease's team that it ended.
    async fn announce_ended(
        &self,
        gone: Vec<LeaseRecord>,
        holder: Option<Arc<AgentRecord>>,
        kind: LeaseEventKind,
        reason: Option<String>,
    ) {
        for lease in gone {
            if let Some(team) = self.registry().team(lease.team_pk) {
                self.announce_lease(&team, holder.clone(), kind, &lease, &[], reason.clone())
                    .await;
            }
        }
    }
}
