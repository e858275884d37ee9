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

use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use switchboard_types::ErrorCode;

use crate::core::CoreError;
use crate::core::sessions::Credential;

/// Who opened which session, and the bound.
pub struct SessionLimit {
    manager: Arc<LocalSessionManager>,
    owners: Mutex<HashMap<String, Credential>>,
    max_per_credential: usize,
}

impl SessionLimit {
    pub fn new(manager: Arc<LocalSessionManager>, max_per_credential: usize) -> SessionLimit {
        SessionLimit {
            manager,
            owners: Mutex::new(HashMap::new()),
            max_per_credential,
        }
    }

    /// Refuses a new session for `owner` when it holds its maximum (`RATE_LIMITED`).
    pub async fn admit(&self, owner: Credential) -> Result<(), CoreError> {
        let live: HashSet<String> = {
            let sessions = self.manager.sessions.read().await;
            sessions.keys().map(|id| id.to_string()).collect()
        };
        let mut owners = self.owners.lock().unwrap_or_else(|p| p.into_inner());
        owners.retain(|id, _| live.contains(id));
        let held = owners.values().filter(|o| **o == owner).count();
        if held >= self.max_per_credential {
            return Err(CoreError::new(
                ErrorCode::RateLimited,
                format!(
                    "this credential already holds {held} MCP sessions; end one (DELETE /mcp \
                     with its Mcp-Session-Id) or let one idle out"
                ),
            )
            .with("max", self.max_per_credential));
        }
        Ok(())
    }

    /// Records that `owner` opened session `id`.
    pub fn opened(&self, id: &str, owner: Credential) {
        let mut owners = self.owners.lock().unwrap_or_else(|p| p.into_inner());
        owners.insert(id.to_owned(), owner);
    }

    /// Whether session `id` may be used by `caller`: it is the caller's, or unknown here
    /// (the SDK answers an unknown session itself).
    pub fn may_use(&self, id: &str, caller: Credential) -> bool {
        let owners = self.owners.lock().unwrap_or_else(|p| p.into_inner());
        owners.get(id).is_none_or(|owner| *owner == caller)
    }
}
