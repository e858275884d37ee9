//! What one credential may hold at once, whoever it is: sessions of each long-lived kind
//! (STOMP connections, MCP sessions, A2A streams), calls the server answers later (an
//! MCP `wait_for_messages`, an A2A blocking `SendMessage`, an MCP `subscriptions/listen`
//! stream), and the bytes its sessions buffer.
//!
//! A held call takes a connection place for as long as it waits, and the connection gate
//! never lets a working connection go: before held calls were counted, one agent token
//! holding 300 `wait_for_messages` calls filled the server's places and `/healthz`
//! answered 503 for 30 s. Every kind is counted here, in one map, whichever transport
//! holds it (`docs/security.md`, "What one caller may cost").
//!
//! A credential is the admin token, a team key or an agent token. Each is held to the
//! same cap per kind (`--ws-max-per-agent`, the WebSocket cap), so no credential — not
//! the admin's, not a team key — can open sessions without end (found: one agent held
//! 300 STOMP connections without a subscription; the team key opened 3,000 MCP sessions
//! in 2 s, 390 MiB of RSS). Bytes buffered for later (STOMP transactions, held until
//! their COMMIT) are bounded per credential, not per connection, so more connections do
//! not buy more memory.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use switchboard_types::ErrorCode;
use switchboard_types::ids::{AgentPk, TeamPk};

use super::Live;
use super::{Caller, Core, CoreError, CoreResult};

/// Bytes one credential's sessions may buffer at once.
pub const MAX_BUFFERED_BYTES: usize = 16 * 1024 * 1024;

/// A long-lived kind of session a credential holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SessionKind {
    /// A STOMP connection (TCP or WebSocket), subscribed or not.
    Stomp,
    /// An MCP session.
    Mcp,
    /// An A2A stream (`SendStreamingMessage`, `SubscribeToTask`).
    A2aStream,
    /// A call answered when something happens or its time is up: MCP
    /// `wait_for_messages` (in a session or not), an MCP `subscriptions/listen` stream,
    /// an A2A blocking `SendMessage`, a claim with `wait_seconds`. The server's own waits (an outside A2A agent's
    /// follow) take none: no client can make more of them.
    Wait,
}

impl SessionKind {
    fn name(self) -> &'static str {
        match self {
            SessionKind::Stomp => "STOMP connections",
            SessionKind::Mcp => "MCP sessions",
            SessionKind::A2aStream => "A2A streams",
            SessionKind::Wait => "waiting calls",
        }
    }
}

/// Who holds: the credential behind a caller (whichever transport it calls by).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Credential {
    Admin,
    Team(TeamPk),
    Agent(AgentPk),
}

impl From<&Caller> for Credential {
    fn from(caller: &Caller) -> Credential {
        match caller {
            Caller::Admin => Credential::Admin,
            Caller::Team { team } => Credential::Team(*team),
            Caller::Agent { agent, .. } => Credential::Agent(*agent),
        }
    }
}

/// The counts. A `std` mutex: held for a map operation, never across `.await`.
#[derive(Default)]
pub(super) struct Sessions {
    held: Mutex<HashMap<(Credential, SessionKind), usize>>,
    buffered: Mutex<HashMap<Credential, usize>>,
}

/// A session's place in its credential's count; dropping it gives the place back, with
/// whatever the session still had buffered.
pub struct SessionHold {
    sessions: Arc<Sessions>,
    holder: Credential,
    kind: SessionKind,
    buffered: usize,
}

fn session_cap_reached(max: usize, kind: SessionKind) -> CoreError {
    CoreError::new(
        ErrorCode::RateLimited,
        format!(
            "this credential already holds {max} {}; close one first",
            kind.name()
        ),
    )
    .with("max", max)
    .suggest("Close a session you no longer use, then try again.")
}

impl Core {
    /// How many sessions of `kind` the credential holds on this node now (an agent's
    /// view shows its MCP sessions and A2A streams).
    pub(super) fn sessions_held(&self, holder: Credential, kind: SessionKind) -> usize {
        let held = self
            .inner
            .sessions
            .held
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        held.get(&(holder, kind)).copied().unwrap_or(0)
    }
}

