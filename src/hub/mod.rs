//! The hub: which agent has which live connections, and pushing to them.
//!
//! Every connection has a bounded outbox. Pushes never wait: a frame either gets a slot
//! or the connection is marked *lagging* and its session closes it (close code 4008); the
//! client resumes from its cursor, so nothing is lost and a slow reader never grows
//! server memory or slows anyone else.
//!
//! The hub is told about an inbox entry only after the transaction that created it has
//! committed. To make SEND_MESSAGE's `delivered_to` exact (and storable with an
//! idempotency key), the writer job *reserves* an outbox slot on each live connection of
//! each recipient before the commit ([`Hub::reserve`]) and the frames go out through
//! those reservations right after it ([`Reservation::deliver`]).
//!
//! One [`Event`] is shared by every recipient of a message; each session adds its own
//! sequence number when it writes the frame, so a broadcast to a thousand agents is
//! serialised once.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, RwLock};

use tokio::sync::{Notify, mpsc};

use crate::core::time::Timestamp;

/// What an inbox entry becomes on the wire: a frame type and its JSON body.
///
/// Adding a kind of push is adding a [`FrameKind`] variant; the hub and sessions carry
/// any of them the same way.
pub struct Event {
    kind: FrameKind,
    body: OnceLock<Box<str>>,
    render: Box<dyn Fn() -> String + Send + Sync>,
}

/// How an event is framed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameKind {
    /// `{"type":"message","seq":N,"message":{…}}`; the message object carries `seq` too.
    Message,
    /// `{"type":"<name>","seq":N,…the object's fields…}` — the task protocol's types.
    Typed(&'static str),
}

impl Event {
    /// An event whose JSON object is produced by `render` when first needed (by the
    /// first session that sends it), then shared.
    pub fn new(kind: FrameKind, render: impl Fn() -> String + Send + Sync + 'static) -> Arc<Event> {
        Arc::new(Event {
            kind,
            body: OnceLock::new(),
            render: Box::new(render),
        })
    }

    /// The frame text for one recipient.
    pub fn frame(&self, seq: i64) -> String {
        let body = self.body.get_or_init(|| (self.render)().into_boxed_str());
        frame_of(self.kind, seq, body)
    }
}

/// A frame from a JSON object `body` (the event's fields, without `seq`).
pub fn frame_of(kind: FrameKind, seq: i64, body: &str) -> String {
    // `body` is a JSON object: "{" + fields + "}"; `inner` is "fields}" (or "}").
    let inner = body.strip_prefix('{').unwrap_or("}");
    let sep = if inner.starts_with('}') { "" } else { "," };
    match kind {
        FrameKind::Message => {
            format!(r#"{{"type":"message","seq":{seq},"message":{{"seq":{seq}{sep}{inner}}}"#)
        }
        FrameKind::Typed(name) => format!(r#"{{"type":"{name}","seq":{seq}{sep}{inner}"#),
    }
}

impl Event {}

/// One inbox entry on its way to a connection.
#[derive(Clone)]
pub struct Push {
    pub seq: i64,
    pub event: Arc<Event>,
}

/// Settings of the hub.
#[derive(Debug, Clone, Copy)]
pub struct HubSettings {
    /// Frames a connection may have waiting before it counts as lagging.
    pub outbox: usize,
}

/// A live connection as the hub sees it.
struct Conn {
    id: u64,
    tx: mpsc::Sender<Push>,
    lagging: Arc<Lag>,
    kicked: tokio_util::sync::CancellationToken,
    since: Timestamp,
}

/// Set when a push found the outbox full; the session closes the connection.
#[derive(Default)]
pub struct Lag {
    flag: AtomicBool,
    notify: Notify,
}

impl Lag {
    fn raise(&self) {
        if !self.flag.swap(true, Ordering::AcqRel) {
            self.notify.notify_one();
        }
    }

    pub fn is_raised(&self) -> bool {
        self.flag.load(Ordering::Acquire)
    }

    /// Resolves once the flag is raised.
    pub async fn raised(&self) {
        loop {
            let notified = self.notify.notified();
            if self.is_raised() {
                return;
            }
            notified.await;
        }
    }

    /// Clears the flag (after the session caught up from storage).
    pub fn clear(&self) {
        self.flag.store(false, Ordering::Release);
    }
}

/// Where an agent is: live connections, cursor, last activity.
#[derive(Default)]
struct AgentState {
    conns: Vec<Conn>,
    acked: i64,
    acked_dirty: bool,
    last_seen: Option<Timestamp>,
}

/// Whether and since when an agent is connected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Presence {
    pub connected: bool,
    /// When its oldest live connection opened.
    pub connected_since: Option<Timestamp>,
    /// Last activity: a frame from it, or its last disconnect.
    pub last_seen_at: Option<Timestamp>,
}

/// See the module documentation.
///
/// The lock is a `std::sync::RwLock`: pushes and presence reads take it shortly for
/// reading; connects, disconnects and acks for writing; it is never held across an
/// `.await`.
pub struct Hub {
    agents: RwLock<HashMap<i64, AgentState>>,
    next_id: AtomicU64,
    settings: HubSettings,
    /// Live connections, for shutdown and metrics.
    open: AtomicU64,
}

/// A registered connection: its outbox and lag flag. Dropping it unregisters.
pub struct Registration {
    pub id: u64,
    pub agent_pk: i64,
    pub rx: mpsc::Receiver<Push>,
    pub lagging: Arc<Lag>,
    /// Cancelled when the agent is removed: its connections must end.
    pub kicked: tokio_util::sync::CancellationToken,
    hub: Arc<Hub>,
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.hub.unregister(self.agent_pk, self.id);
    }
}

