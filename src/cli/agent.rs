//! `switchboard agent …` but `task`: listen, send, the inbox, read marks, responses,
//! broadcasts, assistance.

use serde_json::Map;
use switchboard_client::Client;
use switchboard_types::assistance::{AssistanceType, RequestAssistance, RequestDetails};
use switchboard_types::broadcasts::{BroadcastContent, BroadcastUpdate, UpdateType, Urgency};
use switchboard_types::inbox::InboxQuery;
use switchboard_types::messages::{
    Content, MessageType, Priority, RespondToMessage, ResponseContent, ResponseStatus, SendMessage,
    SortOrder,
};

use super::{AgentArgs, AgentCommand, Failure, inert, json_object, parse, show, token};

pub(super) async fn agent(args: AgentArgs) -> Result<(), Failure> {
    let c = &args.connection;
    let token = token(c)?;
    if let AgentCommand::Ws {
        since,
        news_only,
        activity,
        linger,
    } = args.command
    {
        return super::ws::ws(&c.url, token, since, news_only, activity, linger).await;
    }
    if let AgentCommand::Listen { since, count } = args.command {
        let client = Client::websocket(&c.url, token).await?;
        return listen(&client, c.json, since, count).await;
    }
    let client = Client::http(&c.url, token).await?;
    let json = c.json;
    match args.command {
        AgentCommand::Listen { .. } | AgentCommand::Ws { .. } => Ok(()),
        AgentCommand::Send {
            to,
            text,
            message_type,
            priority,
            requires_response,
            data,
            thread,
        } => {
            let message = SendMessage {
                priority: parse::<Priority>("priority", &priority)?,
                requires_response,
                thread_id: thread,
                content: Content {
                    text,
                    data: json_object("data", data.as_deref())?,
                    attachments: Vec::new(),
                },
                ..SendMessage::new(
                    client.agent_id(),
                    &to.iter().map(String::as_str).collect::<Vec<_>>(),
                    parse::<MessageType>("message type", &message_type)?,
                    "",
                )
            };
            send(&client, json, message).await
        }
        AgentCommand::Inbox {
            unread,
            limit,
            oldest_first,
        } => inbox(&client, json, unread, limit, oldest_first).await,
        AgentCommand::Read { message_ids } => read(&client, json, &message_ids).await,
        AgentCommand::Respond {
            message_id,
            text,
            status,
        } => respond(&client, json, &message_id, text, &status).await,
        AgentCommand::Broadcast {
            summary,
            update_type,
            urgency,
            details,
        } => broadcast(&client, json, summary, &update_type, &urgency, details).await,
        AgentCommand::Assist {
            description,
            assistance_type,
            capabilities,
        } => assist(&client, json, description, &assistance_type, capabilities).await,
        AgentCommand::Task(command) => super::task::task(&client, json, command).await,
        AgentCommand::Lease(command) => super::lease::lease(&client, json, command).await,
        AgentCommand::Approval(command) => {
            let http = switchboard_client::HttpTransport::new(&c.url, token)?;
            super::approval::approval(&http, json, command).await
        }
    }
}

/// Prints every incoming frame as it comes: one short line for a person, or with `--json`
/// the frame itself as one JSON line; either inert on a terminal (see [`super::inert`]).
async fn listen(
    client: &Client,
    json: bool,
    since: Option<i64>,
    count: Option<usize>,
) -> Result<(), Failure> {
    let mut incoming = match since {
        Some(after) => client.incoming_after(after),
        None => client.incoming(),
    };
    let mut seen = 0;
    while let Some(entry) = incoming.recv().await {
        let line = if json {
            super::inert_json(&entry.frame.to_string())
        } else {
            super::inert(&heard(&entry.frame))
        };
        super::print_line(&line);
        seen += 1;
        if count.is_some_and(|n| seen >= n) {
            break;
        }
    }
    Ok(())
}

async fn send(client: &Client, json: bool, message: SendMessage) -> Result<(), Failure> {
    let sent = client.send_message(message, None).await?;
    show(json, &sent, || {
        let d = &sent.delivery_status;
        format!(
            "sent {} — delivered: [{}] pending: [{}] failed: [{}]",
            sent.message_id,
            d.delivered_to.join(", "),
            d.pending_delivery.join(", "),
            d.failed_delivery.join(", ")
        )
    });
    Ok(())
}

