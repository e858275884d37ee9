//! MetaGPT's four-agent example (`002_…`: A splits the requirement, B codes, C compiles,
//! D reviews and sends feedback to B; steps B → C → D three times), written with publish
//! and watch only: nobody names a recipient. Each agent watches the tags it reacts to
//! and publishes its output to everyone; the team stops when it is idle, as a MetaGPT
//! environment does.
//!
//! | agent | watches | publishes |
//! |---|---|---|
//! | A, architect | `UserRequirement`, `Verdict` | `Requirement` |
//! | B, engineer | `Requirement`, `Feedback` | `Code` |
//! | C, integrator | `Code` | `Build` |
//! | D, reviewer | `Build` | `Feedback` (rounds 1–2), `Verdict` (round 3) |
//!
//! (`--rounds N` changes the number of rounds.)
//!
//! Each agent handles a piece of news by publishing its output first and marking the
//! news read second, so between the first message and the verdict someone always has
//! unread news and the team is busy; it turns idle only when A has read the verdict.
//! Each agent has its own client and WebSocket, as five processes would.
//!
//! ```sh
//! cargo run -p switchboard-client --example metagpt_loop -- --url http://127.0.0.1:8080 --admin-token <admin token>
//! ```

use std::time::Duration;

use serde_json::{Value, json};
use switchboard_client::{Client, ClientError};
use switchboard_types::messages::Content;
use switchboard_types::publish::Publish;

#[path = "common/mod.rs"]
mod common;

/// Rounds of B → C → D (`--rounds`, 3 by default), set once at start.
static ROUNDS: std::sync::OnceLock<u64> = std::sync::OnceLock::new();

fn rounds() -> u64 {
    ROUNDS.get().copied().unwrap_or(3)
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    common::exit(run().await)
}

async fn run() -> Result<(), String> {
    let opts = common::options()?;
    let _ = ROUNDS.set(u64::from(opts.rounds.max(1)));
    let team_id = format!("metagpt-{}", std::process::id());
    let agent = |id: &str, role: &str, watch: Value| json!({"agent_id": id, "role": role, "capabilities": [], "watch": watch});
    let tokens = common::team(
        &opts,
        &team_id,
        &[
            agent("user", "Human", json!([])),
            agent("A", "Architect", json!(["UserRequirement", "Verdict"])),
            agent("B", "Engineer", json!(["Requirement", "Feedback"])),
            agent("C", "Integrator", json!(["Code"])),
            agent("D", "Reviewer", json!(["Build"])),
        ],
    )
    .await?;
    let mut clients = Vec::new();
    for token in &tokens {
        clients.push(
            Client::websocket(&opts.url, token)
                .await
                .map_err(|e| e.to_string())?,
        );
    }
    println!("team {team_id}: A architect, B engineer, C integrator, D reviewer");
    let [user, a, b, c, d]: [Client; 5] = clients.try_into().map_err(|_| "five clients")?;
    let agents = [
        tokio::spawn(role(a, architect)),
        tokio::spawn(role(b, engineer)),
        tokio::spawn(role(c, integrator)),
        tokio::spawn(role(d, reviewer)),
    ];
    user.publish(
        Publish::new("UserRequirement", "Write a CLI that counts words"),
        None,
    )
    .await
    .map_err(|e| e.to_string())?;
    println!("[user] published the requirement");
    // The environment's loop: run until every role is idle.
    let idle = async {
        loop {
            tokio::time::sleep(Duration::from_millis(50)).await;
            let activity = user.team_activity().await.map_err(|e| e.to_string())?;
            if activity.idle {
                return Ok::<_, String>(());
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(60), idle)
        .await
        .map_err(|_| "the team was still busy after 60 s".to_owned())??;
    for agent in &agents {
        agent.abort();
    }
    for agent in agents {
        if let Ok(Err(err)) = agent.await {
            return Err(err.to_string());
        }
    }
    println!("team idle: done after {} rounds", rounds());
    Ok(())
}

/// What a role does with one piece of news: the publish it answers with, if any.
type Act = fn(&str, &Value) -> Option<Publish>;

/// Runs a role: for each entry that is news, publish the answer, then mark it read.
async fn role(me: Client, act: Act) -> Result<(), ClientError> {
    let mut incoming = me.incoming();
    while let Some(entry) = incoming.recv().await {
        let Some(m) = entry.message() else { continue };
        if m.news != Some(true) {
            continue;
        }
        let tag = m.cause_by.clone().unwrap_or_default();
        let data = Value::Object(m.content.data.clone());
        if let Some(answer) = act(&tag, &data) {
            me.publish(answer, None).await?;
        }
        me.mark_read(&[m.message_id.as_str()]).await?;
    }
    Ok(())
}

fn publish(tag: &str, text: String, data: Value) -> Publish {
    Publish {
        content: Content {
            text,
            data: match data {
                Value::Object(map) => map,
                _ => Default::default(),
            },
            attachments: Vec::new(),
        },
        ..Publish::new(tag, "")
    }
}

fn round_of(data: &Value) -> u64 {
    data["round"].as_u64().unwrap_or(1)
}

fn architect(tag: &str, data: &Value) -> Option<Publish> {
    match tag {
        "UserRequirement" => {
            println!("[A] splitting the requirement into subtasks");
            Some(publish(
                "Requirement",
                "Subtasks: parse arguments, count words, print the total".into(),
                json!({"round": 1}),
            ))
        }
        _ => {
            println!("[A] verdict after round {}: approved", round_of(data));
            None
        }
    }
}

fn engineer(tag: &str, data: &Value) -> Option<Publish> {
    let round = round_of(data);
    println!("[B] round {round}: coding ({tag})");
    Some(publish(
        "Code",
        format!("wc.rs, round {round}"),
        json!({"round": round}),
    ))
}

fn integrator(_tag: &str, data: &Value) -> Option<Publish> {
    let round = round_of(data);
    println!("[C] round {round}: compiled");
    Some(publish(
        "Build",
        format!("build of round {round}: ok"),
        json!({"round": round}),
    ))
}

fn reviewer(_tag: &str, data: &Value) -> Option<Publish> {
    let round = round_of(data);
    if round < rounds() {
        println!("[D] round {round}: feedback for B");
        Some(publish(
            "Feedback",
            format!("round {round}: handle empty input"),
            json!({"round": round + 1}),
        ))
    } else {
        println!("[D] round {round}: verdict for A");
        Some(publish(
            "Verdict",
            "approved".into(),
            json!({"round": round}),
        ))
    }
}
