//! Live connections, as a transport uses them: register a connection of the calling
//! agent, receive its pushes in commit order, acknowledge entries, replay what it
//! missed. The hub behind this keeps the connections; the rules (who may connect, where
//! replay starts, what an ack may move) are here.

use std::sync::Arc;

use switchboard_types::ErrorCode;
use switchboard_types::ids::{AgentId, AgentPk, TeamId};
use switchboard_types::routing::{Route, Via};

use super::Live;
use super::{Caller, CoreError, CoreResult};
use crate::hub::{ConnectionLimit, Lag, Push, Registration};
use crate::model::PresenceRow;

/// One live connection of an agent. Dropping it ends the connection's registration.
pub struct Connection {
    registration: Registration,
    /// The agent's id and team's id, for greetings and logs.
    pub agent_id: AgentId,
    pub team_id: TeamId,
    /// The client asked for news only: entries that are not news (publishes it does
    /// not watch) are skipped, live and in replay; their seqs still count as sent.
    pub news_only: bool,
    /// Its transport: entries routed to another one are skipped, live (the hub never
    /// reserves them here) and in replay, like entries that are not news.
    pub route: Route,
}

/// A committed inbox entry on its way to one connection.
pub struct LivePush(Push);

impl LivePush {
    /// The recipient's sequence number of the entry.
    pub fn seq(&self) -> i64 {
        self.0.seq
    }

    /// The frame text; an error when the body could not be rendered (the connection
    /// then sends the entry from storage instead).
    pub fn frame(&self) -> Result<String, String> {
        self.0.event.frame(self.0.seq)
    }

    /// The entry as a message view (without `seq`), when it is a message.
    pub fn message(&self) -> Option<&Arc<switchboard_types::messages::MessageView>> {
        self.0.event.message()
    }

    /// Whether the entry is news for the connection's agent.
    pub fn is_news(&self) -> bool {
        self.0.event.is_news()
    }

    /// Whether the entry must be read from storage: another node committed it, and
    /// only its seq is known here.
    pub fn is_stored(&self) -> bool {
        self.0.event.is_stored()
    }
}

impl Connection {
    /// This connection's id (shown to the client and in logs).
    pub fn id(&self) -> u64 {
        self.registration.id
    }

    pub fn agent(&self) -> AgentPk {
        self.registration.agent_pk
    }

    /// The next push, in commit order; `None` once the hub dropped the connection.
    pub async fn next_push(&mut self) -> Option<LivePush> {
        self.registration.rx.recv().await.map(LivePush)
    }

    /// Drops every push waiting (after a replay from storage overtook them).
    pub fn drain(&mut self) {
        while self.registration.rx.try_recv().is_ok() {}
    }

    /// Set when the outbox overflowed: the connection must close (the client resumes
    /// from its cursor).
    pub fn lag(&self) -> &Arc<Lag> {
        &self.registration.lagging
    }

    /// Raised when an entry committed that no push brings (see [`crate::hub::Flag`]).
    pub fn recheck(&self) -> &Arc<crate::hub::Flag> {
        &self.registration.recheck
    }

    /// Cancelled when the agent was removed: its connections must end.
    pub fn removed(&self) -> tokio_util::sync::CancellationToken {
        self.registration.kicked.clone()
    }
}

impl<'a> Live<'a> {
    /// Registers a live connection for the calling agent, by the transport it calls
    /// by. Registered before storage is read for the replay, so nothing committed from
    /// now on can be missed.
    pub fn connect(self, caller: &Caller) -> CoreResult<Connection> {
        let (team, agent) = self.core.identity().acting_agent(caller)?;
        let route = caller
            .via()
            .and_then(Via::route)
            .ok_or_else(|| CoreError::internal("a live connection needs a live transport"))?;
        let registration =
            self.core
                .hub()
                .register(agent.pk, route)
                .map_err(|limit| match limit {
                    ConnectionLimit::Agent(max) => CoreError::new(
                        ErrorCode::RateLimited,
                        format!("this agent already holds {max} live connections; close one first"),
                    )
                    .with("max", max),
                    ConnectionLimit::Total(max) => CoreError::new(
                        ErrorCode::Unavailable,
                        format!(
                            "the server holds its maximum of {max} live connections; retry later"
                        ),
                    )
                    .with("max", max),
                })?;
        Ok(Connection {
            registration,
            agent_id: agent.agent_id.clone(),
            team_id: team.team_id.clone(),
            news_only: false,
            route,
        })
    }

    /// Where a connection's replay starts: after `since` when the client gives it,
    /// otherwise after the agent's last acknowledged entry — never past the agent's
    /// newest entry, so a cursor ahead of the inbox (a client's mistake) cannot make the
    /// connection skip entries committed later.
    pub async fn resume_after(self, caller: &Caller, since: Option<i64>) -> CoreResult<i64> {
        let (_, agent) = self.core.identity().acting_agent(caller)?;
        let wanted = match since {
            Some(since) if since < 0 => {
                return Err(CoreError::validation(
                    "since",
                    "since is a sequence number, 0 or more",
                ));
            }
            Some(since) => since,
            None => self.core.hub().acked(agent.pk),
        };
        let newest = self.core.store().newest_seq(agent.pk).await?;
        Ok(wanted.min(newest))
    }

    /// Writes acknowledged cursors and last activity kept in memory (called every
    /// second and at shutdown), queue cursors included. A failed write keeps them for
    /// the next call.
    pub async fn save_presence(self) -> CoreResult<()> {
        self.core.sync_nodes().await;
        let queues = self.core.save_queue_cursors().await;
        let unsaved = self.core.hub().take_unsaved();
        if unsaved.is_empty() {
            return queues;
        }
        let rows = unsaved
            .iter()
            .map(|c| PresenceRow {
                agent: c.agent,
                acked_seq: c.acked_seq,
                last_seen_at: c.last_seen_at,
            })
            .collect();
        let result = self.core.store().save_presence(rows).await;
        if result.is_err() {
            self.core.hub().unsaved(&unsaved);
        }
        result?;
        queues
    }
}
