//! Whose each MCP session is, and how many one credential may hold.
//!
//! A host that opens a session per conversation and never closes them would otherwise
//! pile them up (each keeps a worker and its buffers until it idles out): every
//! credential — an agent token, a team key, the admin token — holds at most the cap
//! (the team key once opened 3,000). Counted against the SDK's own session table, so
//! sessions that ended by themselves (idle, closed) stop counting at once.
//!
//! And a session is its opener's: a request that names a session id opened by another
//! credential is answered as for an unknown session (404), so a leaked or guessed id
//! cannot be used to read another agent's resource updates, call tools in its session,
//! or end it.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rmcp::transport::streamable_http_server::SessionManager;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;

use crate::core::sessions::{Credential, SessionHold, SessionKind};
use crate::core::{Caller, Core, CoreError};

/// How often sessions that ended inside the SDK (idled out) are let go of here, at most.
const SWEEP_EVERY: Duration = Duration::from_secs(1);

/// Who opened which session. Each session holds its place in the core's count of the
/// credential's sessions (the cap, and the agent's view) until it ends.
pub struct SessionLimit {
    core: Core,
    manager: Arc<LocalSessionManager>,
    owners: Mutex<Owners>,
}

struct Owners {
    by_id: HashMap<String, SessionHold>,
    swept: Instant,
}

impl SessionLimit {
    pub fn new(core: Core, manager: Arc<LocalSessionManager>) -> SessionLimit {
        SessionLimit {
            core,
            manager,
            owners: Mutex::new(Owners {
                by_id: HashMap::new(),
                swept: Instant::now(),
            }),
        }
    }

    /// `RATE_LIMITED` when the caller's credential holds its maximum of sessions (ended
    /// sessions are let go of first); a stateless call that opens none takes no place.
    /// Only an early answer: the count itself is taken when a session opens
    /// ([`Self::opened`]), so many `initialize`s at once cannot all pass this look.
    pub async fn admit(&self, caller: &Caller) -> Result<(), CoreError> {
        self.sweep().await;
        self.core.live().session_room(caller, SessionKind::Mcp)
    }

    /// Lets go of sessions the SDK no longer has, at most once per [`SWEEP_EVERY`]: an
    /// agent's view stops counting a session that idled out within about a second of the
    /// next MCP request.
    pub async fn sweep_if_due(&self) {
        let due = self
            .owners
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .swept
            .elapsed()
            >= crate::ticks::every(SWEEP_EVERY);
        if due {
            self.sweep().await;
        }
    }

    /// Lets go of every session the SDK no longer has.
    pub async fn sweep(&self) {
        let live: HashSet<String> = {
            let sessions = self.manager.sessions.read().await;
            sessions.keys().map(|id| id.to_string()).collect()
        };
        let mut owners = self.owners.lock().unwrap_or_else(|p| p.into_inner());
        owners.by_id.retain(|id, _| live.contains(id));
        owners.swept = Instant::now();
    }

    /// Counts session `id`, which `caller` just opened, until it ends — checked and
    /// counted in one step, so the cap holds however many `initialize`s race (200 at
    /// once opened 60 sessions against a cap of 16 when [`Self::admit`]'s look was the
    /// check). Past the cap the session is closed again and the caller refused.
    pub async fn opened(&self, id: &str, caller: &Caller) -> Result<(), CoreError> {
        match self.core.live().hold_session(caller, SessionKind::Mcp) {
            Ok(place) => {
                let mut owners = self.owners.lock().unwrap_or_else(|p| p.into_inner());
                owners.by_id.insert(id.to_owned(), place);
                Ok(())
            }
            Err(refused) => {
                let _ = self.manager.close_session(&id.into()).await;
                Err(refused)
            }
        }
    }

    /// Whether session `id` may be used by `caller`: it is the caller's, or unknown here
    /// (the SDK answers an unknown session itself).
    pub fn may_use(&self, id: &str, caller: Credential) -> bool {
        let owners = self.owners.lock().unwrap_or_else(|p| p.into_inner());
        owners
            .by_id
            .get(id)
            .is_none_or(|place| place.holder() == caller)
    }
}
