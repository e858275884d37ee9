//! What several nodes on one database tell each other (PostgreSQL): what one committed,
//! and who is connected where.

use switchboard_types::ids::{AgentPk, TaskPk};
use switchboard_types::routing::Route;
use switchboard_types::time::Timestamp;

/// Something another node committed (PostgreSQL with several nodes), as this node hears
/// it: the core pushes it to its own live connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// The agent's inbox has entries up to `seq`.
    Inbox { agent: AgentPk, seq: i64 },
    /// The task changed.
    Task(TaskPk),
    /// A team or an agent was added or changed (a removal, a revoked token, its
    /// communication switched off): the registry must be read again.
    Registry,
    /// Notifications may have been missed (the listening connection dropped): every
    /// live connection should catch up from storage.
    Resync,
}

/// One agent's live connections on one node, as the nodes tell each other through the
/// database (PostgreSQL with several nodes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeConnections {
    pub agent: AgentPk,
    /// The transports of its connections there.
    pub routes: Vec<Route>,
    /// When its oldest connection there opened.
    pub since: Timestamp,
}
