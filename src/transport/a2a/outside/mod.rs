//! Outbound A2A: a Switchboard agent delegates to an outside A2A agent.
//!
//! An outside agent is registered into a team by its card (`POST
//! /v1/teams/{team_id}/a2a-agents`, team key): the card is fetched and checked, and the
//! agent becomes a member whose capabilities are the card's skills, so it is found and
//! assigned like any other. The server acts for that member: a [`Delegate`] per outside
//! agent takes each task given to it (from its inbox, and after a restart from its open
//! tasks) and [`follow::follow`]s it over the agent's JSON-RPC interface; the card is read
//! again every `--a2a-card-refresh` seconds. Outgoing URLs follow the callback rule (no private addresses
//! unless `--allow-private-callbacks`).

mod client;
mod follow;
mod hold;
mod watch;

use crate::core::ask;
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use switchboard_types::agents::{
    AGENT_CAPABILITY_LIMITS, MAX_ROLE, RegisterAgent, RegisterRemoteAgent, RemoteAgentRegistered,
};
use switchboard_types::decode::CommaList;
use switchboard_types::error::ErrorBody;
use switchboard_types::ids::{AgentId, AgentPk, MAX_ID_LEN, TeamId};
use switchboard_types::messages::{MarkRead, MessageView};
use switchboard_types::task_state::TaskStatus;
use switchboard_types::tasks::{TaskQuery, TaskRole};
use switchboard_types::time::Timestamp;
use switchboard_types::{MessageOp, Operation};
use tokio_util::sync::CancellationToken;
use utoipa_axum::{router::OpenApiRouter, routes};

use crate::core::remotes::{RemoteAgentRecord, RemoteBinding};
use crate::core::{Caller, Core, CoreError, CoreResult};
use crate::transport::common::{ApiError, Auth, HasCore, JsonBody, PathParams};

/// Time allowed for one call to an outside agent.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);
/// Longest a delegate waits on its inbox before looking again.
const INBOX_WAIT: Duration = Duration::from_secs(25);

/// Where an outside agent's calls go now (the card may move it).
#[derive(Debug, Clone)]
pub struct Binding {
    pub interface_url: String,
    pub authorization: Option<String>,
    /// The card says the agent streams (`SubscribeToTask`).
    pub streaming: bool,
}

/// Every outside agent the server acts for. Cheap to clone.
#[derive(Clone)]
pub struct Delegation {
    core: Core,
    http: reqwest::Client,
    /// The agents acted for now, each with what stops it (its hold was lost).
    running: Arc<Mutex<HashMap<AgentPk, CancellationToken>>>,
    stop: CancellationToken,
    /// How often each card is read again.
    refresh: Duration,
}

impl HasCore for Delegation {
    fn core(&self) -> &Core {
        &self.core
    }
}

impl Delegation {
    /// `allow_private`: outside agents on private addresses may be called; `refresh`:
    /// how often their cards are read again.
    pub fn new(
        core: Core,
        (allow_private, refresh): (bool, Duration),
        stop: CancellationToken,
    ) -> Result<Delegation, String> {
        Ok(Delegation {
            http: crate::core::egress::http_client(CALL_TIMEOUT, allow_private)?,
            core,
            running: Arc::default(),
            stop,
            refresh,
        })
    }

    /// Starts acting for one outside agent (once).
    fn start(&self, record: RemoteAgentRecord) {
        // A removed agent is acted for no more.
        let Some(agent_id) = self.core.remotes().agent_id_of(record.agent_pk) else {
            return;
        };
        let stop = self.stop.child_token();
        match self.running.lock() {
            Ok(mut running) if !running.contains_key(&record.agent_pk) => {
                running.insert(record.agent_pk, stop.clone());
            }
            _ => return,
        }
        let delegate = Arc::new(Delegate {
            core: self.core.clone(),
            http: self.http.clone(),
            agent_pk: record.agent_pk,
            agent_id,
            binding: RwLock::new(Binding {
                interface_url: record.interface_url.clone(),
                authorization: record.authorization.clone(),
                streaming: streams(&record.card),
            }),
            record: Mutex::new(record),
            following: Mutex::default(),
            refresh: self.refresh,
            stop: stop.clone(),
        });
        let running = self.running.clone();
        metrics::gauge!("switchboard_a2a_outside_agents").increment(1.0);
        tokio::spawn(async move {
            tokio::select! {
                () = delegate.clone().run() => {}
                () = stop.cancelled() => {}
            }
            // Ended by itself (the agent was removed): no longer running. Stopped (its hold
            // was lost): the entry was taken out then, and may be a new one by now.
            if !stop.is_cancelled()
                && let Ok(mut running) = running.lock()
            {
                running.remove(&delegate.agent_pk);
            }
            metrics::gauge!("switchboard_a2a_outside_agents").decrement(1.0);
        });
    }

