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

/// Which of a team's live leases a decision reads: never all of them, so a grant costs
/// the same with ten live leases or ten thousand.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LeaseScope {
    /// The lease with this id (an extension or a release).
    Id(LeaseId),
    /// The leases that may overlap a resource with this literal prefix
    /// (`Pattern::literal_prefix`), with what the limits count for `holder`.
    Around { holder: AgentPk, prefix: String },
}

/// What a decision on a team's leases sees.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LeaseView {
    /// The live leases in the scope, oldest first.
    pub leases: Vec<LeaseRecord>,
    /// Live leases of the scope's holder (zero for [`LeaseScope::Id`]).
    pub held_by_holder: usize,
    /// Unexpired leases of the team (zero for [`LeaseScope::Id`]); a lease of an agent
    /// removed in a crash before its leases were given back counts until it ends, which
    /// can only refuse early, never grant past the limit.
    pub held_in_team: usize,
}
