//! The core: every rule of Switchboard, independent of any transport.
//!
//! One method per operation (`create_team`, `register_agent`, …), each taking the
//! [`Caller`] decided from the token and a typed input, and returning a typed output or a
//! [`CoreError`] carrying the contract's error code. REST handlers and WebSocket frames
//! call the same methods, so the same input gets the same answer on every transport.
//! No axum or sqlx type appears in this API.

pub mod agents;
pub mod assistance;
pub mod auth;
pub mod broadcasts;
pub mod delivery;
pub mod error;
pub mod ids;
pub mod messages;
pub mod ratelimit;
pub mod registry;
pub mod tasks;
pub mod team_metrics;
pub mod teams;
pub mod time;

use std::sync::Arc;

pub use error::{CoreError, CoreResult, ErrorCode};
pub use registry::{AgentRecord, AgentStatus, Caller, Registry, TeamRecord};

use crate::hub::{Hub, HubSettings};
use crate::store::{self, Store, StoreError};

/// Handle to the core; cheap to clone (an `Arc`).
#[derive(Clone)]
pub struct Core {
    inner: Arc<Inner>,
}

struct Inner {
    store: Store,
    registry: Registry,
    rate_limiter: ratelimit::RateLimiter,
    hub: Arc<Hub>,
    tasks: tasks::TaskRuntime,
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
}

/// What the caller needs on a team for an operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Need {
    /// See the team and its members: any member agent, the team key, the admin.
    Read,
    /// Change the team or its membership: the team key or the admin.
    Manage,
}

impl Core {
    /// Loads the registry from storage and settles the admin token.
    ///
    /// `admin_token` is the operator's choice (flag or env); without one, the token stored
    /// from an earlier start is kept, and on the very first start a new one is generated.
    /// Returns the core and, only in that last case, the new token so it can be shown
    /// once (only its digest is stored).
    pub async fn open(
        store: Store,
        settings: CoreSettings,
    ) -> Result<(Core, Option<String>), StoreError> {
        let registry = Registry::default();
        let mut generated = None;
        let admin_hash = match settings.admin_token.as_deref() {
            Some(token) => {
                let hash = auth::digest(token);
                write_admin_hash(&store, hash).await?;
                hash
            }
            None => match store::settings::get(store.reader(), store::settings::ADMIN_TOKEN_HASH)
                .await?
            {
                Some(bytes) => store::teams::hash_from(bytes)?,
                None => {
                    let token = auth::mint(auth::TokenKind::Admin);
                    let hash = auth::digest(&token.text);
                    write_admin_hash(&store, hash).await?;
                    generated = Some(token.text);
                    hash
                }
            },
        };
        registry.set_admin_hash(admin_hash);
        for team in store::teams::load_all(store.reader()).await? {
            registry.put_team(team);
        }
        for agent in store::agents::load_all(store.reader()).await? {
            registry.put_agent(agent);
        }
        let hub = Hub::new(
            settings.hub,
            store::agents::load_presence(store.reader()).await?,
        );
        let open_tasks = store::tasks::open_counts(store.reader()).await?;
        let core = Core {
            inner: Arc::new(Inner {
                store,
                registry,
                rate_limiter: ratelimit::RateLimiter::new(settings.rate_limit),
                hub,
                tasks: tasks::TaskRuntime::new(settings.tasks, open_tasks),
            }),
        };
        Ok((core, generated))
    }

    pub fn store(&self) -> &Store {
        &self.inner.store
    }

    pub fn registry(&self) -> &Registry {
        &self.inner.registry
    }

    pub fn hub(&self) -> &Arc<Hub> {
        &self.inner.hub
    }

    /// Writes acknowledged cursors and last activity kept in memory by the hub (called
    /// every second and at shutdown). A failed write keeps them for the next call.
    pub async fn save_presence(&self) -> Result<(), StoreError> {
        let unsaved = self.hub().take_unsaved();
        if unsaved.is_empty() {
            return Ok(());
        }
        let rows = unsaved.clone();
        let result = self
            .store()
            .write_self_contained(
                move |tx| {
                    Box::pin(
                        async move { store::agents::save_presence(tx.conn().await?, &rows).await },
                    )
                },
                Ok,
            )
            .await;
        if result.is_err() {
            self.hub().unsaved(&unsaved);
        }
        result
    }

    /// Decides who presents `token` (401 `UNAUTHORIZED` if nobody).
    pub fn authenticate(&self, token: &str) -> CoreResult<Caller> {
        self.inner
            .registry
            .authenticate(token)
            .ok_or_else(auth::invalid_token)
    }

    /// Resolves the team named in a path and checks the caller's rights on it.
    ///
    /// A caller bound to another team gets `FORBIDDEN` whether or not the named team
    /// exists, so tokens cannot be used to discover other teams.
    fn team_for(&self, caller: &Caller, team_id: &str, need: Need) -> CoreResult<Arc<TeamRecord>> {
        let own = match caller {
            Caller::Admin => None,
            Caller::Team { team } | Caller::Agent { team, .. } => Some(*team),
        };
        let team = self.inner.registry.team_by_id(team_id);
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

    /// The agent behind an agent token (`FORBIDDEN` for other kinds of token), with its
    /// team. Messaging operations act *as* an agent, so they start here.
    pub fn acting_agent(&self, caller: &Caller) -> CoreResult<(Arc<TeamRecord>, Arc<AgentRecord>)> {
        let Caller::Agent { team, agent } = *caller else {
            return Err(CoreError::forbidden(
                "this operation is done by an agent: use the agent's own token",
            ));
        };
        let registry = &self.inner.registry;
        match (registry.team(team), registry.agent(agent)) {
            (Some(team), Some(agent)) if agent.is_member() => Ok((team, agent)),
            _ => Err(auth::invalid_token()),
        }
    }
}

async fn write_admin_hash(store: &Store, hash: auth::SecretHash) -> Result<(), StoreError> {
    store
        .write(move |tx| {
            Box::pin(async move {
                store::settings::put(tx.conn().await?, store::settings::ADMIN_TOKEN_HASH, &hash)
                    .await
            })
        })
        .await
}

/// Checks a required free-text field: trimmed non-empty, at most `max` characters.
pub(crate) fn check_text(field: &str, value: &str, max: usize) -> CoreResult<()> {
    if value.trim().is_empty() {
        return Err(CoreError::validation(
            field,
            format!("{field} must not be empty"),
        ));
    }
    let len = value.chars().count();
    if len > max {
        return Err(CoreError::validation(
            field,
            format!("{field} must be at most {max} characters (got {len})"),
        )
        .with("max", max)
        .with("length", len));
    }
    Ok(())
}
