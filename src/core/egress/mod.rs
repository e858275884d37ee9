//! Egress: the requests the server makes on its own, and where it may send them. The
//! one HTTP client shape for them (task callbacks,
//! webhooks, A2A delegation): it resolves host names to public addresses only (unless
//! private ones are allowed), so no URL a client gave can lead a request into the
//! server's own network, and it never follows redirects (a redirect could).

pub mod ip_ranges;
pub mod urls;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use ip_ranges::is_public;

struct PublicResolver {
    allow_private: bool,
}

impl reqwest::dns::Resolve for PublicResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let host = name.as_str().to_owned();
        let allow_private = self.allow_private;
        Box::pin(async move {
            let addrs: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), 0))
                .await?
                .filter(|a| allow_private || is_public(a.ip()))
                .collect();
            if addrs.is_empty() {
                return Err(format!("{host} has no public address").into());
            }
            Ok(Box::new(addrs.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

/// A client whose every attempt ends after `timeout`.
pub fn http_client(timeout: Duration, allow_private: bool) -> Result<reqwest::Client, String> {
    switchboard_client::ensure_tls_provider();
    reqwest::Client::builder()
        .timeout(timeout)
        .redirect(reqwest::redirect::Policy::none())
        .user_agent(concat!("switchboard/", env!("CARGO_PKG_VERSION")))
        .dns_resolver(Arc::new(PublicResolver { allow_private }))
        .build()
        .map_err(|e| e.to_string())
}

/// An error with its causes, as one line (reqwest's own message leaves them out).
pub fn describe(err: &(dyn std::error::Error + 'static)) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}
