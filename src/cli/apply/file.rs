//! A team file (`switchboard apply -f team.yaml`) read into what the command compares
//! with the server: every problem found, each with its line, before anything is sent.

use serde_json::{Map, Number, Value};
use switchboard_types::agents::{RegisterAgent, RegisterRemoteAgent, UpdateAgent};
use switchboard_types::ids::{AgentId, TeamId};
use switchboard_types::teams::UpdateTeam;

use crate::yaml::{self, Node};

/// The team a file describes.
#[derive(Debug)]
pub struct TeamFile {
    pub team_id: TeamId,
    /// The team's settings as `PATCH /v1/teams/{team_id}` takes them (`name` included),
    /// each key as the file gave it.
    pub settings: Map<String, Value>,
    pub agents: Vec<AgentEntry>,
    pub a2a_agents: Vec<RemoteEntry>,
}

/// One agent of the file: its id and its fields as `PATCH …/agents/{agent_id}` names
/// them (`role` and `capabilities` included).
#[derive(Debug)]
pub struct AgentEntry {
    pub agent_id: AgentId,
    pub fields: Map<String, Value>,
}

/// An outside A2A agent of the file, registered by its card.
#[derive(Debug)]
pub struct RemoteEntry {
    pub agent_id: AgentId,
    pub card_url: String,
    pub authorization: Option<String>,
}

/// The keys a team file's top level may have.
const TOP: &[&str] = &["team", "name", "settings", "agents", "a2a_agents"];

/// Reads a team file; `Err` holds every problem as `line N: what`.
pub fn read(text: &str) -> Result<TeamFile, Vec<String>> {
    let root = yaml::parse(text).map_err(|e| vec![e.to_string()])?;
    let Node::Mapping { entries, line } = root else {
        return Err(vec![format!(
            "line {}: a team file is a mapping (team: …, agents: …)",
            root.line()
        )]);
    };
    let mut problems = Vec::new();
    let mut say = |line: usize, what: String| problems.push(format!("line {line}: {what}"));
    for (key, value) in &entries {
        if !TOP.contains(&key.as_str()) {
            say(
                value.line(),
                format!("`{key}` is not a key of a team file ({})", TOP.join(", ")),
            );
        }
    }
    let get = |name: &str| entries.iter().find(|(k, _)| k == name).map(|(_, v)| v);
    let team_id = match get("team") {
        None => {
            say(line, "`team` (the team's id) is missing".into());
            None
        }
        Some(node) => match scalar(node).map(|t| TeamId::parse("team", &t)) {
            Some(Ok(id)) => Some(id),
            Some(Err(e)) => {
                say(node.line(), e.error_message);
                None
            }
            None => {
                say(
                    node.line(),
                    "`team` is the team's id, a single value".into(),
                );
                None
            }
        },
    };
    let mut settings = Map::new();
    if let Some(node) = get("name") {
        settings.insert("name".into(), json(node));
    }
    match get("settings") {
        Some(Node::Mapping { entries, .. }) => {
            for (key, value) in entries {
                settings.insert(key.clone(), json(value));
            }
        }
        Some(node) if !node.is_null() => say(node.line(), "`settings` is a mapping".into()),
        _ => {}
    }
    check_settings(&settings, &get, &mut say);
    let agents = list(get("agents"), "agents", &mut say)
        .iter()
        .filter_map(|node| agent(node, &mut say))
        .collect::<Vec<_>>();
    let a2a_agents = list(get("a2a_agents"), "a2a_agents", &mut say)
        .iter()
        .filter_map(|node| remote(node, &mut say))
        .collect::<Vec<_>>();
    duplicates(&agents, &a2a_agents, &mut say);
    match team_id {
        Some(team_id) if problems.is_empty() => Ok(TeamFile {
            team_id,
            settings,
            agents,
            a2a_agents,
        }),
        _ => Err(problems),
    }
}

/// Each setting alone through the body `PATCH` takes, so each problem has its own line.
fn check_settings<'a>(
    settings: &Map<String, Value>,
    get: &dyn Fn(&str) -> Option<&'a Node>,
    say: &mut dyn FnMut(usize, String),
) {
    for (key, value) in settings {
        let line = line_of_setting(key, get);
        let one = Value::Object(Map::from_iter([(key.clone(), value.clone())]));
        if let Err(e) = serde_json::from_value::<UpdateTeam>(one) {
            say(line, format!("settings: {e}"));
        }
    }
}

fn line_of_setting<'a>(key: &str, get: &dyn Fn(&str) -> Option<&'a Node>) -> usize {
    if key == "name" {
        return get("name").map_or(1, Node::line);
    }
    match get("settings") {
        Some(Node::Mapping { entries, line }) => entries
            .iter()
            .find(|(k, _)| k == key)
            .map_or(*line, |(_, v)| v.line()),
        Some(node) => node.line(),
        None => 1,
    }
}

fn list<'a>(node: Option<&'a Node>, key: &str, say: &mut dyn FnMut(usize, String)) -> &'a [Node] {
    match node {
        Some(Node::Sequence { items, .. }) => items,
        Some(node) if !node.is_null() => {
            say(node.line(), format!("`{key}` is a list"));
            &[]
        }
        _ => &[],
    }
}