    /// The registration route, with its OpenAPI description.
    pub fn routes() -> OpenApiRouter<Delegation> {
        OpenApiRouter::new().routes(routes!(register_remote_agent))
    }
}

/// The server acting for one outside agent.
pub struct Delegate {
    core: Core,
    http: reqwest::Client,
    agent_pk: AgentPk,
    agent_id: AgentId,
    binding: RwLock<Binding>,
    record: Mutex<RemoteAgentRecord>,
    /// Tasks being followed now.
    following: Mutex<HashSet<String>>,
    refresh: Duration,
    /// Cancelled when this node stops acting for the agent: its follows end too.
    stop: CancellationToken,
}

impl Delegate {
    fn caller(&self) -> CoreResult<Caller> {
        self.core.remotes().acting_for(self.agent_pk)
    }

    fn binding(&self) -> Binding {
        self.binding
            .read()
            .map(|b| b.clone())
            .unwrap_or_else(|poisoned| poisoned.into_inner().clone())
    }

    /// Takes every task given to the agent, until it is removed.
    async fn run(self: Arc<Self>) {
        let Ok(caller) = self.caller() else { return };
        // Where the inbox stands before the open tasks are read: a task given in between
        // is in both, and followed once.
        let mut cursor = match self
            .core
            .live()
            .wait_for_inbox(&caller, None, Some(1), Duration::ZERO, |_| {})
            .await
        {
            Ok(wait) => wait.next_after_seq,
            Err(err) => {
                tracing::warn!(agent = %self.agent_id, error = %err, "an outside agent's inbox is not readable");
                return;
            }
        };
        // A notice that arrived while no gateway ran (a restart, or this start still
        // under way) is unread: begin before the oldest, so it is taken and marked too.
        if let Some(oldest) = self.oldest_unread(&caller).await {
            cursor = cursor.min(oldest - 1);
        }
        for task_id in self.open_tasks(&caller).await {
            self.clone().take(task_id);
        }
        let mut next_refresh = tokio::time::Instant::now() + self.refresh;
        loop {
            let now = tokio::time::Instant::now();
            if now >= next_refresh {
                self.refresh().await;
                next_refresh = tokio::time::Instant::now() + self.refresh;
            }
            let Ok(caller) = self.caller() else { return };
            let wait = INBOX_WAIT.min(next_refresh.saturating_duration_since(now));
            let wait = self
                .core
                .live()
                .wait_for_inbox(&caller, Some(cursor), Some(100), wait, |_| {})
                .await;
            match wait {
                Ok(wait) => {
                    cursor = wait.next_after_seq.max(cursor);
                    self.clone().take_all(&caller, wait.messages).await;
                }
                Err(err) => {
                    tracing::debug!(agent = %self.agent_id, error = %err, "an outside agent's inbox wait ended");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
            }
        }
    }

    /// The seq of the agent's oldest unread inbox entry, if any.
    async fn oldest_unread(&self, caller: &Caller) -> Option<i64> {
        let query = switchboard_types::inbox::InboxQuery {
            agent_id: Some(self.agent_id.clone()),
            unread_only: Some(true),
            sort_order: Some(switchboard_types::messages::SortOrder::OldestFirst),
            limit: Some(1),
            ..Default::default()
        };
        let page = self
            .core
            .dispatch(caller, ask::GetMessages { query })
            .await
            .ok();
        page.and_then(|page| page.messages.first().and_then(|m| m.seq))
    }

    /// Follows the tasks these inbox entries give the agent, and marks every entry read
    /// (the notices are for the server acting for it, which has seen them).
    async fn take_all(self: Arc<Self>, caller: &Caller, messages: Vec<MessageView>) {
        let mut seen = Vec::with_capacity(messages.len());
        for message in messages {
            let data = &message.content.data;
            if data.get("type").and_then(|t| t.as_str()) == Some("TaskRequest")
                && let Some(task_id) = data.get("task_id").and_then(|t| t.as_str())
                && let Some(originator) = data.get("originating_agent_id").and_then(|o| o.as_str())
            {
                // Named with its originator: another task of the same id given to this
                // agent must never be the one followed.
                self.clone().take(format!("{task_id}@{originator}"));
            }
            seen.push(message.message_id);
        }
        let read = Operation::Messages(MessageOp::MarkMessageRead(MarkRead {
            agent_id: self.agent_id.clone(),
            message_ids: seen,
        }));
        if let Err(err) = self.core.dispatch(caller, read).await {
            tracing::debug!(agent = %self.agent_id, error = %err, "inbox entries not marked read");
        }
    }

    /// Follows a task unless it is followed already.
    fn take(self: Arc<Self>, task_id: String) {
        if let Ok(mut following) = self.following.lock()
            && !following.insert(task_id.clone())
        {
            return;
        }
        tokio::spawn(async move {
            tokio::select! {
                () = follow::follow(&self, &task_id) => {}
                () = self.stop.cancelled() => {}
            }
            if let Ok(mut following) = self.following.lock() {
                following.remove(&task_id);
            }
        });
    }

    /// The agent's unfinished tasks (after a restart: where following resumes).
    async fn open_tasks(&self, caller: &Caller) -> Vec<String> {
        let query = TaskQuery {
            role: Some(TaskRole::Assigned),
            status: Some(CommaList(vec![
                TaskStatus::InProgress,
                TaskStatus::InputRequired,
            ])),
            limit: Some(100),
            ..TaskQuery::default()
        };
        let list = self
            .core
            .dispatch(caller, ask::ListTasks { query })
            .await
            .ok();
        list.map_or_else(Vec::new, |list| {
            list.tasks
                .into_iter()
                .map(|t| format!("{}@{}", t.task_id, t.originating_agent_id))
                .collect()
        })
    }

    /// Reads the card again; records what changed (a failure keeps the card it had).
    async fn refresh(&self) {
        let record = match self.record.lock() {
            Ok(record) => record.clone(),
            Err(_) => return,
        };
        let read = client::read_card(
            &self.http,
            &record.card_url,
            record.authorization.as_deref(),
        )
        .await;
        let card = match read {
            Ok(card) => card,
            Err(why) => {
                tracing::warn!(agent = %self.agent_id, %why, "an outside agent's card could not be refreshed");
                return;
            }
        };
        if self
            .core
            .remotes()
            .check_remote_url(&card.interface_url, "interface_url")
            .is_err()
        {
            tracing::warn!(agent = %self.agent_id, url = %card.interface_url, "a refreshed card names an address this server does not call");
            return;
        }
        let (role, capabilities) = member_of_card(&card.card);
        let updated = RemoteAgentRecord {
            interface_url: card.interface_url.clone(),
            card: card.raw,
            refreshed_at: Timestamp::now(),
            ..record
        };
        match self
            .core
            .remotes()
            .refresh_remote_agent(updated.clone(), role, capabilities)
            .await
        {
            Ok(()) => {
                if let Ok(mut binding) = self.binding.write() {
                    binding.interface_url = updated.interface_url.clone();
                    binding.streaming = streams(&updated.card);
                }
                if let Ok(mut record) = self.record.lock() {
                    *record = updated;
                }
            }
            Err(err) => {
                tracing::warn!(agent = %self.agent_id, error = %err, "a refreshed card was not recorded")
            }
        }
    }
}

/// Register an outside A2A agent (team key): its card is fetched and checked, and it
/// becomes a member whose capabilities are its skills; tasks given to it are forwarded
/// to its JSON-RPC interface and their states, questions and results come back.
#[utoipa::path(post, path = "/v1/teams/{team_id}/a2a-agents", tag = "agents", security(("bearer" = [])),
    params(("team_id" = String, Path, description = "The team's id")),
    request_body = RegisterRemoteAgent,
    responses(
        (status = 201, description = "Registered", body = RemoteAgentRegistered),
        (status = 400, description = "VALIDATION_ERROR: the card could not be read, is not an A2A card, offers no JSON-RPC 1.x interface, or a URL is refused", body = ErrorBody),
        (status = 401, description = "UNAUTHORIZED", body = ErrorBody),
        (status = 403, description = "FORBIDDEN: a team key (or the admin) registers", body = ErrorBody),
        (status = 404, description = "NOT_FOUND: no such team", body = ErrorBody),
        (status = 409, description = "AGENT_ALREADY_REGISTERED", body = ErrorBody),
    ))]
