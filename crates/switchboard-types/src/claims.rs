//! Work offered to a role (an extension of the task protocol, `docs/tasks.md`): the
//! bodies of a claim, an extension and a give-back, a claim's answer, and the `TaskOffer` frame.

use serde::{Deserialize, Serialize};

use crate::error::ErrorBody;
use crate::ids::{AgentId, TaskId};
use crate::messages::Priority;
use crate::tasks::{MAX_REASON, Task};
use crate::validate::check_optional;

/// The longest a claim waits for a task to be offered.
pub const MAX_CLAIM_WAIT_SECONDS: u64 = 60;
/// A claim's lease when the claim names none: five minutes without progress and the task
/// goes back to its role.
pub const DEFAULT_CLAIM_LEASE_SECONDS: u64 = 300;
/// The longest lease a claim may ask for.
pub const MAX_CLAIM_LEASE_SECONDS: u64 = 3_600;

/// Body of `POST /v1/tasks/claim`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ClaimTask {
    /// Wait up to this long (0–60 s, default 0) for a task to be offered when none is.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(example = 5, minimum = 0, maximum = 60))]
    pub wait_seconds: Option<u64>,
    /// How long the claim holds without progress (1–3600 s, default 300); each progress
    /// report starts it again.
    #[serde(default)]
    #[cfg_attr(
        feature = "openapi",
        schema(example = 300, minimum = 1, maximum = 3600)
    )]
    pub lease_seconds: Option<u64>,
}

/// Answer of `POST /v1/tasks/claim`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TaskClaimed {
    pub success: bool,
    /// The task now the caller's (`in-progress`), or null when none was open for it.
    pub task: Option<Task>,
}

/// Body of `POST /v1/tasks/{task_id}/release`: the claimer gives a task back.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ReleaseTask {
    /// Why, for the task's history (at most 1000 characters).
    #[serde(default)]
    pub reason: Option<String>,
}

/// Body of `POST /v1/tasks/{task_id}/extend`: the claimer renews its claim's lease
/// without reporting progress (a long step with nothing to report yet).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ExtendClaim {
    /// The lease from now (1–3600 s); by default the claim's own `lease_seconds`. It
    /// becomes the claim's lease for the progress reports that follow.
    #[serde(default)]
    #[cfg_attr(
        feature = "openapi",
        schema(example = 900, minimum = 1, maximum = 3600)
    )]
    pub lease_seconds: Option<u64>,
}

impl ExtendClaim {
    /// The lease asked for, within its bounds (`None`: keep the claim's own).
    pub fn validate(&self) -> Result<Option<u64>, ErrorBody> {
        match self.lease_seconds {
            Some(lease) if !(1..=MAX_CLAIM_LEASE_SECONDS).contains(&lease) => {
                Err(ErrorBody::validation(
                    "lease_seconds",
                    format!("lease_seconds is 1 to {MAX_CLAIM_LEASE_SECONDS}"),
                ))
            }
            lease => Ok(lease),
        }
    }
}

/// `TaskOffer`: pushed to the online agents of a task's role when it is offered (again).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TaskOffer {
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub task_id: TaskId,
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub originating_agent_id: AgentId,
    pub description: String,
    pub priority: Priority,
    pub assignee_role: String,
    pub required_capabilities: Vec<String>,
    /// Claims so far (0 on its first offer).
    pub attempts: i64,
}

impl ReleaseTask {
    pub fn validate(&self) -> Result<(), ErrorBody> {
        check_optional("reason", &self.reason, MAX_REASON)
    }
}

impl ClaimTask {
    /// The wait and the lease, each within its bounds (defaults filled in).
    pub fn validate(&self) -> Result<(u64, u64), ErrorBody> {
        let wait = self.wait_seconds.unwrap_or(0);
        if wait > MAX_CLAIM_WAIT_SECONDS {
            return Err(ErrorBody::validation(
                "wait_seconds",
                format!("wait_seconds is 0 to {MAX_CLAIM_WAIT_SECONDS}"),
            ));
        }
        let lease = self.lease_seconds.unwrap_or(DEFAULT_CLAIM_LEASE_SECONDS);
        if !(1..=MAX_CLAIM_LEASE_SECONDS).contains(&lease) {
            return Err(ErrorBody::validation(
                "lease_seconds",
                format!("lease_seconds is 1 to {MAX_CLAIM_LEASE_SECONDS}"),
            ));
        }
        Ok((wait, lease))
    }
}
