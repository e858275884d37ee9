//! The A2A client side: reading an outside agent's card and calling its JSON-RPC 1.0
//! interface, with the official crate's types. Every request goes through the server's
//! outgoing client (public addresses only unless allowed, no redirects, a timeout).

use a2a::{AgentCard, Task as A2aTask};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use switchboard_types::tasks::Task;

use crate::core::egress::describe;

/// Where the card is, when the URL given is the agent's base URL.
const WELL_KNOWN: &str = "/.well-known/agent-card.json";

/// The JSON-RPC binding's name on cards.
const JSONRPC: &str = "JSONRPC";

/// Why a call did not give an answer.
#[derive(Debug, Clone)]
pub enum CallError {
    /// No answer: connection refused, timeout, not JSON-RPC, an HTTP error status.
    Unreachable(String),
    /// The agent answered with a JSON-RPC error.
    Refused { code: i64, message: String },
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CallError::Unreachable(why) => write!(f, "{why}"),
            CallError::Refused { code, message } => write!(f, "error {code}: {message}"),
        }
    }
}

/// A card, read and checked: where its JSON-RPC 1.0 interface is.
#[derive(Debug, Clone)]
pub struct ReadCard {
    pub card: AgentCard,
    /// The card as served.
    pub raw: String,
    pub interface_url: String,
}

/// The card URL for what a user gave: a card's URL, or the agent's base URL.
pub fn card_url(given: &str) -> String {
    let given = given.trim();
    if given.ends_with(".json") {
        given.to_owned()
    } else {
        format!("{}{WELL_KNOWN}", given.trim_end_matches('/'))
    }
}

/// Fetches and checks the card at `url`: it must be an A2A card with a JSON-RPC
/// interface for protocol 1.x.
pub async fn read_card(
    http: &reqwest::Client,
    url: &str,
    authorization: Option<&str>,
) -> Result<ReadCard, String> {
    let mut request = http.get(url).header("accept", "application/json");
    if let Some(value) = authorization {
        request = request.header("authorization", value);
    }
    let response = request
        .send()
        .await
        .map_err(|e| format!("the card at {url} could not be fetched: {}", describe(&e)))?;
    let status = response.status();
    if !status.is_success() {
        return Err(format!(
            "the card at {url} answered HTTP {}",
            status.as_u16()
        ));
    }
    let raw = response
        .text()
        .await
        .map_err(|e| format!("the card at {url} could not be read: {}", describe(&e)))?;
    let card: AgentCard =
        serde_json::from_str(&raw).map_err(|e| format!("{url} is not an A2A agent card: {e}"))?;
    if card.name.trim().is_empty() {
        return Err(format!("the card at {url} has no name"));
    }
    let interface = card
        .supported_interfaces
        .iter()
        .find(|i| i.protocol_binding == JSONRPC && i.protocol_version.starts_with("1."))
        .ok_or_else(|| format!("the card at {url} offers no JSON-RPC interface for A2A 1.x"))?;
    Ok(ReadCard {
        interface_url: interface.url.clone(),
        card,
        raw,
    })
}

/// One outside agent's JSON-RPC interface.
pub struct Remote<'a> {
    pub http: &'a reqwest::Client,
    pub url: &'a str,
    pub authorization: Option<&'a str>,
    /// W3C trace headers the calls carry.
    pub trace: Vec<(&'static str, String)>,
}

impl Remote<'_> {
    /// Calls made about `task` carry its trace (`traceparent`, `tracestate`): the outside
    /// agent's work is a child of the task's span.
    pub fn traced(mut self, task: &Task) -> Self {
        self.trace = task
            .trace_fields()
            .map(|(name, value)| (name, value.to_owned()))
            .collect();
        self
    }

    /// Calls `method` and reads its result as `T`.
    pub async fn call<T: DeserializeOwned>(
        &self,
        method: &str,
        params: Value,
    ) -> Result<T, CallError> {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        let mut request = self
            .http
            .post(self.url)
            .header("a2a-version", "1.0")
            .json(&body);
        if let Some(value) = self.authorization {
            request = request.header("authorization", value);
        }
        for (name, value) in &self.trace {
            request = request.header(*name, value);
        }
        let response = request
            .send()
            .await
            .map_err(|e| CallError::Unreachable(describe(&e)))?;
        let status = response.status();
        if !status.is_success() {
            return Err(CallError::Unreachable(format!(
                "{} answered HTTP {}",
                self.url,
                status.as_u16()
            )));
        }
        let answer: Value = response.json().await.map_err(|e| {
            CallError::Unreachable(format!("not a JSON-RPC answer: {}", describe(&e)))
        })?;
        if let Some(error) = answer.get("error") {
            return Err(CallError::Refused {
                code: error["code"].as_i64().unwrap_or(0),
                message: error["message"].as_str().unwrap_or_default().to_owned(),
            });
        }
        serde_json::from_value(answer["result"].clone()).map_err(|e| {
            CallError::Unreachable(format!("{method} answered with an unexpected result: {e}"))
        })
    }

    pub async fn get_task(&self, id: &str) -> Result<A2aTask, CallError> {
        self.call("GetTask", json!({"id": id, "historyLength": 0}))
            .await
    }
}