async fn register_remote_agent(
    State(delegation): State<Delegation>,
    Auth(caller): Auth,
    PathParams(team_id): PathParams<TeamId>,
    JsonBody(input): JsonBody<RegisterRemoteAgent>,
) -> Result<(StatusCode, Json<RemoteAgentRegistered>), ApiError> {
    let core = &delegation.core;
    core.remotes().may_register_remote(&caller, &team_id)?;
    let card_url = client::card_url(&input.card_url);
    core.remotes().check_remote_url(&card_url, "card_url")?;
    let card = client::read_card(&delegation.http, &card_url, input.authorization.as_deref())
        .await
        .map_err(|why| {
            CoreError::validation("card_url", why).with("card_url", card_url.as_str())
        })?;
    let (role, capabilities) = member_of_card(&card.card);
    let agent = RegisterAgent {
        agent_id: input
            .agent_id
            .unwrap_or_else(|| id_of(&card.card.name).into()),
        role,
        capabilities,
        address: Some(card.interface_url.clone()),
        status: None,
        addresses: None,
        watch: None,
        stomp_bridge: None,
    };
    let binding = RemoteBinding {
        card_url: card_url.clone(),
        interface_url: card.interface_url.clone(),
        authorization: input.authorization,
        card: card.raw,
    };
    let (registered, _) = core
        .remotes()
        .register_remote_agent(&caller, &team_id, agent, binding)
        .await?;
    // Held (and acted for) here unless another node holds it already.
    delegation.hold().await;
    Ok((
        StatusCode::CREATED,
        Json(RemoteAgentRegistered {
            success: true,
            agent: registered.agent,
            card_url,
            interface_url: card.interface_url,
        }),
    ))
}

