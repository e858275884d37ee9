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
use std::sync::{Arc, RwLock};

pub use event::{Event, Push};
use switchboard_types::ids::AgentPk;
use switchboard_types::routing::Route;
use switchboard_types::time::Timestamp;
use tokio::sync::{Notify, mpsc};
pub use watch::Watch;

mod departures;
mod event;
mod watch;

/// Where an agent's acknowledged cursor is and when it was last active: what the hub
/// keeps in memory and the core saves once a second.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AgentCursor {
    pub agent: AgentPk,
    pub acked_seq: i64,
    pub last_seen_at: Option<Timestamp>,
}

/// Connections closed because their outbox overflowed (4008).
const OVERFLOWS: &str = "switchboard_ws_outbox_overflows_total";

/// Settings of the hub.
#[derive(Debug, Clone, Copy)]
pub struct HubSettings {
    /// Frames a connection may have waiting before it counts as lagging.
    pub outbox: usize,
    /// Connections one agent may hold at once.
    pub max_per_agent: usize,
    /// Connections the hub holds at once.
    pub max_total: usize,
}

impl HubSettings {
    /// Settings with no connection limit that matters (tests of the hub alone).
    pub fn with_outbox(outbox: usize) -> HubSettings {
        HubSettings {
            outbox,
            max_per_agent: usize::MAX,
            max_total: usize::MAX,
        }
    }
}

/// Why a connection was not registered: a limit was reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConnectionLimit {
    /// The agent already holds this many connections.
    Agent(usize),
    /// The server already holds this many connections.
    Total(usize),
}

/// A live connection as the hub sees it.
struct Conn {
    id: u64,
    /// Its transport: an entry with a route is pushed only to connections of that one.
    route: Route,
    tx: mpsc::Sender<Push>,
    lagging: Arc<Flag>,
    recheck: Arc<Flag>,
    kicked: tokio_util::sync::CancellationToken,
    since: Timestamp,
}

/// A flag the hub raises for a connection's follower, once per episode, and the follower
/// lowers. Two per connection:
/// * its **lag**: a push found the outbox full (counted in [`OVERFLOWS`], once per
///   episode: the pushes refused while it is raised are one overflow, not many); the
///   session closes the connection, or a follower reads storage and clears it;
/// * its **recheck**: an entry committed that no push brings to it — it was registered
///   after the entry's outbox slots were reserved, and may have read storage before the
///   commit — so its follower reads storage again.
pub struct Flag {
    flag: AtomicBool,
    notify: Notify,
    /// The counter raising it increments, if any.
    counter: Option<&'static str>,
}

/// The lag flag of a connection.
pub type Lag = Flag;

impl Flag {
    fn new(counter: Option<&'static str>) -> Flag {
        Flag {
            flag: AtomicBool::new(false),
            notify: Notify::new(),
            counter,
        }
    }

    fn raise(&self) {
        if !self.flag.swap(true, Ordering::AcqRel) {
            if let Some(counter) = self.counter {
                metrics::counter!(counter).increment(1);
            }
            self.notify.notify_one();
        }
    }

    pub fn is_raised(&self) -> bool {
        self.flag.load(Ordering::Acquire)
    }

    /// Resolves once the flag is raised (it stays raised).
    pub async fn raised(&self) {
        loop {
            let notified = self.notify.notified();
            if self.is_raised() {
                return;
            }
            notified.await;
        }
    }

    /// Resolves once the flag is raised, and lowers it.
    pub async fn taken(&self) {
        loop {
            let notified = self.notify.notified();
            if self.flag.swap(false, Ordering::AcqRel) {
                return;
            }
            notified.await;
        }
    }

    /// Lowers the flag (after the follower caught up from storage).
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
    agents: RwLock<HashMap<AgentPk, AgentState>>,
    next_id: AtomicU64,
    settings: HubSettings,
    /// Live connections, for shutdown and metrics.
    open: AtomicU64,
    /// Who waits for an inbox or a task to change (see `watch`), and how many in all.
    signals: std::sync::Mutex<HashMap<watch::Watched, Arc<Notify>>>,
    waiting: AtomicU64,
    /// Agents with live connections on other nodes (several nodes on one database):
    /// their transports and since when, as last heard (every second).
    elsewhere: RwLock<HashMap<AgentPk, (Vec<Route>, Timestamp)>>,
    /// Cancelled when the agent is removed, for what is not a registered connection but
    /// must end with the agent too: a STOMP session before it subscribes, an A2A stream,
    /// an MCP wait or subscription. Made on first ask; gone with the removal.
    removals: std::sync::Mutex<HashMap<AgentPk, tokio_util::sync::CancellationToken>>,
    /// Agents whose last connection here ended (see `departures`).
    departures: departures::Departures,
}

