//! Whether this node is alive *and* has its database: `/healthz` fails while storage
//! does not answer (issue #16: a node cut off from a shared PostgreSQL must leave the
//! load balancer's rotation), without a database round trip per health check — the
//! answer is a flag a background task refreshes every second, so `/healthz` stays as
//! cheap as it was (it is the benchmark's HTTP ceiling).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use switchboard_types::ErrorCode;

use super::Node;
use super::{Core, CoreError, CoreResult, Inner};

/// How often storage is asked, and how long an answer may take.
const EVERY: Duration = Duration::from_secs(1);

/// The last answer of storage (it answered when the core opened).
#[derive(Debug)]
pub(super) struct StorageHealth(AtomicBool);

impl Default for StorageHealth {
    fn default() -> Self {
        StorageHealth(AtomicBool::new(true))
    }
}

impl Core {
    /// Starts the checks; they end with the core.
    pub(super) fn watch_storage(&self) {
        tokio::spawn(check(Arc::downgrade(&self.inner)));
    }
}

async fn check(inner: Weak<Inner>) {
    loop {
        tokio::time::sleep(crate::ticks::every(EVERY)).await;
        let Some(inner) = inner.upgrade() else { return };
        let answered = matches!(
            tokio::time::timeout(EVERY, inner.store.ping()).await,
            Ok(Ok(()))
        );
        if inner.health.0.swap(answered, Ordering::Relaxed) != answered {
            if answered {
                tracing::info!("storage answers again");
            } else {
                tracing::warn!("storage does not answer; /healthz fails until it does");
            }
        }
    }
}

impl<'a> Node<'a> {
    /// Liveness: `UNAVAILABLE` while storage did not answer its last check.
    pub fn alive(self) -> CoreResult<()> {
        if self.core.inner.health.0.load(Ordering::Relaxed) {
            return Ok(());
        }
        Err(CoreError::new(
            ErrorCode::Unavailable,
            "the server cannot reach its storage",
        ))
    }
}
