//! `switchboard admin …`: create a team (admin token), register agents (team key), and
//! give a team a new key or an agent a new token.

use switchboard_client::{HttpTransport, call};
use switchboard_types::agents::{AgentRegistered, RegisterAgent};
use switchboard_types::teams::{CreateTeam, TeamCreated, TeamKeyRotated, TeamList};
use switchboard_types::{AgentOp, Operation, TeamOp};

use super::{AdminAgentCommand, AdminArgs, AdminCommand, Failure, TeamCommand, inert, show, token};

pub(super) async fn admin(args: AdminArgs) -> Result<(), Failure> {
    let c = &args.connection;
    let http = || -> Result<HttpTransport, Failure> { Ok(HttpTransport::new(&c.url, token(c)?)?) };
    match args.command {
        // Not a call to a server: the binary's main opens the database for it.
        AdminCommand::ResetToken { .. } => Err(Failure::Usage(
            "reset-token works on the database, not through a server".into(),
        )),
        AdminCommand::Team(command) => team(command, &http()?, c.json).await,
        AdminCommand::Agent(command) => agent(command, &http()?, c.json).await,
        AdminCommand::Approval(command) => {
            super::approval::approval(&http()?, c.json, command).await
        }
    }
}

/// `switchboard admin team …`.
async fn team(command: TeamCommand, http: &HttpTransport, json: bool) -> Result<(), Failure> {
    match command {
        TeamCommand::Create { name, team_id } => {
            let input = CreateTeam { name, team_id };
            let answer: TeamCreated =
                call(http, Operation::Teams(TeamOp::CreateTeam(input))).await?;
            show(json, &answer, || {
                format!(
                    "team {} created; its key (shown once): {}",
                    inert(&answer.team_id),
                    answer.team_key
                )
            });
        }
        TeamCommand::List => {
            let answer: TeamList = call(http, Operation::Teams(TeamOp::ListTeams)).await?;
            show(json, &answer, || {
                let lines: Vec<String> = answer
                    .teams
                    .iter()
                    .map(|t| {
                        format!(
                            "{}  {} ({} agents)",
                            inert(&t.team_id),
                            inert(&t.name),
                            t.agent_count
                        )
                    })
                    .collect();
                if lines.is_empty() {
                    "no teams".to_owned()
                } else {
                    lines.join("\n")
                }
            });
        }
        TeamCommand::RotateKey { team_id } => {
            let operation = Operation::Teams(TeamOp::RotateTeamKey { team_id });
            let answer: TeamKeyRotated = call(http, operation).await?;
            show(json, &answer, || {
                format!(
                    "team {} has a new key (shown once; the old one no longer works): {}",
                    inert(&answer.team_id),
                    answer.team_key
                )
            });
        }
    }
    Ok(())
}

/// `switchboard admin agent …`.
async fn agent(
    command: AdminAgentCommand,
    http: &HttpTransport,
    json: bool,
) -> Result<(), Failure> {
    match command {
        AdminAgentCommand::Register {
            team,
            agent_id,
            role,
            capabilities,
        } => {
            let agent = RegisterAgent {
                agent_id: agent_id.into(),
                role,
                capabilities,
                address: None,
                status: None,
                addresses: None,
                watch: None,
                stomp_bridge: None,
            };
            let operation = Operation::Agents(AgentOp::RegisterAgent {
                team_id: team.into(),
                agent,
            });
            let answer: AgentRegistered = call(http, operation).await?;
            show(json, &answer, || {
                format!(
                    "agent {} registered; its token (shown once): {}",
                    inert(&answer.agent.agent_id),
                    answer.token
                )
            });
        }
        AdminAgentCommand::RotateToken { team, agent_id } => {
            let operation = Operation::Agents(AgentOp::RotateAgentToken {
                team_id: team.into(),
                agent_id: agent_id.into(),
            });
            let answer: AgentRegistered = call(http, operation).await?;
            show(json, &answer, || {
                format!(
                    "agent {} has a new token (shown once; the old one no longer works): {}",
                    inert(&answer.agent.agent_id),
                    answer.token
                )
            });
        }
    }
    Ok(())
}
