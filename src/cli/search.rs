//! `switchboard search "<q>"`: find messages by the words in them (`docs/search.md`),
//! with an agent token (what it sent or received) or a team key (the whole team).

use clap::Args;
use switchboard_client::{HttpTransport, call};
use switchboard_types::search::{SearchPage, SearchQuery, SearchSort};
use switchboard_types::{MessageOp, Operation};

use super::{Connection, Failure, finish, inert, parse, show, token};

/// `switchboard search …`.
#[derive(Debug, Args)]
pub struct SearchArgs {
    #[command(flatten)]
    pub connection: Connection,
    /// Words (all must match), "a phrase", prefix*.
    pub q: String,
    /// Only messages this agent sent.
    #[arg(long)]
    pub sender: Option<String>,
    /// Only messages addressed to this agent.
    #[arg(long)]
    pub recipient: Option<String>,
    /// Only this conversation.
    #[arg(long)]
    pub thread: Option<String>,
    /// Newest first instead of best match first.
    #[arg(long)]
    pub newest: bool,
    /// At most this many (1–100).
    #[arg(long, default_value_t = 20)]
    pub limit: i64,
}

pub async fn run_search(args: SearchArgs) -> std::process::ExitCode {
    finish(search(args).await)
}

async fn search(args: SearchArgs) -> Result<(), Failure> {
    let c = &args.connection;
    let http = HttpTransport::new(&c.url, token(c)?)?;
    let query = SearchQuery {
        q: args.q,
        sender: args.sender.map(|s| parse("sender", &s)).transpose()?,
        recipient: args.recipient.map(|r| parse("recipient", &r)).transpose()?,
        thread_id: args.thread,
        sort: Some(if args.newest {
            SearchSort::Newest
        } else {
            SearchSort::Relevance
        }),
        limit: Some(args.limit),
        ..SearchQuery::default()
    };
    let page: SearchPage =
        call(&http, Operation::Messages(MessageOp::SearchMessages(query))).await?;
    show(c.json, &page, || {
        let lines: Vec<String> = page
            .results
            .iter()
            .map(|r| {
                let m = &r.message;
                format!(
                    "{} {} → {}: {}",
                    m.timestamp,
                    inert(&m.sender_agent_id),
                    inert(
                        &r.recipient_agent_ids
                            .iter()
                            .map(|a| a.as_str())
                            .collect::<Vec<_>>()
                            .join(",")
                    ),
                    inert(&m.content.text)
                )
            })
            .collect();
        if lines.is_empty() {
            "nothing found".to_owned()
        } else {
            lines.join("\n")
        }
    });
    Ok(())
}
