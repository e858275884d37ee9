//! The callback outbox as the sender sees it: what is due (with the key to sign it),
//! and recording what became of each attempt under the retry policy.
//!
//! The sender (`crate::callbacks`) does the HTTP; which callbacks are due, in which
//! order, how often they are retried and what the task shows about them are decided
//! here.

use crate::core::Callbacks;
use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::time::Duration;

use switchboard_types::tasks::{CallbackDelivery, DeliveryState};
use switchboard_types::time::Timestamp;

use super::Outgoing;
use crate::core::CoreResult;
use crate::model::{Attempt, DueCallback, trace};

/// A callback to POST now: what goes out, signed with its team's key (or why it
/// cannot go out).
#[derive(Debug, Clone)]
pub struct DueDelivery {
    pub callback: DueCallback,
    pub request: Result<(Outgoing, String), String>,
}

/// How failed callbacks are retried.
#[derive(Debug, Clone, Copy)]
pub struct RetryPolicy {
    /// Attempts before a callback is given up.
    pub max_attempts: i64,
    /// Wait before the second attempt; doubled for each further one.
    pub retry_base: Duration,
}

/// Longest backoff between two attempts.
const MAX_BACKOFF: Duration = Duration::from_secs(600);

/// What one attempt got: the receiver's HTTP status on 2xx, or the status (if any) and
/// what went wrong.
pub type AttemptResult = Result<i64, (Option<i64>, String)>;

/// The record of one attempt under `policy`.
fn attempt(
    callback: DueCallback,
    outcome: AttemptResult,
    policy: RetryPolicy,
    now: Timestamp,
) -> Attempt {
    let attempts = callback.attempts + 1;
    let (state, last_status, last_error) = match outcome {
        Ok(status) => (DeliveryState::Delivered, Some(status), None),
        Err((status, error)) if attempts >= policy.max_attempts => {
            (DeliveryState::Failed, status, Some(error))
        }
        Err((status, error)) => (DeliveryState::Pending, status, Some(error)),
    };
    let backoff = policy
        .retry_base
        .saturating_mul(1 << (attempts - 1).clamp(0, 20))
        .min(MAX_BACKOFF);
    let finished_at = (state != DeliveryState::Pending).then_some(now);
    match state {
        DeliveryState::Delivered => {
            metrics::counter!("switchboard_callbacks_delivered_total").increment(1);
        }
        DeliveryState::Failed => {
            metrics::counter!("switchboard_callbacks_failed_total").increment(1);
            tracing::warn!(delivery_id = callback.pk, url = %callback.url, error = ?last_error, "callback given up");
        }
        DeliveryState::Pending => {
            metrics::counter!("switchboard_callbacks_retried_total").increment(1);
            tracing::debug!(delivery_id = callback.pk, error = ?last_error, "callback attempt failed");
        }
    }
    let backoff_micros = i64::try_from(backoff.as_micros()).unwrap_or(i64::MAX / 2);
    Attempt {
        callback_pk: callback.pk,
        task_pk: callback.task_pk,
        state,
        attempts,
        next_attempt_at: Timestamp::from_micros(now.micros().saturating_add(backoff_micros)),
        last_status,
        last_error: last_error.clone(),
        finished_at,
        delivery: CallbackDelivery {
            delivery_id: callback.pk,
            event_seq: callback.event_seq,
            state,
            attempts,
            last_status,
            last_error,
            finished_at,
        },
    }
}

impl<'a> Callbacks<'a> {
    /// The oldest pending callback of each task and receiver, if due, at most `limit`:
    /// a receiver gets a task's changes in order, one at a time. A webhook's body is
    /// rendered here, from the stored entry. They are the caller's for `claim`: it
    /// records their attempts within it, or (on several nodes) another node takes them.
    pub async fn due_callbacks(self, limit: i64, claim: Duration) -> CoreResult<Vec<DueDelivery>> {
        let due = self
            .core
            .store()
            .due_callbacks(Timestamp::now(), limit, claim)
            .await?;
        // One read per team of the round, not per callback.
        let mut secrets: HashMap<_, Result<String, String>> = HashMap::new();
        for callback in &due {
            if let Entry::Vacant(slot) = secrets.entry(callback.team_pk) {
                slot.insert(
                    match self.core.store().callback_secret(callback.team_pk).await {
                        Ok(Some(stored)) => Ok(stored.secret),
                        Ok(None) => Err("the team has no callback secret".to_owned()),
                        Err(err) => Err(format!("reading the team's secret: {err}")),
                    },
                );
            }
        }
        let mut deliveries = Vec::with_capacity(due.len());
        for mut callback in due {
            let secret = secrets
                .get(&callback.team_pk)
                .cloned()
                .unwrap_or_else(|| Err("no secret was read".to_owned()));
            let outgoing = match callback.webhook_pk {
                Some(_) => self.core.webhook_request(&callback).await,
                // The body goes out once; the attempt's record needs no copy of it.
                None => Ok(Outgoing {
                    url: callback.url.clone(),
                    bodies: vec![std::mem::take(&mut callback.body)],
                    headers: Vec::new(),
                }),
            }
            .map(|mut outgoing| {
                // Every POST about a task continues the task's trace.
                outgoing
                    .headers
                    .extend(trace::headers(&callback.task_id, callback.trace.as_ref()));
                outgoing
            });
            deliveries.push(DueDelivery {
                request: outgoing.and_then(|o| secret.map(|s| (o, s))),
                callback,
            });
        }
        Ok(deliveries)
    }

    /// When the next pending callback is due, if any is.
    pub async fn next_callback_due(self) -> CoreResult<Option<Timestamp>> {
        Ok(self.core.store().next_callback_due().await?)
    }

    /// Resolves when a change queued a callback.
    pub async fn callback_queued(self) {
        self.core.inner.tasks.callbacks_queued.notified().await;
    }

    /// Records each attempt's outcome on its callback and its task: delivered, given up
    /// after `policy.max_attempts`, or pending with exponential backoff.
    pub async fn record_callback_attempts(
        self,
        outcomes: Vec<(DueCallback, AttemptResult)>,
        policy: RetryPolicy,
    ) -> CoreResult<()> {
        let now = Timestamp::now();
        let attempts = outcomes
            .into_iter()
            .map(|(callback, outcome)| {
                self.core.callback_span(&callback, &outcome);
                attempt(callback, outcome, policy, now)
            })
            .collect();
        Ok(self.core.store().record_attempts(attempts).await?)
    }
}
