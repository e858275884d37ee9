//! Queues over an agent's inbox, for clients that consume it as several named queues
//! (STOMP's `/queue/request/<agent>` and `/queue/response/<agent>`): each queue takes
//! its own subset of the inbox, so each keeps its own cursor. And the team bridge: a
//! team key acting as one of its agents, which is how a Wise Agents deployment, whose
//! agents all share one login, reaches Switchboard.

use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;
use switchboard_types::ids::{AgentId, TeamId};

use switchboard_types::agents::RegisterAgent;
use switchboard_types::ids::{AgentPk, TeamPk};
use switchboard_types::routing::Via;

use super::Queues;
use super::{Caller, Core, CoreError, CoreResult, Need};
use crate::model::QueueCursorRow;

/// The team key met an agent with a token of its own.
fn not_bridged(agent_id: &AgentId) -> CoreError {
    CoreError::forbidden(format!(
        "agent '{agent_id}' has a token of its own: a team bridge acts only for agents it \
         registered or that were registered with stomp_bridge: true"
    ))
    .with("agent_id", agent_id)
    .suggest(
        "Connect that agent with its own token, or register the Wise Agents process's name \
         with stomp_bridge: true (or let the bridge register it).",
    )
}

/// How many agents a team's bridges may have registered by sending to them, still
/// waiting for their first subscription (see [`Core::queue_to_wait_in`]).
pub const MAX_WAITING_QUEUES: usize = 64;

/// One of an agent's named queues over its inbox (STOMP's destinations): each takes its
/// own subset of the inbox and keeps its own cursor, stored under [`QueueName::stored`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum QueueName {
    /// Wise Agents' request queue.
    Request,
    /// Wise Agents' response queue.
    Response,
    /// `/queue/<agent>`: plain messages sent there.
    Plain,
    /// `/topic/<tag>`: publishes of that tag.
    Topic(String),
}

impl QueueName {
    /// The name its cursor is stored under (the one place these names are written).
    pub fn stored(&self) -> String {
        match self {
            QueueName::Request => "request".into(),
            QueueName::Response => "response".into(),
            QueueName::Plain => "plain".into(),
            QueueName::Topic(tag) => format!("topic:{tag}"),
        }
    }

    /// Wise Agents' queues, whose loss makes an agent deaf, by the name presence shows.
    pub fn presence(&self) -> Option<&'static str> {
        match self {
            QueueName::Request => Some("request"),
            QueueName::Response => Some("response"),
            QueueName::Plain | QueueName::Topic(_) => None,
        }
    }

    /// The queue a presence name (as [`Self::presence`] writes it) stands for.
    fn from_presence(name: &str) -> Option<(QueueName, &'static str)> {
        match name {
            "request" => Some((QueueName::Request, "request")),
            "response" => Some((QueueName::Response, "response")),
            _ => None,
        }
    }
}

/// Queue cursors kept in memory and written once a second (with the WebSocket cursors):
/// a cursor moves on every delivered entry, and one write per entry would double the
/// writer's work. A crash loses at most a second of progress: those entries come again.
#[derive(Default)]
pub struct QueueCursors {
    map: Mutex<HashMap<(AgentPk, QueueName), QueueCursor>>,
    /// Live subscriptions per agent and queue, for presence.
    live: Mutex<HashMap<AgentPk, HashMap<&'static str, usize>>>,
}

/// A live subscription to one of an agent's queues, counted for presence until dropped.
pub struct QueueSubscription {
    core: Core,
    agent: AgentPk,
    queue: &'static str,
    /// Ended by the client (UNSUBSCRIBE, DISCONNECT): the agent stopped listening on
    /// purpose, which is not deafness.
    pub clean: bool,
}

impl Drop for QueueSubscription {
    fn drop(&mut self) {
        let cursors = self.core.queue_cursors();
        let mut live = lock(&cursors.live);
        let mut deaf = None;
        if let Some(queues) = live.get_mut(&self.agent) {
            if let Some(count) = queues.get_mut(self.queue) {
                *count = count.saturating_sub(1);
                if *count == 0 {
                    deaf = Some(!self.clean);
                    if self.clean {
                        queues.remove(self.queue);
                    }
                }
            }
            if queues.is_empty() {
                live.remove(&self.agent);
            }
        }
        if let (Some(deaf), Some((queue, _))) = (deaf, QueueName::from_presence(self.queue)) {
            cursors.mark_deaf(self.agent, queue, deaf);
        }
        metrics::gauge!("switchboard_stomp_deaf_agents").set(deaf_count(&live) as f64);
    }
}

