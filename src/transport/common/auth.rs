//! Bearer tokens: reading the header, and deciding who presents the token.

use crate::core::auth::invalid_token;
use crate::core::{Caller, Core, CoreError, CoreResult};

/// Reads an `Authorization` header value into its token.
pub fn bearer(header: Option<&str>) -> CoreResult<&str> {
    let value = header
        .ok_or_else(|| CoreError::unauthorized("missing 'Authorization: Bearer <token>' header"))?;
    let (scheme, token) = value.split_once(' ').ok_or_else(invalid_token)?;
    if !scheme.eq_ignore_ascii_case("bearer") || token.trim().is_empty() {
        return Err(invalid_token());
    }
    Ok(token.trim())
}

/// The caller behind an `Authorization` header (`UNAUTHORIZED` if nobody).
pub async fn authenticate(core: &Core, header: Option<&str>) -> CoreResult<Caller> {
    core.identity().authenticate(bearer(header)?).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer_header_forms() {
        assert_eq!(bearer(Some("Bearer abc")).ok(), Some("abc"));
        assert_eq!(bearer(Some("bearer abc")).ok(), Some("abc"));
        assert!(bearer(None).is_err());
        assert!(bearer(Some("Basic abc")).is_err());
        assert!(bearer(Some("Bearer ")).is_err());
    }
}
