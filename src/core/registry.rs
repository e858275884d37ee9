//! The registry: teams, agents and their credentials, held in memory.
//!
//! Every request needs its caller and usually some team members (recipients, senders'
//! roles, capability matches). Asking SQLite each time would put several queries on
//! every hot path, so the registry keeps the whole set in memory. The database stays the
//! source of truth: the registry is filled from it at start-up and changed only by
//! after-commit hooks of the writer, which run in commit order, so the registry never
//! shows something that is not committed and never reorders changes.
//!
//! The lock is a `std::sync::RwLock`: reads are many, writes rare, every critical section
//! is a few map operations, and it is never held across an `.await`.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};
use switchboard_types::ids::{AgentId, TeamId};

use switchboard_types::ids::{AgentPk, TeamPk};

use super::auth::{self, Caller, SecretHash, TokenKind, Via};
use crate::model::{AgentRecord, TeamRecord};

/// A map keyed by the server's own numbers (never by what a client sends): hashed with
/// foldhash, not SipHash — several lookups on every request, and no attacker can choose
/// these keys to collide them. Maps keyed by client strings (tokens, ids) keep SipHash.
type ByPk<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

#[derive(Default)]
struct Inner {
    admin_hash: Option<SecretHash>,
    teams: ByPk<TeamPk, Arc<TeamRecord>>,
    team_by_id: HashMap<TeamId, TeamPk>,
    team_by_key: HashMap<String, TeamPk>,
    agents: ByPk<AgentPk, Arc<AgentRecord>>,
    /// Current members of each team, by agent id (sorted, for stable listings).
    members: ByPk<TeamPk, BTreeMap<AgentId, AgentPk>>,
    agent_by_token: HashMap<String, AgentPk>,
    /// Every agent ever registered in each team (removed ones too), by agent id: filters
    /// on senders must find old messages of removed agents.
    all_by_id: ByPk<TeamPk, HashMap<AgentId, AgentPk>>,
    /// Counts the changes this node made itself (`put_team`, `put_agent`), and when each
    /// record was last so changed: a registry read from the database that began before a
    /// local change must not put the older row back (`put_*_loaded`).
    generation: u64,
    changed_at: ByPk<RecordKey, u64>,
}

/// A registry record, for [`Inner::changed_at`].
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
enum RecordKey {
    Team(TeamPk),
    Agent(AgentPk),
}

/// See the module documentation.
#[derive(Default)]
pub struct Registry {
    inner: RwLock<Inner>,
}

