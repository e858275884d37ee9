//! Waiting for new inbox entries without holding a live connection: what a client that
//! cannot keep a socket open (an MCP tool call) uses instead of polling. The hub wakes
//! the wait when a commit adds to the inbox; storage says what was added.

use std::time::Duration;

use switchboard_types::inbox::{DEFAULT_PAGE, InboxWait, MAX_PAGE, MAX_WAIT_MS};

use super::{Caller, Core, CoreError, CoreResult};

/// How often a waiting call says it is still waiting.
pub const TICK: Duration = Duration::from_secs(5);

impl Core {
    /// The caller's inbox entries after `after` (after its newest entry when `None`),
    /// oldest first, at most `limit`: at once if there are any, otherwise as soon as one
    /// commits, or none once `timeout` passed. `on_tick` hears how long it has waited,
    /// every [`TICK`] (a transport tells its client the call is alive).
    pub async fn wait_for_inbox(
        &self,
        caller: &Caller,
        after: Option<i64>,
        limit: Option<i64>,
        timeout: Duration,
        mut on_tick: impl FnMut(Duration) + Send,
    ) -> CoreResult<InboxWait> {
        let (_, me) = self.acting_agent(caller)?;
        if after.is_some_and(|a| a < 0) {
            return Err(CoreError::validation(
                "after_seq",
                "after_seq is a sequence number, 0 or more",
            ));
        }
        let limit = limit.unwrap_or(DEFAULT_PAGE);
        if !(1..=MAX_PAGE).contains(&limit) {
            return Err(
                CoreError::validation("limit", format!("limit is 1 to {MAX_PAGE}"))
                    .with("max", MAX_PAGE),
            );
        }
        if timeout > Duration::from_millis(MAX_WAIT_MS) {
            return Err(CoreError::validation(
                "timeout_ms",
                format!("a wait lasts at most {MAX_WAIT_MS} ms; call again to wait longer"),
            )
            .with("max", MAX_WAIT_MS));
        }
        let watch = self.hub().watch_inbox(me.pk);
        let removed = self.removal_signal(caller)?;
        let after = match after {
            Some(after) => after,
            None => self.store().newest_seq(me.pk).await?,
        };
        let started = tokio::time::Instant::now();
        let deadline = started + timeout;
        let mut ticks = tokio::time::interval_at(started + TICK, TICK);
        loop {
            let woken = watch.notify().notified();
            tokio::pin!(woken);
            woken.as_mut().enable();
            let items = self.inbox_items_after(me.pk, after, limit).await?.items;
            if let Some(last) = items.last() {
                let next_after_seq = last.entry.seq;
                let messages = items
                    .into_iter()
                    .map(|item| {
                        let read = item.entry.read_at.is_some();
                        let seq = item.entry.seq;
                        self.view(item.message, Some(seq), read, Some(item.entry.news))
                    })
                    .collect();
                return Ok(InboxWait {
                    success: true,
                    messages,
                    next_after_seq,
                    timed_out: false,
                });
            }
            tokio::select! {
                () = &mut woken => {}
                () = removed.cancelled() => return Err(agent_removed()),
                _ = ticks.tick() => on_tick(started.elapsed()),
                () = tokio::time::sleep_until(deadline) => {
                    return Ok(InboxWait {
                        success: true,
                        messages: Vec::new(),
                        next_after_seq: after,
                        timed_out: true,
                    });
                }
            }
        }
    }
}

/// An agent's inbox changing, as a stream of wake-ups: what a subscription (MCP's
/// resource subscriptions) listens to. Dropping it stops listening.
pub struct InboxChanges(crate::hub::Watch, tokio_util::sync::CancellationToken);

impl InboxChanges {
    /// Resolves when the agent is removed: the subscription must end.
    pub async fn removed(&self) {
        self.1.cancelled().await;
    }

    /// Resolves at the next commit that adds to the inbox once enabled (`enable` the
    /// pinned future before acting on the previous change, so none is missed).
    pub fn notified(&self) -> tokio::sync::futures::Notified<'_> {
        self.0.notify().notified()
    }
}

impl Core {
    /// Starts listening for commits to the calling agent's inbox.
    pub fn inbox_changes(&self, caller: &Caller) -> CoreResult<InboxChanges> {
        let (_, me) = self.acting_agent(caller)?;
        let watch = self.hub().watch_inbox(me.pk);
        Ok(InboxChanges(watch, self.removal_signal(caller)?))
    }

    /// A token cancelled when the calling agent is removed — on this node or another —
    /// for whatever it holds that is not a registered connection (a STOMP session, an
    /// A2A stream, an MCP wait): it ends at once, not at its next request. Never
    /// cancelled for a team key or the admin. Checked again once the token is held, so
    /// a removal between the caller's authentication and now is not missed.
    pub fn removal_signal(
        &self,
        caller: &Caller,
    ) -> CoreResult<tokio_util::sync::CancellationToken> {
        let Caller::Agent { agent, .. } = caller else {
            return Ok(tokio_util::sync::CancellationToken::new());
        };
        let removal = self.hub().removal(*agent);
        if self.acting_agent(caller).is_err() {
            removal.cancel();
            return Err(agent_removed());
        }
        Ok(removal)
    }
}

/// What a wait answers once its agent was removed: its token no longer counts.
fn agent_removed() -> CoreError {
    CoreError::new(
        switchboard_types::ErrorCode::Unauthorized,
        "the agent was removed: its token no longer counts",
    )
}
