//! Value rules: checks that need nothing but the value itself (lengths, blanks, list
//! sizes). They live beside the types so the server, the client and the OpenAPI
//! document state each limit once; rules that need state (membership, deadlines against
//! stored messages) stay in the server's core.

use std::collections::HashSet;

use crate::error::{ErrorBody, ErrorCode};

/// Checks a required free-text field: trimmed non-empty, at most `max` characters
/// (`VALIDATION_ERROR` either way).
pub fn check_text(field: &str, value: &str, max: usize) -> Result<(), ErrorBody> {
    if value.trim().is_empty() {
        return Err(ErrorBody::validation(
            field,
            format!("{field} must not be empty"),
        ));
    }
    let len = value.chars().count();
    if len > max {
        return Err(ErrorBody::validation(
            field,
            format!("{field} must be at most {max} characters (got {len})"),
        )
        .with("max", max)
        .with("length", len));
    }
    Ok(())
}

/// Checks a text field of the contract: not blank (`VALIDATION_ERROR`), at most `max`
/// characters (`MESSAGE_TOO_LONG`, the contract's code for content over its limit).
pub fn check_message_text(field: &str, text: &str, max: usize) -> Result<(), ErrorBody> {
    if text.trim().is_empty() {
        return Err(ErrorBody::validation(
            field,
            format!("{field} must not be empty"),
        ));
    }
    let length = text.chars().count();
    if length > max {
        return Err(ErrorBody::new(
            ErrorCode::MessageTooLong,
            format!("{field} has {length} characters; at most {max} are allowed"),
        )
        .with("field", field)
        .with("max", max)
        .with("length", length));
    }
    Ok(())
}

/// Checks an optional short free-text field: when given, not blank and at most `max`.
pub fn check_optional(field: &str, value: &Option<String>, max: usize) -> Result<(), ErrorBody> {
    match value {
        Some(v) if v.chars().count() > max => Err(ErrorBody::validation(
            field,
            format!("{field} must be at most {max} characters"),
        )),
        Some(v) if v.trim().is_empty() => Err(ErrorBody::validation(
            field,
            format!("{field} must not be empty when given"),
        )),
        _ => Ok(()),
    }
}

/// Longest `Idempotency-Key`.
pub const MAX_IDEMPOTENCY_KEY: usize = 255;

/// Checks an `Idempotency-Key`: 1 to [`MAX_IDEMPOTENCY_KEY`] visible ASCII characters,
/// so that it can be stored, logged and compared byte for byte.
pub fn check_idempotency_key(key: &str) -> Result<(), ErrorBody> {
    if key.is_empty()
        || key.len() > MAX_IDEMPOTENCY_KEY
        || !key.bytes().all(|b| b.is_ascii_graphic())
    {
        return Err(ErrorBody::validation(
            "Idempotency-Key",
            format!("an idempotency key is 1 to {MAX_IDEMPOTENCY_KEY} visible ASCII characters"),
        ));
    }
    Ok(())
}

/// How many capabilities a list may hold and how long each may be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CapabilityLimits {
    pub max_count: usize,
    pub max_len: usize,
}

/// Validates a capability list and drops case-insensitive duplicates (first spelling
/// wins, trimmed). Too many is an error on `field`; a bad entry on `field[i]`.
pub fn clean_capabilities(
    field: &str,
    capabilities: Vec<String>,
    limits: CapabilityLimits,
) -> Result<Vec<String>, ErrorBody> {
    if capabilities.len() > limits.max_count {
        return Err(ErrorBody::validation(
            field,
            format!("{field}: at most {} capabilities", limits.max_count),
        )
        .with("max", limits.max_count));
    }
    let mut seen = HashSet::new();
    let mut out = Vec::with_capacity(capabilities.len());
    for (i, capability) in capabilities.into_iter().enumerate() {
        check_text(&format!("{field}[{i}]"), &capability, limits.max_len)?;
        let capability = capability.trim().to_owned();
        if seen.insert(capability.to_lowercase()) {
            out.push(capability);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_limits_distinguish_empty_from_too_long() {
        assert_eq!(
            check_message_text("t", " ", 2000).map_err(|e| e.error_code),
            Err(ErrorCode::ValidationError)
        );
        assert_eq!(
            check_message_text("t", &"é".repeat(2001), 2000).map_err(|e| e.error_code),
            Err(ErrorCode::MessageTooLong)
        );
        assert!(check_message_text("t", &"é".repeat(2000), 2000).is_ok());
    }

    #[test]
    fn capabilities_are_trimmed_deduplicated_and_bounded() {
        let limits = CapabilityLimits {
            max_count: 3,
            max_len: 6,
        };
        let clean = clean_capabilities(
            "caps",
            vec![" Rust ".into(), "rust".into(), "go".into()],
            limits,
        );
        assert_eq!(clean.ok(), Some(vec!["Rust".to_owned(), "go".to_owned()]));
        let field = |list: Vec<&str>| {
            clean_capabilities("caps", list.into_iter().map(Into::into).collect(), limits)
                .expect_err("refused")
                .details["field"]
                .clone()
        };
        assert_eq!(field(vec!["a", "b", "c", "d"]), "caps");
        assert_eq!(field(vec!["a", ""]), "caps[1]");
        assert_eq!(field(vec!["toolong"]), "caps[0]");
    }
}