/// Whether a stored card says the agent streams.
fn streams(card: &str) -> bool {
    serde_json::from_str::<a2a::AgentCard>(card)
        .ok()
        .and_then(|card| card.capabilities.streaming)
        .unwrap_or(false)
}

/// The member a card makes: role from its description (or name), capabilities from
/// its skills' ids, within registration's limits.
fn member_of_card(card: &a2a::AgentCard) -> (String, Vec<String>) {
    let described = if card.description.trim().is_empty() {
        card.name.trim()
    } else {
        card.description.trim()
    };
    let role: String = described.chars().take(MAX_ROLE).collect();
    let limits = AGENT_CAPABILITY_LIMITS;
    let mut capabilities: Vec<String> = Vec::new();
    for skill in &card.skills {
        let id: String = skill.id.trim().chars().take(limits.max_len).collect();
        if !id.is_empty() && !capabilities.contains(&id) && capabilities.len() < limits.max_count {
            capabilities.push(id);
        }
    }
    (role, capabilities)
}

/// A card's name as an agent id: `A-Z a-z 0-9 . _ -`, at most [`MAX_ID_LEN`].
fn id_of(name: &str) -> String {
    let id: String = name
        .trim()
        .chars()
        .map(|c| {
            if switchboard_types::ids::is_id_char(c) {
                c
            } else {
                '-'
            }
        })
        .take(MAX_ID_LEN)
        .collect();
    let id = id.trim_matches('-').to_owned();
    if id.is_empty() {
        "a2a-agent".to_owned()
    } else {
        id
    }
}
