//! The callback sender: POSTs queued `CallbackNotification`s to their URLs, signed.
//!
//! Callbacks are written to the outbox in the transaction that changed the task, so a
//! committed change always has its callback and a restart loses none: the sender reads
//! what is due from the outbox. A task's callbacks go out in order, one at a time (its
//! next is tried only when the one before was delivered or given up); different tasks'
//! callbacks go out concurrently. Failed attempts are retried with exponential backoff;
//! each attempt's outcome, and the final one, is recorded on the callback and the task.
//!
//! **Signature.** Every POST carries
//! `Switchboard-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>`
//! with the team's callback secret (`GET /v1/teams/{team_id}/callback-secret`). A
//! receiver recomputes the HMAC over the timestamp, a dot and the raw body, compares in
//! constant time, and rejects old timestamps to stop replays.

use std::time::Duration;

use futures_util::future::join_all;
use hmac::{Hmac, Mac};
use sha2::Sha256;
use switchboard_types::time::Timestamp;
use tokio_util::sync::CancellationToken;

use crate::core::egress::{self, urls};
use crate::core::tasks::{AttemptResult, DueCallback, DueDelivery, Outgoing, RetryPolicy};
use crate::core::{Core, CoreResult};

/// Settings of the callback sender.
#[derive(Debug, Clone, Copy)]
pub struct CallbackSettings {
    /// Time allowed for one attempt (connect, send, answer; every body of it).
    pub timeout: Duration,
    /// Attempts before a callback is given up.
    pub max_attempts: i64,
    /// Wait before the second attempt; doubled for each further one (at most 10 min).
    pub retry_base: Duration,
    /// Call loopback and private addresses too.
    pub allow_private: bool,
}

impl Default for CallbackSettings {
    fn default() -> Self {
        CallbackSettings {
            timeout: Duration::from_secs(10),
            max_attempts: 8,
            retry_base: Duration::from_secs(1),
            allow_private: false,
        }
    }
}

impl CallbackSettings {
    /// How long a round's callbacks stay this node's: the round's attempts run at once,
    /// each within the timeout, and are then recorded; a node that died meanwhile has
    /// its callbacks taken up by another node this long after it claimed them.
    fn claim(&self) -> Duration {
        self.timeout + RECORD_MARGIN
    }

    fn retry_policy(&self) -> RetryPolicy {
        RetryPolicy {
            max_attempts: self.max_attempts,
            retry_base: self.retry_base,
        }
    }
}

/// Callbacks tried at once.
const BATCH: i64 = 64;
/// Time allowed to record a round's attempts, beyond the attempts' own timeout.
const RECORD_MARGIN: Duration = Duration::from_secs(5);
/// Longest wait between looks at the outbox when nothing is announced.
const IDLE_POLL: Duration = Duration::from_secs(5);

/// The header value signing `body` at `unix_seconds` with `secret`.
pub fn signature(secret: &str, unix_seconds: i64, body: &str) -> String {
    // HMAC accepts keys of any length, so this cannot fail.
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes())
        .unwrap_or_else(|_| unreachable!("HMAC takes any key length"));
    mac.update(unix_seconds.to_string().as_bytes());
    mac.update(b".");
    mac.update(body.as_bytes());
    format!(
        "t={unix_seconds},v1={}",
        hex::encode(mac.finalize().into_bytes())
    )
}

/// Runs the sender until `stop` is cancelled.
pub async fn run(core: Core, settings: CallbackSettings, stop: CancellationToken) {
    let client = match egress::http_client(settings.timeout, settings.allow_private) {
        Ok(client) => client,
        Err(err) => {
            tracing::error!(error = %err, "cannot build the callback HTTP client; callbacks stay queued");
            return;
        }
    };
    loop {
        if stop.is_cancelled() {
            break;
        }
        let queued = core.callbacks().callback_queued();
        let wait = match round(&core, &client, &settings).await {
            Ok(true) => continue,
            Ok(false) => next_wait(&core).await,
            Err(err) => {
                tracing::warn!(error = %err, "callback outbox not readable; retrying");
                Duration::from_secs(1)
            }
        };
        tokio::select! {
            () = stop.cancelled() => break,
            () = queued => {}
            () = tokio::time::sleep(wait) => {}
        }
    }
    tracing::debug!("callback sender stopped");
}

/// How long until the next pending callback is due.
async fn next_wait(core: &Core) -> Duration {
    match core.callbacks().next_callback_due().await {
        Ok(Some(at)) => {
            let micros = (at.micros() - Timestamp::now().micros()).max(0);
            Duration::from_micros(micros as u64).min(crate::ticks::every(IDLE_POLL))
        }
        _ => crate::ticks::every(IDLE_POLL),
    }
}

/// Tries every due callback once; `true` if there were any.
async fn round(
    core: &Core,
    client: &reqwest::Client,
    settings: &CallbackSettings,
) -> CoreResult<bool> {
    let due = core
        .callbacks()
        .due_callbacks(BATCH, settings.claim())
        .await?;
    if due.is_empty() {
        return Ok(false);
    }
    let attempts = due
        .into_iter()
        .map(|DueDelivery { callback, request }| async move {
            let outcome: AttemptResult = match request {
                // The client bounds each request; this bounds the attempt as a whole
                // (a webhook may POST several bodies), which the claim relies on.
                Ok((outgoing, secret)) => tokio::time::timeout(
                    settings.timeout,
                    send(client, settings, &callback, outgoing, &secret),
                )
                .await
                .unwrap_or_else(|_| Err((None, "the attempt timed out".to_owned()))),
                Err(why) => Err((None, why)),
            };
            (callback, outcome)
        });
    let outcomes = join_all(attempts).await;
    core.callbacks()
        .record_callback_attempts(outcomes, settings.retry_policy())
        .await?;
    Ok(true)
}

/// One attempt: each body POSTed in order (a webhook's entry may render as several);
/// the last receiver status on 2xx, or the status (if any) and what went wrong.
async fn send(
    client: &reqwest::Client,
    settings: &CallbackSettings,
    callback: &DueCallback,
    outgoing: Outgoing,
    secret: &str,
) -> AttemptResult {
    // Checked again: the server may have been restarted without the private flag.
    urls::check(&outgoing.url, settings.allow_private)
        .map_err(|e| (None, e.into_body().error_message))?;
    let mut status = 204;
    for body in outgoing.bodies {
        let now = chrono::Utc::now().timestamp();
        let mut request = client
            .post(&outgoing.url)
            .header("content-type", "application/json")
            .header("switchboard-signature", signature(secret, now, &body))
            .header("switchboard-delivery", callback.pk.to_string());
        for (name, value) in &outgoing.headers {
            request = request.header(*name, value);
        }
        let response = request
            .body(body)
            .send()
            .await
            .map_err(|e| (None, egress::describe(&e)))?;
        status = i64::from(response.status().as_u16());
        if !response.status().is_success() {
            return Err((Some(status), format!("the receiver answered HTTP {status}")));
        }
    }
    Ok(status)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signature_is_hmac_sha256_over_timestamp_and_body() {
        // Independently computed: printf '1700000000.{"a":1}' | openssl dgst -sha256 -hmac whsec_test
        assert_eq!(
            signature("whsec_test", 1_700_000_000, r#"{"a":1}"#),
            "t=1700000000,v1=38877139021993b830af32feea6e18a8da83eb2f6e49ee50bd9e4cf4ca4d3789"
        );
    }
}
