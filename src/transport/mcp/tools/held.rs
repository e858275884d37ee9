//! The tools for what agents hold and wait on — leases on resources, approvals a person
//! decides — and search. Apart from `tools.rs` so that each file stays readable.

use switchboard_types::{ApprovalOpName, LeaseOpName, MessageOpName, OperationName};

use super::{Ask, Frame, GET, POST, Spec, spec};

/// How long `request_approval` waits for the decision when the call names no
/// `wait_seconds`: long enough for a person at the console, short of the time-outs MCP
/// clients put on a tool call.
pub(super) const ASK_WAIT_SECONDS: u64 = 30;

pub(super) static HELD: [Spec; 9] = [
    spec(
        "acquire_lease",
        Frame(OperationName::Leases(LeaseOpName::AcquireLease)),
        ("put", "/v1/teams/{team_id}/leases"),
    )
    .about(
        "Before you change something others may change too, take a lease on it: resource \
         is a name (a ticket id) or a path pattern (src/**, docs/*.md), ttl_seconds how \
         long (default 300). Refused with LEASE_CONFLICT naming who holds what overlaps \
         and until when: then work on something else. Release it when done.",
    ),
    spec(
        "extend_lease",
        Frame(OperationName::Leases(LeaseOpName::ExtendLease)),
        (POST, "/v1/teams/{team_id}/leases/{lease_id}/extend"),
    )
    .about("Keep a lease you hold for ttl_seconds more (default 300), counted from now."),
    spec(
        "release_lease",
        Frame(OperationName::Leases(LeaseOpName::ReleaseLease)),
        ("delete", "/v1/teams/{team_id}/leases/{lease_id}"),
    )
    .about("Give back a lease you hold (lease_id), as soon as you are done with it."),
    spec(
        "list_leases",
        Frame(OperationName::Leases(LeaseOpName::ListLeases)),
        (GET, "/v1/teams/{team_id}/leases"),
    )
    .reads()
    .about(
        "Who holds what in your team: the live leases, optionally only one holder's or \
         only those overlapping a resource (a name or a path pattern).",
    ),
    spec("request_approval", Ask, (POST, "/v1/approvals")).about(
        "Before something a person must allow (a deploy, a payment, deleting data), ask: \
             summary says what, details why, options what they may answer (default \
             approve / deny). Waits up to wait_seconds (default 30, at most 60) and \
             returns the approval: status decided with the decision, expired (never a \
             go-ahead), or still pending — then wait with get_approval. Do not go ahead \
             unless the decision allows it.",
    ),
    spec(
        "get_approval",
        Frame(OperationName::Approvals(ApprovalOpName::GetApproval)),
        (GET, "/v1/approvals/{approval_id}"),
    )
    .reads()
    .about(
        "An approval you asked for (approval_id); with wait_seconds (at most 60) it \
         returns as soon as a person decides it, or when the wait is over.",
    ),
    spec(
        "list_approvals",
        Frame(OperationName::Approvals(ApprovalOpName::ListApprovals)),
        (GET, "/v1/approvals"),
    )
    .reads()
    .about(
        "Approvals you asked for, newest first (an approver sees the whole team\'s): \
         filter by status (pending, decided, expired), asked_by or task_id.",
    ),
    spec(
        "decide_approval",
        Frame(OperationName::Approvals(ApprovalOpName::DecideApproval)),
        (POST, "/v1/approvals/{approval_id}/decision"),
    )
    .about(
        "Decide a pending approval with one of its options and an optional comment: only \
         for an agent the team names as an approver, never on its own request.",
    ),
    spec(
        "search_messages",
        Frame(OperationName::Messages(MessageOpName::SearchMessages)),
        (GET, "/v1/search"),
    )
    .reads()
    .about(
        "Find messages by the words in them (their text and their data's strings), among \
         those you sent or received: q takes words (all must match), \"a phrase\" and \
         prefix*; filter by sender, recipient, thread_id, message_type, kind, cause_by, \
         since_timestamp, until_timestamp. Best match first, or sort=newest.",
    ),
];
