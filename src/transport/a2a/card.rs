//! Agent cards, built from the registry: one per member at
//! `/a2a/{team_id}/{agent_id}/.well-known/agent-card.json`, one per role at
//! `/a2a/{team_id}/role:{role}/.well-known/agent-card.json`, and the team's directory of
//! them at `/a2a/{team_id}/agents` (what A2A users ask for and the spec lacks).
//!
//! Cards need a credential of the team (an agent token or the team key): membership and
//! capabilities are the team's business, and nothing is reachable across teams. They
//! carry an `ETag` (a hash of the card) and are cacheable privately for a minute.

use crate::core::ask;
use std::collections::{BTreeMap, BTreeSet, HashMap};

use a2a::{
    AgentCapabilities, AgentCard, AgentInterface, AgentProvider, AgentSkill,
    HttpAuthSecurityScheme, SecurityScheme, TRANSPORT_PROTOCOL_JSONRPC,
};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;
use sha2::{Digest, Sha256};
use switchboard_types::agents::{AgentQuery, AgentView};
use switchboard_types::time::Timestamp;

use super::A2aState;
use super::member::{Member, role_members};

use crate::transport::common::{ApiError, ApiResult};

/// The A2A protocol version the interfaces speak.
pub const PROTOCOL_VERSION: &str = "1.0";

/// How long a client may keep a card without asking again.
const CACHE_CONTROL: &str = "private, max-age=60";

/// `GET /a2a/{team_id}/{agent_id}/.well-known/agent-card.json`, and a role's card at
/// `/a2a/{team_id}/role:{role}/.well-known/agent-card.json`.
pub async fn card(
    State(state): State<A2aState>,
    Path((team_id, member)): Path<(String, String)>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    let caller = state.authenticate(&headers).await?;
    let base = base_url(&headers);
    let (card, modified) = match Member::named(member) {
        Member::Agent(agent_id) => {
            let team_id = team_id.into();
            let found = state
                .core
                .dispatch(&caller, ask::GetAgent { team_id, agent_id })
                .await
                .map_err(ApiError)?;
            (build(&found.agent, &base), found.agent.updated_at)
        }
        Member::Role(role) => {
            let members = role_members(&state.core, &caller, team_id.clone().into(), &role).await?;
            let card = role_card(&team_id, &role, &members, &base);
            let modified = members.iter().map(|a| a.updated_at).max();
            (card, modified.unwrap_or_else(Timestamp::now))
        }
    };
    Ok(cached(&headers, &with_v03(&card), Some(modified)))
}

/// `GET /a2a/{team_id}/.well-known/agent-card.json`: where a client that resolves the
/// card relative to a member URL without its trailing slash (the JS SDK's
/// `createFromUrl`) looks. No agent is named here, so no card is guessed: the 404 says
/// which URL to give it.
pub async fn no_team_card(Path(team_id): Path<String>) -> ApiError {
    ApiError(
        switchboard_types::ErrorBody::new(
            switchboard_types::ErrorCode::NotFound,
            format!(
                "no agent is named by /a2a/{team_id}/: each member's card is at \
                 /a2a/{team_id}/{{agent_id}}/.well-known/agent-card.json; give a client that \
                 resolves the card relative to its URL the member URL with its trailing slash \
                 (/a2a/{team_id}/{{agent_id}}/)"
            ),
        )
        .into(),
    )
}

/// `GET /a2a/{team_id}/agents`: every member's card.
pub async fn directory(
    State(state): State<A2aState>,
    Path(team_id): Path<String>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    let caller = state.authenticate(&headers).await?;
    let query = AgentQuery::default();
    let list = state
        .core
        .dispatch(
            &caller,
            ask::ListAgents {
                team_id: team_id.clone().into(),
                query,
            },
        )
        .await
        .map_err(ApiError)?;
    let base = base_url(&headers);
    let cards: Vec<serde_json::Value> = list
        .agents
        .iter()
        .map(|a| with_v03(&build(a, &base)))
        .collect();
    let mut roles: BTreeMap<&str, Vec<AgentView>> = BTreeMap::new();
    for agent in list.agents.iter().filter(|a| !a.role.trim().is_empty()) {
        roles.entry(&agent.role).or_default().push(agent.clone());
    }
    let roles: Vec<serde_json::Value> = roles
        .iter()
        .map(|(role, members)| with_v03(&role_card(&team_id, role, members, &base)))
        .collect();
    Ok(cached(
        &headers,
        &json!({ "agents": cards, "roles": roles }),
        None,
    ))
}

