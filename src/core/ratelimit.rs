//! Per-agent rate limiting of sending operations (`RATE_LIMITED`).
//!
//! A token bucket per agent: `per_second` tokens are added each second up to `burst`;
//! each send takes one. Off unless configured (`--rate-limit`). Buckets of agents that
//! have been quiet long enough to be full again are dropped, so the map does not grow
//! with every agent that ever sent.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Instant;

use switchboard_types::ErrorCode;
use switchboard_types::ids::AgentPk;

use super::Core;
use super::error::{CoreError, CoreResult};

/// A configured limit.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RateLimit {
    pub per_second: f64,
    pub burst: f64,
}

struct Bucket {
    tokens: f64,
    at: Instant,
}

/// The buckets. A plain mutex: each check is a map lookup and a little arithmetic, and
/// it is never held across an `.await`.
pub struct RateLimiter {
    limit: Option<RateLimit>,
    buckets: Mutex<HashMap<AgentPk, Bucket>>,
}

impl RateLimiter {
    pub fn new(limit: Option<RateLimit>) -> Self {
        RateLimiter {
            limit,
            buckets: Mutex::new(HashMap::new()),
        }
    }

    /// Takes a token for `agent`, or says how long to wait for one (milliseconds).
    fn take(&self, agent: AgentPk, now: Instant) -> Result<(), u64> {
        let Some(limit) = self.limit else {
            return Ok(());
        };
        let mut buckets = self.buckets.lock().unwrap_or_else(|p| p.into_inner());
        if buckets.len() > 10_000 {
            let full_after = limit.burst / limit.per_second;
            buckets.retain(|_, b| now.duration_since(b.at).as_secs_f64() < full_after);
        }
        let bucket = buckets.entry(agent).or_insert(Bucket {
            tokens: limit.burst,
            at: now,
        });
        let refill = now.duration_since(bucket.at).as_secs_f64() * limit.per_second;
        bucket.tokens = (bucket.tokens + refill).min(limit.burst);
        bucket.at = now;
        if bucket.tokens >= 1.0 {
            bucket.tokens -= 1.0;
            Ok(())
        } else {
            Err((((1.0 - bucket.tokens) / limit.per_second) * 1000.0).ceil() as u64)
        }
    }
}

impl Core {
    pub(super) fn rate_limit(&self, agent_pk: AgentPk) -> CoreResult<()> {
        self.inner
            .rate_limiter
            .take(agent_pk, Instant::now())
            .map_err(|wait_ms| {
                CoreError::new(
                    ErrorCode::RateLimited,
                    "this agent is sending faster than the server allows",
                )
                .with("retry_after_ms", wait_ms)
            })
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn a_bucket_allows_its_burst_then_refills() {
        let limiter = RateLimiter::new(Some(RateLimit {
            per_second: 10.0,
            burst: 2.0,
        }));
        let t0 = Instant::now();
        assert!(limiter.take(AgentPk(1), t0).is_ok());
        assert!(limiter.take(AgentPk(1), t0).is_ok());
        let wait = limiter.take(AgentPk(1), t0).expect_err("empty");
        assert_eq!(wait, 100);
        // Other agents have their own bucket.
        assert!(limiter.take(AgentPk(2), t0).is_ok());
        assert!(
            limiter
                .take(AgentPk(1), t0 + Duration::from_millis(100))
                .is_ok()
        );
    }

    #[test]
    fn no_limit_means_no_limit() {
        let limiter = RateLimiter::new(None);
        let t0 = Instant::now();
        assert!((0..10_000).all(|_| limiter.take(AgentPk(1), t0).is_ok()));
    }
}
