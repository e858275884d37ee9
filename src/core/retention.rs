//! Retention: what each team keeps, and the background pass that removes the rest.
//!
//! The rule lives here (a team's retention is the shorter of its own and the server's);
//! the store removes rows a small batch per writer job, so writes from agents are never
//! held up by more than one batch.

use std::collections::HashMap;
use std::time::Duration;

use switchboard_types::ids::TeamPk;
use switchboard_types::teams::Retention;
use switchboard_types::time::Timestamp;
use tokio_util::sync::CancellationToken;

use super::Node;
use super::{Core, CoreResult};
use crate::model::{MessageSweepSpec, TeamRecord};

/// The server's retention (`--retention-…`) and how often the pass runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetentionSettings {
    /// Messages and tasks: the most any team keeps (`None`: for ever).
    pub server: Retention,
    /// How long a retry with the same `Idempotency-Key` gets the first answer back.
    pub idempotency_keys: Duration,
    /// How long a delivered or abandoned callback's record is kept.
    pub callbacks: Duration,
    /// Time between passes.
    pub interval: Duration,
}

impl Default for RetentionSettings {
    fn default() -> Self {
        RetentionSettings {
            server: Retention::default(),
            idempotency_keys: Duration::from_secs(24 * 3600),
            callbacks: Duration::from_secs(7 * 24 * 3600),
            interval: Duration::from_secs(60),
        }
    }
}

/// Messages one batch looks at, and at most per team per pass (the next pass goes on
/// where this one stopped, so a long backlog is worked off over several passes).
const BATCH: i64 = 256;
const PER_TEAM_PASS: i64 = 64 * BATCH;

/// What one pass removed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Expired {
    pub messages: u64,
    pub tasks: u64,
    pub idempotency_keys: u64,
    pub callbacks: u64,
}

/// The point before which something older than `seconds` was made.
fn before(now: Timestamp, seconds: Option<u64>) -> Option<i64> {
    let micros = i64::try_from(seconds?).ok()?.checked_mul(1_000_000)?;
    Some(now.micros().saturating_sub(micros))
}

impl Core {
    /// What `team` keeps: the shorter of its own retention and the server's.
    pub(super) fn retention_of(&self, team: &TeamRecord) -> Retention {
        team.retention.shorter(self.inner.retention.server)
    }

    /// Up to [`PER_TEAM_PASS`] of the team's oldest messages looked at, in batches.
    async fn expire_messages(
        &self,
        team: &TeamRecord,
        keep: Retention,
        now: Timestamp,
        resume: &mut HashMap<TeamPk, i64>,
    ) -> CoreResult<u64> {
        let read_before = before(now, keep.read_messages_seconds);
        let any_before = before(now, keep.unread_messages_seconds);
        if read_before.is_none() && any_before.is_none() {
            return Ok(0);
        }
        let mut removed = 0;
        let mut after = resume.remove(&team.pk).unwrap_or(0);
        for _ in 0..PER_TEAM_PASS / BATCH {
            let sweep = self
                .store()
                .expire_messages(MessageSweepSpec {
                    team: team.pk,
                    after,
                    read_before,
                    any_before,
                    limit: BATCH,
                })
                .await?;
            removed += sweep.removed;
            match sweep.next_after {
                Some(next) => after = next,
                // Reached the young end: the next pass starts from the oldest again
                // (messages kept because someone had them unread may go by then).
                None => return Ok(removed),
            }
        }
        resume.insert(team.pk, after);
        Ok(removed)
    }
}

fn micros(d: Duration) -> i64 {
    i64::try_from(d.as_micros()).unwrap_or(i64::MAX)
}

/// Runs a pass every `interval` until `stop` is cancelled.
pub async fn run(core: Core, stop: CancellationToken) {
    let interval = core.inner.retention.interval;
    let mut resume = HashMap::new();
    let removed = |what: &'static str| metrics::counter!("switchboard_retention_removed_total", "what" => what);
    loop {
        tokio::select! {
            () = stop.cancelled() => break,
            () = tokio::time::sleep(interval) => {}
        }
        match core.node().expire(Timestamp::now(), &mut resume).await {
            Ok(done) => {
                removed("messages").increment(done.messages);
                removed("tasks").increment(done.tasks);
                removed("idempotency_keys").increment(done.idempotency_keys);
                removed("callbacks").increment(done.callbacks);
                if done != Expired::default() {
                    tracing::debug!(?done, "retention pass");
                }
            }
            Err(err) => {
                tracing::warn!(error = %err, "retention pass failed; retrying next interval")
            }
        }
    }
}

impl<'a> Node<'a> {
    /// One retention pass over every team as of `now`. `resume` holds, per team, the
    /// message the previous pass stopped at.
    pub async fn expire(
        self,
        now: Timestamp,
        resume: &mut HashMap<TeamPk, i64>,
    ) -> CoreResult<Expired> {
        let store = self.core.store();
        let settings = self.core.inner.retention;
        let mut done = Expired::default();
        for team in self.core.registry().teams() {
            let keep = self.core.retention_of(&team);
            done.messages += self.core.expire_messages(&team, keep, now, resume).await?;
            if let Some(cut) = before(now, keep.finished_tasks_seconds) {
                loop {
                    let n = store
                        .expire_tasks(team.pk, Timestamp::from_micros(cut), BATCH)
                        .await?;
                    done.tasks += n;
                    if n < BATCH as u64 {
                        break;
                    }
                }
            }
        }
        let cut = |age: Duration| Timestamp::from_micros(now.micros().saturating_sub(micros(age)));
        loop {
            let n = store
                .expire_idempotency_keys(cut(settings.idempotency_keys), BATCH * 4)
                .await?;
            done.idempotency_keys += n;
            if n < (BATCH * 4) as u64 {
                break;
            }
        }
        // Budget windows are a day at most: a count two days old is spent for good.
        let spent = now.micros().div_euclid(1_000_000) - 2 * 86_400;
        while store.expire_budget_counts(spent, BATCH * 4).await? == (BATCH * 4) as u64 {}
        loop {
            let n = store
                .expire_callbacks(cut(settings.callbacks), BATCH)
                .await?;
            done.callbacks += n;
            if n < BATCH as u64 {
                break;
            }
        }
        Ok(done)
    }
}
