//! Push notification configs: the four config methods (1.0 and 0.3 shapes) over the
//! core's task webhooks, and how their POSTs look (the [`WebhookFormat`]s).
//!
//! A config is a webhook of the task, so its notifications are the callback sender's:
//! queued in the transaction of each change, signed (`Switchboard-Signature`), retried
//! with backoff, in order. Each POST also carries `X-A2A-Notification-Token` (the
//! config's token) and `Authorization: <scheme> <credentials>` (its `authentication`).
//! A 1.0 config receives one `StreamResponse` per POST (a change that finished the task
//! with a result is two: the artifact, then the status); a 0.3 config receives the task,
//! as 0.3 senders post it. Get and List never show the credentials.

use std::sync::Arc;
use switchboard_types::ids::{TaskRef, WebhookId};

use a2a::{
    A2AError, AuthenticationInfo, DeleteTaskPushNotificationConfigRequest,
    GetTaskPushNotificationConfigRequest, ListTaskPushNotificationConfigsRequest,
    ListTaskPushNotificationConfigsResponse, TaskPushNotificationConfig,
};
use serde_json::{Value, json};
use switchboard_types::ErrorCode;
use switchboard_types::tasks::{Task, TaskEvent};

use super::convert;
use super::rpc::{Interface, decode, to_a2a};
use super::v03::{self, Dialect};
use crate::core::tasks::{TaskWebhook, WebhookFormat, WebhookSpec};
use crate::core::{Core, CoreError};

/// The webhook formats of 1.0 and 0.3 configs.
const FORMAT_V1: &str = "a2a";
const FORMAT_V03: &str = "a2a-0.3";

/// Teaches the core to render A2A webhooks.
pub fn register(core: &Core) {
    core.tasks()
        .register_webhook_format(FORMAT_V1, Arc::new(StreamResponses));
    core.tasks()
        .register_webhook_format(FORMAT_V03, Arc::new(LegacyTask));
}

/// 1.0: the entry's stream events, one per POST.
struct StreamResponses;

impl WebhookFormat for StreamResponses {
    fn render(&self, task: &Task, event: &TaskEvent) -> Result<Vec<String>, String> {
        convert::events(task, event)
            .iter()
            .map(|update| serde_json::to_string(update).map_err(|e| e.to_string()))
            .collect()
    }
}

/// 0.3: the task as it is, once per change.
struct LegacyTask;

impl WebhookFormat for LegacyTask {
    fn render(&self, task: &Task, _event: &TaskEvent) -> Result<Vec<String>, String> {
        let task = json!({ "task": convert::task(task, None) });
        Ok(vec![Dialect::V03.result(task).to_string()])
    }
}

