//! Outside A2A agents as stored: the registry agent the server acts for, and where the
//! agent's card and interface are.

use switchboard_types::ids::{AgentPk, TeamPk};
use switchboard_types::time::Timestamp;

/// An outside A2A agent of a team.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteAgentRecord {
    pub agent_pk: AgentPk,
    pub team_pk: TeamPk,
    pub card_url: String,
    pub interface_url: String,
    /// The `Authorization` value its interface expects, if any.
    pub authorization: Option<String>,
    /// The card as last fetched (JSON text).
    pub card: String,
    pub refreshed_at: Timestamp,
    pub created_at: Timestamp,
}
