//! Which open task a claim decides on, among the claims of this node (see [`Claiming`]).

use std::collections::{HashSet, VecDeque};
use std::time::{Duration, Instant};

use switchboard_types::ids::TaskPk;

/// The tasks claims on this node are deciding on right now, and those they won lately.
///
/// Why: claims in flight together read the same candidates in the same order. When
/// each decided on the first, one won and every other lost a write and read again
/// (64 claimers: 26-30 % of the `tasks` rate, claim p99 0.7-0.9 s). Here each claim
/// takes the first candidate in claim order that no other claim of this node is
/// deciding on — the order the contract promises to claims that arrive together — so
/// claims of one node never race each other for a task. The tasks taken lately are
/// kept for [`RECENT`]: a claim that read its candidates before such a win committed
/// skips it instead of losing a write to it (a task given back here is forgotten at
/// once; one given back on another node is claimable here after `RECENT` at most).
/// Claims of other nodes still race; the task's version decides, and the loser takes
/// its next candidate. `decided` wakes claims that found every candidate being decided
/// on by others.
#[derive(Default)]
pub struct Claiming {
    taken: std::sync::Mutex<Taken>,
    pub(super) decided: tokio::sync::Notify,
}

/// How long a task taken is skipped by this node's claims (longer than a read of the
/// candidates takes, under load too).
const RECENT: Duration = Duration::from_secs(1);
/// At most this many taken tasks are remembered, however many are taken in `RECENT`.
const RECENT_MAX: usize = 8192;

#[derive(Default)]
struct Taken {
    deciding: HashSet<TaskPk>,
    recent: VecDeque<(TaskPk, Instant)>,
    recent_set: HashSet<TaskPk>,
}

impl Taken {
    fn remember(&mut self, task: TaskPk) {
        if self.recent_set.insert(task) {
            self.recent.push_back((task, Instant::now()));
        }
        if self.recent.len() > RECENT_MAX {
            self.drop_oldest();
        }
    }

    fn drop_oldest(&mut self) {
        if let Some((old, _)) = self.recent.pop_front() {
            self.recent_set.remove(&old);
        }
    }

    /// Forgets what was taken longer than `RECENT` ago.
    fn prune(&mut self) {
        while self
            .recent
            .front()
            .is_some_and(|(_, at)| at.elapsed() > RECENT)
        {
            self.drop_oldest();
        }
    }
}

/// A claim deciding on one task; dropping it lets the task go for other claims (and
/// remembers it as taken when the claim, or another, won it).
pub(super) struct Deciding<'a> {
    claiming: &'a Claiming,
    task: TaskPk,
    /// The task was won, by this claim or another: skip it for a while.
    pub(super) taken: bool,
}

impl Drop for Deciding<'_> {
    fn drop(&mut self) {
        let mut taken = self.claiming.lock();
        taken.deciding.remove(&self.task);
        if self.taken {
            taken.remember(self.task);
        }
        drop(taken);
        self.claiming.decided.notify_waiters();
    }
}

impl Claiming {
    fn lock(&self) -> std::sync::MutexGuard<'_, Taken> {
        self.taken.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A task open again (given back, or its lease ran out) is claimable at once.
    pub(super) fn forget(&self, task: TaskPk) {
        let mut taken = self.lock();
        if taken.recent_set.remove(&task) {
            taken.recent.retain(|(pk, _)| *pk != task);
        }
    }

    /// How many claims of this node are deciding right now.
    pub(super) fn deciding(&self) -> usize {
        self.lock().deciding.len()
    }

    /// The first of `candidates` from `from` on that no claim of this node is deciding
    /// on or won lately, now this claim's to decide on.
    pub(super) fn pick(&self, candidates: &[TaskPk], from: usize) -> Option<(usize, Deciding<'_>)> {
        let mut taken = self.lock();
        taken.prune();
        let i = (from..candidates.len()).find(|&i| {
            let pk = candidates[i];
            !taken.deciding.contains(&pk) && !taken.recent_set.contains(&pk)
        })?;
        taken.deciding.insert(candidates[i]);
        let deciding = Deciding {
            claiming: self,
            task: candidates[i],
            taken: false,
        };
        Some((i, deciding))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OPEN: [TaskPk; 3] = [TaskPk(1), TaskPk(2), TaskPk(3)];

    #[test]
    fn claims_deciding_together_take_the_first_tasks_one_each() {
        let claiming = Claiming::default();
        let (first, _a) = claiming.pick(&OPEN, 0).expect("one");
        let (second, _b) = claiming.pick(&OPEN, 0).expect("two");
        let (third, _c) = claiming.pick(&OPEN, 0).expect("three");
        assert_eq!((first, second, third), (0, 1, 2));
        assert!(
            claiming.pick(&OPEN, 0).is_none(),
            "all three are being decided on"
        );
        assert_eq!(claiming.deciding(), 3);
    }

    #[test]
    fn a_task_lost_is_free_again_and_one_taken_is_skipped_until_forgotten() {
        let claiming = Claiming::default();
        let (_, lost) = claiming.pick(&OPEN, 0).expect("first");
        drop(lost);
        let (again, mut won) = claiming.pick(&OPEN, 0).expect("first again");
        assert_eq!(again, 0, "a decision that did not take the task lets it go");
        won.taken = true;
        drop(won);
        let (next, _d) = claiming.pick(&OPEN, 0).expect("next");
        assert_eq!(
            next, 1,
            "a task taken lately is skipped (a read before its commit)"
        );
        claiming.forget(TaskPk(1));
        let (back, _e) = claiming.pick(&OPEN, 0).expect("given back");
        assert_eq!(back, 0, "a task given back is claimable at once");
    }
}
