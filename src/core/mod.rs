//! The core: every rule of Switchboard, independent of any transport.
//!
//! Every transport hands an [`Operation`](switchboard_types::Operation) and the
//! [`Caller`] its token decided to [`Core::dispatch`], and gets the answer or a
//! [`CoreError`] carrying the contract's error code: the same input gets the same answer
//! on every transport. One file per resource holds its operations; no axum or sqlx type
//! appears in this API, and storage is reached only through [`Store`]'s typed methods.

pub mod activity;
mod agents;
mod approval_events;
pub mod approvals;
pub mod ask;
mod assistance;
pub mod auth;
mod broadcasts;
mod budgets;
pub mod cursor;
mod delivery;
mod dispatch;
pub mod egress;
pub mod error;
pub mod feed;
mod fence;
mod health;
pub mod holds;
mod ids;
mod inbox;
mod lease_events;
pub mod leases;
pub mod live;
mod loops;
mod messages;
mod metrics;
pub mod node;
mod other_nodes;
mod publish;
pub mod queues;
pub mod ratelimit;
pub mod registry;
pub mod remotes;
mod responses;
pub mod retention;
mod search;
pub mod sessions;
pub mod spans;
pub mod tasks;
mod teams;
pub mod trace;
mod traffic;
pub mod waiting;

pub use inbox::ReplayPage;

use std::sync::Arc;
use switchboard_types::ids::{AgentId, TeamId};

pub use auth::Caller;
pub use error::{CoreError, CoreResult};
use registry::Registry;
use switchboard_types::ids::AgentPk;

use crate::hub::{AgentCursor, Hub, HubSettings};
use crate::model::{AgentRecord, TeamRecord};
use crate::store::{Store, StoreError};

/// Handle to the core; cheap to clone (an `Arc`).
#[derive(Clone)]
pub struct Core {
    inner: Arc<Inner>,
}

struct Inner {
    store: Store,
    registry: Registry,
    rate_limiter: ratelimit::RateLimiter,
    /// Chains the loop guard stopped and budgets spent, reported lately (`loops`).
    loop_reports: loops::LoopReports,
    /// The operator's budget ceilings (`--budget`).
    budget_ceiling: switchboard_types::budgets::Budgets,
    /// Where spans go when they are exported (`--otlp-endpoint`).
    spans: Option<spans::SpanSink>,
    hub: Arc<Hub>,
    tasks: tasks::TaskRuntime,
    retention: retention::RetentionSettings,
    activity: activity::ActivityWatch,
    queue_cursors: queues::QueueCursors,
    node_id: node::NodeId,
    health: health::StorageHealth,
    /// Long-lived sessions each credential holds, and what they buffer (`sessions`).
    sessions: Arc<sessions::Sessions>,
    /// Sessions of one kind a credential may hold (the hub's per-agent cap).
    session_cap: usize,
    /// When the newest registry reload asked for by a miss started (several nodes; see
    /// `other_nodes::registry_current_since`): one at a time, and none again for requests
    /// that arrived before it started.
    registry_reload: tokio::sync::Mutex<Option<std::time::Instant>>,
    /// The registry epoch held and when it was last confirmed current (`fence`).
    fence: fence::Fence,
    /// Registry reads from the database run one at a time (`other_nodes`).
    reloading: tokio::sync::Mutex<()>,
    /// Woken when an approval of this node is decided or expires (`approvals`).
    approvals: tokio::sync::Notify,
    /// Searches reading at once (`search`): the rest wait their turn.
    searches: tokio::sync::Semaphore,
}

/// Settings of the core.
#[derive(Debug, Clone)]
pub struct CoreSettings {
    /// The operator's admin token; see [`Core::open`].
    pub admin_token: Option<String>,
    /// Limit on sending operations per agent; none when `None`.
    pub rate_limit: Option<ratelimit::RateLimit>,
    pub hub: HubSettings,
    pub tasks: tasks::TaskSettings,
    pub retention: retention::RetentionSettings,
    /// This process's name among the nodes (`--node-id`).
    pub node_id: node::NodeId,
    /// The operator's budget ceilings; a team may set lower ones.
    pub budgets: switchboard_types::budgets::Budgets,
    /// Where finished spans go (`--otlp-endpoint`); none: no span is built.
    pub spans: Option<spans::SpanSink>,
}

/// What the caller needs on a team for an operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Need {
    /// See the team and its members: any member agent, the team key, the admin.
    Read,
    /// Change the team or its membership: the team key or the admin.
    Manage,
}

