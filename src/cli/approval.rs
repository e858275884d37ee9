//! `switchboard agent approval …` and `switchboard admin approval …`: ask for, read and
//! decide approvals from a terminal (`docs/approvals.md`). The same commands under both:
//! an agent asks and waits; a person with the team key lists and decides.

use clap::Subcommand;
use switchboard_client::{HttpTransport, call};
use switchboard_types::approvals::{
    Approval, ApprovalEnvelope, ApprovalList, ApprovalQuery, ApprovalStatus, ApprovalWait,
    DecideApproval, RequestApproval,
};
use switchboard_types::{ApprovalOp, Operation};

use super::{Failure, inert, parse, show};

#[derive(Debug, Subcommand)]
pub enum ApprovalCommand {
    /// Ask a person to decide (agent token); with --wait, print the outcome.
    Request {
        /// One line saying what is to be decided.
        summary: String,
        /// Whatever the person needs to know to decide.
        #[arg(long)]
        details: Option<String>,
        /// What the person may answer, comma-separated (default approve,deny).
        #[arg(long, value_delimiter = ',')]
        options: Vec<String>,
        /// The task it belongs to.
        #[arg(long)]
        task: Option<String>,
        /// Seconds it waits for a decision before it expires (default 3600).
        #[arg(long)]
        expires_in: Option<u64>,
        /// Seconds to wait for the decision before answering (at most 60).
        #[arg(long)]
        wait: Option<u64>,
    },
    /// One approval; with --wait, once decided or expired.
    Show {
        /// The approval, as `approval request` printed it.
        approval_id: String,
        /// Seconds to wait for the decision (at most 60).
        #[arg(long)]
        wait: Option<u64>,
    },
    /// Approvals, newest first: the team key's and approvers' every one, an agent's its own.
    List {
        /// pending, decided or expired.
        #[arg(long)]
        status: Option<String>,
        /// Only those this agent asked.
        #[arg(long)]
        asked_by: Option<String>,
    },
    /// Decide a pending approval (team key, or an agent the team names as an approver).
    Decide {
        /// The approval, as `approval list` shows it.
        approval_id: String,
        /// One of the approval's options.
        decision: String,
        /// Why, for the asker and the record.
        #[arg(long)]
        comment: Option<String>,
    },
}

/// Runs `command` with whichever token the connection has.
pub(super) async fn approval(
    http: &HttpTransport,
    json: bool,
    command: ApprovalCommand,
) -> Result<(), Failure> {
    let op = match command {
        ApprovalCommand::Request {
            summary,
            details,
            options,
            task,
            expires_in,
            wait,
        } => ApprovalOp::RequestApproval(RequestApproval {
            summary,
            details,
            options: Some(options).filter(|o| !o.is_empty()),
            task_id: task.map(Into::into),
            expires_in_seconds: expires_in,
            wait_seconds: wait,
        }),
        ApprovalCommand::Show { approval_id, wait } => ApprovalOp::GetApproval {
            approval_id: approval_id.into(),
            wait: ApprovalWait { wait_seconds: wait },
        },
        ApprovalCommand::Decide {
            approval_id,
            decision,
            comment,
        } => ApprovalOp::DecideApproval {
            approval_id: approval_id.into(),
            decision: DecideApproval { decision, comment },
        },
        ApprovalCommand::List { status, asked_by } => {
            let query = ApprovalQuery {
                status: status
                    .map(|s| parse::<ApprovalStatus>("status", &s))
                    .transpose()?,
                asked_by: asked_by.map(Into::into),
                ..ApprovalQuery::default()
            };
            let answer: ApprovalList =
                call(http, Operation::Approvals(ApprovalOp::ListApprovals(query))).await?;
            show(json, &answer, || {
                let lines: Vec<String> = answer.approvals.iter().map(line).collect();
                if lines.is_empty() {
                    "no approvals".to_owned()
                } else {
                    lines.join("\n")
                }
            });
            return Ok(());
        }
    };
    let answer: ApprovalEnvelope = call(http, Operation::Approvals(op)).await?;
    show(json, &answer, || line(&answer.approval));
    Ok(())
}

/// One approval on one line: its id, where it stands, who asked what.
fn line(a: &Approval) -> String {
    let outcome = match a.status {
        ApprovalStatus::Pending => format!(
            "pending until {} ({})",
            a.expires_at,
            inert(&a.options.join(" / "))
        ),
        ApprovalStatus::Decided => format!(
            "decided: {}{}",
            inert(a.decision.as_deref().unwrap_or("")),
            a.comment
                .as_deref()
                .map(|c| format!(" ({})", inert(c)))
                .unwrap_or_default()
        ),
        ApprovalStatus::Expired => "expired undecided".to_owned(),
    };
    format!(
        "{} {} — {} asks: {}",
        inert(&a.approval_id),
        outcome,
        inert(&a.asked_by),
        inert(&a.summary)
    )
}
