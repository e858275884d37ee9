//! `switchboard apply -f team.yaml`: a team written down, and the server made to agree.
//! The file is read whole and every problem reported (with its line) before anything is
//! sent; then the plan — what differs between the file and the server — is shown, and
//! applied unless `--dry-run`. Applying the same file again changes nothing.

mod file;

use std::io::Write;
use std::path::PathBuf;

use clap::Args;
use serde_json::{Map, Value};
use switchboard_client::{ClientError, HttpTransport, call};
use switchboard_types::agents::{AgentList, AgentQuery, AgentRegistered, AgentView, UpdateAgent};
use switchboard_types::ids::AgentId;
use switchboard_types::teams::{CreateTeam, TeamCreated, TeamView, UpdateTeam};
use switchboard_types::{AgentOp, ErrorCode, TeamOp};

use super::{Connection, Failure, finish, inert, print_line, token};
use file::TeamFile;

/// `switchboard apply …`.
#[derive(Debug, Args)]
pub struct ApplyArgs {
    #[command(flatten)]
    pub connection: Connection,
    /// The team file (YAML; see examples/team.yaml).
    #[arg(short = 'f', long = "file")]
    pub file: PathBuf,
    /// Show what would change, and change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Also remove the team's agents the file does not name.
    #[arg(long)]
    pub prune: bool,
    /// Write new agents' tokens (and a new team's key) to this file, readable by you
    /// only, instead of printing them.
    #[arg(long)]
    pub tokens_out: Option<PathBuf>,
}

/// Runs `switchboard apply …`.
pub async fn run_apply(args: ApplyArgs) -> std::process::ExitCode {
    finish(apply(args).await)
}

/// One change the file asks for.
#[derive(Debug)]
enum Change {
    CreateTeam(CreateTeam),
    UpdateTeam(UpdateTeam, Vec<String>),
    Register(Box<switchboard_types::agents::RegisterAgent>),
    Update(AgentId, UpdateAgent, Vec<String>),
    RegisterRemote(switchboard_types::agents::RegisterRemoteAgent),
    Remove(AgentId),
}

async fn apply(args: ApplyArgs) -> Result<(), Failure> {
    let shown = args.file.display().to_string();
    let text = std::fs::read_to_string(&args.file)
        .map_err(|e| Failure::Usage(format!("{shown}: cannot read it: {e}")))?;
    let team = file::read(&text).map_err(|problems| {
        Failure::Usage(
            problems
                .iter()
                .map(|p| format!("{shown}: {p}"))
                .collect::<Vec<_>>()
                .join("\nerror: "),
        )
    })?;
    let http = HttpTransport::new(&args.connection.url, token(&args.connection)?)?;
    let changes = plan(&team, &http, args.prune).await?;
    if changes.is_empty() {
        print_line(&format!("team {}: nothing to change", inert(&team.team_id)));
        return Ok(());
    }
    for change in &changes {
        print_line(&describe(change, args.dry_run));
    }
    if args.dry_run {
        print_line(&format!(
            "{} changes (dry run: nothing applied)",
            changes.len()
        ));
        return Ok(());
    }
    let mut secrets = Vec::new();
    let mut applied = Ok(());
    for change in changes {
        applied = execute(&team, &http, change, &mut secrets).await;
        if applied.is_err() {
            break;
        }
    }
    // What was created before a refusal keeps its secret: a team's key or an agent's
    // token is shown once, whatever came after it.
    keep_secrets(&secrets, args.tokens_out.as_ref())?;
    applied
}

