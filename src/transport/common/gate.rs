//! How many sockets the server holds at once, and which it lets go when it is full.
//!
//! Every accepted socket — HTTP (and what upgrades from it: WebSocket, STOMP over
//! WebSocket, SSE streams) and STOMP over TCP — takes a [`Ticket`] from one [`Gate`]
//! before anything is read from it. The gate's size is kept below the process's
//! file-descriptor limit (`server::limits`), so the server never runs out of descriptors
//! for its database, its own outgoing calls or a fresh connection: with descriptors gone,
//! accept fails, `/healthz` stops answering and the log fills (found by an attacker who
//! held 19,960 idle connections).
//!
//! When the gate is full, a new socket is not simply refused: the server lets go of an
//! *idle* connection to admit it — one that is between requests or has not finished a
//! request head, which costs its peer nothing to reopen — oldest first. Connections in
//! the middle of a request, streaming an answer, upgraded to a WebSocket or
//! authenticated as a STOMP session are never let go this way (they are bounded by the
//! per-credential caps and timeouts instead). Only when nothing is idle is the new socket
//! refused. So a flood of idle sockets cannot keep a fresh client out, and a flood of
//! busy ones ends with their timeouts (`docs/security.md`, "Limits").

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};

use tokio_util::sync::CancellationToken;

/// How many of the oldest candidates are looked at to find an idle one: the search stays
/// cheap under a flood, and the oldest are the likeliest to be idle.
const SHED_SCAN: usize = 64;

/// The server's connection budget, shared by every listener.
#[derive(Clone)]
pub struct Gate {
    inner: Arc<Inner>,
}

struct Inner {
    max: usize,
    open: AtomicUsize,
    next_id: AtomicU64,
    /// Connections that may be let go (not pinned), by age. A `std` mutex: held for a
    /// map operation or a short scan, never across `.await`.
    candidates: Mutex<BTreeMap<u64, Weak<Slot>>>,
    shed: metrics::Counter,
    refused: metrics::Counter,
}

/// One admitted socket's state, as the gate sees it.
pub struct Slot {
    id: u64,
    /// Requests in progress (their answer not yet written to the end).
    busy: AtomicU32,
    /// Never let go by the gate (an upgraded or authenticated long-lived session).
    pinned: AtomicBool,
    /// Cancelled when the gate lets the connection go.
    close: CancellationToken,
    gate: Weak<Inner>,
}

/// An admitted socket's place in the gate; dropping it frees the place.
pub struct Ticket {
    slot: Arc<Slot>,
    gate: Arc<Inner>,
}

impl Gate {
    /// A gate for at most `max` sockets.
    pub fn new(max: usize) -> Gate {
        Gate {
            inner: Arc::new(Inner {
                max: max.max(1),
                open: AtomicUsize::new(0),
                next_id: AtomicU64::new(0),
                candidates: Mutex::new(BTreeMap::new()),
                shed: metrics::counter!("switchboard_connections_shed_total"),
                refused: metrics::counter!("switchboard_connections_refused_total"),
            }),
        }
    }

    /// The most sockets held at once.
    pub fn max(&self) -> usize {
        self.inner.max
    }

    /// A place for a new socket: free, or made by letting an idle connection go. `None`
    /// when the gate is full of connections that are all at work: refuse the socket.
    pub fn admit(&self) -> Option<Ticket> {
        let inner = &self.inner;
        let open = inner.open.fetch_add(1, Ordering::AcqRel);
        if open >= inner.max && !inner.shed_one() {
            inner.open.fetch_sub(1, Ordering::AcqRel);
            inner.refused.increment(1);
            return None;
        }
        let slot = Arc::new(Slot {
            id: inner.next_id.fetch_add(1, Ordering::Relaxed),
            busy: AtomicU32::new(0),
            pinned: AtomicBool::new(false),
            close: CancellationToken::new(),
            gate: Arc::downgrade(inner),
        });
        inner
            .candidates
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(slot.id, Arc::downgrade(&slot));
        Some(Ticket {
            slot,
            gate: inner.clone(),
        })
    }

    /// Sockets held now.
    pub fn open(&self) -> usize {
        self.inner.open.load(Ordering::Acquire)
    }
}

impl Inner {
    /// Lets the oldest idle connection go; whether one was found.
    fn shed_one(&self) -> bool {
        let mut candidates = self.candidates.lock().unwrap_or_else(|p| p.into_inner());
        let mut gone = Vec::new();
        let mut chosen = None;
        for (id, slot) in candidates.iter().take(SHED_SCAN) {
            match slot.upgrade() {
                None => gone.push(*id),
                Some(slot) if slot.is_idle() => {
                    chosen = Some((*id, slot));
                    break;
                }
                Some(_) => {}
            }
        }
        for id in gone {
            candidates.remove(&id);
        }
        let Some((id, slot)) = chosen else {
            return false;
        };
        candidates.remove(&id);
        drop(candidates);
        slot.close.cancel();
        self.shed.increment(1);
        true
    }
}

