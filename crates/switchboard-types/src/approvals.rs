//! Approval checkpoints: an agent stops and a person decides (`docs/approvals.md`).
//!
//! An agent asks (`POST /v1/approvals`); the approval is `pending` until the team key,
//! or an agent the team names in its `approvers`, decides it with one of its `options`,
//! or until it expires. An expiry is an outcome of its own, never one of the options: an
//! agent that asked must not go ahead on an expired approval. The asker never decides its
//! own, and a decided approval is never decided again.

use serde::{Deserialize, Serialize};

use crate::error::ErrorBody;
use crate::ids::{AgentId, ApprovalId, TaskRef, TeamId};
use crate::messages::wire_enum;
use crate::time::Timestamp;

/// The options an approval offers when the request names none.
pub const DEFAULT_OPTIONS: [&str; 2] = ["approve", "deny"];
/// How long an approval waits for a decision when the request says nothing: one hour.
pub const DEFAULT_EXPIRES_IN_SECONDS: u64 = 3_600;
/// The longest an approval waits: seven days.
pub const MAX_EXPIRES_IN_SECONDS: u64 = 7 * 86_400;
/// The longest summary, in characters.
pub const MAX_SUMMARY_CHARS: usize = 500;
/// The longest details, in characters.
pub const MAX_DETAILS_CHARS: usize = 20_000;
/// The longest comment, in characters.
pub const MAX_COMMENT_CHARS: usize = 2_000;
/// At most this many options.
pub const MAX_OPTIONS: usize = 10;
/// The longest option, in characters.
pub const MAX_OPTION_CHARS: usize = 64;
/// The longest a read waits for a decision (`wait_seconds`), as a claim's wait.
pub const MAX_APPROVAL_WAIT_SECONDS: u64 = 60;
/// The most approvals one page lists: the inbox's page, as every list's.
pub const MAX_APPROVAL_PAGE: i64 = crate::inbox::MAX_PAGE;
/// The most approvals one agent may have pending at once.
pub const MAX_PENDING_PER_AGENT: i64 = 100;
/// The most names a team's `approvers` holds.
pub const MAX_APPROVERS: usize = 100;

/// The tag a team's approval events are published under: an agent that watches it gets
/// every request, decision and expiry of its team's approvals (an approver agent's way to
/// hear of work). The asking agent gets the decision and the expiry of its own whether it
/// watches or not.
pub const APPROVAL_EVENTS_TAG: &str = "switchboard.approval";

/// `POST /v1/approvals`: what the calling agent asks a person to decide.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RequestApproval {
    /// One line a person reads in the queue, 1–500 characters.
    #[cfg_attr(
        feature = "openapi",
        schema(
            example = "Deploy release 4.2 to production?",
            min_length = 1,
            max_length = 500
        )
    )]
    pub summary: String,
    /// Whatever the person needs to decide (at most 20,000 characters).
    #[serde(default)]
    #[cfg_attr(
        feature = "openapi",
        schema(
            example = "12 migrations, 3 of them lock tables for ~2 s.",
            max_length = 20000
        )
    )]
    pub details: Option<String>,
    /// What the person may answer: 2–10 distinct texts of 1–64 characters, not blank
    /// (default `["approve", "deny"]`); a decision is one of them, exactly.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(example = json!(["approve", "deny"])))]
    pub options: Option<Vec<String>>,
    /// The task this approval belongs to (one the caller originated or works on): its
    /// history records the request and the decision.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>, example = "release-4.2"))]
    pub task_id: Option<TaskRef>,
    /// How long it waits for a decision (default 3,600, at most 604,800).
    #[serde(default)]
    #[cfg_attr(
        feature = "openapi",
        schema(example = 900, minimum = 1, maximum = 604800)
    )]
    pub expires_in_seconds: Option<u64>,
    /// Answer only once it is decided or expired, or after this many seconds (0–60,
    /// default 0: at once, pending). What an agent that can do nothing else meanwhile
    /// asks for; the MCP tool `request_approval` waits 30 unless told otherwise.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(example = 30, minimum = 0, maximum = 60))]
    pub wait_seconds: Option<u64>,
}

