//! What other nodes on the same database committed, pushed to this node's live
//! connections, and their registry changes taken up here (PostgreSQL with several
//! nodes; see `store::postgres::listen`).
//!
//! Only a recipient's newest seq crosses nodes, not the entries: each of this node's
//! connections of that agent gets a push that says "read up to here from storage", and
//! its session sends what it has not sent yet, in order, from the database — the same
//! path as filling a gap. So the frames are exactly those a local send would have pushed
//! (routes, news-only and acks apply as always), and nothing depends on the
//! notification carrying them.

use switchboard_types::ids::AgentPk;
use switchboard_types::time::Timestamp;
use tokio::sync::mpsc;

use super::Core;
use crate::hub::{Event, Push};
use crate::model::{Change, NodeConnections};

pub use crate::store::NODE_EXPIRY;

impl Core {
    /// Starts pushing what other nodes commit, when the store hears them.
    pub(super) fn follow_other_nodes(&self) {
        if let Some(changes) = self.store().take_changes() {
            tokio::spawn(self.clone().follow(changes));
        }
    }

    async fn follow(self, mut changes: mpsc::Receiver<Vec<Change>>) {
        while let Some(batch) = changes.recv().await {
            for change in batch {
                match change {
                    Change::Inbox { agent, seq } => self.written_elsewhere(agent, seq),
                    Change::Task(task) => self.hub().task_changed(task),
                    Change::Registry => self.reload_registry().await,
                    Change::Resync => {
                        self.reload_registry().await;
                        self.resync().await;
                    }
                }
            }
        }
    }

    /// Tells the other nodes which agents are connected here and learns which are
    /// connected there (every second, with the presence save). A node whose heartbeat
    /// is older than [`NODE_EXPIRY`] counts as dead: its connections are forgotten. If
    /// the exchange fails, nothing is assumed of the other nodes.
    pub(super) async fn sync_nodes(&self) {
        let beat = std::time::Instant::now();
        let mine = self
            .hub()
            .local_connections()
            .into_iter()
            .map(|(agent, routes, since)| NodeConnections {
                agent,
                routes,
                since,
            })
            .collect();
        let now = Timestamp::now();
        let fresh_after = Timestamp::from_micros(now.micros() - NODE_EXPIRY.as_micros() as i64);
        let node = self.node().node_id().to_string();
        match self
            .store()
            .sync_connections(node, mine, now, fresh_after)
            .await
        {
            Ok(theirs) => {
                self.hub().set_elsewhere(
                    theirs
                        .into_iter()
                        .map(|c| (c.agent, c.routes, c.since))
                        .collect(),
                );
                // Confirmed after the heartbeat is written, never before (see `fence`).
                self.inner.fence.beat(beat);
                if let Err(err) = self.confirm_registry().await {
                    tracing::debug!(error = %err, "confirming the registry failed");
                }
            }
            Err(err) => {
                tracing::debug!(error = %err, "exchanging connections with the other nodes failed");
                self.hub().set_elsewhere(Vec::new());
            }
        }
    }

    /// Another node wrote `agent`'s entries up to `seq`.
    fn written_elsewhere(&self, agent: AgentPk, seq: i64) {
        self.hub().inbox_changed(agent);
        let reservation = self.hub().reserve(agent, None);
        if reservation.delivers() {
            reservation.deliver(Push {
                seq,
                event: Event::stored(),
            });
        }
    }

    /// Another node added or changed a team or an agent: the registry is read again
    /// (it is small, and such changes are rare), and the connections of an agent that
    /// was removed there end here too (4003), as they do on the node that removed it.
    /// Makes the registry hold everything committed before `arrived` (several nodes): a
    /// request that found an agent, token or team unknown asks this before it refuses,
    /// since another node may have committed it a moment ago and its notification not be
    /// here yet. Negative answers are never cached. Reloads run one at a time, and a
    /// reload that started after the request arrived already covers it, so a stream of
    /// unknown tokens costs at most one reload in flight, not one per request.
    pub(super) async fn registry_current_since(&self, arrived: std::time::Instant) {
        let mut started = self.inner.registry_reload.lock().await;
        if started.is_some_and(|at| at >= arrived) {
            return;
        }
        *started = Some(std::time::Instant::now());
        self.reload_registry().await;
    }

    /// Reads the registry (after reading the newest epoch, so that what is read holds
    /// at least that epoch) and records the epoch held, here and in this node's row.
    /// Reads run one at a time, so an older read never lands after a newer one; a row
    /// this node changed itself while the read ran is kept as it is here, and the read
    /// is made again (at most three times) before its epoch counts as held.
    async fn reload_registry(&self) {
        let _one_at_a_time = self.inner.reloading.lock().await;
        for _ in 0..3 {
            match self.read_registry().await {
                Ok(Some(epoch)) => {
                    if let Err(err) = self
                        .store()
                        .registry_seen(self.node().node_id().as_str(), epoch)
                        .await
                    {
                        tracing::warn!(error = %err, "recording the registry epoch this node holds failed");
                    }
                    return;
                }
                Ok(None) => {}
                Err(err) => {
                    tracing::warn!(error = %err, "reading the registry after another node's change failed");
                    return;
                }
            }
        }
    }

    /// One read of the registry, applied: the epoch it holds, or `None` when a row
    /// changed here while it ran (the read is older than that row).
    async fn read_registry(&self) -> Result<Option<i64>, crate::store::StoreError> {
        let started = std::time::Instant::now();
        let since = self.registry().generation();
        let epoch = self.store().registry_epoch().await?;
        let teams = self.store().load_teams().await?;
        let agents = self.store().load_agents().await?;
        let mut whole = true;
        for team in teams {
            whole &= self.registry().put_team_loaded(team, since);
        }
        for agent in agents {
            // A removal, or a new token (its connections were opened with the old one),
            // ends the agent's connections here too, as it did on the node that made it.
            let known = self.registry().agent(agent.pk);
            let was_member = known.as_ref().is_some_and(|a| a.is_member());
            let removed = was_member && !agent.is_member();
            let rotated = was_member && known.is_some_and(|a| a.token_id != agent.token_id);
            let pk = agent.pk;
            whole &= self.registry().put_agent_loaded(agent, since);
            if removed || rotated {
                self.hub().kick(pk);
            }
        }
        if !whole {
            return Ok(None);
        }
        self.inner.fence.applied(epoch, started);
        Ok(Some(epoch))
    }

    /// Notifications may have been missed: every live connection catches up from
    /// storage.
    async fn resync(&self) {
        for agent in self.hub().connected_agents() {
            match self.store().newest_seq(agent).await {
                Ok(seq) if seq > 0 => self.written_elsewhere(agent, seq),
                Ok(_) => {}
                Err(err) => {
                    tracing::warn!(error = %err, "catching up after missed notifications failed");
                    return;
                }
            }
        }
    }
}
