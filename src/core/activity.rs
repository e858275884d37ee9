//! A team's activity: per member, unread news and open tasks; the team is idle when
//! nobody has either. A MetaGPT environment stops when every role is idle; this is how
//! a team run through Switchboard knows.
//!
//! Read on demand (`GET /v1/teams/{team_id}/activity`: two indexed queries over the
//! team's counters and open tasks), and pushed to the WebSocket connections that asked
//! for it (`?activity=true`) when the team turns idle or busy. Watching costs nothing
//! for teams nobody watches: after an operation of a watched team, one recomputation is
//! scheduled (a burst of operations shares it) and its answer sent only if `idle`
//! changed.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use switchboard_types::ids::TeamId;

use switchboard_types::budgets::BudgetExhausted;
use switchboard_types::ids::TeamPk;
use switchboard_types::loops::LoopStopped;
use switchboard_types::publish::{AgentActivity, TeamActivity};
use switchboard_types::time::Timestamp;
use tokio::sync::watch;

use super::Live;
use super::{Caller, Core, CoreResult, Need};

/// How long after an operation the activity is recomputed: operations in between share
/// one recomputation.
const SETTLE: Duration = Duration::from_millis(20);

/// What a team's watchers are told at once, busy or idle.
pub(super) enum Alarm {
    Loop(LoopStopped),
    Budget(BudgetExhausted),
}

/// The activity frames of a watched team: the last one sent (`None` before the first).
pub type ActivityFrames = watch::Receiver<Option<Arc<str>>>;

/// Watched teams.
#[derive(Default)]
pub struct ActivityWatch {
    teams: Mutex<HashMap<TeamPk, Watched>>,
    /// Whether any team is watched: the lock is taken only then, so operations of a
    /// server where nobody watches pay one atomic load.
    any: AtomicBool,
}

struct Watched {
    frames: watch::Sender<Option<Arc<str>>>,
    /// The `idle` of the last frame sent.
    idle: Option<bool>,
    /// A recomputation is scheduled.
    scheduled: bool,
    /// A connection started watching: send the next computation whatever it says.
    fresh: bool,
}

impl Core {
    /// `GET /v1/teams/{team_id}/activity`; without a team id, the calling agent's team.
    pub(super) async fn team_activity(
        &self,
        caller: &Caller,
        team_id: Option<&TeamId>,
    ) -> CoreResult<TeamActivity> {
        let team = match team_id {
            Some(team_id) => self.team_for(caller, team_id, Need::Read)?,
            None => self.identity().acting_agent(caller)?.0,
        };
        self.compute_activity(team.pk).await
    }

    async fn compute_activity(&self, team: TeamPk) -> CoreResult<TeamActivity> {
        let Some(record) = self.registry().team(team) else {
            return Err(super::CoreError::internal("a watched team is gone"));
        };
        let counts = self.store().team_activity(team).await?;
        let mut agents: Vec<AgentActivity> = self
            .registry()
            .members(team)
            .iter()
            .map(|a| {
                let c = counts.get(&a.pk).copied().unwrap_or_default();
                AgentActivity {
                    agent_id: a.agent_id.clone(),
                    unread_news: c.unread_news,
                    open_tasks: c.open_tasks,
                    idle: c.unread_news == 0 && c.open_tasks == 0,
                }
            })
            .collect();
        agents.sort_by(|a, b| a.agent_id.cmp(&b.agent_id));
        let open_tasks = counts.values().map(|c| c.open_tasks).sum::<u64>();
        Ok(TeamActivity {
            success: true,
            team_id: record.team_id.clone(),
            idle: open_tasks == 0 && agents.iter().all(|a| a.unread_news == 0),
            open_tasks,
            agents,
            as_of: Timestamp::now(),
            loop_stopped: None,
            budget_exhausted: None,
        })
    }

    /// Something happened in `team`: if anyone watches it, recompute its activity soon.
    pub(super) fn touch_activity(&self, team: TeamPk) {
        if !self.activity().any.load(Ordering::Acquire) {
            return;
        }
        let mut teams = self
            .activity()
            .teams
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let Some(watched) = teams.get_mut(&team) else {
            return;
        };
        if watched.frames.receiver_count() == 0 {
            teams.remove(&team);
            if teams.is_empty() {
                self.activity().any.store(false, Ordering::Release);
            }
            return;
        }
        if watched.scheduled {
            return;
        }
        watched.scheduled = true;
        drop(teams);
        let core = self.clone();
        tokio::spawn(async move {
            tokio::time::sleep(SETTLE).await;
            core.publish_activity(team).await;
        });
    }

    async fn publish_activity(&self, team: TeamPk) {
        let fresh = {
            let mut teams = self
                .activity()
                .teams
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            match teams.get_mut(&team) {
                Some(watched) => {
                    watched.scheduled = false;
                    std::mem::take(&mut watched.fresh)
                }
                None => return,
            }
        };
        self.send_activity(team, None, fresh).await;
    }

    /// Pushes the team's activity with an alarm (a stopped loop, a spent budget) to its
    /// watchers, whatever `idle` says (`core::loops`, `core::budgets`).
    pub(super) async fn announce_activity(&self, team: TeamPk, alarm: Alarm) {
        if self.activity().any.load(Ordering::Acquire) {
            self.send_activity(team, Some(alarm), true).await;
        }
    }

    /// Computes the team's activity and sends it to its watchers when `force`d or when
    /// `idle` changed.
    async fn send_activity(&self, team: TeamPk, alarm: Option<Alarm>, force: bool) {
        let Some((idle, frame)) = self.activity_frame(team, alarm).await else {
            return;
        };
        let mut teams = self
            .activity()
            .teams
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if let Some(watched) = teams.get_mut(&team)
            && (force || watched.idle != Some(idle))
        {
            watched.idle = Some(idle);
            watched.frames.send_replace(Some(frame.into()));
        }
    }

    /// The team's activity frame (with `alarm`, if any) and whether it is idle.
    async fn activity_frame(&self, team: TeamPk, alarm: Option<Alarm>) -> Option<(bool, String)> {
        let mut activity = match self.compute_activity(team).await {
            Ok(activity) => activity,
            Err(err) => {
                tracing::warn!(error = %err, "team activity could not be computed");
                return None;
            }
        };
        match alarm {
            Some(Alarm::Loop(stopped)) => activity.loop_stopped = Some(stopped),
            Some(Alarm::Budget(spent)) => activity.budget_exhausted = Some(spent),
            None => {}
        }
        match switchboard_types::frames::activity_frame(&activity) {
            Ok(frame) => Some((activity.idle, frame)),
            Err(err) => {
                tracing::error!(error = %err, "team activity could not be rendered");
                None
            }
        }
    }
}

impl<'a> Live<'a> {
    /// Activity frames of the caller's team for one connection; the current state is
    /// computed for the first watcher.
    pub fn watch_activity(self, caller: &Caller) -> CoreResult<ActivityFrames> {
        let (team, _) = self.core.identity().acting_agent(caller)?;
        let mut teams = self
            .core
            .activity()
            .teams
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let watched = teams.entry(team.pk).or_insert_with(|| Watched {
            frames: watch::Sender::new(None),
            idle: None,
            scheduled: false,
            fresh: false,
        });
        watched.fresh = true;
        let frames = watched.frames.subscribe();
        self.core.activity().any.store(true, Ordering::Release);
        drop(teams);
        self.core.touch_activity(team.pk);
        Ok(frames)
    }
}