impl Registry {
    fn read(&self) -> RwLockReadGuard<'_, Inner> {
        // A poisoned lock means a panic while the maps were being changed; the maps are
        // still structurally sound (each change is a few inserts), so keep serving.
        self.inner.read().unwrap_or_else(|p| p.into_inner())
    }

    fn write(&self) -> RwLockWriteGuard<'_, Inner> {
        self.inner.write().unwrap_or_else(|p| p.into_inner())
    }

    pub fn set_admin_hash(&self, hash: SecretHash) {
        self.write().admin_hash = Some(hash);
    }

    /// Decides who presents `token`; `None` for anything not currently valid.
    pub fn authenticate(&self, token: &str) -> Option<Caller> {
        let inner = self.read();
        match auth::parse(token) {
            Some(parsed) if parsed.kind == TokenKind::Team => {
                let team = inner.teams.get(inner.team_by_key.get(parsed.id)?)?;
                auth::verify(parsed.secret, &team.key_hash)
                    .then_some(Caller::Team { team: team.pk })
            }
            Some(parsed) if parsed.kind == TokenKind::Agent => {
                let agent = inner.agents.get(inner.agent_by_token.get(parsed.id)?)?;
                let hash = agent.token_hash.as_ref()?;
                auth::verify(parsed.secret, hash).then_some(Caller::Agent {
                    team: agent.team_pk,
                    agent: agent.pk,
                    via: Via::Rest,
                })
            }
            // The admin token may be any string the operator chose, so it is checked
            // whole against its digest.
            _ => {
                let hash = inner.admin_hash.as_ref()?;
                auth::verify(token, hash).then_some(Caller::Admin)
            }
        }
    }

    pub fn team(&self, pk: TeamPk) -> Option<Arc<TeamRecord>> {
        self.read().teams.get(&pk).cloned()
    }

    /// Every team (for passes that visit each, such as retention).
    pub fn teams(&self) -> Vec<Arc<TeamRecord>> {
        self.read().teams.values().cloned().collect()
    }

    pub fn team_by_id(&self, team_id: &TeamId) -> Option<Arc<TeamRecord>> {
        let inner = self.read();
        inner.teams.get(inner.team_by_id.get(team_id)?).cloned()
    }

    /// Any agent ever registered (including removed ones).
    pub fn agent(&self, pk: AgentPk) -> Option<Arc<AgentRecord>> {
        self.read().agents.get(&pk).cloned()
    }

    /// A current member of the team by agent id.
    pub fn member(&self, team_pk: TeamPk, agent_id: &AgentId) -> Option<Arc<AgentRecord>> {
        let inner = self.read();
        let pk = inner.members.get(&team_pk)?.get(agent_id)?;
        inner.agents.get(pk).cloned()
    }

    /// All current members of a team, ordered by agent id.
    pub fn members(&self, team_pk: TeamPk) -> Vec<Arc<AgentRecord>> {
        let inner = self.read();
        inner
            .members
            .get(&team_pk)
            .map(|m| {
                m.values()
                    .filter_map(|pk| inner.agents.get(pk).cloned())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The `pk` of an agent id in a team, removed agents included.
    pub fn agent_pk_by_id(&self, team_pk: TeamPk, agent_id: &AgentId) -> Option<AgentPk> {
        self.read().all_by_id.get(&team_pk)?.get(agent_id).copied()
    }

    pub fn member_count(&self, team_pk: TeamPk) -> usize {
        self.read().members.get(&team_pk).map_or(0, BTreeMap::len)
    }

    /// Adds or replaces a team (after its write committed).
    /// Where local changes stand: taken before a registry read from the database.
    pub fn generation(&self) -> u64 {
        self.read().generation
    }

    /// Puts a team read from the database by a read that began at `since`
    /// ([`Registry::generation`]); `false` (and nothing changed) when this node changed
    /// the team itself after that: the row read may be older than what it holds.
    pub fn put_team_loaded(&self, team: TeamRecord, since: u64) -> bool {
        let key = RecordKey::Team(team.pk);
        if self
            .read()
            .changed_at
            .get(&key)
            .is_some_and(|at| *at > since)
        {
            return false;
        }
        self.put_team_as(team, None);
        true
    }

    /// As [`Registry::put_team_loaded`], for an agent. A removed agent is never made a
    /// member again (a removal is final: an id registered again is a new agent), whatever
    /// order reads and changes arrive in.
    pub fn put_agent_loaded(&self, agent: AgentRecord, since: u64) -> bool {
        let key = RecordKey::Agent(agent.pk);
        {
            let inner = self.read();
            if inner.changed_at.get(&key).is_some_and(|at| *at > since) {
                return false;
            }
            if agent.is_member() && inner.agents.get(&agent.pk).is_some_and(|a| !a.is_member()) {
                return true;
            }
        }
        self.put_agent_as(agent, None);
        true
    }

    /// Adds or replaces a team after this node's own write committed.
    pub fn put_team(&self, team: TeamRecord) {
        let key = RecordKey::Team(team.pk);
        self.put_team_as(team, Some(key));
    }

    fn put_team_as(&self, team: TeamRecord, local: Option<RecordKey>) {
        let mut inner = self.write();
        if let Some(key) = local {
            inner.generation += 1;
            let at = inner.generation;
            inner.changed_at.insert(key, at);
        }
        // A rotated key's id leaves the lookup (its secret no longer verifies anyway).
        if let Some(old) = inner.teams.get(&team.pk).cloned()
            && old.key_id != team.key_id
        {
            inner.team_by_key.remove(&old.key_id);
        }
        inner.team_by_id.insert(team.team_id.clone(), team.pk);
        inner.team_by_key.insert(team.key_id.clone(), team.pk);
        inner.members.entry(team.pk).or_default();
        inner.teams.insert(team.pk, Arc::new(team));
    }

    /// Adds or replaces an agent (after its write committed), keeping membership and
    /// token lookup in step: a removed agent leaves both.
    pub fn put_agent(&self, agent: AgentRecord) {
        let key = RecordKey::Agent(agent.pk);
        self.put_agent_as(agent, Some(key));
    }

    fn put_agent_as(&self, agent: AgentRecord, local: Option<RecordKey>) {
        let mut inner = self.write();
        if let Some(key) = local {
            inner.generation += 1;
            let at = inner.generation;
            inner.changed_at.insert(key, at);
        }
        if let Some(old) = inner.agents.get(&agent.pk).cloned()
            && let Some(token_id) = &old.token_id
        {
            inner.agent_by_token.remove(token_id);
        }
        let members = inner.members.entry(agent.team_pk).or_default();
        if agent.is_member() {
            members.insert(agent.agent_id.clone(), agent.pk);
        } else {
            members.remove(&agent.agent_id);
        }
        if let Some(token_id) = &agent.token_id {
            inner.agent_by_token.insert(token_id.clone(), agent.pk);
        }
        inner
            .all_by_id
            .entry(agent.team_pk)
            .or_default()
            .insert(agent.agent_id.clone(), agent.pk);
        inner.agents.insert(agent.pk, Arc::new(agent));
    }
}

#[cfg(test)]
mod tests {
    use switchboard_types::agents::AgentStatus;
    use switchboard_types::ids::{AgentPk, TeamPk};
    use switchboard_types::time::Timestamp;

    use super::Registry;
    use crate::model::AgentRecord;

    fn agent(role: &str, removed: bool) -> AgentRecord {
        AgentRecord {
            pk: AgentPk(7),
            team_pk: TeamPk(1),
            agent_id: "a".into(),
            role: role.into(),
            capabilities: Vec::new(),
            address: None,
            status: AgentStatus::Available,
            communication_enabled: true,
            token_id: Some("tok".into()),
            token_hash: None,
            registered_at: Timestamp::from_micros(1),
            updated_at: Timestamp::from_micros(1),
            removed_at: removed.then(|| Timestamp::from_micros(2)),
            addresses: None,
            watch: Vec::new(),
            stomp_bridge: false,
        }
    }

    /// A read from the database that began before this node's own change does not put
    /// the older row back (the checker's stale "yes": a removed token accepted again).
    #[test]
    fn an_older_read_never_undoes_a_newer_change() {
        let registry = Registry::default();
        registry.put_agent(agent("first", false));
        let since = registry.generation();
        registry.put_agent(agent("changed here", false));
        assert!(!registry.put_agent_loaded(agent("first", false), since));
        let held = registry.agent(AgentPk(7)).expect("held");
        assert_eq!(held.role, "changed here");
        // A read begun after the change applies.
        let since = registry.generation();
        assert!(registry.put_agent_loaded(agent("from elsewhere", false), since));
        assert_eq!(
            registry.agent(AgentPk(7)).expect("held").role,
            "from elsewhere"
        );
    }

    /// A removal is final: no read, however late, makes the agent a member again.
    #[test]
    fn a_removed_agent_stays_removed() {
        let registry = Registry::default();
        registry.put_agent(agent("r", false));
        let since = registry.generation();
        assert!(registry.put_agent_loaded(agent("r", true), since));
        assert!(registry.put_agent_loaded(agent("r", false), since));
        assert!(!registry.agent(AgentPk(7)).expect("held").is_member());
        assert!(registry.member(TeamPk(1), &"a".into()).is_none());
    }
}
