//! `switchboard agent lease …`: leases on named resources from a terminal
//! (`docs/leases.md`).

use switchboard_client::Client;
use switchboard_types::leases::{AcquireLease, ExtendLease, Lease, LeaseQuery};

use clap::Subcommand;

use super::{Failure, inert, show};

#[derive(Debug, Subcommand)]
pub enum LeaseCommand {
    /// Take a lease on a name or a path pattern (src/**, docs/*.md, T-42).
    Take {
        /// A name or a path pattern.
        resource: String,
        /// Seconds it lives unless extended (default 300, at most 86400).
        #[arg(long)]
        ttl: Option<u64>,
        /// Shared: coexists with other shared leases, not with an exclusive one.
        #[arg(long)]
        shared: bool,
        /// Why, for the others who meet it.
        #[arg(long)]
        reason: Option<String>,
    },
    /// Renew a lease you hold.
    Extend {
        /// The lease, as `lease take` printed it.
        lease_id: String,
        /// Seconds from now (default 300).
        #[arg(long)]
        ttl: Option<u64>,
    },
    /// Give a lease back.
    Release {
        /// The lease, as `lease take` printed it.
        lease_id: String,
    },
    /// The team's live leases.
    List {
        /// Only this agent's.
        #[arg(long)]
        holder: Option<String>,
        /// Only those overlapping this name or pattern.
        #[arg(long)]
        resource: Option<String>,
    },
}

pub(super) async fn lease(
    client: &Client,
    json: bool,
    command: LeaseCommand,
) -> Result<(), Failure> {
    let one = |lease: &Lease, what: &str| {
        format!(
            "{what} {} on {} ({}), until {}",
            inert(&lease.lease_id),
            inert(&lease.resource),
            if lease.exclusive {
                "exclusive"
            } else {
                "shared"
            },
            lease.expires_at
        )
    };
    match command {
        LeaseCommand::Take {
            resource,
            ttl,
            shared,
            reason,
        } => {
            let asked = AcquireLease {
                resource,
                ttl_seconds: ttl,
                exclusive: Some(!shared),
                reason,
            };
            let answer = client.acquire_lease(asked).await?;
            show(json, &answer, || one(&answer.lease, "holding"));
        }
        LeaseCommand::Extend { lease_id, ttl } => {
            let extend = ExtendLease { ttl_seconds: ttl };
            let answer = client.extend_lease(&lease_id, extend).await?;
            show(json, &answer, || one(&answer.lease, "holding"));
        }
        LeaseCommand::Release { lease_id } => {
            let answer = client.release_lease(&lease_id).await?;
            show(json, &answer, || one(&answer.lease, "released"));
        }
        LeaseCommand::List { holder, resource } => {
            let query = LeaseQuery {
                holder: holder.map(Into::into),
                resource,
            };
            let answer = client.list_leases(query).await?;
            show(json, &answer, || {
                let lines: Vec<String> = answer
                    .leases
                    .iter()
                    .map(|l| format!("{}: {}", inert(&l.holder), one(l, "holds")))
                    .collect();
                if lines.is_empty() {
                    "no live leases".to_owned()
                } else {
                    lines.join("\n")
                }
            });
        }
    }
    Ok(())
}
