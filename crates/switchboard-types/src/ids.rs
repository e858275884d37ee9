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
fn check_id(field: &str, id: &str) -> Result<(), ErrorBody> {
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
fn check_agent_id(field: &str, id: &str) -> Result<(), ErrorBody> {
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
fn task_ref<'a>(field: &str, reference: &'a str) -> Result<(&'a str, Option<&'a str>), ErrorBody> {
    match reference.split_once('@') {
        None => check_id(field, reference).map(|()| (reference, None)),
        Some((id, originator)) => {
            check_id(field, id)?;
            check_id(field, originator).map_err(|err| err.with("value", reference))?;
            Ok((id, Some(originator)))
        }
    }
}

macro_rules! name_id {
    ($($(#[$doc:meta])* $name:ident;)*) => {$(
        $(#[$doc])*
        ///
        /// A typed id says *what* a string names, so that an agent's id cannot be passed
        /// where a team's is expected; it does not say the name exists. Any text can name
        /// something to look up (`From<String>`: an id that breaks the rule names nothing
        /// and is answered as not found, as a client would expect of a lookup). Where a
        /// client *chooses* an id, it goes through the one validating parser, `parse`.
        /// On the wire it is the bare string.
        #[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(String);

        impl $name {
            pub fn as_str(&self) -> &str {
                &self.0
            }

            pub fn into_string(self) -> String {
                self.0
            }
        }

        impl std::ops::Deref for $name {
            type Target = str;
            fn deref(&self) -> &str {
                &self.0
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        impl std::borrow::Borrow<str> for $name {
            fn borrow(&self) -> &str {
                &self.0
            }
        }

        impl From<String> for $name {
            fn from(text: String) -> Self {
                Self(text)
            }
        }

        impl From<&str> for $name {
            fn from(text: &str) -> Self {
                Self(text.to_owned())
            }
        }

        impl From<&String> for $name {
            fn from(text: &String) -> Self {
                Self(text.clone())
            }
        }

        impl From<$name> for String {
            fn from(id: $name) -> String {
                id.0
            }
        }

        impl PartialEq<str> for $name {
            fn eq(&self, other: &str) -> bool {
                self.0 == other
            }
        }

        impl PartialEq<&str> for $name {
            fn eq(&self, other: &&str) -> bool {
                self.0 == *other
            }
        }

        impl PartialEq<String> for $name {
            fn eq(&self, other: &String) -> bool {
                &self.0 == other
            }
        }

        impl PartialEq<$name> for String {
            fn eq(&self, other: &$name) -> bool {
                self == &other.0
            }
        }

        impl PartialEq<$name> for str {
            fn eq(&self, other: &$name) -> bool {
                self == other.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl From<$name> for serde_json::Value {
            fn from(id: $name) -> serde_json::Value {
                serde_json::Value::String(id.0)
            }
        }

        impl From<&$name> for serde_json::Value {
            fn from(id: &$name) -> serde_json::Value {
                serde_json::Value::String(id.0.clone())
            }
        }
    )*};
}

name_id! {
    /// A team's id.
    TeamId;
    /// An agent's id within its team.
    AgentId;
    /// A task's id within its originator's tasks (a task reference may add
    /// `@originator`: [`TaskRef`]).
    TaskId;
    /// A task as a client names it: its id, or `id@originator` ([`TaskRef::parts`]).
    TaskRef;
    /// A message's id (the server chooses it).
    MessageId;
    /// A task webhook's id (the server chooses it).
    WebhookId;
    /// A clarification's id within its task.
    ClarificationId;
    /// A lease's id (the server chooses it).
    LeaseId;
    /// An approval's id (the server chooses it).
    ApprovalId;
}

impl TeamId {
    /// The one validating parser for a team id a client chooses: 1–64 of
    /// `A-Z a-z 0-9 . _ -`, not `.` or `..`; refused naming `field`.
    pub fn parse(field: &str, text: &str) -> Result<Self, ErrorBody> {
        check_id(field, text).map(|()| Self(text.to_owned()))
    }

    /// Whether a team id already decoded (from a body) may be chosen: as [`Self::parse`].
    pub fn check(&self, field: &str) -> Result<(), ErrorBody> {
        check_id(field, &self.0)
    }
}

impl AgentId {
    /// The one validating parser for an agent id a registration chooses: the id rule,
    /// and not a name for the whole team ([`RESERVED_AGENT_IDS`]).
    pub fn parse(field: &str, text: &str) -> Result<Self, ErrorBody> {
        check_agent_id(field, text).map(|()| Self(text.to_owned()))
    }

    /// Whether an agent id already decoded (from a body) may be chosen: as
    /// [`Self::parse`].
    pub fn check(&self, field: &str) -> Result<(), ErrorBody> {
        check_agent_id(field, &self.0)
    }
}

impl From<TaskId> for TaskRef {
    fn from(id: TaskId) -> TaskRef {
        TaskRef(id.0)
    }
}

impl TaskRef {
    /// The reference that names one originator's task whatever other task shares
    /// its id.
    pub fn at(task: &str, originator: &AgentId) -> TaskRef {
        TaskRef(format!("{task}@{originator}"))
    }

    /// Whether it names the task's originator (`id@originator`).
    pub fn names_originator(&self) -> bool {
        self.0.contains('@')
    }

    /// The task's id and, when given, its originator's agent id; each part follows
    /// [`check_id`] (a reference that breaks it names no task and is refused as
    /// `field`).
    pub fn parts(&self, field: &str) -> Result<(TaskId, Option<AgentId>), ErrorBody> {
        let (id, originator) = task_ref(field, &self.0)?;
        Ok((TaskId::from(id), originator.map(AgentId::from)))
    }
}

impl TaskId {
    /// The one validating parser for a task id an originator chooses: the id rule.
    pub fn parse(field: &str, text: &str) -> Result<Self, ErrorBody> {
        check_id(field, text).map(|()| Self(text.to_owned()))
    }

    /// Whether a task id already decoded (from a body) may be chosen: as
    /// [`Self::parse`].
    pub fn check(&self, field: &str) -> Result<(), ErrorBody> {
        check_id(field, &self.0)
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
    fn a_typed_id_is_its_string_on_the_wire_and_parsed_by_the_rule() {
        let id = AgentId::parse("agent_id", "planner").expect("valid");
        assert_eq!(
            serde_json::to_value(&id).expect("serialises"),
            serde_json::json!("planner")
        );
        let back: AgentId = serde_json::from_value(serde_json::json!("planner")).expect("decodes");
        assert_eq!(back, id);
        let err = AgentId::parse("recipient_agent_ids[1]", "ALL").expect_err("reserved");
        assert_eq!(err.details["field"], "recipient_agent_ids[1]");
        assert!(
            TaskId::parse("task_id", "all").is_ok(),
            "a task may be 'all'"
        );
        let err = TeamId::parse("team_id", "a b").expect_err("space");
        assert_eq!(err.details["field"], "team_id");
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
