//! A task's webhooks: further HTTP receivers of its changes, which its originator sets
//! through a transport (A2A's push notification configs are these).
//!
//! Every history entry written after a webhook was set is queued to it in the entry's
//! own transaction (a store trigger), so a committed change is never left unpushed, and
//! goes out through the callback sender: signed, retried with backoff, in order per
//! receiver. What a POST carries is the business of the transport that set the webhook:
//! it registers a [`WebhookFormat`] under its name, and the body is rendered from the
//! stored entry when it is sent. The credentials given for the receiver are sent with
//! each POST and never shown back.

use crate::core::Tasks;
use std::sync::Arc;
use switchboard_types::ids::{TaskId, TaskRef, WebhookId};

use switchboard_types::tasks::{Task, TaskEvent};
use switchboard_types::time::Timestamp;

use crate::core::egress::urls;
use crate::core::{Caller, Core, CoreError, CoreResult};
use crate::model::DueCallback;
use crate::model::WebhookRecord;

/// How a transport renders what its webhooks receive.
pub trait WebhookFormat: Send + Sync {
    /// The bodies to POST, in order, for one history entry of the task (the task as it
    /// is now; the entry says what changed then).
    fn render(&self, task: &Task, event: &TaskEvent) -> Result<Vec<String>, String>;
}

/// Webhooks a task may have.
pub const MAX_WEBHOOKS_PER_TASK: usize = 10;
/// Longest webhook id, token and credentials.
const MAX_ID: usize = 128;
const MAX_SECRET: usize = 4096;

/// A webhook to set on a task.
#[derive(Debug, Clone, Default)]
pub struct WebhookSpec {
    /// Its id; one is made when none is given. Setting an id again replaces it.
    pub id: Option<String>,
    pub url: String,
    /// Sent as `X-A2A-Notification-Token`.
    pub token: Option<String>,
    /// `(scheme, credentials)`, sent as `Authorization: <scheme> <credentials>`.
    pub auth: Option<(String, Option<String>)>,
}

/// A webhook as its owner sees it: everything but the credentials.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskWebhook {
    pub id: WebhookId,
    pub task_id: TaskId,
    pub url: String,
    pub token: Option<String>,
    pub auth_scheme: Option<String>,
    pub created_at: Timestamp,
}

/// One delivery as it goes out: the bodies to POST in order, with these headers.
#[derive(Debug, Clone)]
pub struct Outgoing {
    pub url: String,
    pub bodies: Vec<String>,
    pub headers: Vec<(&'static str, String)>,
}

impl Core {
    /// What a webhook's delivery sends: the bodies its format renders for the entry,
    /// with the webhook's headers; or why it cannot be sent.
    pub(super) async fn webhook_request(&self, due: &DueCallback) -> Result<Outgoing, String> {
        let pk = due.webhook_pk.ok_or("not a webhook delivery")?;
        let webhook = self
            .store()
            .webhook(pk)
            .await
            .map_err(|e| format!("reading the webhook: {e}"))?
            .ok_or("the webhook was removed")?;
        let crate::model::TaskSnapshot { task, events, .. } = self
            .store()
            .task_snapshot(due.task_pk)
            .await
            .map_err(|e| format!("reading the task: {e}"))?
            .ok_or("the task was removed")?;
        let event = events
            .into_iter()
            .find(|e| e.seq == due.event_seq)
            .ok_or("the history entry was removed")?;
        let format = self
            .inner
            .tasks
            .formats
            .read()
            .ok()
            .and_then(|formats| formats.get(&webhook.format).cloned())
            .ok_or_else(|| format!("no transport renders '{}' webhooks", webhook.format))?;
        let bodies = format.render(&self.task_view(&task), &self.event_view(event))?;
        let mut headers = Vec::new();
        if let Some(token) = webhook.token {
            headers.push(("x-a2a-notification-token", token));
        }
        if let Some((scheme, Some(credentials))) = webhook.auth {
            headers.push(("authorization", format!("{scheme} {credentials}")));
        }
        Ok(Outgoing {
            url: webhook.url,
            bodies,
            headers,
        })
    }