impl RequestApproval {
    /// The one check of a request's fields: answers its options, its time to live and
    /// its wait.
    pub fn validate(&self) -> Result<(Vec<String>, u64, u64), ErrorBody> {
        let wait = ApprovalWait {
            wait_seconds: self.wait_seconds,
        }
        .validate()?;
        let summary = self.summary.trim();
        if summary.is_empty() || self.summary.chars().count() > MAX_SUMMARY_CHARS {
            return Err(ErrorBody::validation(
                "summary",
                format!("summary is 1 to {MAX_SUMMARY_CHARS} characters, not blank"),
            ));
        }
        if let Some(details) = &self.details
            && details.chars().count() > MAX_DETAILS_CHARS
        {
            return Err(ErrorBody::validation(
                "details",
                format!("details are at most {MAX_DETAILS_CHARS} characters"),
            ));
        }
        let options = match &self.options {
            None => DEFAULT_OPTIONS.iter().map(|o| (*o).to_owned()).collect(),
            Some(options) => options.clone(),
        };
        if !(2..=MAX_OPTIONS).contains(&options.len()) {
            return Err(ErrorBody::validation(
                "options",
                format!("an approval offers 2 to {MAX_OPTIONS} options"),
            ));
        }
        for (i, option) in options.iter().enumerate() {
            let chars = option.chars().count();
            if option.trim().is_empty() || chars > MAX_OPTION_CHARS {
                return Err(ErrorBody::validation(
                    "options",
                    format!("an option is 1 to {MAX_OPTION_CHARS} characters, not blank"),
                ));
            }
            if options[..i].contains(option) {
                return Err(ErrorBody::validation(
                    "options",
                    format!("option '{option}' is given twice"),
                ));
            }
        }
        let ttl = self
            .expires_in_seconds
            .unwrap_or(DEFAULT_EXPIRES_IN_SECONDS);
        if !(1..=MAX_EXPIRES_IN_SECONDS).contains(&ttl) {
            return Err(ErrorBody::validation(
                "expires_in_seconds",
                format!("expires_in_seconds is 1 to {MAX_EXPIRES_IN_SECONDS}"),
            ));
        }
        Ok((options, ttl, wait))
    }
}

/// `POST /v1/approvals/{approval_id}/decision`: the team key or an approver decides.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct DecideApproval {
    /// One of the approval's `options`.
    #[cfg_attr(feature = "openapi", schema(example = "approve"))]
    pub decision: String,
    /// Why, for the asker and the record (at most 2,000 characters).
    #[serde(default)]
    #[cfg_attr(
        feature = "openapi",
        schema(example = "Go after 18:00 UTC.", max_length = 2000)
    )]
    pub comment: Option<String>,
}

impl DecideApproval {
    /// The comment's bound (the decision is checked against the approval's options).
    pub fn validate(&self) -> Result<(), ErrorBody> {
        if let Some(comment) = &self.comment
            && comment.chars().count() > MAX_COMMENT_CHARS
        {
            return Err(ErrorBody::validation(
                "comment",
                format!("comment is at most {MAX_COMMENT_CHARS} characters"),
            ));
        }
        Ok(())
    }
}

/// `GET /v1/approvals/{approval_id}`: with `wait_seconds`, the answer comes once the
/// approval is decided or expired, or when the wait is over (still `pending`).
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "openapi", derive(utoipa::IntoParams, utoipa::ToSchema))]
#[cfg_attr(feature = "openapi", into_params(parameter_in = Query))]
pub struct ApprovalWait {
    /// Wait up to this many seconds for a decision (0–60, default 0).
    #[serde(default)]
    #[cfg_attr(feature = "openapi", param(example = 30, minimum = 0, maximum = 60))]
    #[cfg_attr(feature = "openapi", schema(minimum = 0, maximum = 60))]
    pub wait_seconds: Option<u64>,
}

impl ApprovalWait {
    /// The wait, checked.
    pub fn validate(&self) -> Result<u64, ErrorBody> {
        let wait = self.wait_seconds.unwrap_or(0);
        if wait > MAX_APPROVAL_WAIT_SECONDS {
            return Err(ErrorBody::validation(
                "wait_seconds",
                format!("wait_seconds is 0 to {MAX_APPROVAL_WAIT_SECONDS}"),
            ));
        }
        Ok(wait)
    }
}

wire_enum! {
    "snake_case";
    /// Where an approval stands.
    pub enum ApprovalStatus {
        /// Waiting for a decision.
        Pending,
        /// Decided: `decision` is one of its options.
        Decided,
        /// Nobody decided before `expires_at`: not one of the options, never a go-ahead.
        Expired,
    }
}