async fn inbox(
    client: &Client,
    json: bool,
    unread: bool,
    limit: i64,
    oldest_first: bool,
) -> Result<(), Failure> {
    let page = client
        .get_messages(InboxQuery {
            unread_only: Some(unread),
            limit: Some(limit),
            sort_order: Some(if oldest_first {
                SortOrder::OldestFirst
            } else {
                SortOrder::NewestFirst
            }),
            ..InboxQuery::default()
        })
        .await?;
    show(json, &page, || {
        let mut out = format!(
            "{} messages ({} unread)",
            page.total_count, page.unread_count
        );
        for m in &page.messages {
            out.push_str(&format!(
                "\n{} {} #{} {} from {}: {}",
                if m.read_status { " " } else { "*" },
                m.timestamp,
                m.seq.unwrap_or(0),
                inert(&m.message_id),
                inert(&m.sender_agent_id),
                inert(&m.content.text)
            ));
        }
        out
    });
    Ok(())
}

async fn read(client: &Client, json: bool, message_ids: &[String]) -> Result<(), Failure> {
    let ids: Vec<&str> = message_ids.iter().map(String::as_str).collect();
    let marked = client.mark_read(&ids).await?;
    show(json, &marked, || {
        format!(
            "marked read: [{}] already read: [{}] not found: [{}]",
            inert(&marked.marked_read.join(", ")),
            inert(&marked.already_read.join(", ")),
            inert(&marked.not_found.join(", "))
        )
    });
    Ok(())
}

async fn respond(
    client: &Client,
    json: bool,
    message_id: &str,
    text: String,
    status: &str,
) -> Result<(), Failure> {
    let response = RespondToMessage {
        responder_agent_id: client.agent_id().into(),
        original_message_id: None,
        response_content: ResponseContent {
            text,
            data: Map::new(),
            status: parse::<ResponseStatus>("status", status)?,
        },
        additional_recipients: Vec::new(),
        route: None,
    };
    let answer = client.respond(message_id, response, None).await?;
    show(json, &answer, || {
        format!("responded with {}", answer.response_message_id)
    });
    Ok(())
}

async fn broadcast(
    client: &Client,
    json: bool,
    summary: String,
    update_type: &str,
    urgency: &str,
    details: String,
) -> Result<(), Failure> {
    let update = BroadcastUpdate {
        sender_agent_id: client.agent_id().into(),
        update_type: parse::<UpdateType>("update type", update_type)?,
        urgency: parse::<Urgency>("urgency", urgency)?,
        content: BroadcastContent {
            summary,
            details,
            impact: String::new(),
            action_required: false,
        },
    };
    let answer = client.broadcast(update, None).await?;
    show(json, &answer, || {
        format!(
            "broadcast {} to [{}]",
            answer.broadcast_id,
            inert(&answer.recipients.join(", "))
        )
    });
    Ok(())
}

async fn assist(
    client: &Client,
    json: bool,
    description: String,
    assistance_type: &str,
    capabilities: Vec<String>,
) -> Result<(), Failure> {
    let request = RequestAssistance {
        requester_agent_id: client.agent_id().into(),
        assistance_type: parse::<AssistanceType>("assistance type", assistance_type)?,
        required_capabilities: capabilities,
        request_details: RequestDetails {
            description,
            context: String::new(),
            deadline: None,
            priority: Priority::Normal,
        },
        target_agents: Vec::new(),
    };
    let answer = client.request_assistance(request, None).await?;
    show(json, &answer, || {
        let who: Vec<String> = answer
            .potential_responders
            .iter()
            .map(|r| format!("{} ({:.2})", inert(&r.agent_id), r.capability_match))
            .collect();
        format!(
            "assistance request {} — can help: {}",
            answer.request_id,
            who.join(", ")
        )
    });
    Ok(())
}

/// A frame as one line for a person: `#12 request from planner: Review PR 42`, a task
/// notification by its type and task, anything else by its type.
fn heard(frame: &serde_json::Value) -> String {
    let seq = frame["seq"]
        .as_i64()
        .map_or_else(String::new, |s| format!("#{s} "));
    let kind = frame["type"].as_str().unwrap_or("frame");
    let text = |v: &serde_json::Value| v.as_str().unwrap_or_default().to_owned();
    if kind == "message" {
        let m = &frame["message"];
        return format!(
            "{seq}{} from {}: {}",
            text(&m["message_type"]),
            text(&m["sender_agent_id"]),
            text(&m["content"]["text"])
        );
    }
    match frame["task_id"].as_str() {
        Some(task) => {
            let about = [
                "description",
                "question",
                "answer",
                "reason",
                "error_message",
            ]
            .iter()
            .find_map(|k| frame[*k].as_str())
            .map_or_else(
                || frame["status"].as_str().unwrap_or_default().to_owned(),
                str::to_owned,
            );
            format!("{seq}{kind} {task}: {about}")
        }
        None => format!("{seq}{kind}"),
    }
}
