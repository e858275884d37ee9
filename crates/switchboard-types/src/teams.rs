//! Teams: creation (admin), information, the team-wide communication switch, and who a
//! token belongs to.

use crate::ids::{AgentId, TeamId};
use serde::{Deserialize, Serialize};

use crate::budgets::Budgets;
use crate::error::ErrorBody;
use crate::loops::LoopGuard;
use crate::time::Timestamp;
use crate::validate::check_text;

/// Longest team name.
pub const MAX_TEAM_NAME: usize = 200;

/// Body of `POST /v1/teams`.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CreateTeam {
    /// A name for people, 1–200 characters.
    #[cfg_attr(feature = "openapi", schema(example = "research-squad"))]
    pub name: String,
    /// The team's id (1–64 of `A-Z a-z 0-9 . _ -`); generated when absent.
    #[cfg_attr(feature = "openapi", schema(example = "research"))]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>))]
    pub team_id: Option<TeamId>,
}

impl CreateTeam {
    /// The value rules: a name, and a well-formed id when one is given.
    pub fn validate(&self) -> Result<(), ErrorBody> {
        check_text("name", &self.name, MAX_TEAM_NAME)?;
        if let Some(id) = &self.team_id {
            id.check("team_id")?;
        }
        Ok(())
    }
}

/// Answer of `POST /v1/teams`. The team key is shown here once and never again.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TeamCreated {
    pub success: bool,
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub team_id: TeamId,
    pub name: String,
    /// Registers agents and manages the team. Store it: it cannot be shown again.
    pub team_key: String,
    pub created_at: Timestamp,
}

/// Answer of `GET /v1/teams` (admin): every team of the server, by id.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TeamList {
    pub success: bool,
    pub teams: Vec<TeamView>,
}

/// Answer of `POST /v1/teams/{team_id}/key`: the team's new key, shown here once. The
/// old key is refused from this answer on, on every node.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TeamKeyRotated {
    pub success: bool,
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub team_id: TeamId,
    /// The new team key. Store it: it cannot be shown again.
    pub team_key: String,
    pub rotated_at: Timestamp,
}

/// A team as its members and owner see it.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TeamView {
    pub success: bool,
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub team_id: TeamId,
    pub name: String,
    /// When false, no member can send anything (`COMMUNICATION_DISABLED`).
    pub communication_enabled: bool,
    /// A STOMP team bridge registers an agent it does not know on its first
    /// subscription (role `wise-agent`); when false, such a subscription is refused.
    pub stomp_auto_register: bool,
    /// The Wise Agents context (`_context_name`) a message that names none is handed to
    /// the team's Wise agents in; `null`: such a message is not handed to them at all
    /// (they would crash on it), only kept in their inbox. See `docs/stomp.md`.
    pub stomp_default_context: Option<String>,
    /// Current members.
    pub agent_count: usize,
    /// The team's own retention (`null`: the server's).
    pub retention: Retention,
    /// What is applied: the shorter of the team's and the server's (`null`: kept for
    /// ever).
    pub effective_retention: Retention,
    /// How the team stops agents talking in circles (`LOOP_DETECTED`).
    pub loop_guard: LoopGuard,
    /// The team's own budgets (`null`: the server's ceiling, if any).
    pub budgets: Budgets,
    /// What is applied: the lower of the team's and the server's (`null`: no limit).
    pub budgets_in_force: Budgets,
    /// How many times a task offered to a role may be claimed before a lease that runs
    /// out fails it (default 3).
    pub max_attempts: u32,
    /// The agents that may decide the team's approvals besides the team key.
    #[cfg_attr(feature = "openapi", schema(value_type = Vec<String>))]
    pub approvers: Vec<crate::ids::AgentId>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

