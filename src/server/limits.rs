//! The process's file-descriptor budget, and how much of it connections may take.
//!
//! Every socket, database file, log and outgoing call is a descriptor. Out of them,
//! `accept` fails, `/healthz` cannot answer and the log fills with "Too many open files"
//! (found by an attacker holding 19,960 idle connections). At start the soft limit is
//! raised to the hard one (no privilege needed), and the connection gate
//! (`transport::common::gate`) is sized to leave a reserve for everything that is not a
//! client's socket. A low limit is said in the log at start.

/// Descriptors kept out of the gate's reach: the database (SQLite: the file, its WAL and
/// index per connection; PostgreSQL: the pools), outgoing callbacks and A2A calls, the
/// listeners, logs and the runtime's own. The larger of this and a tenth of the limit.
const RESERVE: u64 = 256;

/// The server's connection gate: the descriptor limit raised, the budget set from it.
pub(super) fn connection_gate(asked: Option<usize>) -> crate::transport::common::gate::Gate {
    let descriptors = raise_descriptor_limit();
    let budget = connection_budget(asked, descriptors);
    match descriptors {
        Some(descriptors) => {
            tracing::info!(max_connections = budget, descriptors, "connection budget");
        }
        None => tracing::info!(
            max_connections = budget,
            "connection budget (the descriptor limit is unknown)"
        ),
    }
    crate::transport::common::gate::Gate::new(budget)
}

/// Below this many connections the operator is warned at start.
const LOW: usize = 1024;

/// The soft limit, raised to the hard one where it is lower; `None` where it cannot be
/// read (then nothing is assumed about it).
fn raise_descriptor_limit() -> Option<u64> {
    use rustix::process::{Resource, getrlimit, setrlimit};
    let limit = getrlimit(Resource::Nofile);
    let soft = limit.current?;
    let hard = limit.maximum.unwrap_or(u64::MAX);
    if soft >= hard {
        return Some(soft);
    }
    // Some systems refuse an unlimited soft value for descriptors: stop at a large one.
    let wanted = hard.min(1 << 20);
    let raised = rustix::process::Rlimit {
        current: Some(wanted),
        maximum: limit.maximum,
    };
    match setrlimit(Resource::Nofile, raised) {
        Ok(()) => Some(wanted),
        Err(err) => {
            tracing::warn!(error = %err, soft, hard, "could not raise the file-descriptor limit");
            Some(soft)
        }
    }
}

/// How many connections the server holds at once: what the operator asked for
/// (`--max-connections`), never more than the descriptor limit leaves after the reserve.
fn connection_budget(asked: Option<usize>, descriptors: Option<u64>) -> usize {
    let Some(descriptors) = descriptors else {
        return asked.unwrap_or(10_000);
    };
    let reserve = RESERVE.max(descriptors / 10);
    let room = usize::try_from(descriptors.saturating_sub(reserve)).unwrap_or(usize::MAX);
    let budget = asked.map_or(room, |asked| asked.min(room)).max(16);
    if asked.is_some_and(|asked| asked > room) {
        tracing::warn!(
            asked = asked.unwrap_or_default(),
            budget,
            descriptors,
            "--max-connections is above what the file-descriptor limit leaves; using the lower"
        );
    }
    if budget < LOW {
        tracing::warn!(
            descriptors,
            budget,
            "the file-descriptor limit allows only {budget} connections; raise it (ulimit -n) \
             for more"
        );
    }
    budget
}

#[cfg(test)]
mod tests {
    use super::connection_budget;

    #[test]
    fn the_budget_leaves_a_reserve_below_the_descriptor_limit() {
        assert_eq!(connection_budget(None, Some(1024)), 768);
        assert_eq!(connection_budget(None, Some(100_000)), 90_000);
        assert_eq!(connection_budget(Some(500), Some(100_000)), 500);
        assert_eq!(connection_budget(Some(5_000), Some(1024)), 768);
        assert_eq!(connection_budget(Some(100), None), 100);
    }
}
