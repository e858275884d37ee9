//! Leases on named resources as stored (`docs/leases.md`).

use switchboard_types::ids::{AgentPk, LeaseId, TeamPk};
use switchboard_types::time::Timestamp;

/// A lease granted and not yet released (`pk` is ignored when one is added). It is live
/// while `expires_at` is ahead of now and its holder is a member.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseRecord {
    pub pk: i64,
    pub team_pk: TeamPk,
    pub lease_id: LeaseId,
    pub holder_pk: AgentPk,
    pub resource: String,
    pub exclusive: bool,
    pub reason: Option<String>,
    pub acquired_at: Timestamp,
    pub expires_at: Timestamp,
}

/// What a decision on a team's live leases writes (see `Store::change_leases`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LeaseChange {
    /// Nothing: the decision refused, or only read.
    Nothing,
    Grant(LeaseRecord),
    /// The lease of this row now ends at this time.
    Extend {
        pk: i64,
        expires_at: Timestamp,
    },
    Release {
        pk: i64,
    },
}
