//! Agents: registration (team key), lookup by capability and status, updates, removal.

use crate::ids::{AgentId, TeamId};
use serde::{Deserialize, Serialize};

use crate::error::ErrorBody;
use crate::publish::{Subscription, clean_subscription};
use crate::time::Timestamp;
use crate::validate::{CapabilityLimits, check_text, clean_capabilities};

pub const MAX_ROLE: usize = 100;
pub const MAX_ADDRESS: usize = 2048;

/// What an agent may claim it can do. These are wider than a task's required
/// capabilities ([`crate::tasks::REQUIRED_CAPABILITY_LIMITS`]): an agent lists all its
/// skills, a task the few it needs.
pub const AGENT_CAPABILITY_LIMITS: CapabilityLimits = CapabilityLimits {
    max_count: 64,
    max_len: 100,
};

/// Whether an agent can take on work (the contract's availability).
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    Serialize,
    Deserialize,
    strum::IntoStaticStr,
    strum::EnumString,
)]
#[serde(rename_all = "lowercase")]
#[strum(serialize_all = "lowercase")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum AgentStatus {
    Available,
    Busy,
    Unavailable,
}

impl AgentStatus {
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// Body of `POST /v1/teams/{team_id}/agents`.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RegisterAgent {
    /// 1–64 of `A-Z a-z 0-9 . _ -`, unique among the team's current members.
    #[cfg_attr(feature = "openapi", schema(example = "planner"))]
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub agent_id: AgentId,
    /// What the agent does, for people and for `sender_role` (1–100 characters).
    #[cfg_attr(feature = "openapi", schema(example = "Planner"))]
    pub role: String,
    /// Skills, matched case-insensitively (at most 64, each 1–100 characters).
    #[cfg_attr(feature = "openapi", schema(example = json!(["planning", "python"])))]
    pub capabilities: Vec<String>,
    /// Where the agent can be reached outside Switchboard, if anywhere (free text).
    pub address: Option<String>,
    /// Defaults to `available`.
    pub status: Option<AgentStatus>,
    /// Addresses a publish's `send_to` is matched against (at most 32); default: the
    /// agent id and its role.
    #[serde(default)]
    pub addresses: Option<Vec<String>>,
    /// `cause_by` tags the agent takes up as news (at most 64; `prefix*` for a prefix).
    #[serde(default)]
    pub watch: Option<Vec<String>>,
    /// Served by the team's STOMP bridge (a Wise Agents process that connects with the
    /// team id and key): the team key may subscribe and send for it there. Default
    /// `false`: an agent with a token of its own is its own, and the team key cannot act
    /// as it. Agents a bridge registers itself have it set.
    #[serde(default)]
    pub stomp_bridge: Option<bool>,
}

impl RegisterAgent {
    /// The publish subscription, checked.
    pub fn subscription(&self) -> Result<Subscription, ErrorBody> {
        clean_subscription(&self.addresses, &self.watch)
    }

    /// The value rules; returns the capabilities cleaned (trimmed, without duplicates).
    pub fn validate(&self) -> Result<Vec<String>, ErrorBody> {
        self.agent_id.check("agent_id")?;
        check_text("role", &self.role, MAX_ROLE)?;
        let capabilities = clean_capabilities(
            "capabilities",
            self.capabilities.clone(),
            AGENT_CAPABILITY_LIMITS,
        )?;
        check_address(&self.address)?;
        Ok(capabilities)
    }
}

/// An agent as others see it.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AgentView {
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub agent_id: AgentId,
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub team_id: TeamId,
    pub role: String,
    pub capabilities: Vec<String>,
    pub address: Option<String>,
    pub status: AgentStatus,
    /// When false the agent can neither send nor receive.
    pub communication_enabled: bool,
    pub registered_at: Timestamp,
    pub updated_at: Timestamp,
    /// Whether it has a live WebSocket connection now.
    pub connected: bool,
    /// When its oldest live connection opened.
    pub connected_since: Option<Timestamp>,
    /// Its last activity over a connection (a frame, or its last disconnect).
    pub last_seen_at: Option<Timestamp>,
    /// What a publish's `send_to` is matched against.
    pub addresses: Vec<String>,
    /// The `cause_by` tags it takes up as news.
    pub watch: Vec<String>,
    /// Its STOMP queues with a live subscription now (`request`, `response`).
    #[serde(default)]
    pub stomp_queues: Vec<String>,
    /// A STOMP agent that lost the subscription of one of its queues since it
    /// subscribed: Wise Agents never resubscribe, so it no longer hears that queue
    /// until it restarts. Messages wait in its inbox meanwhile.
    #[serde(default)]
    pub deaf: bool,
    /// Served by the team's STOMP bridge: the team key may act for it there.
    #[serde(default)]
    pub stomp_bridge: bool,
    /// MCP sessions it holds open on the node that answered (its WebSocket and STOMP
    /// presence are above): which transports a person sees it on.
    #[serde(default)]
    pub mcp_sessions: usize,
    /// A2A streams (`SendStreamingMessage`, `SubscribeToTask`) it holds open on the node
    /// that answered.
    #[serde(default)]
    pub a2a_streams: usize,
}

/// Answer of a registration. The token is shown here once and never again.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AgentRegistered {
    pub success: bool,
    pub agent: AgentView,
    /// The agent's bearer token. Store it: it cannot be shown again.
    pub token: String,
}

