//! What a message or task remembers of the causal chain it extends, for the loop guard
//! (`core::loops`).
//!
//! Walking a chain back through the store at every send would cost a read per hop; a
//! row carries instead the chain's length, where it started, and who sent its last few
//! hops and when, so the guard decides from the parent row alone. A chain's first row
//! stores nothing (`None`): its chain is itself, read from its own columns.

use serde::{Deserialize, Serialize};
use switchboard_types::ids::AgentPk;
use switchboard_types::loops::MAX_CYCLE_MESSAGES;
use switchboard_types::time::Timestamp;

/// Most hops a chain's tail keeps: enough for the longest cycle rule a team can set
/// (its `cycle_messages` sends before the one being checked, and that one).
pub const TAIL: usize = MAX_CYCLE_MESSAGES as usize + 1;

/// A causal chain as of one row.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Chain {
    /// How many sends the chain has, this row's included (a first row is hop 1).
    #[serde(rename = "h")]
    pub hops: u32,
    /// The id of the chain's first message or task.
    #[serde(rename = "f")]
    pub first: String,
    /// The chain's last sends, oldest first, this row's last: `(sender, unix seconds)`,
    /// at most [`TAIL`].
    #[serde(rename = "t")]
    pub tail: Vec<(i64, i64)>,
}

impl Chain {
    /// The chain of a row that extends none: itself.
    pub fn first(id: &str, sender: AgentPk, at: Timestamp) -> Chain {
        Chain {
            hops: 1,
            first: id.to_owned(),
            tail: vec![(sender.0, seconds(at))],
        }
    }

    /// The chain one more send by `sender` at `at` makes of this one. With
    /// `repeats_count` false (a chain of messages), a send by the agent that made the
    /// last one — replying to itself — adds no hop, so no member can lengthen a chain
    /// alone: 64 messages to the whole team, each replying to its own last, had made
    /// every other member's next send in that thread `LOOP_DETECTED`. In a chain of
    /// tasks every link hands work to someone, whoever made the last one.
    pub fn extended(&self, sender: AgentPk, at: Timestamp, repeats_count: bool) -> Chain {
        let moved = repeats_count || self.tail.last().is_none_or(|(last, _)| *last != sender.0);
        let skip = (self.tail.len() + 1).saturating_sub(TAIL);
        let mut tail = Vec::with_capacity(self.tail.len() + 1 - skip);
        tail.extend_from_slice(&self.tail[skip..]);
        tail.push((sender.0, seconds(at)));
        Chain {
            hops: self.hops.saturating_add(u32::from(moved)),
            first: self.first.clone(),
            tail,
        }
    }

    /// The same chain counted afresh: quiet for longer than the guard's window, it
    /// starts its hops again (its first id and its tail stay for the cycle rule).
    pub fn rested(&self, now: Timestamp, window_seconds: u64) -> Chain {
        let quiet = self.tail.last().is_some_and(|(_, at)| {
            seconds(now).saturating_sub(*at) > i64::try_from(window_seconds).unwrap_or(i64::MAX)
        });
        Chain {
            hops: if quiet { 1 } else { self.hops },
            first: self.first.clone(),
            tail: self.tail.clone(),
        }
    }

    /// The agents that sent the chain's last sends, most sends first: who built it.
    pub fn builders(&self) -> Vec<AgentPk> {
        let mut counts: Vec<(i64, usize)> = Vec::new();
        for (agent, _) in &self.tail {
            match counts.iter_mut().find(|(a, _)| a == agent) {
                Some((_, n)) => *n += 1,
                None => counts.push((*agent, 1)),
            }
        }
        counts.sort_by_key(|(_, n)| std::cmp::Reverse(*n));
        counts.into_iter().map(|(a, _)| AgentPk(a)).collect()
    }

    /// Whether it is the chain of its own row alone (stored as nothing).
    pub fn is_first(&self) -> bool {
        self.hops <= 1
    }
}

/// Whole seconds since the epoch: the cycle rule's window is in seconds.
fn seconds(at: Timestamp) -> i64 {
    at.micros().div_euclid(1_000_000)
}
