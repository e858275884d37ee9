//! The four-agent loop of MetaGPT's "code = SOP(team)" (`002_…`): four independent
//! agents that talk only through Switchboard.
//!
//! * **A, the architect**, splits the requirement into subtasks and submits each as a
//!   `TaskRequest` for someone who can `code`.
//! * **B, the engineer**, works each subtask (folding in the reviewer's last feedback),
//!   reports the result, and sends its output to C.
//! * **C, the integrator**, compiles B's outputs of a round into one build for D.
//! * **D, the reviewer**, reviews the build, sends feedback to B and the verdict to A.
//!
//! Three rounds; then A broadcasts completion and everyone stops. Each agent has its
//! own client and WebSocket, as four processes would.
//!
//! ```sh
//! cargo run -p switchboard-client --example team_loop -- --url http://127.0.0.1:8080 --admin-token <admin token>
//! ```

use std::time::Duration;

use serde_json::{Value, json};
use switchboard_client::{Client, ClientError};
use switchboard_types::broadcasts::{BroadcastContent, BroadcastUpdate, UpdateType, Urgency};
use switchboard_types::messages::{Content, MessageType, SendMessage};
use switchboard_types::tasks::{TaskRequest, TaskResponseStatus, TaskResult};

const SUBTASKS: [&str; 2] = ["parser", "report"];

#[path = "common/mod.rs"]
mod common;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    common::exit(run().await)
}

async fn run() -> Result<(), String> {
    let opts = common::options()?;
    let team_id = format!("sop-{}", std::process::id());
    let tokens = common::team(
        &opts,
        &team_id,
        &[
            json!({"agent_id": "A", "role": "architect", "capabilities": ["design"]}),
            json!({"agent_id": "B", "role": "engineer", "capabilities": ["code"]}),
            json!({"agent_id": "C", "role": "integrator", "capabilities": ["build"]}),
            json!({"agent_id": "D", "role": "reviewer", "capabilities": ["review"]}),
        ],
    )
    .await?;
    println!("team {team_id}: A architect, B engineer, C integrator, D reviewer");
    let mut clients = Vec::new();
    for token in &tokens {
        clients.push(
            Client::websocket(&opts.url, token)
                .await
                .map_err(|e| e.to_string())?,
        );
    }
    let [a, b, c, d]: [Client; 4] = clients.try_into().map_err(|_| "four clients")?;
    let rounds = opts.rounds;
    let agents = [
        tokio::spawn(architect(a, rounds)),
        tokio::spawn(engineer(b)),
        tokio::spawn(integrator(c)),
        tokio::spawn(reviewer(d)),
    ];
    let all = async {
        for agent in agents {
            agent
                .await
                .map_err(|e| e.to_string())?
                .map_err(|e| e.to_string())?;
        }
        Ok::<_, String>(())
    };
    tokio::time::timeout(Duration::from_secs(60), all)
        .await
        .map_err(|_| "the loop did not finish within 60 s".to_owned())??;
    println!("done: {rounds} rounds");
    Ok(())
}

fn message(from: &Client, to: &str, kind: MessageType, text: String, data: Value) -> SendMessage {
    SendMessage {
        content: Content {
            text,
            data: match data {
                Value::Object(map) => map,
                _ => Default::default(),
            },
            attachments: Vec::new(),
        },
        ..SendMessage::new(from.agent_id(), &[to], kind, "")
    }
}

/// Whether a frame is the completion broadcast that ends the loop.
fn is_done(frame: &Value) -> bool {
    frame["type"] == "message"
        && frame["message"]["kind"] == "broadcast"
        && frame["message"]["content"]["data"]["update_type"] == "completion"
}

