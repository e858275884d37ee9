//! How often the server's background work runs, stretched as one for the cost check.
//!
//! The cost check (`benches/cost_check.py`) counts with callgrind what a phase of N
//! operations executes. Work on a timer — a checkpoint, a health ping, the presence
//! saver, a sweep — falls into a phase as the clock decides, and made one phase's count
//! differ from the next by up to 1.8 % of its instructions and 1.1 % of its allocations:
//! more than the creep the check is there to see. Stretched (`--tick-scale`), none falls
//! into a phase, and what is left is the operations' own work.
//!
//! One factor for the process, not a setting per task: the intervals are each module's
//! constants (a module says how often its work runs, and why), and the factor is the
//! same for all of them. Never set in production: a stretched server checkpoints,
//! checks its storage and saves cursors that much less often.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

static SCALE: AtomicU32 = AtomicU32::new(1);

/// Multiplies every background interval from now on by `factor` (at least 1).
pub fn stretch(factor: u32) {
    SCALE.store(factor.max(1), Ordering::Relaxed);
}

/// `interval` as this process runs it: as written, or stretched for the cost check.
pub fn every(interval: Duration) -> Duration {
    interval.saturating_mul(SCALE.load(Ordering::Relaxed))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intervals_are_as_written_until_stretched() {
        assert_eq!(every(Duration::from_secs(1)), Duration::from_secs(1));
    }
}
