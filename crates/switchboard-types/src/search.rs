//! Search over what a team said (`docs/search.md`): words, `"phrases"` and `prefix*`
//! over messages' text and the strings of their data, with the inbox's filters.
//!
//! The query language is ours, parsed here once ([`SearchTerms::parse`]) and written
//! into each engine's own syntax by the store, so a query means the same on SQLite's
//! FTS5 and PostgreSQL's `tsvector`: every term is cut into runs of letters and digits
//! (lowercased), a term of several runs (`foo-bar`, `"due friday"`) is a phrase of them,
//! and a trailing `*` makes the last run a prefix. All terms must match.

use serde::{Deserialize, Serialize};

use crate::error::ErrorBody;
use crate::ids::AgentId;
use crate::messages::{MessageKind, MessageType, wire_enum};
use crate::traffic::TrafficEntry;

/// The longest query, in characters.
pub const MAX_QUERY_CHARS: usize = 256;
/// The most terms (words, phrases, prefixes) a query holds.
pub const MAX_TERMS: usize = 10;
/// The shortest prefix (`ab*`): a one-letter prefix matches most of a language.
pub const MIN_PREFIX_CHARS: usize = 2;
/// How far down the ranking a search pages: relevance past this is noise.
pub const MAX_RESULTS: i64 = 1_000;

wire_enum! {
    "snake_case";
    /// The order of the results.
    pub enum SearchSort {
        /// Best match first (each engine's own ranking: FTS5's bm25, PostgreSQL's
        /// `ts_rank`), newest first among equals.
        Relevance,
        /// Newest first.
        Newest,
    }
}

/// `GET /v1/search`: the query and the inbox's filters.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "openapi", derive(utoipa::IntoParams, utoipa::ToSchema))]
#[cfg_attr(feature = "openapi", into_params(parameter_in = Query))]
pub struct SearchQuery {
    /// Words (all must match), `"a phrase"`, `prefix*`; 1–256 characters, at most 10
    /// terms.
    #[cfg_attr(feature = "openapi", param(example = "\"parser change\" review*"))]
    pub q: String,
    /// Only messages this agent sent.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", param(value_type = Option<String>, example = "planner"))]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>))]
    pub sender: Option<AgentId>,
    /// Only messages addressed to this agent.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", param(value_type = Option<String>, example = "coder"))]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>))]
    pub recipient: Option<AgentId>,
    /// Only this conversation.
    #[serde(default)]
    pub thread_id: Option<String>,
    /// Only this type.
    #[serde(default)]
    pub message_type: Option<MessageType>,
    /// Only this kind (`message`, `response`, `broadcast`, `publish`, …).
    #[serde(default)]
    pub kind: Option<MessageKind>,
    /// Only publishes under this tag (`cause_by`).
    #[serde(default)]
    pub cause_by: Option<String>,
    /// Only messages sent at or after this time (RFC 3339).
    #[serde(default)]
    #[cfg_attr(feature = "openapi", param(value_type = Option<String>))]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>))]
    pub since_timestamp: Option<crate::time::Timestamp>,
    /// Only messages sent before this time (RFC 3339).
    #[serde(default)]
    #[cfg_attr(feature = "openapi", param(value_type = Option<String>))]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>))]
    pub until_timestamp: Option<crate::time::Timestamp>,
    /// `relevance` (default) or `newest`.
    #[serde(default)]
    pub sort: Option<SearchSort>,
    /// At most this many (1–100, default 20); fewer when the page byte bound is reached.
    #[serde(default)]
    pub limit: Option<i64>,
    /// The `next_cursor` of the page before.
    #[serde(default)]
    pub cursor: Option<String>,
}

/// One page of results.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SearchPage {
    pub success: bool,
    /// The messages found, in the order asked for, each with its recipients.
    pub results: Vec<TrafficEntry>,
    /// Give it as `cursor` for the next page; `null` on the last.
    pub next_cursor: Option<String>,
}

/// One term of a query: runs of letters and digits, lowercased; several make a phrase.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchTerm {
    pub tokens: Vec<String>,
    /// The last token is a prefix.
    pub prefix: bool,
}

/// A query's terms, all of which must match.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchTerms(pub Vec<SearchTerm>);

impl SearchTerms {
    /// The one parser of the query language (see the module's documentation).
    pub fn parse(q: &str) -> Result<SearchTerms, ErrorBody> {
        let refuse = |why: String| Err(ErrorBody::validation("q", why));
        if q.chars().count() > MAX_QUERY_CHARS {
            return refuse(format!("q is at most {MAX_QUERY_CHARS} characters"));
        }
        let mut terms = Vec::new();
        for (i, chunk) in q.split('"').enumerate() {
            let quoted = i % 2 == 1;
            let pieces: Vec<&str> = if quoted {
                vec![chunk]
            } else {
                chunk.split_whitespace().collect()
            };
            for piece in pieces {
                let prefix = piece.trim_end().ends_with('*');
                let tokens: Vec<String> = piece
                    .split(|c: char| !c.is_alphanumeric())
                    .filter(|t| !t.is_empty())
                    .map(str::to_lowercase)
                    .collect();
                if tokens.is_empty() {
                    continue;
                }
                if prefix
                    && tokens
                        .last()
                        .is_some_and(|t| t.chars().count() < MIN_PREFIX_CHARS)
                {
                    return refuse(format!(
                        "a prefix is at least {MIN_PREFIX_CHARS} letters or digits"
                    ));
                }
                terms.push(SearchTerm { tokens, prefix });
            }
        }
        if terms.is_empty() {
            return refuse("q holds no word (letters or digits)".into());
        }
        if terms.len() > MAX_TERMS {
            return refuse(format!("q holds at most {MAX_TERMS} terms"));
        }
        Ok(SearchTerms(terms))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn term(tokens: &[&str], prefix: bool) -> SearchTerm {
        SearchTerm {
            tokens: tokens.iter().map(|t| (*t).to_owned()).collect(),
            prefix,
        }
    }

    #[test]
    fn words_phrases_and_prefixes_are_cut_alike() {
        let parsed = SearchTerms::parse(r#"Parser "due Friday" foo-bar revi* "x""#).expect("ok");
        assert_eq!(
            parsed.0,
            vec![
                term(&["parser"], false),
                term(&["due", "friday"], false),
                term(&["foo", "bar"], false),
                term(&["revi"], true),
                term(&["x"], false),
            ]
        );
        assert!(SearchTerms::parse("  -- ").is_err());
        assert!(SearchTerms::parse("a*").is_err());
        assert!(SearchTerms::parse(&"w ".repeat(11)).is_err());
        assert!(SearchTerms::parse(&"w".repeat(257)).is_err());
    }
}
