//! The inbox and tasks as MCP resources: `switchboard://inbox` (the newest page of the
//! caller's inbox) and `switchboard://tasks/{task_id}`. A subscription is a task of the
//! session that waits for the hub to say the caller's inbox changed (every task change
//! reaches the inbox of those it concerns) and sends `notifications/resources/updated`;
//! for a task, only when the task itself changed.

use std::collections::HashMap;
use std::sync::Mutex;

use rmcp::ErrorData as McpError;
use rmcp::model::{ReadResourceResult, Resource, ResourceContents, ResourceTemplate};
use rmcp::service::{Peer, RoleServer};
use serde_json::Value;
use switchboard_types::inbox::{InboxQuery, MAX_PAGE};
use switchboard_types::{MessageOp, Operation, Reply, TaskOp};
use tokio::task::AbortHandle;

use switchboard_types::ErrorCode;

use crate::core::{Caller, Core, CoreError};

pub const INBOX: &str = "switchboard://inbox";
const TASKS: &str = "switchboard://tasks/";

pub fn list() -> Vec<Resource> {
    vec![
        Resource::new(INBOX, "inbox")
            .with_description(
                "Your inbox: the newest page of GET_MESSAGES (messages, responses, \
                 broadcasts, task notifications) with total_count and unread_count. \
                 Subscribe to hear when something arrives.",
            )
            .with_mime_type("application/json"),
    ]
}

pub fn templates() -> Vec<ResourceTemplate> {
    vec![
        ResourceTemplate::new(format!("{TASKS}{{task_id}}"), "task")
            .with_description(
                "A task you gave or work on: status, assignee, result, history. Subscribe \
                 to hear when it changes.",
            )
            .with_mime_type("application/json"),
    ]
}

/// What a resource URI names.
enum Named {
    Inbox,
    Task(String),
}

fn parse(uri: &str) -> Result<Named, McpError> {
    if uri == INBOX {
        return Ok(Named::Inbox);
    }
    match uri.strip_prefix(TASKS) {
        Some(id) if !id.is_empty() && !id.contains('/') => Ok(Named::Task(id.to_owned())),
        _ => Err(McpError::resource_not_found(
            format!("no resource '{uri}': there are {INBOX} and {TASKS}{{task_id}}"),
            None,
        )),
    }
}

/// The resource's current content as JSON, read as `caller`.
async fn current(core: &Core, caller: &Caller, named: &Named) -> Result<Value, McpError> {
    let operation = match named {
        Named::Inbox => Operation::Messages(MessageOp::GetMessages(InboxQuery::default())),
        Named::Task(task_id) => Operation::Tasks(TaskOp::GetTask {
            task_id: task_id.clone().into(),
        }),
    };
    let reply: Reply = core.dispatch(caller, operation).await.map_err(refused)?;
    serde_json::to_value(reply).map_err(|e| McpError::internal_error(e.to_string(), None))
}

/// A core refusal as an MCP error, the contract's body in `data`: `-32000` (JSON-RPC's
/// server-error range) for a bound the caller may retry after (`RATE_LIMITED`), `-32602`
/// for anything about what the request named.
pub(super) fn refused(err: CoreError) -> McpError {
    let body = err.into_body();
    let data = serde_json::to_value(&body).ok();
    let message = format!("{}: {}", body.error_code.as_str(), body.error_message);
    match body.error_code {
        ErrorCode::RateLimited | ErrorCode::Unavailable => {
            McpError::new(rmcp::model::ErrorCode(-32000), message, data)
        }
        _ => McpError::invalid_params(message, data),
    }
}

/// Most resources one session subscribes to at once: each is a task and a feed of the
/// server's, so a session cannot make them without end.
pub const MAX_SUBSCRIPTIONS: usize = 64;

pub async fn read(core: &Core, caller: &Caller, uri: &str) -> Result<ReadResourceResult, McpError> {
    let value = current(core, caller, &parse(uri)?).await?;
    let text = ResourceContents::text(value.to_string(), uri).with_mime_type("application/json");
    Ok(ReadResourceResult::new(vec![text]))
}

/// A session's subscriptions; dropped with the session, which ends them.
#[derive(Default)]
pub struct Subscriptions(Mutex<HashMap<String, AbortHandle>>);

impl Drop for Subscriptions {
    fn drop(&mut self) {
        let map = self.0.get_mut().unwrap_or_else(|p| p.into_inner());
        for (_, task) in map.drain() {
            task.abort();
        }
    }
}