/// What differs between the file and the server, in the order it is applied.
async fn plan(team: &TeamFile, http: &HttpTransport, prune: bool) -> Result<Vec<Change>, Failure> {
    let id = team.team_id.clone();
    let mut changes = Vec::new();
    let current: Option<TeamView> = match call(
        http,
        TeamOp::GetTeam {
            team_id: id.clone(),
        }
        .into(),
    )
    .await
    {
        Ok(view) => Some(view),
        Err(err) if not_found(&err) => None,
        Err(err) => return Err(err.into()),
    };
    let agents: Vec<AgentView> = match current {
        Some(_) => {
            let query = AgentQuery::default();
            let list: AgentList = call(
                http,
                AgentOp::ListAgents {
                    team_id: id.clone(),
                    query,
                }
                .into(),
            )
            .await?;
            list.agents
        }
        None => Vec::new(),
    };
    let view = match &current {
        Some(view) => to_map(view),
        None => {
            let Some(Value::String(name)) = team.settings.get("name") else {
                return Err(Failure::Usage(format!(
                    "team {} does not exist: give it a `name` in the file to create it",
                    inert(&id)
                )));
            };
            changes.push(Change::CreateTeam(CreateTeam {
                name: name.clone(),
                team_id: Some(id.clone()),
            }));
            Map::new()
        }
    };
    let mut settings = differing(&team.settings, &view);
    if current.is_none() {
        settings.remove("name");
    }
    agent_changes(team, &agents, &mut changes)?;
    // After the agents (an approver must be a member), before any removal.
    if !settings.is_empty() {
        let described = describe_fields(&settings, &view);
        changes.push(Change::UpdateTeam(decode(settings)?, described));
    }
    if prune {
        changes.extend(removals(team, &agents));
    }
    Ok(changes)
}

/// The team's agents the file does not name (`--prune`).
fn removals(team: &TeamFile, agents: &[AgentView]) -> Vec<Change> {
    let named = |id: &AgentId| {
        team.agents.iter().any(|a| a.agent_id == *id)
            || team.a2a_agents.iter().any(|r| r.agent_id == *id)
    };
    agents
        .iter()
        .filter(|a| !named(&a.agent_id))
        .map(|a| Change::Remove(a.agent_id.clone()))
        .collect()
}

fn agent_changes(
    team: &TeamFile,
    agents: &[AgentView],
    changes: &mut Vec<Change>,
) -> Result<(), Failure> {
    let find = |id: &AgentId| agents.iter().find(|a| a.agent_id == *id);
    for entry in &team.agents {
        match find(&entry.agent_id) {
            None => {
                let registration = file::registration(entry)
                    .map_err(|e| Failure::Usage(format!("agent {}: {e}", entry.agent_id)))?;
                changes.push(Change::Register(Box::new(registration)));
                if entry.fields.get("communication_enabled") == Some(&Value::Bool(false)) {
                    let patch =
                        Map::from_iter([("communication_enabled".into(), Value::Bool(false))]);
                    let described = vec!["communication_enabled → false".into()];
                    changes.push(Change::Update(
                        entry.agent_id.clone(),
                        decode(patch)?,
                        described,
                    ));
                }
            }
            Some(view) => {
                let view = to_map(view);
                let patch = differing(&entry.fields, &view);
                if !patch.is_empty() {
                    let described = describe_fields(&patch, &view);
                    changes.push(Change::Update(
                        entry.agent_id.clone(),
                        decode(patch)?,
                        described,
                    ));
                }
            }
        }
    }
    for remote in &team.a2a_agents {
        if find(&remote.agent_id).is_none() {
            changes.push(Change::RegisterRemote(
                switchboard_types::agents::RegisterRemoteAgent {
                    card_url: remote.card_url.clone(),
                    agent_id: Some(remote.agent_id.clone()),
                    authorization: remote.authorization.clone(),
                },
            ));
        }
    }
    Ok(())
}

