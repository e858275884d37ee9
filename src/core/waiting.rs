//! Waiting for new inbox entries without holding a live connection: what a client that
//! cannot keep a socket open (an MCP tool call) uses instead of polling. The hub wakes
//! the wait when a commit adds to the inbox; storage says what was added.

use std::sync::Arc;
use std::time::Duration;

use switchboard_types::inbox::{DEFAULT_PAGE, InboxWait, MAX_PAGE, MAX_WAIT_MS};
use switchboard_types::messages::MessageView;

use super::Live;
use super::feed::FeedItem;
use super::{Caller, CoreError, CoreResult};

/// How often a waiting call says it is still waiting.
pub const TICK: Duration = Duration::from_secs(5);

/// What a wait or a follow answers once its agent was removed: its token no longer counts.
pub(super) fn agent_removed() -> CoreError {
    CoreError::new(
        switchboard_types::ErrorCode::Unauthorized,
        "the agent was removed: its token no longer counts",
    )
}

impl<'a> Live<'a> {
    /// The caller's inbox entries after `after` (after its newest entry when `None`),
    /// oldest first, at most `limit`: at once if there are any, otherwise as soon as one
    /// commits, or none once `timeout` passed. `on_tick` hears how long it has waited,
    /// every [`TICK`] (a transport tells its client the call is alive).
    pub async fn wait_for_inbox(
        self,
        caller: &Caller,
        after: Option<i64>,
        limit: Option<i64>,
        timeout: Duration,
        mut on_tick: impl FnMut(Duration) + Send,
    ) -> CoreResult<InboxWait> {
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
        let mut feed = self.feed_watch(caller, after).await?;
        let removed = self.removal_signal(caller)?;
        let started = tokio::time::Instant::now();
        let deadline = started + timeout;
        let mut ticks = tokio::time::interval_at(started + TICK, TICK);
        loop {
            let messages: Vec<MessageView> = feed
                .next_batch(limit)
                .await?
                .into_iter()
                .filter_map(|entry| match entry.item {
                    FeedItem::View(view) => Some(Arc::unwrap_or_clone(view)),
                    FeedItem::Frame(_) | FeedItem::Skipped => None,
                })
                .collect();
            if !messages.is_empty() {
                return Ok(InboxWait {
                    success: true,
                    messages,
                    next_after_seq: feed.cursor(),
                    timed_out: false,
                });
            }
            tokio::select! {
                _ = feed.ready() => {}
                () = removed.cancelled() => return Err(agent_removed()),
                _ = ticks.tick() => on_tick(started.elapsed()),
                () = tokio::time::sleep_until(deadline) => {
                    return Ok(InboxWait {
                        success: true,
                        messages: Vec::new(),
                        next_after_seq: feed.cursor(),
                        timed_out: true,
                    });
                }
            }
        }
    }

    /// A token cancelled when the calling agent is removed — on this node or another —
    /// for whatever it holds that is not a registered connection (a STOMP session, an
    /// A2A stream, an MCP wait): it ends at once, not at its next request. Never
    /// cancelled for a team key or the admin. Checked again once the token is held, so
    /// a removal between the caller's authentication and now is not missed.
    pub fn removal_signal(
        self,
        caller: &Caller,
    ) -> CoreResult<tokio_util::sync::CancellationToken> {
        let Caller::Agent { agent, .. } = caller else {
            return Ok(tokio_util::sync::CancellationToken::new());
        };
        let removal = self.core.hub().removal(*agent);
        if self.core.identity().acting_agent(caller).is_err() {
            removal.cancel();
            return Err(agent_removed());
        }
        Ok(removal)
    }
}