/// Agents with a queue they subscribed to and no longer hear.
fn deaf_count(live: &HashMap<AgentPk, HashMap<&'static str, usize>>) -> usize {
    live.values()
        .filter(|queues| queues.values().any(|n| *n == 0))
        .count()
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A panic while holding the lock leaves only plain numbers behind: keep going.
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// Where one queue stands.
#[derive(Debug, Clone, Default)]
struct QueueCursor {
    /// Everything up to here was consumed.
    seq: i64,
    /// Not yet saved.
    dirty: bool,
    /// Entries past `seq` acknowledged one by one (`client-individual`), which a new
    /// subscription skips. Kept in memory only: after a restart they come again.
    beyond: BTreeSet<i64>,
    /// The agent lost this queue's subscription without unsubscribing (saved, so a
    /// restart still knows: the process stays deaf until it is restarted itself).
    deaf: bool,
}

impl QueueCursors {
    /// The cursors, with the queues that were deaf when the server last saved them: a
    /// Wise Agents process that went deaf stays deaf across our restart, and its
    /// presence says so.
    pub fn loaded(deaf: Vec<QueueCursorRow>) -> QueueCursors {
        let cursors = QueueCursors::default();
        {
            let mut live = lock(&cursors.live);
            let mut map = lock(&cursors.map);
            for row in deaf {
                let Some((queue, name)) = QueueName::from_presence(&row.queue) else {
                    continue;
                };
                live.entry(row.agent).or_default().insert(name, 0);
                map.insert(
                    (row.agent, queue),
                    QueueCursor {
                        seq: row.acked_seq,
                        deaf: true,
                        ..QueueCursor::default()
                    },
                );
            }
            metrics::gauge!("switchboard_stomp_deaf_agents").set(deaf_count(&live) as f64);
        }
        cursors
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(AgentPk, QueueName), QueueCursor>> {
        lock(&self.map)
    }

    /// Records whether a queue is deaf, to be saved with the cursors. (Taken after
    /// `live`, never before: one order for the two locks.)
    /// A subscription reads its cursor before it counts, so the entry is there; were it
    /// not, a made-up one would hide the stored cursor.
    fn mark_deaf(&self, agent: AgentPk, queue: QueueName, deaf: bool) {
        let mut map = self.lock();
        if let Some(cursor) = map.get_mut(&(agent, queue))
            && cursor.deaf != deaf
        {
            cursor.deaf = deaf;
            cursor.dirty = true;
        }
    }
}

impl Core {
    /// The agent's queues with a live subscription, and whether it is deaf (it lost the
    /// subscription of a queue without unsubscribing, before or since this server
    /// started, and has not subscribed to it again).
    pub(super) fn queue_presence(&self, agent: AgentPk) -> (Vec<String>, bool) {
        let live = lock(&self.queue_cursors().live);
        let Some(queues) = live.get(&agent) else {
            return (Vec::new(), false);
        };
        let mut heard: Vec<String> = queues
            .iter()
            .filter(|(_, n)| **n > 0)
            .map(|(q, _)| (*q).to_owned())
            .collect();
        heard.sort();
        (heard, queues.values().any(|n| *n == 0))
    }

    /// Writes the queue cursors that moved; on failure they stay marked for next time.
    pub(super) async fn save_queue_cursors(&self) -> CoreResult<()> {
        let (keys, rows): (Vec<(AgentPk, QueueName)>, Vec<QueueCursorRow>) = {
            let mut map = self.queue_cursors().lock();
            map.iter_mut()
                .filter(|(_, cursor)| cursor.dirty)
                .map(|((agent, queue), cursor)| {
                    cursor.dirty = false;
                    let row = QueueCursorRow {
                        agent: *agent,
                        queue: queue.stored(),
                        acked_seq: cursor.seq,
                        deaf: cursor.deaf,
                    };
                    ((*agent, queue.clone()), row)
                })
                .unzip()
        };
        if rows.is_empty() {
            return Ok(());
        }
        let result = self.store().save_queue_cursors(rows).await;
        if result.is_err() {
            let mut map = self.queue_cursors().lock();
            for key in keys {
                if let Some(cursor) = map.get_mut(&key) {
                    cursor.dirty = true;
                }
            }
        }
        Ok(result?)
    }
}

impl<'a> Queues<'a> {
    /// Who a queue client acts as when it consumes `agent_id`'s queues or sends as
    /// `agent_id`. An agent token acts only as its own agent (`team_id` is not asked
    /// for). A team key (`team_id` must be given and be its team) acts as a member the
    /// team's bridge serves (`stomp_bridge`: registered by a bridge, or with the flag) —
    /// never as an agent with a token of its own, whose queues it would consume and whose
    /// name it would send under — and with `register_as` a missing agent is registered
    /// on first use with that role (Wise Agents agents are named by their queues, not
    /// registered beforehand).
    pub async fn act_as(
        self,
        caller: &Caller,
        team_id: Option<&TeamId>,
        agent_id: &AgentId,
        register_as: Option<&str>,
    ) -> CoreResult<Caller> {
        match *caller {
            Caller::Agent { .. } => {
                let (_, me) = self.core.identity().acting_agent(caller)?;
                if me.agent_id == *agent_id {
                    Ok(*caller)
                } else {
                    Err(CoreError::forbidden(format!(
                        "this connection is agent '{}' and cannot act as '{agent_id}'",
                        me.agent_id
                    ))
                    .with("agent_id", agent_id))
                }
            }
            Caller::Team { team } => {
                self.bridged(caller, team, team_id, agent_id, register_as)
                    .await
            }
            Caller::Admin => Err(CoreError::forbidden(
                "the admin token manages teams; connect with an agent token or a team key",
            )),
        }
    }

    /// A team key acting as a member its bridge serves, registered on first use when the
    /// team allows it (see [`Queues::act_as`]).
    async fn bridged(
        self,
        caller: &Caller,
        team: TeamPk,
        team_id: Option<&TeamId>,
        agent_id: &AgentId,
        register_as: Option<&str>,
    ) -> CoreResult<Caller> {
        let Some(team_id) = team_id else {
            return Err(CoreError::forbidden(
                "a team key acts for an agent of a named team: give the team id",
            ));
        };
        let record = self.core.team_for(caller, team_id, Need::Manage)?;
        // Another node may have registered it a moment ago (several nodes): the
        // registry catches up before the agent counts as unknown.
        if self.core.registry().member(team, agent_id).is_none() && self.core.store().shared() {
            self.core
                .registry_current_since(std::time::Instant::now())
                .await;
        }
        if let Some(agent) = self.core.registry().member(team, agent_id) {
            if !agent.stomp_bridge {
                return Err(not_bridged(agent_id));
            }
            return Ok(Caller::Agent {
                team,
                agent: agent.pk,
                via: Via::Stomp,
            });
        }
        let Some(role) = register_as.filter(|_| record.stomp_auto_register) else {
            return Err(CoreError::agent_not_found(agent_id).with(
                "hint",
                "register the agent first, or let the team register agents on first \
                 subscription (PATCH the team: stomp_auto_register = true)",
            ));
        };
        let input = RegisterAgent {
            agent_id: agent_id.clone(),
            role: role.to_owned(),
            capabilities: Vec::new(),
            address: None,
            status: None,
            addresses: None,
            watch: None,
            stomp_bridge: Some(true),
        };
        // Two connections of one agent may race to register it: the loser finds
        // the winner's record.
        let registered = self
            .core
            .register_agent(caller, &record.team_id, input)
            .await;
        match self.core.registry().member(team, agent_id) {
            Some(agent) => Ok(Caller::Agent {
                team,
                agent: agent.pk,
                via: Via::Stomp,
            }),
            None => Err(registered.err().unwrap_or_else(|| {
                CoreError::internal("an agent registered for a bridge is missing")
            })),
        }
    }

    /// The team's key holder, without the key: for the operator's explicit
    /// `--stomp-anonymous-team`, which lets clients without credentials act as a team
    /// bridge (a laptop's convenience; anyone who reaches the port is the team).
    pub fn anonymous_team(self, team_id: &TeamId) -> CoreResult<Caller> {
        match self.core.registry().team_by_id(team_id) {
            Some(team) => Ok(Caller::Team { team: team.pk }),
            None => Err(CoreError::not_found(format!(
                "team '{team_id}' (--stomp-anonymous-team) does not exist"
            ))),
        }
    }

    /// Whether a team key belongs to team `team_id` (a bridge names its team as `login`).
    pub fn team_of_key(self, caller: &Caller, team_id: &TeamId) -> CoreResult<()> {
        self.core
            .team_for(caller, team_id, Need::Manage)
            .map(|_| ())
    }

    /// Makes sure a team bridge's `SEND` to `agent_id` has a queue to wait in, as a
    /// broker's queue would: a name the team does not know yet (its Wise Agents process
    /// has not started, or not subscribed yet) is registered with `role`, when the team
    /// lets bridges register agents, and the message waits in its inbox until the agent
    /// subscribes (kept as long as the team's retention keeps unread messages). At most
    /// [`MAX_WAITING_QUEUES`] such agents of a team may be waiting for a first
    /// subscription on this server at once, so a typo in a loop cannot register agents
    /// without end; past that the `SEND` is refused, naming the bound.
    pub async fn queue_to_wait_in(
        self,
        caller: &Caller,
        team_id: &TeamId,
        agent_id: &AgentId,
        role: &str,
    ) -> CoreResult<()> {
        let record = self.core.team_for(caller, team_id, Need::Manage)?;
        if self.core.registry().member(record.pk, agent_id).is_some() {
            return Ok(());
        }
        // Never subscribed (on this server): no live or deaf queue, and no cursor read —
        // an agent that subscribed once and left cleanly is not waiting for anyone.
        let waiting = {
            let cursors = self.core.queue_cursors();
            let live = lock(&cursors.live);
            let map = cursors.lock();
            let subscribed = |pk: AgentPk| {
                live.contains_key(&pk)
                    || map.contains_key(&(pk, QueueName::Request))
                    || map.contains_key(&(pk, QueueName::Response))
            };
            self.core
                .registry()
                .members(record.pk)
                .iter()
                .filter(|a| a.role == role && !subscribed(a.pk))
                .count()
        };
        if waiting >= MAX_WAITING_QUEUES && record.stomp_auto_register {
            return Err(CoreError::new(
                switchboard_types::ErrorCode::RateLimited,
                format!(
                    "{waiting} agents of team '{team_id}' are waiting for their first \
                 subscription; at most {MAX_WAITING_QUEUES} may (send to agents that have \
                 started, or register them first)"
                ),
            )
            .with("agent_id", agent_id));
        }
        self.act_as(caller, Some(team_id), agent_id, Some(role))
            .await
            .map(|_| ())
    }

    /// The Wise Agents context the team of `agent` hands messages that name none in
    /// (`stomp_default_context`); `None` when it set none.
    pub fn default_context(self, agent: AgentPk) -> Option<String> {
        let agent = self.core.registry().agent(agent)?;
        self.core
            .registry()
            .team(agent.team_pk)?
            .stomp_default_context
            .clone()
    }

    /// Where `queue` of the agent stands: entries up to the number were consumed, and
    /// so were the ones in the set.
    pub async fn queue_cursor(
        self,
        agent: AgentPk,
        queue: &QueueName,
    ) -> CoreResult<(i64, BTreeSet<i64>)> {
        let key = (agent, queue.clone());
        if let Some(cursor) = self.core.queue_cursors().lock().get(&key) {
            return Ok((cursor.seq, cursor.beyond.clone()));
        }
        let stored = self
            .core
            .store()
            .queue_cursor(agent, queue.stored())
            .await?;
        let mut map = self.core.queue_cursors().lock();
        let cursor = map.entry(key).or_insert(QueueCursor {
            seq: stored,
            ..QueueCursor::default()
        });
        Ok((cursor.seq, cursor.beyond.clone()))
    }

    /// Records that `queue` of the agent consumed everything up to `seq` (never back)
    /// and, past it, the entries of `beyond`.
    pub fn queue_consumed(
        self,
        agent: AgentPk,
        queue: &QueueName,
        seq: i64,
        beyond: &BTreeSet<i64>,
    ) {
        let mut map = self.core.queue_cursors().lock();
        let cursor = map.entry((agent, queue.clone())).or_default();
        if seq > cursor.seq {
            cursor.seq = seq;
            cursor.dirty = true;
        }
        let at = cursor.seq;
        cursor.beyond.extend(beyond.iter().copied());
        cursor.beyond.retain(|s| *s > at);
    }

    /// Counts a live subscription to `queue` of the agent until the guard is dropped,
    /// for the queues whose loss makes an agent deaf (`None` for the others).
    pub fn queue_subscribed(self, agent: AgentPk, queue: &QueueName) -> Option<QueueSubscription> {
        let name = queue.presence()?;
        let cursors = self.core.queue_cursors();
        let mut live = lock(&cursors.live);
        *live.entry(agent).or_default().entry(name).or_default() += 1;
        cursors.mark_deaf(agent, queue.clone(), false);
        metrics::gauge!("switchboard_stomp_deaf_agents").set(deaf_count(&live) as f64);
        Some(QueueSubscription {
            core: self.core.clone(),
            agent,
            queue: name,
            clean: false,
        })
    }
}