impl Subscriptions {
    /// Subscribes the session to `uri` (again is a no-op). The resource must be readable
    /// by `caller` now.
    pub async fn subscribe(
        &self,
        core: &Core,
        caller: Caller,
        uri: String,
        peer: Peer<RoleServer>,
    ) -> Result<(), McpError> {
        let named = parse(&uri)?;
        // Readable by the caller now, or refused.
        current(core, &caller, &named).await?;
        let ready = {
            let mut map = self.0.lock().unwrap_or_else(|p| p.into_inner());
            if map.contains_key(&uri) {
                return Ok(());
            }
            if map.len() >= MAX_SUBSCRIPTIONS {
                return Err(refused(
                    CoreError::new(
                        ErrorCode::RateLimited,
                        format!(
                            "this session already follows {MAX_SUBSCRIPTIONS} resources; \
                             unsubscribe from one first"
                        ),
                    )
                    .with("max", MAX_SUBSCRIPTIONS),
                ));
            }
            let (armed, ready) = tokio::sync::oneshot::channel();
            let key = uri.clone();
            let task = tokio::spawn(follow(
                core.clone(),
                caller,
                vec![uri],
                Some(armed),
                async move |uri| {
                    let update = rmcp::model::ResourceUpdatedNotificationParam::new(uri);
                    peer.notify_resource_updated(update).await.is_ok()
                },
            ));
            map.insert(key, task.abort_handle());
            ready
        };
        // Answered once listening: a change after the answer is never missed.
        let _ = ready.await;
        Ok(())
    }

    pub fn unsubscribe(&self, uri: &str) {
        let mut map = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(task) = map.remove(uri) {
            task.abort();
        }
    }
}

/// The URIs of `requested` this server serves (for `subscriptions/listen`).
pub fn known(requested: &[String]) -> Vec<String> {
    requested
        .iter()
        .filter(|u| parse(u).is_ok())
        .cloned()
        .collect()
}

/// Serves one `subscriptions/listen` stream (the 2026-07-28 revision) until the client
/// cancels it. The SDK acknowledges the stream before this runs, so a change in the
/// moment between the two is not reported (the revision promises no replay: a client
/// reads the resource after the acknowledgment).
pub async fn listen(core: &Core, caller: Caller, context: rmcp::service::SubscriptionContext) {
    let uris = context
        .accepted()
        .resource_subscriptions
        .clone()
        .unwrap_or_default();
    let sink = context.sink().clone();
    let sending = follow(core.clone(), caller, uris, None, async move |uri| {
        sink.notify_resource_updated(uri).await.is_ok()
    });
    tokio::select! {
        () = sending => {}
        () = context.cancelled() => {}
    }
}

/// Tells `send` about each change of `uris` as `caller` sees them, until `send` says the
/// client is gone: once per batch of new entries in the caller's inbox (the core's feed,
/// listening from before the first read); a task's URI only when the task itself changed.
async fn follow(
    core: Core,
    caller: Caller,
    uris: Vec<String>,
    armed: Option<tokio::sync::oneshot::Sender<()>>,
    mut send: impl AsyncFnMut(String) -> bool,
) {
    let (Ok(mut feed), Ok(removed)) = (
        core.live().feed_watch(&caller, None).await,
        core.live().removal_signal(&caller),
    ) else {
        return;
    };
    let named: Vec<(String, Named)> = uris
        .into_iter()
        .filter_map(|uri| parse(&uri).ok().map(|named| (uri, named)))
        .collect();
    // The first read arms the feed: a change from here on is reported.
    if feed.next_batch(MAX_PAGE).await.is_err() {
        return;
    }
    let mut last = Vec::with_capacity(named.len());
    for (_, named) in &named {
        last.push(current(&core, &caller, named).await.ok());
    }
    if let Some(armed) = armed {
        let _ = armed.send(());
    }
    loop {
        tokio::select! {
            _ = feed.ready() => {}
            // The agent was removed: its subscriptions end with it.
            () = removed.cancelled() => return,
        }
        match feed.next_batch(MAX_PAGE).await {
            Ok(entries) if entries.is_empty() => continue,
            Ok(_) => {}
            Err(_) => return,
        }
        for ((uri, named), last) in named.iter().zip(last.iter_mut()) {
            if let Named::Task(_) = named {
                // Only a change of this task is news for its subscribers.
                let now = current(&core, &caller, named).await.ok();
                if now.is_none() || now == *last {
                    continue;
                }
                *last = now;
            }
            if !send(uri.clone()).await {
                return;
            }
        }
    }
}
