//! A task's webhooks as stored: further HTTP receivers of its changes, set by its
//! originator through a transport (A2A push notification configs).

use switchboard_types::ids::WebhookId;
use switchboard_types::ids::{TaskPk, TeamPk};
use switchboard_types::time::Timestamp;

/// A webhook as stored (`pk` is ignored when one is added). The credentials are kept to
/// be sent, never shown back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookRecord {
    pub pk: i64,
    pub task_pk: TaskPk,
    pub team_pk: TeamPk,
    pub webhook_id: WebhookId,
    /// Who renders its bodies (a transport's name, e.g. `a2a`).
    pub format: String,
    pub url: String,
    pub token: Option<String>,
    /// `(scheme, credentials)` of its `Authorization` header.
    pub auth: Option<(String, Option<String>)>,
    pub created_at: Timestamp,
}