async fn architect(a: Client, rounds: u32) -> Result<(), ClientError> {
    let mut incoming = a.incoming();
    for round in 1..=rounds {
        println!(
            "[A] round {round}: splitting the requirement into {}",
            SUBTASKS.join(", ")
        );
        for part in SUBTASKS {
            a.submit_task(TaskRequest {
                task_id: Some(format!("r{round}-{part}").into()),
                description: format!("Write the {part} module (round {round})"),
                data: json!({"round": round, "part": part})
                    .as_object()
                    .cloned()
                    .unwrap_or_default(),
                originating_agent_id: a.agent_id().into(),
                callback_url: None,
                priority: None,
                required_capabilities: vec!["code".into()],
                target_agent_id: None,
                parent_task_id: None,
                assignee_role: None,
            })
            .await?;
        }
        // Wait for the reviewer's verdict on this round.
        while let Some(entry) = incoming.recv().await {
            if let Some(m) = entry.message()
                && m.sender_agent_id == "D"
                && m.content.data.get("round") == Some(&json!(round))
            {
                println!("[A] round {round}: verdict from D: {}", m.content.text);
                break;
            }
        }
    }
    a.broadcast(
        BroadcastUpdate {
            sender_agent_id: a.agent_id().into(),
            update_type: UpdateType::Completion,
            urgency: Urgency::Info,
            content: BroadcastContent {
                summary: format!("All {rounds} rounds done"),
                details: "The build passed review.".into(),
                impact: "Ship it".into(),
                action_required: false,
            },
        },
        None,
    )
    .await?;
    println!("[A] broadcast completion");
    Ok(())
}

async fn engineer(b: Client) -> Result<(), ClientError> {
    let mut incoming = b.incoming();
    let mut feedback = String::from("none yet");
    while let Some(entry) = incoming.recv().await {
        if is_done(&entry.frame) {
            return Ok(());
        }
        if let Some(m) = entry.message()
            && m.sender_agent_id == "D"
        {
            feedback = m.content.text.clone();
            println!("[B] got feedback: {feedback}");
            continue;
        }
        if entry.kind() != "TaskRequest" {
            continue;
        }
        let task_id = entry.frame["task_id"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let round = entry.frame["data"]["round"].clone();
        let part = entry.frame["data"]["part"]
            .as_str()
            .unwrap_or("?")
            .to_owned();
        let code = format!("fn {part}() {{ /* round {round}, after feedback: {feedback} */ }}");
        b.report(
            &task_id,
            TaskResult {
                status: TaskResponseStatus::Success,
                result_data: json!({"code": code}),
            },
        )
        .await?;
        b.send_message(
            message(
                &b,
                "C",
                MessageType::Information,
                format!("{part} for round {round}"),
                json!({"round": round, "part": part, "code": code}),
            ),
            None,
        )
        .await?;
        println!("[B] {task_id}: done, sent to C");
    }
    Ok(())
}

async fn integrator(c: Client) -> Result<(), ClientError> {
    let mut incoming = c.incoming();
    let mut parts: Vec<(Value, String)> = Vec::new();
    while let Some(entry) = incoming.recv().await {
        if is_done(&entry.frame) {
            return Ok(());
        }
        let Some(m) = entry.message() else { continue };
        if m.sender_agent_id != "B" {
            continue;
        }
        let round = m.content.data.get("round").cloned().unwrap_or(Value::Null);
        let code = m
            .content
            .data
            .get("code")
            .and_then(Value::as_str)
            .unwrap_or("");
        parts.push((round.clone(), code.to_owned()));
        let ready: Vec<String> = parts
            .iter()
            .filter(|(r, _)| *r == round)
            .map(|(_, code)| code.clone())
            .collect();
        if ready.len() == SUBTASKS.len() {
            let build = ready.join("\n");
            c.send_message(
                message(
                    &c,
                    "D",
                    MessageType::Request,
                    format!("build of round {round}"),
                    json!({"round": round, "build": build}),
                ),
                None,
            )
            .await?;
            println!(
                "[C] round {round}: compiled {} parts, sent to D",
                ready.len()
            );
        }
    }
    Ok(())
}

async fn reviewer(d: Client) -> Result<(), ClientError> {
    let mut incoming = d.incoming();
    while let Some(entry) = incoming.recv().await {
        if is_done(&entry.frame) {
            return Ok(());
        }
        let Some(m) = entry.message() else { continue };
        if m.sender_agent_id != "C" {
            continue;
        }
        let round = m.content.data.get("round").cloned().unwrap_or(Value::Null);
        let lines = m
            .content
            .data
            .get("build")
            .and_then(Value::as_str)
            .map_or(0, |b| b.lines().count());
        let feedback = format!("round {round}: {lines} functions look fine; add docs");
        d.send_message(
            message(
                &d,
                "B",
                MessageType::Coordination,
                feedback.clone(),
                json!({"round": round}),
            ),
            None,
        )
        .await?;
        d.send_message(
            message(
                &d,
                "A",
                MessageType::Response,
                format!("approved: {feedback}"),
                json!({"round": round}),
            ),
            None,
        )
        .await?;
        println!("[D] round {round}: reviewed, feedback to B, verdict to A");
    }
    Ok(())
}