/// The keys an agent entry may have beside `id`.
const AGENT_KEYS: &[&str] = &[
    "role",
    "capabilities",
    "address",
    "addresses",
    "status",
    "watch",
    "communication_enabled",
];

fn agent(node: &Node, say: &mut dyn FnMut(usize, String)) -> Option<AgentEntry> {
    let Node::Mapping { entries, line } = node else {
        say(node.line(), "an agent is a mapping (id: …, role: …)".into());
        return None;
    };
    let mut fields = Map::new();
    let mut agent_id = None;
    let mut ok = true;
    for (key, value) in entries {
        if key == "id" {
            match scalar(value).map(|t| AgentId::parse("id", &t)) {
                Some(Ok(id)) => agent_id = Some(id),
                Some(Err(e)) => {
                    say(value.line(), e.error_message);
                    return None;
                }
                None => {
                    say(value.line(), "an agent's `id` is a single value".into());
                    return None;
                }
            }
        } else if AGENT_KEYS.contains(&key.as_str()) {
            let one = Value::Object(Map::from_iter([(key.clone(), json(value))]));
            match serde_json::from_value::<UpdateAgent>(one) {
                Ok(_) => {
                    fields.insert(key.clone(), json(value));
                }
                Err(e) => {
                    say(value.line(), format!("agent: {e}"));
                    ok = false;
                }
            }
        } else {
            say(
                value.line(),
                format!(
                    "`{key}` is not a field of an agent (id, {})",
                    AGENT_KEYS.join(", ")
                ),
            );
            ok = false;
        }
    }
    let Some(agent_id) = agent_id else {
        say(*line, "an agent needs an `id`".into());
        return None;
    };
    if !fields.contains_key("role") {
        say(*line, format!("agent `{agent_id}` needs a `role`"));
        return None;
    }
    ok.then_some(AgentEntry { agent_id, fields })
}

fn remote(node: &Node, say: &mut dyn FnMut(usize, String)) -> Option<RemoteEntry> {
    let Node::Mapping { line, .. } = node else {
        say(
            node.line(),
            "an outside A2A agent is a mapping (agent_id: …, card_url: …)".into(),
        );
        return None;
    };
    match serde_json::from_value::<RegisterRemoteAgent>(json(node)) {
        Ok(RegisterRemoteAgent {
            card_url,
            agent_id: Some(agent_id),
            authorization,
        }) => Some(RemoteEntry {
            agent_id,
            card_url,
            authorization,
        }),
        Ok(_) => {
            say(
                *line,
                "an outside A2A agent needs an `agent_id` (so applying again finds it)".into(),
            );
            None
        }
        Err(e) => {
            say(*line, format!("outside A2A agent: {e}"));
            None
        }
    }
}

fn duplicates(agents: &[AgentEntry], remotes: &[RemoteEntry], say: &mut dyn FnMut(usize, String)) {
    let mut seen = std::collections::BTreeSet::new();
    let ids = agents
        .iter()
        .map(|a| &a.agent_id)
        .chain(remotes.iter().map(|r| &r.agent_id));
    for id in ids {
        if !seen.insert(id.as_str()) {
            say(1, format!("agent `{id}` is named twice"));
        }
    }
}

/// A single value's text, if the node is one.
fn scalar(node: &Node) -> Option<String> {
    match node {
        Node::Scalar { text, .. } if !node.is_null() => Some(text.clone()),
        _ => None,
    }
}

/// The node as JSON, reading plain scalars as YAML does: `true`, `false`, null's
/// spellings and numbers; anything quoted is a string.
pub fn json(node: &Node) -> Value {
    match node {
        Node::Scalar { .. } if node.is_null() => Value::Null,
        Node::Scalar {
            text, plain: true, ..
        } => match text.as_str() {
            "true" | "True" | "TRUE" => Value::Bool(true),
            "false" | "False" | "FALSE" => Value::Bool(false),
            _ => text
                .parse::<i64>()
                .map(Number::from)
                .ok()
                .or_else(|| text.parse::<f64>().ok().and_then(Number::from_f64))
                .map_or_else(|| Value::String(text.clone()), Value::Number),
        },
        Node::Scalar { text, .. } => Value::String(text.clone()),
        Node::Sequence { items, .. } => Value::Array(items.iter().map(json).collect()),
        Node::Mapping { entries, .. } => {
            Value::Object(entries.iter().map(|(k, v)| (k.clone(), json(v))).collect())
        }
    }
}

/// `RegisterAgent` for a new agent of the file.
pub fn registration(entry: &AgentEntry) -> Result<RegisterAgent, serde_json::Error> {
    let mut body = entry.fields.clone();
    body.remove("communication_enabled");
    body.insert("agent_id".into(), Value::String(entry.agent_id.to_string()));
    body.entry("capabilities")
        .or_insert_with(|| Value::Array(Vec::new()));
    serde_json::from_value(Value::Object(body))
}