/// The body with its `ETag`, or `304` when the client already has it.
/// With `Last-Modified` when the card is one member's: when its registry entry last
/// changed (what the card's `version` says too).
fn cached(
    headers: &HeaderMap,
    body: &serde_json::Value,
    modified: Option<switchboard_types::time::Timestamp>,
) -> Response {
    let text = body.to_string();
    let tag = format!(
        "\"{}\"",
        hex::encode(&Sha256::digest(text.as_bytes())[..12])
    );
    let known = headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|t| t.trim() == tag));
    let mut response = if known {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        ([(header::CONTENT_TYPE, "application/json")], text).into_response()
    };
    let headers = response.headers_mut();
    if let Ok(tag) = HeaderValue::from_str(&tag) {
        headers.insert(header::ETAG, tag);
    }
    headers.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static(CACHE_CONTROL),
    );
    let modified = modified
        .and_then(|at| chrono::DateTime::from_timestamp_micros(at.micros()))
        .map(|at| at.format("%a, %d %b %Y %H:%M:%S GMT").to_string())
        .and_then(|at| HeaderValue::from_str(&at).ok());
    if let Some(modified) = modified {
        headers.insert(header::LAST_MODIFIED, modified);
    }
    response
}

/// Where this server is reached, as the client reached it (`Host`, and the scheme a
/// proxy names in `X-Forwarded-Proto`).
pub fn base_url(headers: &HeaderMap) -> String {
    let host = headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("localhost");
    let scheme = headers
        .get("x-forwarded-proto")
        .and_then(|v| v.to_str().ok())
        .filter(|s| matches!(*s, "http" | "https"))
        .unwrap_or("http");
    format!("{scheme}://{host}")
}

/// The interface URL of a member (`segment` is its agent id or `role:{role}`),
/// percent-encoded as a path segment: a role may hold any character.
pub fn interface_url(base: &str, team_id: &str, segment: &str) -> String {
    match url::Url::parse(base) {
        Ok(mut url) => {
            if let Ok(mut path) = url.path_segments_mut() {
                path.clear().extend(["a2a", team_id, segment]);
            }
            url.to_string()
        }
        Err(_) => format!("{base}/a2a/{team_id}/{segment}"),
    }
}

/// A member's card: its role as the description, one skill per capability.
fn build(agent: &AgentView, base: &str) -> AgentCard {
    let skills = if agent.capabilities.is_empty() {
        vec![skill("tasks", &format!("Tasks for {}", agent.agent_id))]
    } else {
        agent
            .capabilities
            .iter()
            .map(|c| skill(c, &format!("{} takes tasks that need {c}", agent.agent_id)))
            .collect()
    };
    let description = if agent.role.trim().is_empty() {
        format!(
            "Switchboard agent {} of team {}",
            agent.agent_id, agent.team_id
        )
    } else {
        agent.role.clone()
    };
    Profile {
        name: agent.agent_id.to_string(),
        description,
        version: agent.updated_at.to_string(),
        url: interface_url(base, &agent.team_id, &agent.agent_id),
        skills,
    }
    .card(base)
}

/// A role's card: any of its agents takes what is sent here; its skills are every
/// capability one of them has (a task a member without it claims is still done by the
/// role — name `required_capabilities` over REST to narrow who may claim).
fn role_card(team_id: &str, role: &str, members: &[AgentView], base: &str) -> AgentCard {
    let capabilities: BTreeSet<&str> = members
        .iter()
        .flat_map(|a| a.capabilities.iter().map(String::as_str))
        .collect();
    let mut skills: Vec<AgentSkill> = capabilities
        .iter()
        .map(|c| skill(c, &format!("an agent of role {role} that has {c}")))
        .collect();
    if skills.is_empty() {
        skills.push(skill(
            "tasks",
            &format!("Tasks for any agent of role {role}"),
        ));
    }
    let segment = Member::Role(role.to_owned()).segment();
    let newest = members.iter().map(|a| a.updated_at).max();
    Profile {
        name: segment.clone(),
        description: format!(
            "Any free agent of role '{role}' in team {team_id} ({} registered): a task sent \
             here is offered to them all and worked by the first that claims it",
            members.len()
        ),
        version: newest.map(|at| at.to_string()).unwrap_or_default(),
        url: interface_url(base, team_id, &segment),
        skills,
    }
    .card(base)
}

