//! Waiting for an agent's inbox to change without being one of its live connections
//! (MCP's `wait_for_messages`, resource subscriptions): a [`Notify`] per agent that
//! somebody waits for, woken after each commit that adds to that inbox.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use switchboard_types::ids::AgentPk;
use tokio::sync::Notify;

use super::Hub;

/// A wait for an agent's inbox to change; dropping it ends the wait.
///
/// Arm it ([`Notify::notified`] and `enable`) *before* reading storage: a commit after
/// the read then wakes it, and a commit before the read is in what was read.
pub struct InboxWatch {
    hub: Arc<Hub>,
    agent: AgentPk,
    notify: Arc<Notify>,
}

impl InboxWatch {
    pub fn notify(&self) -> &Notify {
        &self.notify
    }
}

impl Drop for InboxWatch {
    fn drop(&mut self) {
        self.hub.waiting.fetch_sub(1, Ordering::SeqCst);
        let mut signals = self.hub.signals.lock().unwrap_or_else(|p| p.into_inner());
        // The map's own reference and ours: nobody else waits for this agent.
        if Arc::strong_count(&self.notify) <= 2 {
            signals.remove(&self.agent);
        }
    }
}

impl Hub {
    /// Starts waiting for `agent_pk`'s inbox to change.
    pub fn watch_inbox(self: &Arc<Self>, agent_pk: AgentPk) -> InboxWatch {
        let mut signals = self.signals.lock().unwrap_or_else(|p| p.into_inner());
        let notify = signals.entry(agent_pk).or_default().clone();
        drop(signals);
        self.waiting.fetch_add(1, Ordering::SeqCst);
        InboxWatch {
            hub: self.clone(),
            agent: agent_pk,
            notify,
        }
    }

    /// Wakes whoever waits for `agent_pk`'s inbox (called after a commit added to it).
    pub fn inbox_changed(&self, agent_pk: AgentPk) {
        if self.waiting.load(Ordering::SeqCst) == 0 {
            return;
        }
        let signals = self.signals.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(notify) = signals.get(&agent_pk) {
            notify.notify_waiters();
        }
    }
}