/// Outbox slots held for one recipient until its entry is committed.
pub struct Reservation {
    agent_pk: i64,
    permits: Vec<mpsc::OwnedPermit<Push>>,
}

impl Reservation {
    pub fn agent_pk(&self) -> i64 {
        self.agent_pk
    }

    /// Whether at least one live connection will get the entry.
    pub fn delivers(&self) -> bool {
        !self.permits.is_empty()
    }

    /// Sends the committed entry to every reserved connection.
    pub fn deliver(self, push: Push) {
        for permit in self.permits {
            permit.send(push.clone());
        }
    }
}

impl Hub {
    pub fn new(settings: HubSettings, presence: Vec<(i64, i64, Option<Timestamp>)>) -> Arc<Hub> {
        let agents = presence
            .into_iter()
            .map(|(pk, acked, last_seen)| {
                (
                    pk,
                    AgentState {
                        acked,
                        last_seen,
                        ..AgentState::default()
                    },
                )
            })
            .collect();
        Arc::new(Hub {
            agents: RwLock::new(agents),
            next_id: AtomicU64::new(1),
            settings,
            open: AtomicU64::new(0),
        })
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, HashMap<i64, AgentState>> {
        self.agents.read().unwrap_or_else(|p| p.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, HashMap<i64, AgentState>> {
        self.agents.write().unwrap_or_else(|p| p.into_inner())
    }

    /// Adds a live connection for `agent_pk`.
    pub fn register(self: &Arc<Self>, agent_pk: i64) -> Registration {
        let (tx, rx) = mpsc::channel(self.settings.outbox.max(1));
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let lagging = Arc::new(Lag::default());
        let kicked = tokio_util::sync::CancellationToken::new();
        let now = Timestamp::now();
        let mut agents = self.write();
        let state = agents.entry(agent_pk).or_default();
        state.conns.push(Conn {
            id,
            tx,
            lagging: lagging.clone(),
            kicked: kicked.clone(),
            since: now,
        });
        state.last_seen = Some(now);
        drop(agents);
        let open = self.open.fetch_add(1, Ordering::Relaxed) + 1;
        metrics::gauge!("switchboard_ws_connections").set(open as f64);
        Registration {
            id,
            agent_pk,
            rx,
            lagging,
            kicked,
            hub: self.clone(),
        }
    }

    /// Ends every live connection of an agent (it was removed).
    pub fn kick(&self, agent_pk: i64) {
        if let Some(state) = self.read().get(&agent_pk) {
            for conn in &state.conns {
                conn.kicked.cancel();
            }
        }
    }

    fn unregister(&self, agent_pk: i64, id: u64) {
        let mut agents = self.write();
        if let Some(state) = agents.get_mut(&agent_pk) {
            state.conns.retain(|c| c.id != id);
            state.last_seen = Some(Timestamp::now());
        }
        drop(agents);
        let open = self.open.fetch_sub(1, Ordering::Relaxed).saturating_sub(1);
        metrics::gauge!("switchboard_ws_connections").set(open as f64);
    }

    /// Reserves one outbox slot on each live connection of `agent_pk`. A connection
    /// whose outbox is full is marked lagging (its session will close it) and skipped.
    pub fn reserve(&self, agent_pk: i64) -> Reservation {
        let agents = self.read();
        let mut permits = Vec::new();
        if let Some(state) = agents.get(&agent_pk) {
            for conn in &state.conns {
                match conn.tx.clone().try_reserve_owned() {
                    Ok(permit) => permits.push(permit),
                    Err(mpsc::error::TrySendError::Full(_)) => {
                        metrics::counter!("switchboard_ws_outbox_overflows_total").increment(1);
                        conn.lagging.raise();
                    }
                    Err(mpsc::error::TrySendError::Closed(_)) => {}
                }
            }
        }
        Reservation { agent_pk, permits }
    }

    /// Whether the agent has a live connection right now.
    pub fn is_connected(&self, agent_pk: i64) -> bool {
        self.read()
            .get(&agent_pk)
            .is_some_and(|s| !s.conns.is_empty())
    }

    pub fn presence(&self, agent_pk: i64) -> Presence {
        let agents = self.read();
        match agents.get(&agent_pk) {
            Some(state) => Presence {
                connected: !state.conns.is_empty(),
                connected_since: state.conns.iter().map(|c| c.since).min(),
                last_seen_at: state.last_seen,
            },
            None => Presence {
                connected: false,
                connected_since: None,
                last_seen_at: None,
            },
        }
    }

    /// The highest sequence number the agent acknowledged.
    pub fn acked(&self, agent_pk: i64) -> i64 {
        self.read().get(&agent_pk).map_or(0, |s| s.acked)
    }

    /// Records an acknowledgement (never moves the cursor back) and activity.
    pub fn ack(&self, agent_pk: i64, seq: i64) {
        let mut agents = self.write();
        let state = agents.entry(agent_pk).or_default();
        if seq > state.acked {
            state.acked = seq;
            state.acked_dirty = true;
        }
        state.last_seen = Some(Timestamp::now());
    }

    /// Notes activity from the agent (a frame arrived).
    pub fn seen(&self, agent_pk: i64) {
        if let Some(state) = self.write().get_mut(&agent_pk) {
            state.last_seen = Some(Timestamp::now());
        }
    }

    /// Acks not yet written to storage: `(agent pk, acked seq, last seen)`; they count as
    /// written from now on (the caller writes them, or puts them back with
    /// [`Hub::unsaved`] if it cannot).
    pub fn take_unsaved(&self) -> Vec<(i64, i64, Option<Timestamp>)> {
        let mut agents = self.write();
        agents
            .iter_mut()
            .filter(|(_, s)| s.acked_dirty)
            .map(|(pk, s)| {
                s.acked_dirty = false;
                (*pk, s.acked, s.last_seen)
            })
            .collect()
    }

    /// Marks acks as unsaved again after a failed write.
    pub fn unsaved(&self, agents: &[(i64, i64, Option<Timestamp>)]) {
        let mut map = self.write();
        for (pk, _, _) in agents {
            if let Some(state) = map.get_mut(pk) {
                state.acked_dirty = true;
            }
        }
    }

    /// Number of live connections.
    pub fn open_connections(&self) -> u64 {
        self.open.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_carry_the_recipients_sequence_number() {
        let event = Event::new(FrameKind::Message, || {
            r#"{"message_id":"m1","kind":"message"}"#.to_owned()
        });
        assert_eq!(
            event.frame(7),
            r#"{"type":"message","seq":7,"message":{"seq":7,"message_id":"m1","kind":"message"}}"#
        );
        let task = Event::new(FrameKind::Typed("TaskRequest"), || {
            r#"{"task_id":"t1"}"#.to_owned()
        });
        assert_eq!(
            task.frame(3),
            r#"{"type":"TaskRequest","seq":3,"task_id":"t1"}"#
        );
        let empty = Event::new(FrameKind::Typed("X"), || "{}".to_owned());
        assert_eq!(empty.frame(1), r#"{"type":"X","seq":1}"#);
        for text in [event.frame(9), task.frame(9), empty.frame(9)] {
            assert!(
                serde_json::from_str::<serde_json::Value>(&text).is_ok(),
                "{text}"
            );
        }
    }

    #[tokio::test]
    async fn a_full_outbox_marks_the_connection_lagging_and_skips_it() {
        let hub = Hub::new(HubSettings { outbox: 2 }, Vec::new());
        let mut reg = hub.register(1);
        let event = Event::new(FrameKind::Message, || "{}".to_owned());
        for seq in 1..=2 {
            let r = hub.reserve(1);
            assert!(r.delivers());
            r.deliver(Push {
                seq,
                event: event.clone(),
            });
        }
        let r = hub.reserve(1);
        assert!(!r.delivers());
        assert!(reg.lagging.is_raised());
        assert_eq!(reg.rx.recv().await.map(|p| p.seq), Some(1));
        // Another agent is unaffected.
        let _other = hub.register(2);
        assert!(hub.reserve(2).delivers());
    }

    #[test]
    fn presence_and_acks() {
        let hub = Hub::new(HubSettings { outbox: 4 }, vec![(5, 10, None)]);
        assert_eq!(hub.acked(5), 10);
        assert!(!hub.is_connected(5));
        let reg = hub.register(5);
        assert!(hub.presence(5).connected);
        hub.ack(5, 8);
        assert_eq!(hub.acked(5), 10, "acks never go back");
        assert!(hub.take_unsaved().is_empty());
        hub.ack(5, 12);
        assert_eq!(
            hub.take_unsaved(),
            vec![(5, 12, hub.presence(5).last_seen_at)]
        );
        drop(reg);
        assert!(!hub.presence(5).connected);
        assert!(hub.presence(5).last_seen_at.is_some());
        assert_eq!(hub.open_connections(), 0);
    }
}