/// Body of `PATCH /v1/teams/{team_id}`: any of the fields, at least one.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct UpdateTeam {
    #[serde(
        default,
        deserialize_with = "crate::decode::no_null",
        skip_serializing_if = "Option::is_none"
    )]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub name: Option<String>,
    /// Switches sending off (or on) for every member of the team.
    #[serde(
        default,
        deserialize_with = "crate::decode::no_null",
        skip_serializing_if = "Option::is_none"
    )]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub communication_enabled: Option<bool>,
    /// Whether a STOMP team bridge registers unknown agents on first subscription.
    #[serde(
        default,
        deserialize_with = "crate::decode::no_null",
        skip_serializing_if = "Option::is_none"
    )]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub stomp_auto_register: Option<bool>,
    /// The Wise Agents context a message without `context_reference` is handed to the
    /// team's Wise agents in: one the deployment creates at start. `""` clears it.
    #[serde(
        default,
        deserialize_with = "crate::decode::no_null",
        skip_serializing_if = "Option::is_none"
    )]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub stomp_default_context: Option<String>,
    /// Replaces the team's retention (every field: absent or `null` follows the server).
    #[serde(
        default,
        deserialize_with = "crate::decode::no_null",
        skip_serializing_if = "Option::is_none"
    )]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub retention: Option<Retention>,
    /// Replaces the team's loop guard (a field left out takes its default).
    #[serde(
        default,
        deserialize_with = "crate::decode::no_null",
        skip_serializing_if = "Option::is_none"
    )]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub loop_guard: Option<LoopGuard>,
    /// Replaces the team's budgets (a field absent or `null`: the server's ceiling). A
    /// team may lower a budget below the server's ceiling, never raise it.
    #[serde(
        default,
        deserialize_with = "crate::decode::no_null",
        skip_serializing_if = "Option::is_none"
    )]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub budgets: Option<Budgets>,
    /// How many claims a task offered to a role gets before a lease that runs out fails
    /// it (1–100).
    #[serde(
        default,
        deserialize_with = "crate::decode::no_null",
        skip_serializing_if = "Option::is_none"
    )]
    #[cfg_attr(
        feature = "openapi",
        schema(nullable = false, example = 3, minimum = 1, maximum = 100)
    )]
    pub max_attempts: Option<u32>,
    /// Replaces the agents (by id, members of the team) that may decide the team's
    /// approvals besides the team key (`[]`: the team key alone).
    #[serde(
        default,
        deserialize_with = "crate::decode::no_null",
        skip_serializing_if = "Option::is_none"
    )]
    #[cfg_attr(feature = "openapi", schema(nullable = false, value_type = Option<Vec<String>>, example = json!(["release-manager"])))]
    pub approvers: Option<Vec<crate::ids::AgentId>>,
}

/// A team's `max_attempts` until it sets one.
pub const DEFAULT_MAX_ATTEMPTS: u32 = 3;
/// The most claims a team may allow a task.
pub const MAX_MAX_ATTEMPTS: u32 = 100;

/// Longest Wise Agents context name a team may set as its default.
pub const MAX_CONTEXT_NAME: usize = 255;

/// Longest retention a team may set: 100 years, in seconds.
pub const MAX_RETENTION_SECONDS: u64 = 100 * 365 * 24 * 3600;

/// How long a team keeps what its agents are done with, in seconds. A team can shorten
/// the server's retention, never lengthen it: the disk is the operator's.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Retention {
    /// A message every recipient has read is removed this long after it was sent.
    #[cfg_attr(
        feature = "openapi",
        schema(example = 604800, minimum = 1, maximum = 3153600000u64)
    )]
    pub read_messages_seconds: Option<u64>,
    /// Any message (read or not) is removed this long after it was sent.
    #[cfg_attr(
        feature = "openapi",
        schema(example = 2592000, minimum = 1, maximum = 3153600000u64)
    )]
    pub unread_messages_seconds: Option<u64>,
    /// A task that succeeded, failed or was canceled is removed (with its history and
    /// callbacks) this long after its last change.
    #[cfg_attr(
        feature = "openapi",
        schema(example = 2592000, minimum = 1, maximum = 3153600000u64)
    )]
    pub finished_tasks_seconds: Option<u64>,
}