    /// The task with this id that the caller originated (named with the caller as its
    /// originator, so a task of the same id the caller was given is never the one found).
    async fn owned_task(
        &self,
        caller: &Caller,
        task_id: &TaskRef,
    ) -> CoreResult<crate::model::TaskRecord> {
        let (team, me) = self.identity().acting_agent(caller)?;
        let reference = if task_id.names_originator() {
            task_id.clone()
        } else {
            TaskRef::at(task_id, &me.agent_id)
        };
        let loaded = self.load_task(team, me, &reference).await?;
        if !loaded.party.originator {
            return Err(CoreError::forbidden(format!(
                "only the originator of task '{task_id}' sets its webhooks"
            )));
        }
        Ok(loaded.task)
    }
}

fn view(task_id: &str, w: WebhookRecord) -> TaskWebhook {
    TaskWebhook {
        id: w.webhook_id.clone(),
        task_id: task_id.to_owned().into(),
        url: w.url,
        token: w.token,
        auth_scheme: w.auth.map(|(scheme, _)| scheme),
        created_at: w.created_at,
    }
}

fn checked(field: &str, value: String, max: usize) -> CoreResult<String> {
    if value.len() > max || value.chars().any(char::is_control) {
        return Err(CoreError::validation(
            field,
            format!("{field} must be at most {max} bytes without control characters"),
        ));
    }
    Ok(value)
}

fn no_webhook(task_id: &str, webhook_id: &str) -> CoreError {
    CoreError::not_found(format!("task '{task_id}' has no webhook '{webhook_id}'"))
        .with("webhook_id", webhook_id)
}

impl<'a> Tasks<'a> {
    /// Makes `format`'s webhooks renderable: a transport calls this once at start.
    pub fn register_webhook_format(self, name: &str, format: Arc<dyn WebhookFormat>) {
        if let Ok(mut formats) = self.core.inner.tasks.formats.write() {
            formats.insert(name.to_owned(), format);
        }
    }

    /// Sets a webhook on a task the caller originated, rendered by `format`. With
    /// `replay_after`, the entries after that sequence number are queued to it too.
    pub async fn add_task_webhook(
        self,
        caller: &Caller,
        task_id: &TaskRef,
        format: &str,
        spec: WebhookSpec,
        replay_after: Option<i64>,
    ) -> CoreResult<TaskWebhook> {
        let task = self.core.owned_task(caller, task_id).await?;
        let spec = self.check_webhook(spec)?;
        let webhook_id = spec.id.unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
        let (token, auth) = (spec.token, spec.auth);
        let existing = self.core.store().task_webhooks(task.pk).await?;
        if existing.len() >= MAX_WEBHOOKS_PER_TASK
            && !existing.iter().any(|w| w.webhook_id == webhook_id)
        {
            return Err(CoreError::validation(
                "id",
                format!("a task has at most {MAX_WEBHOOKS_PER_TASK} webhooks"),
            ));
        }
        let record = WebhookRecord {
            pk: 0,
            task_pk: task.pk,
            team_pk: task.team_pk,
            webhook_id: webhook_id.into(),
            format: format.to_owned(),
            url: spec.url,
            token,
            auth,
            created_at: Timestamp::now(),
        };
        self.core
            .store()
            .put_webhook(record.clone(), replay_after)
            .await?;
        self.core.inner.tasks.callbacks_queued.notify_one();
        Ok(view(&task.task_id, record))
    }

    /// The webhook as it would be set, or why it cannot be: a transport checks before it
    /// makes the task a webhook is for, so a refused webhook leaves nothing behind.
    pub fn check_webhook(self, spec: WebhookSpec) -> CoreResult<WebhookSpec> {
        urls::check_named(
            &spec.url,
            self.core.inner.tasks.settings.allow_private_callbacks,
            "url",
        )?;
        let id = match spec.id.filter(|id| !id.is_empty()) {
            Some(id) => Some(checked("id", id, MAX_ID)?),
            None => None,
        };
        let token = spec
            .token
            .map(|t| checked("token", t, MAX_SECRET))
            .transpose()?;
        let auth = match spec.auth {
            Some((scheme, credentials)) => Some((
                checked("authentication.scheme", scheme, MAX_ID)?,
                credentials
                    .map(|c| checked("authentication.credentials", c, MAX_SECRET))
                    .transpose()?,
            )),
            None => None,
        };
        Ok(WebhookSpec {
            id,
            url: spec.url,
            token,
            auth,
        })
    }

    /// The webhooks of a task the caller originated, oldest first.
    pub async fn task_webhooks(
        self,
        caller: &Caller,
        task_id: &TaskRef,
    ) -> CoreResult<Vec<TaskWebhook>> {
        let task = self.core.owned_task(caller, task_id).await?;
        let stored = self.core.store().task_webhooks(task.pk).await?;
        Ok(stored.into_iter().map(|w| view(&task.task_id, w)).collect())
    }

    /// One webhook of a task the caller originated; `NOT_FOUND` when it has none of
    /// that id.
    pub async fn task_webhook(
        self,
        caller: &Caller,
        task_id: &TaskRef,
        webhook_id: &WebhookId,
    ) -> CoreResult<TaskWebhook> {
        self.task_webhooks(caller, task_id)
            .await?
            .into_iter()
            .find(|w| w.id == *webhook_id)
            .ok_or_else(|| no_webhook(task_id, webhook_id))
    }

    /// Removes a webhook (and what it still had to send) from a task the caller
    /// originated; whether there was one. Removing is idempotent (A2A's spec says so of
    /// deleting a push config): a webhook already gone is no error, an unknown task is.
    pub async fn remove_task_webhook(
        self,
        caller: &Caller,
        task_id: &TaskRef,
        webhook_id: &WebhookId,
    ) -> CoreResult<bool> {
        let task = self.core.owned_task(caller, task_id).await?;
        Ok(self
            .core
            .store()
            .delete_webhook(task.pk, webhook_id.to_string())
            .await?)
    }
}