/// A registered connection: its outbox and lag flag. Dropping it unregisters.
pub struct Registration {
    pub id: u64,
    pub agent_pk: AgentPk,
    pub rx: mpsc::Receiver<Push>,
    pub lagging: Arc<Flag>,
    pub recheck: Arc<Flag>,
    /// Cancelled when the agent is removed: its connections must end.
    pub kicked: tokio_util::sync::CancellationToken,
    hub: Arc<Hub>,
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.hub.unregister(self.agent_pk, self.id);
    }
}

/// Outbox slots held for one recipient until its entry is committed, and the
/// connections that had no room for it.
pub struct Reservation {
    agent_pk: AgentPk,
    permits: Vec<mpsc::OwnedPermit<Push>>,
    /// Connections whose outbox was full: marked lagging at once, and again when the
    /// entry is committed (see [`Reservation::deliver`]).
    missed: Vec<Arc<Flag>>,
    /// The connections it saw, and the next connection id when it looked: a connection
    /// registered since is told at the commit ([`Hub::recheck_unseen`]).
    seen: Vec<u64>,
    ids_at: u64,
    route: Option<Route>,
}

impl Reservation {
    pub fn agent_pk(&self) -> AgentPk {
        self.agent_pk
    }

    /// Whether at least one live connection will get the entry.
    pub fn delivers(&self) -> bool {
        !self.permits.is_empty()
    }

    /// Whether a connection gets the entry or must hear it missed one.
    pub fn matters(&self) -> bool {
        !self.permits.is_empty() || !self.missed.is_empty()
    }

    /// Sends the committed entry to every reserved connection, and marks lagging again
    /// every connection that had no room for it. Again, because the mark made at the
    /// reservation came before the commit: a follower that recovered from it in between
    /// read storage without this entry, cleared the mark, and would wait for a push that
    /// never comes. Marked after the commit, the next read from storage has it.
    pub fn deliver(mut self, push: Push) {
        for permit in std::mem::take(&mut self.permits) {
            permit.send(push.clone());
        }
        self.committed();
    }

    /// The entry is committed but has nothing to push to this recipient (no sequence
    /// number for it): only the connections that missed it are told.
    pub fn committed(self) {
        for lag in self.missed {
            lag.raise();
        }
    }
}

impl Hub {
    pub fn new(settings: HubSettings, cursors: Vec<AgentCursor>) -> Arc<Hub> {
        let agents = cursors
            .into_iter()
            .map(|c| {
                (
                    c.agent,
                    AgentState {
                        acked: c.acked_seq,
                        last_seen: c.last_seen_at,
                        ..AgentState::default()
                    },
                )
            })
            .collect();
        // Shown from the start (at 0), not only after the first overflow.
        metrics::counter!(OVERFLOWS).increment(0);
        Arc::new(Hub {
            agents: RwLock::new(agents),
            next_id: AtomicU64::new(1),
            settings,
            open: AtomicU64::new(0),
            signals: std::sync::Mutex::new(HashMap::new()),
            waiting: AtomicU64::new(0),
            elsewhere: RwLock::new(HashMap::new()),
            removals: std::sync::Mutex::new(HashMap::new()),
            departures: departures::Departures::default(),
        })
    }

