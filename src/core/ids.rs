//! Identifiers: the rules for client-chosen ids and the shape of generated ones.

use rand::Rng;

use super::error::{CoreError, CoreResult};

/// Longest agent or team id a client may choose.
pub const MAX_ID_LEN: usize = 64;

/// Checks a client-chosen id (agent or team): 1–64 of `A-Z a-z 0-9 . _ -`.
///
/// The character set keeps ids safe in URL paths, STOMP destinations and log lines
/// without escaping.
pub fn check_id(field: &str, id: &str) -> CoreResult<()> {
    if id.is_empty() || id.len() > MAX_ID_LEN {
        return Err(CoreError::validation(
            field,
            format!("{field} must be 1 to {MAX_ID_LEN} characters long"),
        )
        .with("value", id));
    }
    if let Some(bad) = id
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
    {
        return Err(CoreError::validation(
            field,
            format!("{field} may only contain A-Z a-z 0-9 . _ - (found {bad:?})"),
        )
        .with("value", id));
    }
    Ok(())
}

/// A new random id with a readable prefix, e.g. `team-3f9a1c2b7d4e5f60`.
pub fn random_id(prefix: &str) -> String {
    let n: u64 = rand::rng().random();
    format!("{prefix}-{n:016x}")
}

/// A new time-ordered id (UUIDv7) with a prefix, e.g. `msg_0193…`.
///
/// Time order keeps the B-tree of ids append-mostly, which is what makes inserts cheap.
pub fn ordered_id(prefix: &str) -> String {
    format!("{prefix}_{}", uuid::Uuid::now_v7().simple())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_the_documented_charset() {
        assert!(check_id("agent_id", "Planner-1.v2_x").is_ok());
        assert!(check_id("agent_id", &"a".repeat(64)).is_ok());
    }

    #[test]
    fn rejects_empty_long_and_odd_characters() {
        for bad in ["", "a b", "a/b", "ä", &"a".repeat(65)] {
            let err = check_id("agent_id", bad).expect_err(bad);
            assert_eq!(err.details["field"], "agent_id");
        }
    }
}