impl Slot {
    /// Marks a request in progress until the guard is dropped (when its answer has been
    /// written to the end, or abandoned).
    pub fn begin(self: &Arc<Self>) -> Busy {
        self.busy.fetch_add(1, Ordering::AcqRel);
        Busy(self.clone())
    }

    /// Counts the request in progress as not at work until the guard is dropped: its
    /// answer is decided and only its peer keeps it (a refused request whose unread body
    /// is drained), so a full gate may let the connection go for a newer one. Called
    /// only within a request that [`Slot::begin`] counted.
    pub fn rest(self: &Arc<Self>) -> Resting {
        self.busy.fetch_sub(1, Ordering::AcqRel);
        Resting(self.clone())
    }

    fn is_idle(&self) -> bool {
        !self.pinned.load(Ordering::Acquire) && self.busy.load(Ordering::Acquire) == 0
    }

    /// Keeps the connection out of the gate's reach for good (and out of its list of
    /// candidates): it became a long-lived session bounded by other rules.
    pub fn pin(&self) {
        if self.pinned.swap(true, Ordering::AcqRel) {
            return;
        }
        if let Some(gate) = self.gate.upgrade() {
            gate.candidates
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(&self.id);
        }
    }

    /// Resolves when the gate lets this connection go.
    pub async fn shed(&self) {
        self.close.cancelled().await;
    }
}

tokio::task_local! {
    /// The connection the request being served came on, for the code that changes how
    /// the gate sees it (a refused request draining its body rests; a STOMP WebSocket is
    /// pinned only once it connected). A task-local rather than a request extension: an
    /// extension costs an allocation on every request for the few that need it.
    static PLACE: Arc<Slot>;
}

/// Serves `request` (a future) with `slot` as its connection's place ([`place`]).
pub fn on_place<F: Future>(slot: Arc<Slot>, request: F) -> impl Future<Output = F::Output> {
    PLACE.scope(slot, request)
}

/// The place of the connection the current request came on; `None` outside a request
/// the listener serves.
pub fn place() -> Option<Arc<Slot>> {
    PLACE.try_with(Arc::clone).ok()
}

/// A response extension: the upgrade this answers is not pinned by the listener; the
/// session it starts pins it once authenticated (STOMP over WebSocket: at `CONNECT`).
#[derive(Clone, Copy)]
pub struct PinLater;

/// A request in progress on a connection (see [`Slot::begin`]).
pub struct Busy(Arc<Slot>);

/// A request whose answer is decided but that waits on its peer (see [`Slot::rest`]).
pub struct Resting(Arc<Slot>);

impl Drop for Resting {
    fn drop(&mut self) {
        self.0.busy.fetch_add(1, Ordering::AcqRel);
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.busy.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Ticket {
    /// The socket's state, for the code that serves it.
    pub fn slot(&self) -> &Arc<Slot> {
        &self.slot
    }

    /// Keeps the connection out of the gate's reach (see [`Slot::pin`]).
    pub fn pin(&self) {
        self.slot.pin();
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        self.gate.open.fetch_sub(1, Ordering::AcqRel);
        self.gate
            .candidates
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&self.slot.id);
    }
}

#[cfg(test)]
mod tests {
    use super::Gate;

    /// Full of idle connections, the gate lets the oldest go for a newcomer; full of
    /// busy or pinned ones, it refuses; a place freed is a place again.
    #[test]
    fn a_full_gate_lets_the_oldest_idle_go_and_refuses_when_all_work() {
        let gate = Gate::new(3);
        let first = gate.admit().expect("room");
        let second = gate.admit().expect("room");
        let third = gate.admit().expect("room");
        let busy = second.slot().begin();
        third.pin();
        let fourth = gate.admit().expect("the idle first is let go");
        assert!(first.slot().close.is_cancelled());
        assert!(!second.slot().close.is_cancelled());
        drop(first);
        let _fourth_busy = fourth.slot().begin();
        assert!(gate.admit().is_none(), "everyone works: refused");
        drop(busy);
        let fifth = gate.admit().expect("second is idle again");
        assert!(second.slot().close.is_cancelled());
        drop((second, fifth));
        assert!(gate.admit().is_some(), "a freed place");
        assert_eq!(gate.open(), 2);
    }
}