wire_enum! {
    "snake_case";
    /// Which credential decided.
    pub enum DecidedWith {
        /// The team key (a person at the console, an operator's script).
        TeamKey,
        /// An agent named in the team's `approvers` (`decided_by`).
        Approver,
    }
}

/// `GET /v1/approvals`: the caller's team's approvals, newest first. An agent sees the
/// ones it asked (and, as an approver, every one of its team); the team key every one.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "openapi", derive(utoipa::IntoParams, utoipa::ToSchema))]
#[cfg_attr(feature = "openapi", into_params(parameter_in = Query))]
pub struct ApprovalQuery {
    /// Only approvals in this state.
    #[serde(default)]
    pub status: Option<ApprovalStatus>,
    /// Only those this agent asked.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", param(value_type = Option<String>, example = "deployer"))]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>))]
    pub asked_by: Option<AgentId>,
    /// Only those of this task (its id; `id@originator` where two originators share it).
    #[serde(default)]
    #[cfg_attr(feature = "openapi", param(value_type = Option<String>))]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>))]
    pub task_id: Option<TaskRef>,
    /// At most this many (1–100, default 50).
    #[serde(default)]
    pub limit: Option<i64>,
    /// The `next_cursor` of the page before.
    #[serde(default)]
    pub cursor: Option<String>,
}

/// An approval as its asker, its team key and its approvers see it.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Approval {
    #[cfg_attr(feature = "openapi", schema(value_type = String, example = "appr_0192f3c4a1b27c3e9d5e8f1a2b3c4d5e"))]
    pub approval_id: ApprovalId,
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub team_id: TeamId,
    /// The agent that asked.
    #[cfg_attr(feature = "openapi", schema(value_type = String, example = "deployer"))]
    pub asked_by: AgentId,
    pub summary: String,
    pub details: Option<String>,
    pub options: Vec<String>,
    /// The task it belongs to.
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>))]
    pub task_id: Option<String>,
    pub status: ApprovalStatus,
    /// The option chosen (`null` while pending and once expired).
    pub decision: Option<String>,
    pub comment: Option<String>,
    /// The approver agent that decided (`null` for the team key).
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>))]
    pub decided_by: Option<AgentId>,
    pub decided_with: Option<DecidedWith>,
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub created_at: Timestamp,
    /// When it expires unless decided.
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub expires_at: Timestamp,
    /// When it was decided, or found expired.
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>))]
    pub decided_at: Option<Timestamp>,
}

/// One approval: the answer of a request, a decision and a read.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ApprovalEnvelope {
    pub success: bool,
    pub approval: Approval,
}

/// A page of approvals, newest first.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ApprovalList {
    pub success: bool,
    pub approvals: Vec<Approval>,
    /// Give it as `cursor` for the next page; `null` on the last.
    pub next_cursor: Option<String>,
}

/// What happened to an approval: the `instruct_content` of an approval event (and
/// `content.data`, beside `"type": "approval_event"`).
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
pub struct ApprovalEvent {
    /// `requested`, `decided` or `expired`.
    pub event: String,
    pub approval: Approval,
}

/// Approval checkpoints (`docs/approvals.md`): an agent asks, a person (the team key)
/// or an approver agent decides; the asker reads, or waits for, the outcome.
#[derive(Debug, Clone, strum::EnumDiscriminants)]
#[strum_discriminants(
    name(ApprovalOpName),
    derive(strum::EnumString, strum::IntoStaticStr, strum::VariantArray, Hash),
    strum(serialize_all = "snake_case")
)]
pub enum ApprovalOp {
    /// Ask, as the calling agent, for a decision.
    RequestApproval(RequestApproval),
    /// Decide a pending approval (team key, or an agent of the team's `approvers`).
    DecideApproval {
        approval_id: ApprovalId,
        decision: DecideApproval,
    },
    /// One approval, at once or once decided (`wait_seconds`).
    GetApproval {
        approval_id: ApprovalId,
        wait: ApprovalWait,
    },
    /// The team's approvals, newest first.
    ListApprovals(ApprovalQuery),
}

impl From<ApprovalOp> for crate::Operation {
    fn from(op: ApprovalOp) -> crate::Operation {
        crate::Operation::Approvals(op)
    }
}