impl Retention {
    /// Each value from 1 second to [`MAX_RETENTION_SECONDS`].
    pub fn validate(&self) -> Result<(), ErrorBody> {
        for (field, value) in [
            (
                "retention.read_messages_seconds",
                self.read_messages_seconds,
            ),
            (
                "retention.unread_messages_seconds",
                self.unread_messages_seconds,
            ),
            (
                "retention.finished_tasks_seconds",
                self.finished_tasks_seconds,
            ),
        ] {
            if let Some(v) = value
                && !(1..=MAX_RETENTION_SECONDS).contains(&v)
            {
                return Err(ErrorBody::validation(
                    field,
                    format!("{field} must be from 1 to {MAX_RETENTION_SECONDS} seconds, or null"),
                ));
            }
        }
        Ok(())
    }

    /// The shorter of two retentions, field by field (`None` is for ever).
    pub fn shorter(self, other: Retention) -> Retention {
        fn min(a: Option<u64>, b: Option<u64>) -> Option<u64> {
            match (a, b) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            }
        }
        Retention {
            read_messages_seconds: min(self.read_messages_seconds, other.read_messages_seconds),
            unread_messages_seconds: min(
                self.unread_messages_seconds,
                other.unread_messages_seconds,
            ),
            finished_tasks_seconds: min(self.finished_tasks_seconds, other.finished_tasks_seconds),
        }
    }
}

impl UpdateTeam {
    /// At least one field, and a valid name when one is given.
    pub fn validate(&self) -> Result<(), ErrorBody> {
        if self.name.is_none()
            && self.communication_enabled.is_none()
            && self.stomp_auto_register.is_none()
            && self.stomp_default_context.is_none()
            && self.retention.is_none()
            && self.loop_guard.is_none()
            && self.budgets.is_none()
            && self.max_attempts.is_none()
            && self.approvers.is_none()
        {
            return Err(ErrorBody::validation(
                "body",
                "give at least one of: name, communication_enabled, stomp_auto_register, stomp_default_context, retention, loop_guard, budgets, max_attempts, approvers",
            ));
        }
        if let Some(n) = self.max_attempts
            && !(1..=MAX_MAX_ATTEMPTS).contains(&n)
        {
            return Err(ErrorBody::validation(
                "max_attempts",
                format!("max_attempts is 1 to {MAX_MAX_ATTEMPTS}"),
            ));
        }
        if let Some(context) = &self.stomp_default_context
            && context.chars().count() > MAX_CONTEXT_NAME
        {
            return Err(ErrorBody::validation(
                "stomp_default_context",
                format!("stomp_default_context is at most {MAX_CONTEXT_NAME} characters"),
            ));
        }
        if let Some(guard) = &self.loop_guard {
            guard.validate()?;
        }
        if let Some(budgets) = &self.budgets {
            // The ceiling is the server's to check; here only each value's range.
            budgets.validate(&Budgets::default())?;
        }
        if let Some(retention) = &self.retention {
            retention.validate()?;
        }
        if let Some(name) = &self.name {
            check_text("name", name, MAX_TEAM_NAME)?;
        }
        Ok(())
    }
}

/// What kind of token made a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, strum::IntoStaticStr)]
#[serde(rename_all = "lowercase")]
#[strum(serialize_all = "lowercase")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum TokenKind {
    /// The server admin token.
    Admin,
    /// A team key.
    Team,
    /// An agent token.
    Agent,
}

/// Who a token belongs to (`GET /v1/whoami`): lets a client or the command line learn
/// its own agent id and team from the token alone.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct WhoAmI {
    pub success: bool,
    /// `admin`, `team` (a team key) or `agent`.
    pub kind: TokenKind,
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>))]
    pub team_id: Option<TeamId>,
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>))]
    pub agent_id: Option<AgentId>,
}