/// One of the four config methods, answered in the request's dialect.
pub async fn call(interface: &Interface, method: &str, params: Value) -> Result<Value, A2AError> {
    let dialect = interface.dialect;
    let format = format_of(dialect);
    let core = &interface.state.core;
    let caller = &interface.caller;
    let shown = |webhook: TaskWebhook| match dialect {
        Dialect::V1 => json!(config_of(webhook)),
        Dialect::V03 => v03::push_config_out(json!(config_of(webhook))),
    };
    match method {
        "CreateTaskPushNotificationConfig" => {
            let config: TaskPushNotificationConfig = decode(params)?;
            let task_id = config.task_id.clone();
            interface.task(&task_id).await?;
            let webhook = core
                .tasks()
                .add_task_webhook(
                    caller,
                    &TaskRef::from(task_id),
                    format,
                    spec_of(config),
                    None,
                )
                .await
                .map_err(to_a2a)?;
            Ok(shown(webhook))
        }
        "GetTaskPushNotificationConfig" => {
            let request: GetTaskPushNotificationConfigRequest = decode(params)?;
            interface.task(&request.task_id).await?;
            let (task, webhook) = (
                TaskRef::from(request.task_id.as_str()),
                WebhookId::from(request.id.as_str()),
            );
            core.tasks()
                .task_webhook(caller, &task, &webhook)
                .await
                .map(shown)
                .map_err(|err| config_error(err, &request.task_id, &request.id))
        }
        "ListTaskPushNotificationConfigs" => {
            let request: ListTaskPushNotificationConfigsRequest = decode(params)?;
            interface.task(&request.task_id).await?;
            let webhooks = core
                .tasks()
                .task_webhooks(caller, &TaskRef::from(request.task_id))
                .await
                .map_err(to_a2a)?;
            Ok(match dialect {
                Dialect::V1 => json!(ListTaskPushNotificationConfigsResponse {
                    configs: webhooks.into_iter().map(config_of).collect(),
                    next_page_token: None,
                }),
                Dialect::V03 => Value::Array(webhooks.into_iter().map(shown).collect()),
            })
        }
        "DeleteTaskPushNotificationConfig" => {
            let request: DeleteTaskPushNotificationConfigRequest = decode(params)?;
            interface.task(&request.task_id).await?;
            // Idempotent: deleting a config that is already gone succeeds.
            let (task, webhook) = (
                TaskRef::from(request.task_id.as_str()),
                WebhookId::from(request.id.as_str()),
            );
            core.tasks()
                .remove_task_webhook(caller, &task, &webhook)
                .await
                .map_err(|err| config_error(err, &request.task_id, &request.id))?;
            Ok(match dialect {
                Dialect::V1 => json!({}),
                Dialect::V03 => Value::Null,
            })
        }
        other => Err(super::rpc::unknown_method(other)),
    }
}

/// Sets the push config a send carried on the task it made (or answered), with every
/// entry after `after_seq` queued to it: nothing between the send and the config is
/// missed. Without an id the config takes the task's, so a retried send sets it again
/// instead of adding a second one.
pub async fn on_send(
    interface: &Interface,
    task_id: &str,
    mut config: TaskPushNotificationConfig,
    after_seq: i64,
) -> Result<(), A2AError> {
    config.id = config
        .id
        .filter(|id| !id.is_empty())
        .or_else(|| Some(task_id.to_owned()));
    interface
        .state
        .core
        .tasks()
        .add_task_webhook(
            &interface.caller,
            &TaskRef::from(task_id),
            format_of(interface.dialect),
            spec_of(config),
            Some(after_seq),
        )
        .await
        .map(|_| ())
        .map_err(to_a2a)
}

fn format_of(dialect: Dialect) -> &'static str {
    match dialect {
        Dialect::V1 => FORMAT_V1,
        Dialect::V03 => FORMAT_V03,
    }
}

/// Refuses a config a send carries before the send makes anything.
pub fn check(interface: &Interface, config: &TaskPushNotificationConfig) -> Result<(), A2AError> {
    interface
        .state
        .core
        .tasks()
        .check_webhook(spec_of(config.clone()))
        .map(|_| ())
        .map_err(to_a2a)
}

fn spec_of(config: TaskPushNotificationConfig) -> WebhookSpec {
    WebhookSpec {
        id: config.id,
        url: config.url,
        token: config.token,
        auth: config.authentication.map(|a| (a.scheme, a.credentials)),
    }
}

/// A webhook as a config, without its credentials.
fn config_of(webhook: TaskWebhook) -> TaskPushNotificationConfig {
    TaskPushNotificationConfig {
        url: webhook.url,
        id: Some(webhook.id.to_string()),
        task_id: webhook.task_id.to_string(),
        token: webhook.token,
        authentication: webhook.auth_scheme.map(|scheme| AuthenticationInfo {
            scheme,
            credentials: None,
        }),
        tenant: None,
    }
}

/// A missing config is A2A's TaskNotFound (as the SDK's own server answers); the
/// contract's `NOT_FOUND` stays in the error's metadata.
fn config_error(err: CoreError, task_id: &str, id: &str) -> A2AError {
    if err.code() != ErrorCode::NotFound {
        return to_a2a(err);
    }
    to_a2a(
        CoreError::new(
            ErrorCode::TaskNotFound,
            format!("task '{task_id}' has no push notification config '{id}'"),
        )
        .with("config_id", id),
    )
}
