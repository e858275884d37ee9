//! How many MCP sessions an agent may hold: a host that opens a session per
//! conversation and never closes them would otherwise pile them up (each keeps a
//! worker and its buffers until it idles out). Counted against the SDK's own session
//! table, so sessions that ended by themselves (idle, closed) stop counting at once.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use switchboard_types::ErrorCode;
use switchboard_types::ids::AgentPk;

use crate::core::CoreError;

/// Who opened which session, and the bound.
pub struct SessionLimit {
    manager: Arc<LocalSessionManager>,
    owners: Mutex<HashMap<String, AgentPk>>,
    max_per_agent: usize,
}

impl SessionLimit {
    pub fn new(manager: Arc<LocalSessionManager>, max_per_agent: usize) -> SessionLimit {
        SessionLimit {
            manager,
            owners: Mutex::new(HashMap::new()),
            max_per_agent,
        }
    }

    /// Refuses a new session for `agent` when it holds its maximum (`RATE_LIMITED`).
    pub async fn admit(&self, agent: AgentPk) -> Result<(), CoreError> {
        let live: HashSet<String> = {
            let sessions = self.manager.sessions.read().await;
            sessions.keys().map(|id| id.to_string()).collect()
        };
        let mut owners = self.owners.lock().unwrap_or_else(|p| p.into_inner());
        owners.retain(|id, _| live.contains(id));
        let held = owners.values().filter(|owner| **owner == agent).count();
        if held >= self.max_per_agent {
            return Err(CoreError::new(
                ErrorCode::RateLimited,
                format!(
                    "this agent already holds {held} MCP sessions; end one (DELETE /mcp with \
                     its Mcp-Session-Id) or let one idle out"
                ),
            )
            .with("max", self.max_per_agent));
        }
        Ok(())
    }

    /// Records that `agent` opened session `id`.
    pub fn opened(&self, id: &str, agent: AgentPk) {
        let mut owners = self.owners.lock().unwrap_or_else(|p| p.into_inner());
        owners.insert(id.to_owned(), agent);
    }
}
