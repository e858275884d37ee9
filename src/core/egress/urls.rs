//! Which callback URLs the server will POST to.
//!
//! A callback makes the server send a request on a client's behalf, so a client could
//! aim it at the server's own network (an admin port on loopback, a cloud metadata
//! address). Only http and https are accepted, and addresses on loopback, private,
//! link-local and other non-public ranges are refused unless the operator allows them
//! (`--allow-private-callbacks`). The check runs on the URL at submission and again on
//! every address a host name resolves to at sending time, so DNS cannot smuggle a
//! private address in later; both use one classification ([`super::ip_ranges`]).

use std::net::IpAddr;

use url::Url;

use switchboard_types::tasks::MAX_CALLBACK_URL;

use super::ip_ranges::is_public;
use crate::core::{CoreError, CoreResult};

/// Whether `text` is meant as a URL (rather than an agent id).
pub fn looks_like_url(text: &str) -> bool {
    text.contains("://")
}

/// Parses and checks a callback URL.
pub fn check(text: &str, allow_private: bool) -> CoreResult<Url> {
    check_named(text, allow_private, "callback_url")
}

/// Parses and checks a URL the server will call, given in the field `field` (a webhook's
/// `url`, an outside agent's `card_url`): the same rule as for callbacks.
pub fn check_named(text: &str, allow_private: bool, field: &str) -> CoreResult<Url> {
    let invalid =
        |why: &str| CoreError::validation(field, format!("{field} {why}")).with(field, text);
    if text.len() > MAX_CALLBACK_URL {
        return Err(invalid(&format!(
            "must be at most {MAX_CALLBACK_URL} characters"
        )));
    }
    let url = Url::parse(text).map_err(|e| invalid(&format!("is not a valid URL: {e}")))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(invalid("must use http or https"));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(invalid("must not carry credentials"));
    }
    let private = match url.host() {
        None => return Err(invalid("has no host")),
        Some(url::Host::Ipv4(ip)) => !is_public(IpAddr::V4(ip)),
        Some(url::Host::Ipv6(ip)) => !is_public(IpAddr::V6(ip)),
        Some(url::Host::Domain(name)) => {
            let name = name.trim_end_matches('.').to_ascii_lowercase();
            name == "localhost" || name.ends_with(".localhost")
        }
    };
    if private && !allow_private {
        return Err(invalid(
            "points at a loopback or private address, which this server does not call",
        )
        .suggest("Use a public address, or start the server with --allow-private-callbacks."));
    }
    Ok(url)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn public_http_urls_pass() {
        for url in [
            "https://example.com/hook",
            "http://93.184.216.34:8080/x",
            "https://[2606:4700::1111]/",
        ] {
            assert!(check(url, false).is_ok(), "{url}");
        }
    }

    #[test]
    fn other_schemes_and_garbage_are_refused() {
        for url in [
            "ftp://example.com/",
            "file:///etc/passwd",
            "not a url",
            "https://u:p@example.com/",
        ] {
            let err = check(url, true).expect_err(url).into_body();
            assert_eq!(err.details["field"], "callback_url");
        }
    }

    #[test]
    fn private_addresses_need_the_flag() {
        for url in [
            "http://127.0.0.1:9000/",
            "http://localhost/",
            "http://api.localhost/",
            "http://10.1.2.3/",
            "http://172.16.0.1/",
            "http://192.168.1.1/",
            "http://169.254.169.254/latest/meta-data",
            "http://100.64.0.1/",
            "http://0.0.0.0/",
            "http://[::1]/",
            "http://[fd00::1]/",
            "http://[fe80::1]/",
            "http://[::ffff:127.0.0.1]/",
            "http://[::127.0.0.1]/",
            "http://[64:ff9b::a9fe:a9fe]/",
            "http://[2002:7f00:1::1]/",
            "http://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/",
            "http://2130706433/",
            "http://0x7f.1/",
            "http://127.1/",
        ] {
            assert!(check(url, false).is_err(), "{url} must be refused");
            assert!(check(url, true).is_ok(), "{url} is allowed with the flag");
        }
    }
}