/// One agent.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AgentEnvelope {
    pub success: bool,
    pub agent: AgentView,
}

/// Agents matching a lookup, ordered by agent id.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AgentList {
    pub success: bool,
    pub agents: Vec<AgentView>,
    pub total_count: usize,
}

/// Answer of a removal.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AgentRemoved {
    pub success: bool,
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub agent_id: AgentId,
    pub removed_at: Timestamp,
}

/// Filters of an agent lookup.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "openapi", derive(utoipa::IntoParams, utoipa::ToSchema))]
#[cfg_attr(feature = "openapi", into_params(parameter_in = Query))]
pub struct AgentQuery {
    /// Capabilities the agent must all have, comma-separated, case-insensitive.
    #[cfg_attr(feature = "openapi", param(example = "python,review"))]
    pub capability: Option<String>,
    /// Only agents with this status.
    pub status: Option<AgentStatus>,
}

/// Body of `PATCH /v1/teams/{team_id}/agents/{agent_id}`: any of the fields, at least one.
///
/// The agent itself may change `role`, `capabilities`, `address` and `status`; only the
/// team key (or admin) may change `communication_enabled`.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct UpdateAgent {
    #[serde(
        default,
        deserialize_with = "crate::decode::no_null",
        skip_serializing_if = "Option::is_none"
    )]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub role: Option<String>,
    #[serde(
        default,
        deserialize_with = "crate::decode::no_null",
        skip_serializing_if = "Option::is_none"
    )]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub capabilities: Option<Vec<String>>,
    #[serde(
        default,
        deserialize_with = "crate::decode::no_null",
        skip_serializing_if = "Option::is_none"
    )]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub address: Option<String>,
    #[serde(
        default,
        deserialize_with = "crate::decode::no_null",
        skip_serializing_if = "Option::is_none"
    )]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub status: Option<AgentStatus>,
    #[serde(
        default,
        deserialize_with = "crate::decode::no_null",
        skip_serializing_if = "Option::is_none"
    )]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub communication_enabled: Option<bool>,
    /// Replaces the publish addresses; `[]` restores the default (id and role).
    #[serde(
        default,
        deserialize_with = "crate::decode::no_null",
        skip_serializing_if = "Option::is_none"
    )]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub addresses: Option<Vec<String>>,
    /// Replaces the watched tags.
    #[serde(
        default,
        deserialize_with = "crate::decode::no_null",
        skip_serializing_if = "Option::is_none"
    )]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub watch: Option<Vec<String>>,
}

impl UpdateAgent {
    /// The publish subscription, checked.
    pub fn subscription(&self) -> Result<Subscription, ErrorBody> {
        clean_subscription(&self.addresses, &self.watch)
    }

    /// At least one field, each valid; returns the capabilities cleaned, if given.
    pub fn validate(&self) -> Result<Option<Vec<String>>, ErrorBody> {
        if self.role.is_none()
            && self.capabilities.is_none()
            && self.address.is_none()
            && self.status.is_none()
            && self.communication_enabled.is_none()
            && self.addresses.is_none()
            && self.watch.is_none()
        {
            return Err(ErrorBody::validation(
                "body",
                "give at least one of: role, capabilities, address, status, \
                 communication_enabled, addresses, watch",
            ));
        }
        if let Some(role) = &self.role {
            check_text("role", role, MAX_ROLE)?;
        }
        let capabilities = self
            .capabilities
            .clone()
            .map(|c| clean_capabilities("capabilities", c, AGENT_CAPABILITY_LIMITS))
            .transpose()?;
        check_address(&self.address)?;
        Ok(capabilities)
    }
}

fn check_address(address: &Option<String>) -> Result<(), ErrorBody> {
    match address {
        Some(a) if a.chars().count() > MAX_ADDRESS => Err(ErrorBody::validation(
            "address",
            format!("address must be at most {MAX_ADDRESS} characters"),
        )),
        _ => Ok(()),
    }
}

/// Body of `POST /v1/teams/{team_id}/a2a-agents`: an outside A2A agent to register.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RegisterRemoteAgent {
    /// The agent's card (`…/.well-known/agent-card.json`) or its base URL (the card is
    /// looked for there). http or https; private addresses only when the server allows
    /// private callbacks.
    #[cfg_attr(
        feature = "openapi",
        schema(example = "https://agents.example.com/translator")
    )]
    pub card_url: String,
    /// Its id in the team; default: the card's name, made an id (`A-Z a-z 0-9 . _ -`).
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>))]
    pub agent_id: Option<AgentId>,
    /// Sent as the `Authorization` header of every call to the agent (card and
    /// interface), for agents that need it; never shown back.
    #[serde(default)]
    pub authorization: Option<String>,
}

/// Answer of `POST /v1/teams/{team_id}/a2a-agents`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RemoteAgentRegistered {
    pub success: bool,
    /// The member that stands for it: role from the card's description, capabilities
    /// from its skills. Tasks given to it are forwarded.
    pub agent: AgentView,
    /// Where the card was read (it is read again every 10 minutes).
    pub card_url: String,
    /// The card's JSON-RPC interface, where its tasks go.
    pub interface_url: String,
}
