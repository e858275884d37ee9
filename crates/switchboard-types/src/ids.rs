//! Identifiers: the rule for client-chosen ids, and typed row keys.
//!
//! Clients name things with strings (`team_id`, `agent_id`, `message_id`, `task_id`).
//! Inside the server every row also has an integer key; each kind gets its own type so
//! that an agent's key can never be passed where a message's is expected.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::error::ErrorBody;

/// Longest agent, team or task id a client may choose.
pub const MAX_ID_LEN: usize = 64;

/// Whether `c` may appear in an id: `A-Z a-z 0-9 . _ -`. The one statement of the
/// alphabet, for client-chosen ids, node names and the ids the server derives (from an
/// A2A card's name, an idempotency key).
pub fn is_id_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')
}

/// Whether `text` is 1 to `max` characters of the id alphabet ([`is_id_char`]).
pub fn fits_id_alphabet(text: &str, max: usize) -> bool {
    (1..=max).contains(&text.len()) && text.chars().all(is_id_char)
}

/// Checks a client-chosen id (agent, team, task): 1–64 of `A-Z a-z 0-9 . _ -`.
///
/// The character set keeps ids safe in URL paths, STOMP destinations and log lines
/// without escaping.
pub fn check_id(field: &str, id: &str) -> Result<(), ErrorBody> {
    if id.is_empty() || id.len() > MAX_ID_LEN {
        return Err(ErrorBody::validation(
            field,
            format!("{field} must be 1 to {MAX_ID_LEN} characters long"),
        )
        .with("value", id));
    }
    if id == "." || id == ".." {
        // Clients and proxies resolve these path segments away: such an agent could
        // never be reached by its URL.
        return Err(
            ErrorBody::validation(field, format!("{field} may not be \".\" or \"..\""))
                .with("value", id),
        );
    }
    if let Some(bad) = id.chars().find(|&c| !is_id_char(c)) {
        return Err(ErrorBody::validation(
            field,
            format!("{field} may only contain A-Z a-z 0-9 . _ - (found {bad:?})"),
        )
        .with("value", id));
    }
    Ok(())
}

/// Agent ids that mean something else where agents are named: SEND_MESSAGE reads
/// `["ALL"]` as the whole team, and clients are careless about its casing.
pub const RESERVED_AGENT_IDS: &[&str] = &["all"];

/// Checks an agent id a registration chooses: [`check_id`], and none of
/// [`RESERVED_AGENT_IDS`] in any casing (an agent `ALL` would be unreachable, and
/// `all` read as the team by a client that upper-cases).
pub fn check_agent_id(field: &str, id: &str) -> Result<(), ErrorBody> {
    check_id(field, id)?;
    if RESERVED_AGENT_IDS
        .iter()
        .any(|r| id.eq_ignore_ascii_case(r))
    {
        return Err(ErrorBody::validation(
            field,
            format!("{field} '{id}' is reserved (\"ALL\" names the whole team)"),
        )
        .with("value", id));
    }
    Ok(())
}

/// A task reference: a task's id, or `id@originator` where the id alone would be
/// ambiguous. Task ids are unique among one originator's tasks, so an agent that takes
/// part in two tasks of the same id (given by two originators, or one it gave and one it
/// was given) names the one it means by its originator.
///
/// Returns the id and the originator's agent id, if given; each part follows
/// [`check_id`].
pub fn task_ref<'a>(
    field: &str,
    reference: &'a str,
) -> Result<(&'a str, Option<&'a str>), ErrorBody> {
    match reference.split_once('@') {
        None => check_id(field, reference).map(|()| (reference, None)),
        Some((id, originator)) => {
            check_id(field, id)?;
            check_id(field, originator).map_err(|err| err.with("value", reference))?;
            Ok((id, Some(originator)))
        }
    }
}

macro_rules! row_key {
    ($($(#[$doc:meta])* $name:ident;)*) => {$(
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(pub i64);

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}", self.0)
            }
        }
    )*};
}

row_key! {
    /// A team's row key.
    TeamPk;
    /// An agent's row key (stays with the agent after removal: messages point at it).
    AgentPk;
    /// A message's row key.
    MessagePk;
    /// A task's row key.
    TaskPk;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_task_reference_is_an_id_or_an_id_at_its_originator() {
        assert_eq!(task_ref("task_id", "payroll"), Ok(("payroll", None)));
        assert_eq!(
            task_ref("task_id", "payroll@alice"),
            Ok(("payroll", Some("alice")))
        );
        for bad in ["@alice", "payroll@", "pay roll@alice", "a@b@c", ""] {
            assert!(task_ref("task_id", bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_whole_team_is_no_agent_id_in_any_casing() {
        for reserved in ["ALL", "all", "All", "aLl"] {
            assert!(check_agent_id("agent_id", reserved).is_err(), "{reserved}");
            assert!(
                check_id("agent_id", reserved).is_ok(),
                "{reserved}: a task may be 'all'"
            );
        }
        assert!(check_agent_id("agent_id", "allison").is_ok());
    }

    #[test]
    fn accepts_the_documented_charset() {
        assert!(check_id("agent_id", "Planner-1.v2_x").is_ok());
        assert!(check_id("agent_id", &"a".repeat(64)).is_ok());
    }

    #[test]
    fn rejects_empty_long_and_odd_characters() {
        for bad in ["", "a b", "a/b", "ä", ".", "..", &"a".repeat(65)] {
            let err = check_id("agent_id", bad).expect_err(bad);
            assert_eq!(err.details["field"], "agent_id");
        }
    }
}