impl SessionHold {
    /// The hold of a place already counted.
    fn counted(sessions: &Arc<Sessions>, holder: Credential, kind: SessionKind) -> SessionHold {
        SessionHold {
            sessions: sessions.clone(),
            holder,
            kind,
            buffered: 0,
        }
    }

    /// Whose place this is.
    pub fn holder(&self) -> Credential {
        self.holder
    }

    /// Takes `bytes` more of the credential's buffer; `false` (nothing taken) when that
    /// would pass [`MAX_BUFFERED_BYTES`].
    pub fn buffer(&mut self, bytes: usize) -> bool {
        let mut buffered = self
            .sessions
            .buffered
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let total = buffered.entry(self.holder).or_default();
        if total.saturating_add(bytes) > MAX_BUFFERED_BYTES {
            return false;
        }
        *total += bytes;
        self.buffered += bytes;
        true
    }

    /// Gives back `bytes` of what this session buffered (its transaction ended).
    pub fn release(&mut self, bytes: usize) {
        let bytes = bytes.min(self.buffered);
        self.buffered -= bytes;
        let mut buffered = self
            .sessions
            .buffered
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if let Some(total) = buffered.get_mut(&self.holder) {
            *total = total.saturating_sub(bytes);
            if *total == 0 {
                buffered.remove(&self.holder);
            }
        }
    }
}

impl Drop for SessionHold {
    fn drop(&mut self) {
        self.release(self.buffered);
        let mut held = self.sessions.held.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(count) = held.get_mut(&(self.holder, self.kind)) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                held.remove(&(self.holder, self.kind));
            }
        }
    }
}

impl<'a> Live<'a> {
    /// Takes a place for a session of `kind` held by `caller`'s credential, or refuses
    /// (`RATE_LIMITED`) when the credential already holds the cap.
    pub fn hold_session(self, caller: &Caller, kind: SessionKind) -> CoreResult<SessionHold> {
        let max = self.core.inner.session_cap;
        let holder = Credential::from(caller);
        let sessions = &self.core.inner.sessions;
        let mut held = sessions.held.lock().unwrap_or_else(|p| p.into_inner());
        let count = held.entry((holder, kind)).or_default();
        if *count >= max {
            return Err(session_cap_reached(max, kind));
        }
        *count += 1;
        Ok(SessionHold::counted(sessions, holder, kind))
    }

    /// Takes a place for a call that waits (see [`SessionKind::Wait`]) before it waits,
    /// or refuses (`RATE_LIMITED`) at once: a refused call has done nothing yet.
    pub fn hold_wait(self, caller: &Caller) -> CoreResult<SessionHold> {
        let hold = self.hold_session(caller, SessionKind::Wait)?;
        let _ = WAITED.try_with(|waited| waited.set(true));
        Ok(hold)
    }

    /// Refuses (`RATE_LIMITED`) when `caller`'s credential holds the cap of `kind`, and
    /// takes nothing: for a request that may or may not open a session (an MCP POST
    /// without a session id is a stateless call, or an initialize).
    pub fn session_room(self, caller: &Caller, kind: SessionKind) -> CoreResult<()> {
        let max = self.core.inner.session_cap;
        if self.core.sessions_held(Credential::from(caller), kind) >= max {
            return Err(session_cap_reached(max, kind));
        }
        Ok(())
    }
}

tokio::task_local! {
    /// Whether the call being served took a place for a waiting call ([`Live::hold_wait`]).
    static WAITED: std::cell::Cell<bool>;
}

/// Runs a transport's handling of one call, answering with whether it waited for
/// something (a long poll, a claim, a blocking A2A send): how long such a call took is the
/// caller's choice, not the server's speed, so the access log does not call it slow.
pub async fn noting_waits<F: std::future::Future>(call: F) -> (F::Output, bool) {
    WAITED
        .scope(std::cell::Cell::new(false), async move {
            let output = call.await;
            (output, WAITED.with(std::cell::Cell::get))
        })
        .await
}