/// The file's fields whose value the server does not have; a mapping (budgets, the loop
/// guard) differs when one of the keys the file gives does.
fn differing(wanted: &Map<String, Value>, current: &Map<String, Value>) -> Map<String, Value> {
    wanted
        .iter()
        .filter(|(key, value)| !agrees(value, current.get(key.as_str()).unwrap_or(&Value::Null)))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

fn agrees(wanted: &Value, current: &Value) -> bool {
    match (wanted, current) {
        (Value::Object(wanted), Value::Object(current)) => wanted
            .iter()
            .all(|(k, v)| agrees(v, current.get(k).unwrap_or(&Value::Null))),
        (Value::Number(a), Value::Number(b)) => a.as_f64() == b.as_f64(),
        _ => wanted == current,
    }
}

fn describe_fields(fields: &Map<String, Value>, current: &Map<String, Value>) -> Vec<String> {
    fields
        .iter()
        .map(|(key, value)| match current.get(key) {
            Some(old) => format!(
                "{key}: {} → {}",
                inert(&old.to_string()),
                inert(&value.to_string())
            ),
            None => format!("{key} → {}", inert(&value.to_string())),
        })
        .collect()
}

fn describe(change: &Change, dry_run: bool) -> String {
    let will = if dry_run { "would " } else { "" };
    match change {
        Change::CreateTeam(create) => format!(
            "+ {will}create team {} ({})",
            inert(&create.team_id.clone().unwrap_or_default()),
            inert(&create.name)
        ),
        Change::UpdateTeam(_, fields) => {
            format!("~ {will}set team settings: {}", fields.join("; "))
        }
        Change::Register(agent) => format!(
            "+ {will}register agent {} ({}; {})",
            inert(&agent.agent_id),
            inert(&agent.role),
            inert(&agent.capabilities.join(", "))
        ),
        Change::Update(id, _, fields) => {
            format!("~ {will}update agent {}: {}", inert(id), fields.join("; "))
        }
        Change::RegisterRemote(remote) => format!(
            "+ {will}register outside A2A agent {} ({})",
            inert(
                &remote
                    .agent_id
                    .clone()
                    .map(|a| a.to_string())
                    .unwrap_or_default()
            ),
            inert(&remote.card_url)
        ),
        Change::Remove(id) => format!("- {will}remove agent {}", inert(id)),
    }
}

async fn execute(
    team: &TeamFile,
    http: &HttpTransport,
    change: Change,
    secrets: &mut Vec<(String, String)>,
) -> Result<(), Failure> {
    let team_id = team.team_id.clone();
    match change {
        Change::CreateTeam(create) => {
            let created: TeamCreated = call(http, TeamOp::CreateTeam(create).into()).await?;
            secrets.push(("team_key".into(), created.team_key));
        }
        Change::UpdateTeam(patch, _) => {
            let _: TeamView = call(http, TeamOp::UpdateTeam { team_id, patch }.into()).await?;
        }
        Change::Register(agent) => {
            let operation = AgentOp::RegisterAgent {
                team_id,
                agent: *agent,
            };
            let registered: AgentRegistered = call(http, operation.into()).await?;
            secrets.push((registered.agent.agent_id.to_string(), registered.token));
        }
        Change::Update(agent_id, patch, _) => {
            let _: Value = call(
                http,
                AgentOp::UpdateAgent {
                    team_id,
                    agent_id,
                    patch,
                }
                .into(),
            )
            .await?;
        }
        Change::RegisterRemote(remote) => {
            http.register_remote_agent(team_id.as_str(), &remote)
                .await?;
        }
        Change::Remove(agent_id) => {
            let _: Value = call(http, AgentOp::RemoveAgent { team_id, agent_id }.into()).await?;
        }
    }
    Ok(())
}

/// New secrets, shown once: printed, or written to `out` (created for its owner only).
fn keep_secrets(secrets: &[(String, String)], out: Option<&PathBuf>) -> Result<(), Failure> {
    if secrets.is_empty() {
        return Ok(());
    }
    let Some(path) = out else {
        for (name, secret) in secrets {
            print_line(&format!("{} (shown once): {secret}", inert(name)));
        }
        return Ok(());
    };
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let text: String = secrets
        .iter()
        .map(|(name, secret)| format!("{name}: {secret}\n"))
        .collect();
    let written = options
        .open(path)
        .and_then(|mut f| f.write_all(text.as_bytes()));
    written.map_err(|e| Failure::Usage(format!("cannot write {}: {e}", path.display())))?;
    print_line(&format!(
        "{} new secrets written to {}",
        secrets.len(),
        path.display()
    ));
    Ok(())
}

fn not_found(err: &ClientError) -> bool {
    matches!(err.code(), Some(ErrorCode::NotFound))
}

fn to_map(view: &impl serde::Serialize) -> Map<String, Value> {
    match serde_json::to_value(view) {
        Ok(Value::Object(map)) => map,
        _ => Map::new(),
    }
}

fn decode<T: serde::de::DeserializeOwned>(fields: Map<String, Value>) -> Result<T, Failure> {
    serde_json::from_value(Value::Object(fields)).map_err(|e| Failure::Usage(e.to_string()))
}