/// What tells one card from another; the rest is the same for every member.
struct Profile {
    name: String,
    description: String,
    version: String,
    url: String,
    skills: Vec<AgentSkill>,
}

impl Profile {
    fn card(self, base: &str) -> AgentCard {
        // The same URL answers both versions (`v03.rs`); 1.0 first, as clients prefer it.
        let interfaces = [PROTOCOL_VERSION, "0.3"].map(|version| {
            let mut interface = AgentInterface::new(self.url.clone(), TRANSPORT_PROTOCOL_JSONRPC);
            interface.protocol_version = version.to_owned();
            interface
        });
        AgentCard {
            name: self.name,
            description: self.description,
            version: self.version,
            supported_interfaces: interfaces.to_vec(),
            capabilities: AgentCapabilities {
                streaming: Some(true),
                push_notifications: Some(true),
                extensions: None,
                extended_agent_card: Some(false),
            },
            default_input_modes: vec!["text/plain".into(), "application/json".into()],
            default_output_modes: vec!["text/plain".into(), "application/json".into()],
            skills: self.skills,
            provider: Some(AgentProvider {
                organization: "Switchboard".into(),
                url: base.to_owned(),
            }),
            documentation_url: None,
            icon_url: None,
            security_schemes: Some(HashMap::from([(
                "bearer".to_owned(),
                SecurityScheme::HttpAuth(HttpAuthSecurityScheme {
                    scheme: "Bearer".into(),
                    description: Some("A Switchboard agent token of the same team".into()),
                    bearer_format: None,
                }),
            )])),
            security_requirements: Some(vec![HashMap::from([("bearer".to_owned(), Vec::new())])]),
            signatures: None,
        }
    }
}

/// The card as both versions read it: the 1.0 card, with the fields a 0.3 client needs
/// to discover the member added where 1.0 has none (`url`, `protocolVersion`,
/// `preferredTransport`, `additionalInterfaces`, `security`, and each security scheme's
/// `type`), as the reference server (`a2a-python`'s `agent_card_to_dict`) merges its 0.3
/// card into the 1.0 one. 1.0 readers ignore the 0.3 fields (the SDK's resolver drops
/// them when `supportedInterfaces` is there); 0.3 readers find theirs. A 0.3 client is
/// given the member's interface URL, as a 1.0 client is, and reads the card beneath it.
fn with_v03(card: &AgentCard) -> serde_json::Value {
    let mut value = json!(card);
    let Some(url) = card.supported_interfaces.first().map(|i| i.url.clone()) else {
        return value;
    };
    let schemes: serde_json::Map<String, serde_json::Value> = card
        .security_schemes
        .iter()
        .flatten()
        .map(|(name, scheme)| {
            let v03 = match scheme {
                SecurityScheme::HttpAuth(http) => {
                    json!({"type": "http", "scheme": http.scheme.to_ascii_lowercase()})
                }
                _ => json!({}),
            };
            (name.clone(), v03)
        })
        .collect();
    let v03 = json!({
        "protocolVersion": "0.3.0",
        "url": url,
        "preferredTransport": "JSONRPC",
        "additionalInterfaces": [{"url": url, "transport": "JSONRPC"}],
        "securitySchemes": schemes,
        "security": card
            .security_requirements
            .iter()
            .flatten()
            .map(|r| r.keys().map(|k| (k.clone(), json!([]))).collect::<serde_json::Map<_, _>>())
            .collect::<Vec<_>>(),
    });
    merge_absent(&mut value, v03);
    value
}

/// Adds what `from` has and `into` lacks, into nested objects too; never replaces.
fn merge_absent(into: &mut serde_json::Value, from: serde_json::Value) {
    let (serde_json::Value::Object(into), serde_json::Value::Object(from)) = (into, from) else {
        return;
    };
    for (key, value) in from {
        match into.get_mut(&key) {
            None => {
                into.insert(key, value);
            }
            Some(existing) => merge_absent(existing, value),
        }
    }
}

fn skill(id: &str, description: &str) -> AgentSkill {
    AgentSkill {
        id: id.to_owned(),
        name: id.to_owned(),
        description: description.to_owned(),
        tags: vec![id.to_owned()],
        examples: None,
        input_modes: None,
        output_modes: None,
        security_requirements: None,
    }
}
