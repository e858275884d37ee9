//! Waiting for something to change without being one of an agent's live connections:
//! an agent's inbox (MCP's `wait_for_messages`, resource subscriptions) or one task (an
//! A2A stream). A [`Notify`] per thing somebody waits for, woken after each commit that
//! changed it.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use switchboard_types::ids::{AgentPk, TaskPk};
use tokio::sync::Notify;

use super::Hub;

/// What a wait is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum Watched {
    Inbox(AgentPk),
    Task(TaskPk),
}

/// A wait for an inbox or a task to change; dropping it ends the wait.
///
/// Arm it ([`Notify::notified`] and `enable`) *before* reading storage: a commit after
/// the read then wakes it, and a commit before the read is in what was read.
pub struct Watch {
    hub: Arc<Hub>,
    watched: Watched,
    notify: Arc<Notify>,
}

impl Watch {
    /// A wake-up for the next change, registered now (enabled): a change from this
    /// moment on completes it, however long before it is awaited.
    pub fn arm(&self) -> std::pin::Pin<Box<tokio::sync::futures::OwnedNotified>> {
        let mut armed = Box::pin(self.notify.clone().notified_owned());
        armed.as_mut().enable();
        armed
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        self.hub.waiting.fetch_sub(1, Ordering::SeqCst);
        let mut signals = self.hub.signals.lock().unwrap_or_else(|p| p.into_inner());
        // The map's own reference and ours: nobody else waits for this.
        if Arc::strong_count(&self.notify) <= 2 {
            signals.remove(&self.watched);
        }
    }
}

impl Hub {
    fn watch(self: &Arc<Self>, watched: Watched) -> Watch {
        let mut signals = self.signals.lock().unwrap_or_else(|p| p.into_inner());
        let notify = signals.entry(watched).or_default().clone();
        drop(signals);
        self.waiting.fetch_add(1, Ordering::SeqCst);
        Watch {
            hub: self.clone(),
            watched,
            notify,
        }
    }

    fn wake(&self, watched: Watched) {
        if self.waiting.load(Ordering::SeqCst) == 0 {
            return;
        }
        let signals = self.signals.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(notify) = signals.get(&watched) {
            notify.notify_waiters();
        }
    }

    /// Starts waiting for `agent_pk`'s inbox to change.
    pub fn watch_inbox(self: &Arc<Self>, agent_pk: AgentPk) -> Watch {
        self.watch(Watched::Inbox(agent_pk))
    }

    /// Wakes whoever waits for `agent_pk`'s inbox (called after a commit added to it).
    pub fn inbox_changed(&self, agent_pk: AgentPk) {
        self.wake(Watched::Inbox(agent_pk));
    }

    /// Whether something on this node waits for `agent_pk`'s inbox right now: an MCP
    /// listener (`wait_for_messages`, `subscriptions/listen`, a resource subscription)
    /// or an outside agent's gateway. Such an agent hears what its inbox gets without
    /// a live connection, so it is offered work as a connected one is.
    pub fn is_watching_inbox(&self, agent_pk: AgentPk) -> bool {
        self.waiting.load(Ordering::SeqCst) > 0
            && self
                .signals
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .contains_key(&Watched::Inbox(agent_pk))
    }

    /// Starts waiting for a task to change.
    pub fn watch_task(self: &Arc<Self>, task_pk: TaskPk) -> Watch {
        self.watch(Watched::Task(task_pk))
    }

    /// Wakes whoever waits for the task (called after a commit changed it).
    pub fn task_changed(&self, task_pk: TaskPk) {
        self.wake(Watched::Task(task_pk));
    }
}
