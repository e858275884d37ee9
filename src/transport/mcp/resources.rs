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
use switchboard_types::inbox::InboxQuery;
use switchboard_types::{Operation, Reply};
use tokio::task::AbortHandle;

use crate::core::{Caller, Core};

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
        Named::Inbox => Operation::GetMessages(InboxQuery::default()),
        Named::Task(task_id) => Operation::GetTask {
            task_id: task_id.clone(),
        },
    };
    let reply: Reply = core.dispatch(caller, operation).await.map_err(|err| {
        let body = err.into_body();
        let data = serde_json::to_value(&body).ok();
        McpError::invalid_params(
            format!("{}: {}", body.error_code.as_str(), body.error_message),
            data,
        )
    })?;
    serde_json::to_value(reply).map_err(|e| McpError::internal_error(e.to_string(), None))
}

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
        let changes = core
            .inbox_changes(&caller)
            .map_err(|e| McpError::invalid_params(e.into_body().error_message, None))?;
        let mut map = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if map.contains_key(&uri) {
            return Ok(());
        }
        let core = core.clone();
        let key = uri.clone();
        let task = tokio::spawn(async move {
            let mut woken = Box::pin(changes.notified());
            woken.as_mut().enable();
            // Read after arming: a change from here on wakes the loop.
            let mut last = current(&core, &caller, &named).await.ok();
            loop {
                woken.as_mut().await;
                // Armed before acting on this change, so a commit meanwhile is not missed.
                woken = Box::pin(changes.notified());
                woken.as_mut().enable();
                if let Named::Task(_) = named {
                    // Only a change of this task is news for its subscribers.
                    let now = current(&core, &caller, &named).await.ok();
                    if now.is_none() || now == last {
                        continue;
                    }
                    last = now;
                }
                if peer
                    .notify_resource_updated(rmcp::model::ResourceUpdatedNotificationParam::new(
                        uri.clone(),
                    ))
                    .await
                    .is_err()
                {
                    return;
                }
            }
        });
        map.insert(key, task.abort_handle());
        Ok(())
    }

    pub fn unsubscribe(&self, uri: &str) {
        let mut map = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(task) = map.remove(uri) {
            task.abort();
        }
    }
}
