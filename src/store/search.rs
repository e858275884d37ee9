//! Full-text search over a team's messages (`docs/search.md`), written once over the
//! two places the engines differ ([`SearchDialect`]): how a query matches (FTS5's
//! `MATCH` on `messages_fts`, PostgreSQL's `@@` on the `search` column) and how matches
//! are ranked (bm25, `ts_rank`). The index is kept in the message's own transaction by
//! the schema itself (a trigger on SQLite, a generated column on PostgreSQL), so every
//! way a message is written — and every way retention removes one — keeps it.

use sqlx::{Postgres, QueryBuilder, Sqlite};
use switchboard_types::search::{SearchSort, SearchTerms};

use super::filters::Dialect;
use crate::model::SearchSpec;
use crate::store::columns::MESSAGE_COLUMNS;

/// What a search's SQL says in each engine's own words.
pub(crate) trait SearchDialect: Dialect
where
    i64: for<'t> sqlx::Encode<'t, Self> + sqlx::Type<Self>,
    String: for<'t> sqlx::Encode<'t, Self> + sqlx::Type<Self>,
{
    /// `SELECT … FROM` the matches of `terms` (`m` the message), then `WHERE` the first
    /// condition.
    fn push_matches(q: &mut QueryBuilder<Self>, terms: &SearchTerms);
    /// The order of the best matches first.
    fn push_by_rank(q: &mut QueryBuilder<Self>, terms: &SearchTerms);
}

impl SearchDialect for Sqlite {
    fn push_matches(q: &mut QueryBuilder<Self>, terms: &SearchTerms) {
        // The index first (CROSS JOIN keeps that order: left to itself SQLite may walk the
        // team's messages and ask the index about each).
        q.push(format_args!(
            "SELECT {MESSAGE_COLUMNS}, m.recipient_ids FROM messages_fts f
             CROSS JOIN messages m ON m.pk = f.rowid WHERE messages_fts MATCH "
        ))
        .push_bind(fts5_query(terms));
    }

    fn push_by_rank(q: &mut QueryBuilder<Self>, _: &SearchTerms) {
        q.push(" ORDER BY bm25(messages_fts), m.pk DESC");
    }
}

impl SearchDialect for Postgres {
    fn push_matches(q: &mut QueryBuilder<Self>, terms: &SearchTerms) {
        q.push(format_args!(
            "SELECT {MESSAGE_COLUMNS}, m.recipient_ids FROM messages m
             WHERE m.search @@ to_tsquery('simple', "
        ))
        .push_bind(ts_query(terms))
        .push(")");
    }

    fn push_by_rank(q: &mut QueryBuilder<Self>, terms: &SearchTerms) {
        q.push(" ORDER BY ts_rank(m.search, to_tsquery('simple', ")
            .push_bind(ts_query(terms))
            .push(")) DESC, m.pk DESC");
    }
}

/// FTS5's syntax: each term a quoted phrase of its tokens (letters and digits only, so
/// nothing needs escaping), `*` after a prefix; side by side, all must match.
fn fts5_query(terms: &SearchTerms) -> String {
    let quoted: Vec<String> = terms
        .0
        .iter()
        .map(|t| {
            format!(
                "\"{}\"{}",
                t.tokens.join(" "),
                if t.prefix { "*" } else { "" }
            )
        })
        .collect();
    quoted.join(" ")
}

/// `to_tsquery`'s syntax: a phrase's tokens joined by `<->`, `:*` after a prefix, terms
/// joined by `&`.
fn ts_query(terms: &SearchTerms) -> String {
    terms
        .0
        .iter()
        .map(|t| {
            let last = t.tokens.len() - 1;
            let tokens: Vec<String> = t
                .tokens
                .iter()
                .enumerate()
                .map(|(i, tok)| {
                    if t.prefix && i == last {
                        format!("'{tok}':*")
                    } else {
                        format!("'{tok}'")
                    }
                })
                .collect();
            format!("({})", tokens.join(" <-> "))
        })
        .collect::<Vec<_>>()
        .join(" & ")
}

/// One page of the team's messages matching `spec`, with their recipients.
pub(crate) fn search_query<DB: SearchDialect>(spec: &SearchSpec) -> QueryBuilder<DB>
where
    i64: for<'t> sqlx::Encode<'t, DB> + sqlx::Type<DB>,
    String: for<'t> sqlx::Encode<'t, DB> + sqlx::Type<DB>,
{
    let mut q = QueryBuilder::new("");
    DB::push_matches(&mut q, &spec.terms);
    q.push(" AND m.team_pk = ").push_bind(spec.team.0);
    if let Some(viewer) = spec.viewer {
        // What an agent may read: what it sent, what was addressed to it.
        q.push(" AND (m.sender_pk = ")
            .push_bind(viewer.0)
            .push(" OR EXISTS (SELECT 1 FROM inbox v WHERE v.message_pk = m.pk AND v.agent_pk = ")
            .push_bind(viewer.0)
            .push("))");
    }
    if let Some(sender) = spec.sender {
        q.push(" AND m.sender_pk = ").push_bind(sender.0);
    }
    if let Some(recipient) = spec.recipient {
        q.push(" AND EXISTS (SELECT 1 FROM inbox r WHERE r.message_pk = m.pk AND r.agent_pk = ")
            .push_bind(recipient.0)
            .push(")");
    }
    let texts = [
        ("m.thread_id", spec.thread_id.clone()),
        (
            "m.message_type",
            spec.message_type.map(|t| t.as_str().to_owned()),
        ),
        ("m.kind", spec.kind.map(|k| k.as_str().to_owned())),
        ("m.cause_by", spec.cause_by.clone()),
    ];
    for (column, value) in texts {
        if let Some(value) = value {
            q.push(format_args!(" AND {column} = ")).push_bind(value);
        }
    }
    if let Some(since) = spec.since {
        q.push(" AND m.created_at >= ").push_bind(since.micros());
    }
    if let Some(until) = spec.until {
        q.push(" AND m.created_at < ").push_bind(until.micros());
    }
    match spec.sort {
        SearchSort::Newest => {
            if let Some(before) = spec.before {
                q.push(" AND m.pk < ").push_bind(before);
            }
            q.push(" ORDER BY m.pk DESC");
        }
        SearchSort::Relevance => DB::push_by_rank(&mut q, &spec.terms),
    }
    q.push(" LIMIT ").push_bind(spec.limit);
    q.push(" OFFSET ").push_bind(spec.offset);
    q
}