/// The core's services: what a transport needs besides [`Core::dispatch`], grouped by
/// the state it acts on, so the entry type stays small and a new feature lands in its own
/// service rather than as one more method of the core. Each is a borrowed view (free to
/// make); the list, with why each is not an operation, is in `docs/architecture.md`,
/// checked by `tests/it/layout.rs`.
macro_rules! services {
    ($($(#[$doc:meta])* $name:ident by $accessor:ident;)*) => {
        $(
            $(#[$doc])*
            #[derive(Clone, Copy)]
            pub struct $name<'a> {
                core: &'a Core,
            }
        )*

        impl Core {
            $(
                #[doc = concat!("The [`", stringify!($name), "`] service.")]
                pub fn $accessor(&self) -> $name<'_> {
                    $name { core: self }
                }
            )*
        }
    };
}

services! {
    /// Who a request runs as: tokens to callers, a caller to its agent and team. They
    /// decide the `Caller` an operation runs as, so they come before any operation.
    Identity by identity;
    /// Live delivery: connections, the one live feed, sessions and their caps, waits.
    /// They hand out a stream over time or act on what a transport holds open, not one
    /// answer.
    Live by live;
    /// STOMP's queues and its team bridge: a queue's cursor and presence live with the
    /// subscription, and the bridge decides whom a queue client acts as.
    Queues by queues;
    /// Outside agents (A2A out): the server acting for an agent that lives elsewhere.
    Remotes by remotes;
    /// The callback sender's side: the server's own worker (`src/callbacks.rs`) takes due
    /// deliveries and records attempts; no client asks for these.
    Callbacks by callbacks;
    /// What A2A adds to tasks: push configs (its own resource), a submission followed on
    /// its stream, a task's changes followed or awaited.
    Tasks by tasks;
    /// The process among the nodes: its name, liveness and readiness, retention passes.
    Node by node;
    /// What agents hold for a while — leases on resources, claims on tasks offered to a
    /// role: the server's own sweep of those that ended, and the give-back of a removed
    /// agent's (taking and giving back themselves go through `dispatch`).
    Holds by holds;
}

impl Core {
    /// Loads the registry from storage and settles the admin token.
    ///
    /// `admin_token` is the operator's choice (flag or env); without one, the token stored
    /// from an earlier start is kept, and on the very first start a new one is generated.
    /// Returns the core and what was settled ([`auth::AdminToken`]), so that a generated
    /// token can be shown once (only its digest is stored) and a kept one named.
    pub async fn open(
        store: Store,
        settings: CoreSettings,
    ) -> Result<(Core, auth::AdminToken), StoreError> {
        store.set_node(settings.node_id.as_str());
        let registry = Registry::default();
        let (admin_hash, admin_token) =
            auth::settle_admin_token(&store, settings.admin_token.as_deref()).await?;
        registry.set_admin_hash(admin_hash);
        // Read before the registry, recorded after it (several nodes: `fence`): until a
        // node records an epoch, a change elsewhere waits for it to read the registry.
        let epoch = store.registry_epoch().await?;
        for team in store.load_teams().await? {
            registry.put_team(team);
        }
        for agent in store.load_agents().await? {
            registry.put_agent(agent);
        }
        let cursors = store
            .load_presence()
            .await?
            .into_iter()
            .map(|p| AgentCursor {
                agent: p.agent,
                acked_seq: p.acked_seq,
                last_seen_at: p.last_seen_at,
            })
            .collect();
        let hub = Hub::new(settings.hub, cursors);
        let deaf_queues = store.deaf_queues().await?;
        budgets::export_metrics();
        let open_tasks = store.open_task_counts().await?;
        let core = Core {
            inner: Arc::new(Inner {
                store,
                registry,
                rate_limiter: ratelimit::RateLimiter::new(settings.rate_limit),
                loop_reports: loops::LoopReports::new(),
                budget_ceiling: settings.budgets,
                spans: settings.spans,
                hub,
                tasks: tasks::TaskRuntime::new(settings.tasks, open_tasks),
                retention: settings.retention,
                activity: activity::ActivityWatch::default(),
                queue_cursors: queues::QueueCursors::loaded(deaf_queues),
                node_id: settings.node_id,
                health: health::StorageHealth::default(),
                sessions: Arc::default(),
                session_cap: settings.hub.max_per_agent,
                registry_reload: tokio::sync::Mutex::new(None),
                fence: fence::Fence::default(),
                reloading: tokio::sync::Mutex::new(()),
                approvals: tokio::sync::Notify::new(),
                searches: tokio::sync::Semaphore::new(search::AT_ONCE),
            }),
        };
        store_epoch(&core, epoch).await?;
        core.follow_other_nodes();
        core.watch_storage();
        Ok((core, admin_token))
    }

    fn store(&self) -> &Store {
        &self.inner.store
    }

    fn registry(&self) -> &Registry {
        &self.inner.registry
    }

    fn activity(&self) -> &activity::ActivityWatch {
        &self.inner.activity
    }

    fn queue_cursors(&self) -> &queues::QueueCursors {
        &self.inner.queue_cursors
    }

    fn hub(&self) -> &Arc<Hub> {
        &self.inner.hub
    }

    /// Resolves the team named in a path and checks the caller's rights on it.
    ///
    /// A caller bound to another team gets `FORBIDDEN` whether or not the named team
    /// exists, so tokens cannot be used to discover other teams.
    fn team_for(
        &self,
        caller: &Caller,
        team_id: &TeamId,
        need: Need,
    ) -> CoreResult<Arc<TeamRecord>> {
        let own = match caller {
            Caller::Admin => None,
            Caller::Team { team } | Caller::Agent { team, .. } => Some(*team),
        };
        let team = self.registry().team_by_id(team_id);
        match (own, team) {
            (None, Some(team)) => Ok(team),
            (None, None) => Err(
                CoreError::not_found(format!("team '{team_id}' does not exist"))
                    .with("team_id", team_id),
            ),
            (Some(own), Some(team)) if team.pk == own => {
                if need == Need::Manage && matches!(caller, Caller::Agent { .. }) {
                    Err(CoreError::forbidden(
                        "this operation needs the team key; an agent token cannot do it",
                    ))
                } else {
                    Ok(team)
                }
            }
            (Some(_), _) => Err(CoreError::forbidden(format!(
                "your token does not belong to team '{team_id}'"
            ))),
        }
    }

    /// Who reads a team's messages and tasks: its key, which sees every one of them (no
    /// agent), or an agent, which sees those it takes part in. Anyone else is refused as
    /// by [`Core::acting_agent`].
    fn reader(&self, caller: &Caller) -> CoreResult<(Arc<TeamRecord>, Option<Arc<AgentRecord>>)> {
        if let Caller::Team { team } = *caller {
            let team = self.registry().team(team).ok_or_else(auth::invalid_token)?;
            return Ok((team, None));
        }
        let (team, me) = self.identity().acting_agent(caller)?;
        Ok((team, Some(me)))
    }

    /// A current member of `team` by id, or `AGENT_NOT_FOUND`.
    fn member_of(&self, team: &TeamRecord, agent_id: &AgentId) -> CoreResult<Arc<AgentRecord>> {
        self.registry()
            .member(team.pk, agent_id)
            .ok_or_else(|| CoreError::agent_not_found(agent_id))
    }

    /// The agent id of any agent ever registered (removed ones too).
    fn agent_name(&self, pk: AgentPk) -> AgentId {
        self.registry().agent(pk).map_or_else(
            || AgentId::from(format!("agent#{pk}")),
            |a| a.agent_id.clone(),
        )
    }
}

/// Records the registry epoch a node read at its start: the registry it holds is that
/// epoch's or newer (PostgreSQL; nothing on SQLite).
async fn store_epoch(core: &Core, epoch: i64) -> Result<(), StoreError> {
    if core.store().shared() {
        core.inner.fence.applied(epoch, std::time::Instant::now());
        core.store()
            .registry_seen(core.node().node_id().as_str(), epoch)
            .await?;
    }
    Ok(())
}

impl<'a> Identity<'a> {
    /// Decides who presents `token` (401 `UNAUTHORIZED` if nobody). With several nodes,
    /// a token this node does not know is looked for in the database before it is
    /// refused: an agent registered on another node a moment ago is known here at once.
    pub async fn authenticate(self, token: &str) -> CoreResult<Caller> {
        self.core.fence().await?;
        if let Some(caller) = self.core.inner.registry.authenticate(token) {
            return Ok(caller);
        }
        if self.core.store().shared() {
            // Taken at the miss: later than the request's arrival, so at worst one
            // reload more, never one too few.
            self.core
                .registry_current_since(std::time::Instant::now())
                .await;
            if let Some(caller) = self.core.inner.registry.authenticate(token) {
                return Ok(caller);
            }
        }
        Err(auth::invalid_token())
    }

    /// The id of the team a team key or an agent token belongs to (`FORBIDDEN` for the
    /// admin, who belongs to none): for transports whose calls do not name the team.
    pub fn own_team_id(self, caller: &Caller) -> CoreResult<TeamId> {
        let team = match caller {
            Caller::Team { team } | Caller::Agent { team, .. } => *team,
            Caller::Admin => {
                return Err(CoreError::forbidden(
                    "the admin token belongs to no team; use a team key or an agent token",
                ));
            }
        };
        self.core
            .registry()
            .team(team)
            .map(|t| t.team_id.clone())
            .ok_or_else(auth::invalid_token)
    }

    /// The agent behind an agent token (`FORBIDDEN` for other kinds of token), with its
    /// team. Messaging operations act *as* an agent, so they start here.
    pub fn acting_agent(self, caller: &Caller) -> CoreResult<(Arc<TeamRecord>, Arc<AgentRecord>)> {
        let Caller::Agent { team, agent, .. } = *caller else {
            return Err(CoreError::forbidden(
                "this operation is done by an agent: use the agent's own token",
            ));
        };
        let registry = self.core.registry();
        match (registry.team(team), registry.agent(agent)) {
            (Some(team), Some(agent)) if agent.is_member() => Ok((team, agent)),
            _ => Err(auth::invalid_token()),
        }
    }
}

impl<'a> Node<'a> {
    /// This process's name among the nodes that may share its database.
    pub fn node_id(self) -> &'a node::NodeId {
        &self.core.inner.node_id
    }

    /// Whether storage answers (readiness).
    pub async fn ready(self) -> CoreResult<()> {
        Ok(self.core.store().ping().await?)
    }
}