    /// A token cancelled when `agent_pk` is removed (see [`Hub::kick`]).
    pub fn removal(&self, agent_pk: AgentPk) -> tokio_util::sync::CancellationToken {
        self.removals
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(agent_pk)
            .or_default()
            .clone()
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, HashMap<AgentPk, AgentState>> {
        self.agents.read().unwrap_or_else(|p| p.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, HashMap<AgentPk, AgentState>> {
        self.agents.write().unwrap_or_else(|p| p.into_inner())
    }

    /// Adds a live connection for `agent_pk`, by transport `route`.
    pub fn register(
        self: &Arc<Self>,
        agent_pk: AgentPk,
        route: Route,
    ) -> Result<Registration, ConnectionLimit> {
        let (tx, rx) = mpsc::channel(self.settings.outbox.max(1));
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let lagging = Arc::new(Flag::new(Some(OVERFLOWS)));
        let recheck = Arc::new(Flag::new(None));
        let kicked = tokio_util::sync::CancellationToken::new();
        let now = Timestamp::now();
        let mut agents = self.write();
        // Checked under the lock, so concurrent connects cannot both take the last place.
        if self.open.load(Ordering::Relaxed) >= self.settings.max_total as u64 {
            return Err(ConnectionLimit::Total(self.settings.max_total));
        }
        let state = agents.entry(agent_pk).or_default();
        if state.conns.len() >= self.settings.max_per_agent {
            return Err(ConnectionLimit::Agent(self.settings.max_per_agent));
        }
        state.conns.push(Conn {
            id,
            route,
            tx,
            lagging: lagging.clone(),
            recheck: recheck.clone(),
            kicked: kicked.clone(),
            since: now,
        });
        state.last_seen = Some(now);
        let open = self.open.fetch_add(1, Ordering::Relaxed) + 1;
        drop(agents);
        metrics::gauge!("switchboard_ws_connections").set(open as f64);
        Ok(Registration {
            id,
            agent_pk,
            rx,
            lagging,
            recheck,
            kicked,
            hub: self.clone(),
        })
    }

    /// Ends every live connection of an agent (it was removed), and everything else
    /// that waits on its [`Hub::removal`].
    pub fn kick(&self, agent_pk: AgentPk) {
        if let Some(state) = self.read().get(&agent_pk) {
            for conn in &state.conns {
                conn.kicked.cancel();
            }
        }
        let removal = self
            .removals
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&agent_pk);
        if let Some(removal) = removal {
            removal.cancel();
        }
    }

    fn unregister(&self, agent_pk: AgentPk, id: u64) {
        let mut agents = self.write();
        if let Some(state) = agents.get_mut(&agent_pk) {
            state.conns.retain(|c| c.id != id);
            let now = Timestamp::now();
            state.last_seen = Some(now);
            if state.conns.is_empty() {
                self.departures.record(agent_pk, now);
            }
        }
        drop(agents);
        let open = self.open.fetch_sub(1, Ordering::Relaxed).saturating_sub(1);
        metrics::gauge!("switchboard_ws_connections").set(open as f64);
    }

    /// Reserves one outbox slot on each live connection of `agent_pk` (with a route:
    /// each of that transport). A connection whose outbox is full is marked lagging
    /// (its session will close it) and skipped.
    pub fn reserve(&self, agent_pk: AgentPk, route: Option<Route>) -> Reservation {
        let agents = self.read();
        // Read under the lock: a connection with a higher id was not yet in the map.
        let ids_at = self.next_id.load(Ordering::Acquire);
        let (mut permits, mut missed, mut seen) = (Vec::new(), Vec::new(), Vec::new());
        if let Some(state) = agents.get(&agent_pk) {
            let routed = state
                .conns
                .iter()
                .filter(|c| route.is_none_or(|r| r == c.route));
            for conn in routed {
                seen.push(conn.id);
                match conn.tx.clone().try_reserve_owned() {
                    Ok(permit) => permits.push(permit),
                    Err(mpsc::error::TrySendError::Full(_)) => {
                        conn.lagging.raise();
                        missed.push(conn.lagging.clone());
                    }
                    Err(mpsc::error::TrySendError::Closed(_)) => {}
                }
            }
        }
        Reservation {
            agent_pk,
            permits,
            missed,
            seen,
            ids_at,
            route,
        }
    }

    /// After `reservation`'s entry committed: the agent's connections registered since it
    /// was made (so they got no slot) re-read storage. Nothing to do, without taking the
    /// lock, when no connection was registered since.
    pub fn recheck_unseen(&self, reservation: &Reservation) {
        if self.next_id.load(Ordering::Acquire) == reservation.ids_at {
            return;
        }
        if let Some(state) = self.read().get(&reservation.agent_pk) {
            state
                .conns
                .iter()
                .filter(|c| reservation.route.is_none_or(|r| r == c.route))
                .filter(|c| !reservation.seen.contains(&c.id))
                .for_each(|c| c.recheck.raise());
        }
    }

    /// Whether the agent has a live connection of transport `route` right now.
    pub fn is_connected_by(&self, agent_pk: AgentPk, route: Route) -> bool {
        self.read()
            .get(&agent_pk)
            .is_some_and(|s| s.conns.iter().any(|c| c.route == route))
    }

    /// This node's live connections per agent: their transports and the oldest one's
    /// start (what the other nodes are told).
    pub fn local_connections(&self) -> Vec<(AgentPk, Vec<Route>, Timestamp)> {
        self.read()
            .iter()
            .filter_map(|(agent, s)| {
                let since = s.conns.iter().map(|c| c.since).min()?;
                let mut routes: Vec<Route> = s.conns.iter().map(|c| c.route).collect();
                routes.sort_by_key(|r| r.as_str());
                routes.dedup();
                Some((*agent, routes, since))
            })
            .collect()
    }

    /// Replaces what is known of the other nodes' live connections.
    pub fn set_elsewhere(&self, connections: Vec<(AgentPk, Vec<Route>, Timestamp)>) {
        let mut map: HashMap<AgentPk, (Vec<Route>, Timestamp)> = HashMap::new();
        for (agent, routes, since) in connections {
            let entry = map.entry(agent).or_insert((Vec::new(), since));
            entry.0.extend(routes);
            entry.1 = entry.1.min(since);
        }
        *self.elsewhere.write().unwrap_or_else(|p| p.into_inner()) = map;
    }

    /// Whether another node holds a live connection of the agent (of transport
    /// `route`, when given): an entry committed here reaches it through that node.
    pub fn is_connected_elsewhere(&self, agent_pk: AgentPk, route: Option<Route>) -> bool {
        self.elsewhere
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(&agent_pk)
            .is_some_and(|(routes, _)| route.is_none_or(|r| routes.contains(&r)))
    }

    /// Every agent with a live connection here right now.
    pub fn connected_agents(&self) -> Vec<AgentPk> {
        self.read()
            .iter()
            .filter(|(_, s)| !s.conns.is_empty())
            .map(|(agent, _)| *agent)
            .collect()
    }

    /// Whether the agent has a live connection right now.
    pub fn is_connected(&self, agent_pk: AgentPk) -> bool {
        self.read()
            .get(&agent_pk)
            .is_some_and(|s| !s.conns.is_empty())
    }

    /// Whether and since when the agent is connected, here or on another node.
    pub fn presence(&self, agent_pk: AgentPk) -> Presence {
        let elsewhere = self
            .elsewhere
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(&agent_pk)
            .map(|(_, since)| *since);
        let agents = self.read();
        let (here, last_seen_at) = match agents.get(&agent_pk) {
            Some(state) => (state.conns.iter().map(|c| c.since).min(), state.last_seen),
            None => (None, None),
        };
        let connected_since = match (here, elsewhere) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        Presence {
            connected: connected_since.is_some(),
            connected_since,
            last_seen_at,
        }
    }

    /// The highest sequence number the agent acknowledged.
    pub fn acked(&self, agent_pk: AgentPk) -> i64 {
        self.read().get(&agent_pk).map_or(0, |s| s.acked)
    }

    /// Records an acknowledgement (never moves the cursor back) and activity.
    pub fn ack(&self, agent_pk: AgentPk, seq: i64) {
        let mut agents = self.write();
        let state = agents.entry(agent_pk).or_default();
        if seq > state.acked {
            state.acked = seq;
            state.acked_dirty = true;
        }
        state.last_seen = Some(Timestamp::now());
    }

    /// Notes activity from the agent (a frame arrived).
    pub fn seen(&self, agent_pk: AgentPk) {
        if let Some(state) = self.write().get_mut(&agent_pk) {
            state.last_seen = Some(Timestamp::now());
        }
    }

    /// Acks not yet written to storage: `(agent pk, acked seq, last seen)`; they count as
    /// written from now on (the caller writes them, or puts them back with
    /// [`Hub::unsaved`] if it cannot).
    pub fn take_unsaved(&self) -> Vec<AgentCursor> {
        let mut agents = self.write();
        agents
            .iter_mut()
            .filter(|(_, s)| s.acked_dirty)
            .map(|(pk, s)| {
                s.acked_dirty = false;
                AgentCursor {
                    agent: *pk,
                    acked_seq: s.acked,
                    last_seen_at: s.last_seen,
                }
            })
            .collect()
    }

    /// Marks acks as unsaved again after a failed write.
    pub fn unsaved(&self, cursors: &[AgentCursor]) {
        let mut map = self.write();
        for cursor in cursors {
            if let Some(state) = map.get_mut(&cursor.agent) {
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
mod tests;
