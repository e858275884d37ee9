//! Agent cards, built from the registry: one per member at
//! `/a2a/{team_id}/{agent_id}/.well-known/agent-card.json`, and the team's directory of
//! them at `/a2a/{team_id}/agents` (what A2A users ask for and the spec lacks).
//!
//! Cards need a credential of the team (an agent token or the team key): membership and
//! capabilities are the team's business, and nothing is reachable across teams. They
//! carry an `ETag` (a hash of the card) and are cacheable privately for a minute.

use crate::core::ask;
use std::collections::HashMap;

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

use super::A2aState;

use crate::transport::common::{ApiError, ApiResult};

/// The A2A protocol version the interfaces speak.
pub const PROTOCOL_VERSION: &str = "1.0";

/// How long a client may keep a card without asking again.
const CACHE_CONTROL: &str = "private, max-age=60";

/// `GET /a2a/{team_id}/{agent_id}/.well-known/agent-card.json`
pub async fn card(
    State(state): State<A2aState>,
    Path((team_id, agent_id)): Path<(String, String)>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    let caller = state.authenticate(&headers).await?;
    let found = state
        .core
        .dispatch(
            &caller,
            ask::GetAgent {
                team_id: team_id.into(),
                agent_id: agent_id.into(),
            },
        )
        .await
        .map_err(ApiError)?;
    let card = build(&found.agent, &base_url(&headers));
    Ok(cached(
        &headers,
        &with_v03(&card),
        Some(found.agent.updated_at),
    ))
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
                team_id: team_id.into(),
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
    Ok(cached(&headers, &json!({ "agents": cards }), None))
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

/// The interface URL of a member.
pub fn interface_url(base: &str, team_id: &str, agent_id: &str) -> String {
    format!("{base}/a2a/{team_id}/{agent_id}")
}

/// A member's card: its role as the description, one skill per capability.
fn build(agent: &AgentView, base: &str) -> AgentCard {
    let url = interface_url(base, &agent.team_id, &agent.agent_id);
    // The same URL answers both versions (`v03.rs`); 1.0 first, as clients prefer it.
    let interfaces = [PROTOCOL_VERSION, "0.3"].map(|version| {
        let mut interface = AgentInterface::new(url.clone(), TRANSPORT_PROTOCOL_JSONRPC);
        interface.protocol_version = version.to_owned();
        interface
    });
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
    AgentCard {
        name: agent.agent_id.to_string(),
        description,
        version: agent.updated_at.to_string(),
        supported_interfaces: interfaces.to_vec(),
        capabilities: AgentCapabilities {
            streaming: Some(true),
            push_notifications: Some(true),
            extensions: None,
            extended_agent_card: Some(false),
        },
        default_input_modes: vec!["text/plain".into(), "application/json".into()],
        default_output_modes: vec!["text/plain".into(), "application/json".into()],
        skills,
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
