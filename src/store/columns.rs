//! Reading records out of rows, once for every engine.
//!
//! The engines store the same columns in slightly different types (a flag is an
//! `INTEGER` 0/1 on SQLite, a `BOOLEAN` on PostgreSQL); [`Columns`] hides that, so each
//! record is decoded by one function whichever engine read it, and a column added to a
//! record is added in one place.

use sqlx::Row;
use sqlx::postgres::PgRow;
use sqlx::sqlite::SqliteRow;
use switchboard_types::ids::{
    AgentId, AgentPk, ClarificationId, MessageId, MessagePk, TaskPk, TeamPk,
};
use switchboard_types::messages::{Attachment, Content, Priority, ResponseStatus};
use switchboard_types::task_state::TaskStatus;
use switchboard_types::tasks::CallbackDelivery;
use switchboard_types::teams::Retention;
use switchboard_types::time::Timestamp;

use super::StoreError;
use crate::model::RemoteAgentRecord;
use crate::model::WebhookRecord;
use crate::model::{
    AgentRecord, MessageRecord, PublishedRecord, SecretHash, TaskEventRecord, TaskRecord,
    TeamRecord, TrafficRow,
};

/// A column by position or by name. By position where rows are many: replay decodes a
/// hundred thousand messages a second, and a lookup by name per column showed in its
/// profile.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Col<'a> {
    At(usize),
    Named(&'a str),
}

impl From<usize> for Col<'_> {
    fn from(i: usize) -> Self {
        Col::At(i)
    }
}

impl<'a> From<&'a str> for Col<'a> {
    fn from(name: &'a str) -> Self {
        Col::Named(name)
    }
}

/// The column types records are made of, as each engine stores them.
pub(crate) trait Columns {
    fn int<'a>(&self, c: impl Into<Col<'a>>) -> Result<i64, StoreError>;
    fn opt_int<'a>(&self, c: impl Into<Col<'a>>) -> Result<Option<i64>, StoreError>;
    fn text<'a>(&self, c: impl Into<Col<'a>>) -> Result<String, StoreError>;
    fn opt_text<'a>(&self, c: impl Into<Col<'a>>) -> Result<Option<String>, StoreError>;
    fn flag<'a>(&self, c: impl Into<Col<'a>>) -> Result<bool, StoreError>;
    fn opt_bytes<'a>(&self, c: impl Into<Col<'a>>) -> Result<Option<Vec<u8>>, StoreError>;
    /// The length in bytes of a text column (0 for NULL), read without a copy: what a
    /// row weighs for a page's byte bound.
    fn text_len<'a>(&self, c: impl Into<Col<'a>>) -> Result<usize, StoreError>;

    /// A text column parsed into one of the types' enums.
    fn parse<'a, T: std::str::FromStr>(&self, c: impl Into<Col<'a>>) -> Result<T, StoreError> {
        let c = c.into();
        let text = self.text(c)?;
        text.parse().map_err(|_| corrupt(c, &text))
    }

    /// A nullable text column parsed into one of the types' enums.
    fn opt_parse<'a, T: std::str::FromStr>(
        &self,
        c: impl Into<Col<'a>>,
    ) -> Result<Option<T>, StoreError> {
        let c = c.into();
        self.opt_text(c)?
            .map(|text| text.parse().map_err(|_| corrupt(c, &text)))
            .transpose()
    }

    /// A JSON text column.
    fn json<'a, T: serde::de::DeserializeOwned>(
        &self,
        c: impl Into<Col<'a>>,
    ) -> Result<T, StoreError> {
        let c = c.into();
        let text = self.text(c)?;
        serde_json::from_str(&text).map_err(|e| StoreError::Corrupt(format!("{c:?}: {e}")))
    }

    /// A nullable JSON text column.
    fn opt_json<'a, T: serde::de::DeserializeOwned>(
        &self,
        c: impl Into<Col<'a>>,
    ) -> Result<Option<T>, StoreError> {
        let c = c.into();
        self.opt_text(c)?
            .map(|text| serde_json::from_str(&text))
            .transpose()
            .map_err(|e| StoreError::Corrupt(format!("{c:?}: {e}")))
    }

    fn time<'a>(&self, c: impl Into<Col<'a>>) -> Result<Timestamp, StoreError> {
        self.int(c).map(Timestamp::from_micros)
    }

    fn opt_time<'a>(&self, c: impl Into<Col<'a>>) -> Result<Option<Timestamp>, StoreError> {
        Ok(self.opt_int(c)?.map(Timestamp::from_micros))
    }
}

fn corrupt(c: Col<'_>, value: &str) -> StoreError {
    StoreError::Corrupt(format!("{c:?} '{value}'"))
}

/// Implements [`Columns`] for an engine's row: `$flag` reads a flag column.
macro_rules! columns_for {
    ($row:ty, $flag:expr) => {
        impl Columns for $row {
            fn int<'a>(&self, c: impl Into<Col<'a>>) -> Result<i64, StoreError> {
                get(self, c.into())
            }
            fn opt_int<'a>(&self, c: impl Into<Col<'a>>) -> Result<Option<i64>, StoreError> {
                get(self, c.into())
            }
            fn text<'a>(&self, c: impl Into<Col<'a>>) -> Result<String, StoreError> {
                get(self, c.into())
            }
            fn opt_text<'a>(&self, c: impl Into<Col<'a>>) -> Result<Option<String>, StoreError> {
                get(self, c.into())
            }
            fn flag<'a>(&self, c: impl Into<Col<'a>>) -> Result<bool, StoreError> {
                $flag(self, c.into())
            }
            fn opt_bytes<'a>(&self, c: impl Into<Col<'a>>) -> Result<Option<Vec<u8>>, StoreError> {
                get(self, c.into())
            }
            fn text_len<'a>(&self, c: impl Into<Col<'a>>) -> Result<usize, StoreError> {
                let text: Option<&str> = get(self, c.into())?;
                Ok(text.map_or(0, str::len))
            }
        }
    };
}

/// One column of either engine's row, by position or name.
fn get<'r, R, T>(row: &'r R, c: Col<'_>) -> Result<T, StoreError>
where
    R: Row,
    T: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    usize: sqlx::ColumnIndex<R>,
    for<'n> &'n str: sqlx::ColumnIndex<R>,
{
    Ok(match c {
        Col::At(i) => row.try_get(i)?,
        Col::Named(name) => row.try_get(name)?,
    })
}

// SQLite has no boolean type: flags are 0/1 integers.
columns_for!(SqliteRow, |row: &SqliteRow, c| get::<_, i64>(row, c)
    .map(|v| v != 0));
columns_for!(PgRow, |row: &PgRow, c| get::<_, bool>(row, c));

/// What a traffic row weighs toward a page's byte bound: its content and instructions
/// (the columns a client fills), its recipients.
pub(crate) fn traffic_weight(row: &impl Columns) -> Result<usize, StoreError> {
    Ok(row.text_len(8)? + row.text_len(18)? + row.text_len(TRAFFIC_RECIPIENTS)?)
}

/// What a task row weighs toward a page's byte bound: every column a client fills.
pub(crate) fn task_weight(row: &impl Columns) -> Result<usize, StoreError> {
    let mut weight = 0;
    for column in ["description", "data", "question", "context", "result_data"] {
        weight += row.text_len(column)?;
    }
    Ok(weight)
}

/// The columns of [`MESSAGE_COLUMNS`], as a literal for `concat!`.
macro_rules! message_columns {
    () => {
        "m.pk, m.message_id, m.team_pk, m.kind, m.sender_pk, m.sender_role, \
     m.message_type, m.priority, m.content, m.requires_response, m.response_deadline, \
     m.context_reference, m.thread_id, m.in_reply_to, m.response_status, m.created_at, \
     m.cause_by, m.send_to, m.instruct_content, m.via, m.route, m.trace"
    };
}

/// The columns every message query selects first, in the order [`message`] reads them.
pub(crate) const MESSAGE_COLUMNS: &str = message_columns!();

/// The column of a traffic row that holds the recipients (after the
/// [`MESSAGE_COLUMNS`]; `filters::traffic_query`).
pub(crate) const TRAFFIC_RECIPIENTS: usize = 22;

/// A message of a team's traffic with its recipients (`filters::traffic_query`).
pub(crate) fn traffic_row(row: &impl Columns) -> Result<TrafficRow, StoreError> {
    Ok(TrafficRow {
        message: message(row)?,
        recipients: row.json(TRAFFIC_RECIPIENTS)?,
    })
}

/// A message from the [`MESSAGE_COLUMNS`] at the start of a row.
pub(crate) fn message(row: &impl Columns) -> Result<MessageRecord, StoreError> {
    let content: Content = row.json(8)?;
    let published = match row.opt_text(16)? {
        None => None,
        Some(cause_by) => Some(PublishedRecord {
            cause_by,
            send_to: row.opt_json::<Vec<String>>(17)?.unwrap_or_default(),
            instruct_content: row.opt_json(18)?,
        }),
    };
    Ok(MessageRecord {
        pk: MessagePk(row.int(0)?),
        message_id: row.text(1)?.into(),
        team_pk: TeamPk(row.int(2)?),
        kind: row.parse(3)?,
        sender_pk: AgentPk(row.int(4)?),
        sender_role: row.text(5)?,
        message_type: row.parse(6)?,
        priority: row.parse(7)?,
        content,
        requires_response: row.flag(9)?,
        response_deadline: row.opt_time(10)?,
        context_reference: row.opt_text(11)?,
        thread_id: row.opt_text(12)?,
        in_reply_to: row.opt_text(13)?.map(MessageId::from),
        response_status: row.opt_parse::<ResponseStatus>(14)?,
        created_at: row.time(15)?,
        published,
        via: row.opt_parse(19)?,
        route: row.opt_parse(20)?,
        chain: None,
        trace: row.opt_json(21)?,
    })
}

/// The [`MESSAGE_COLUMNS`] and the chain the message extends: what the loop guard reads
/// of a message a send answers or continues. (Other reads leave the chain out.)
pub(crate) const MESSAGE_CHAIN_COLUMNS: &str = concat!(message_columns!(), ", m.chain");

/// A message from the [`MESSAGE_CHAIN_COLUMNS`].
pub(crate) fn message_with_chain(row: &impl Columns) -> Result<MessageRecord, StoreError> {
    Ok(MessageRecord {
        chain: row.opt_json(22)?,
        ..message(row)?
    })
}

/// A stored digest, checked for its length.
/// A setting's time, written as decimal microseconds; `None` when absent or unreadable
/// (it only informs the operator).
pub(crate) fn set_at_from(bytes: Option<Vec<u8>>) -> Option<Timestamp> {
    let text = String::from_utf8(bytes?).ok()?;
    text.parse().ok().map(Timestamp::from_micros)
}

pub(crate) fn hash_from(bytes: Vec<u8>) -> Result<SecretHash, StoreError> {
    SecretHash::try_from(bytes.as_slice())
        .map_err(|_| StoreError::Corrupt(format!("a stored digest has {} bytes", bytes.len())))
}

/// The columns [`team`] reads.
pub(crate) const TEAM_COLUMNS: &str = "pk, team_id, name, key_id, key_hash, communication_enabled,
    retain_read_s, retain_unread_s, retain_tasks_s, stomp_auto_register, created_at, updated_at,
    loop_guard, budgets, stomp_default_context, max_attempts, approvers";

/// A stored retention column: positive seconds or NULL.
fn seconds(row: &impl Columns, column: &str) -> Result<Option<u64>, StoreError> {
    row.opt_int(column)?
        .map(|s| u64::try_from(s).map_err(|_| StoreError::Corrupt(format!("{column} = {s}"))))
        .transpose()
}

pub(crate) fn team(row: &impl Columns) -> Result<TeamRecord, StoreError> {
    let key_hash = row
        .opt_bytes("key_hash")?
        .ok_or_else(|| StoreError::Corrupt("a team without a key digest".into()))?;
    Ok(TeamRecord {
        pk: TeamPk(row.int("pk")?),
        team_id: row.text("team_id")?.into(),
        name: row.text("name")?,
        key_id: row.text("key_id")?,
        key_hash: hash_from(key_hash)?,
        communication_enabled: row.flag("communication_enabled")?,
        stomp_auto_register: row.flag("stomp_auto_register")?,
        stomp_default_context: row.opt_text("stomp_default_context")?,
        retention: Retention {
            read_messages_seconds: seconds(row, "retain_read_s")?,
            unread_messages_seconds: seconds(row, "retain_unread_s")?,
            finished_tasks_seconds: seconds(row, "retain_tasks_s")?,
        },
        loop_guard: row.opt_json("loop_guard")?.unwrap_or_default(),
        budgets: row.opt_json("budgets")?.unwrap_or_default(),
        max_attempts: row.int("max_attempts")?,
        approvers: row.json("approvers")?,
        created_at: row.time("created_at")?,
        updated_at: row.time("updated_at")?,
    })
}

/// A team's loop guard as stored: `NULL` while it is the default (so a team that never
/// changed it follows the server's defaults).
pub(crate) fn loop_guard(team: &TeamRecord) -> Result<Option<String>, StoreError> {
    if team.loop_guard == Default::default() {
        return Ok(None);
    }
    to_json(&team.loop_guard).map(Some)
}

/// A team's budgets as stored: `NULL` while it set none (the server's ceilings apply).
pub(crate) fn budgets(team: &TeamRecord) -> Result<Option<String>, StoreError> {
    if team.budgets.is_empty() {
        return Ok(None);
    }
    to_json(&team.budgets).map(Some)
}

/// The columns [`agent`] reads.
pub(crate) const AGENT_COLUMNS: &str = "pk, team_pk, agent_id, role, capabilities, address, status, \
     communication_enabled, token_id, token_hash, registered_at, updated_at, removed_at, \
     addresses, watch, stomp_bridge";

pub(crate) fn agent(row: &impl Columns) -> Result<AgentRecord, StoreError> {
    Ok(AgentRecord {
        pk: AgentPk(row.int("pk")?),
        team_pk: TeamPk(row.int("team_pk")?),
        agent_id: row.text("agent_id")?.into(),
        role: row.text("role")?,
        capabilities: row.json("capabilities")?,
        address: row.opt_text("address")?,
        status: row.parse("status")?,
        communication_enabled: row.flag("communication_enabled")?,
        token_id: row.opt_text("token_id")?,
        token_hash: row.opt_bytes("token_hash")?.map(hash_from).transpose()?,
        registered_at: row.time("registered_at")?,
        updated_at: row.time("updated_at")?,
        removed_at: row.opt_time("removed_at")?,
        addresses: row.opt_json("addresses")?,
        watch: row.json("watch")?,
        stomp_bridge: row.flag("stomp_bridge")?,
    })
}

/// The columns [`task`] reads.
pub(crate) const TASK_COLUMNS: &str = "pk, team_pk, task_id, description, data, originator_pk, assignee_pk, \
     callback_url, priority, required_capabilities, target_agent_id, status, clarification_id, \
     question, context, result_data, callback_delivery, version, created_at, updated_at, \
     originator_inbox, chain, trace, history_bytes, assignee_role, attempts, lease_seconds, \
     lease_expires_at";

pub(crate) fn task(row: &impl Columns) -> Result<TaskRecord, StoreError> {
    let clarification_id = row.opt_text("clarification_id")?.map(ClarificationId::from);
    let question = row.opt_text("question")?;
    Ok(TaskRecord {
        pk: TaskPk(row.int("pk")?),
        team_pk: TeamPk(row.int("team_pk")?),
        task_id: row.text("task_id")?.into(),
        description: row.text("description")?,
        data: row.json("data")?,
        originator_pk: AgentPk(row.int("originator_pk")?),
        assignee_pk: row.opt_int("assignee_pk")?.map(AgentPk),
        callback_url: row.opt_text("callback_url")?,
        priority: row.parse::<Priority>("priority")?,
        required_capabilities: row.json("required_capabilities")?,
        target_agent_id: row.opt_text("target_agent_id")?.map(AgentId::from),
        status: row.parse::<TaskStatus>("status")?,
        originator_inbox: row.flag("originator_inbox")?,
        clarification: clarification_id.zip(question),
        context: row.json("context")?,
        result_data: row.opt_json("result_data")?.unwrap_or_default(),
        callback_delivery: row.opt_json("callback_delivery")?,
        version: row.int("version")?,
        created_at: row.time("created_at")?,
        updated_at: row.time("updated_at")?,
        chain: row.opt_json("chain")?,
        trace: row.opt_json("trace")?,
        history_bytes: row.int("history_bytes")?,
        assignee_role: row.opt_text("assignee_role")?,
        attempts: row.int("attempts")?,
        lease_seconds: row.opt_int("lease_seconds")?,
        lease_expires_at: row.opt_time("lease_expires_at")?,
    })
}

/// The columns [`task_event`] reads.
pub(crate) const TASK_EVENT_COLUMNS: &str = "seq, kind, actor_pk, status, data, created_at";

pub(crate) fn task_event(row: &impl Columns) -> Result<TaskEventRecord, StoreError> {
    Ok(TaskEventRecord {
        seq: row.int("seq")?,
        kind: row.parse("kind")?,
        actor_pk: row.opt_int("actor_pk")?.map(AgentPk),
        status: row.parse("status")?,
        data: row.json("data")?,
        created_at: row.time("created_at")?,
    })
}

/// The columns [`delivery`] reads.
pub(crate) const DELIVERY_COLUMNS: &str =
    "pk, event_seq, state, attempts, last_status, last_error, finished_at";

/// A callback's outcome as a task shows it.
pub(crate) fn delivery(row: &impl Columns) -> Result<CallbackDelivery, StoreError> {
    Ok(CallbackDelivery {
        delivery_id: row.int("pk")?,
        event_seq: row.int("event_seq")?,
        state: row.parse("state")?,
        attempts: row.int("attempts")?,
        last_status: row.opt_int("last_status")?,
        last_error: row.opt_text("last_error")?,
        finished_at: row.opt_time("finished_at")?,
    })
}

/// The columns [`webhook`] reads.
pub(crate) const WEBHOOK_COLUMNS: &str = "pk, task_pk, team_pk, webhook_id, format, url, token, \
     auth_scheme, auth_credentials, created_at";

pub(crate) fn webhook(row: &impl Columns) -> Result<WebhookRecord, StoreError> {
    let scheme = row.opt_text("auth_scheme")?;
    let credentials = row.opt_text("auth_credentials")?;
    Ok(WebhookRecord {
        pk: row.int("pk")?,
        task_pk: TaskPk(row.int("task_pk")?),
        team_pk: TeamPk(row.int("team_pk")?),
        webhook_id: row.text("webhook_id")?.into(),
        format: row.text("format")?,
        url: row.text("url")?,
        token: row.opt_text("token")?,
        auth: scheme.map(|scheme| (scheme, credentials)),
        created_at: row.time("created_at")?,
    })
}

/// The columns [`lease`] reads, of `leases` as `l`.
pub(crate) const LEASE_COLUMNS: &str = "l.pk, l.team_pk, l.lease_id, l.holder_pk, l.resource, \
     l.exclusive, l.reason, l.acquired_at, l.expires_at";

pub(crate) fn lease(row: &impl Columns) -> Result<crate::model::LeaseRecord, StoreError> {
    Ok(crate::model::LeaseRecord {
        pk: row.int("pk")?,
        team_pk: TeamPk(row.int("team_pk")?),
        lease_id: row.text("lease_id")?.into(),
        holder_pk: AgentPk(row.int("holder_pk")?),
        resource: row.text("resource")?,
        exclusive: row.flag("exclusive")?,
        reason: row.opt_text("reason")?,
        acquired_at: row.time("acquired_at")?,
        expires_at: row.time("expires_at")?,
    })
}

/// The columns [`approval`] reads.
pub(crate) const APPROVAL_COLUMNS: &str = "pk, team_pk, approval_id, asker_pk, task_pk, task_id, \
     summary, details, options, status, decision, comment, decider_pk, decided_with, \
     created_at, expires_at, decided_at";

pub(crate) fn approval(row: &impl Columns) -> Result<crate::model::ApprovalRecord, StoreError> {
    Ok(crate::model::ApprovalRecord {
        pk: row.int("pk")?,
        team_pk: TeamPk(row.int("team_pk")?),
        approval_id: row.text("approval_id")?.into(),
        asker_pk: AgentPk(row.int("asker_pk")?),
        task_pk: row.opt_int("task_pk")?.map(switchboard_types::ids::TaskPk),
        task_id: row.opt_text("task_id")?,
        summary: row.text("summary")?,
        details: row.opt_text("details")?,
        options: row.json("options")?,
        status: row.parse("status")?,
        decision: row.opt_text("decision")?,
        comment: row.opt_text("comment")?,
        decider_pk: row.opt_int("decider_pk")?.map(AgentPk),
        decided_with: row.opt_parse("decided_with")?,
        created_at: row.time("created_at")?,
        expires_at: row.time("expires_at")?,
        decided_at: row.opt_time("decided_at")?,
    })
}

/// The columns [`remote`] reads (quoted: `authorization` is a keyword of PostgreSQL).
pub(crate) const REMOTE_COLUMNS: &str = "r.agent_pk, r.team_pk, r.card_url, r.interface_url, \
     r.\"authorization\", r.card, r.refreshed_at, r.created_at";

/// A callback the sender takes, from the columns `pk, task_pk, team_pk, url, event_seq,
/// body, attempts, webhook_pk, task_id, trace` in that order.
pub(crate) fn due_callback(
    row: &impl Columns,
    now: Timestamp,
) -> Result<crate::model::DueCallback, StoreError> {
    Ok(crate::model::DueCallback {
        pk: row.int(0)?,
        task_pk: TaskPk(row.int(1)?),
        team_pk: TeamPk(row.int(2)?),
        url: row.text(3)?,
        event_seq: row.int(4)?,
        body: row.text(5)?,
        attempts: row.int(6)?,
        webhook_pk: row.opt_int(7)?,
        task_id: row.text(8)?,
        trace: row.opt_json(9)?,
        taken_at: now,
    })
}

pub(crate) fn remote(row: &impl Columns) -> Result<RemoteAgentRecord, StoreError> {
    Ok(RemoteAgentRecord {
        agent_pk: AgentPk(row.int("agent_pk")?),
        team_pk: TeamPk(row.int("team_pk")?),
        card_url: row.text("card_url")?,
        interface_url: row.text("interface_url")?,
        authorization: row.opt_text("authorization")?,
        card: row.text("card")?,
        refreshed_at: row.time("refreshed_at")?,
        created_at: row.time("created_at")?,
    })
}

/// Content as stored: empty `data` and `attachments` are left out (most messages have
/// neither) and come back as their defaults when read.
#[derive(serde::Serialize)]
pub(crate) struct StoredContent<'a> {
    text: &'a str,
    #[serde(skip_serializing_if = "serde_json::Map::is_empty")]
    data: &'a serde_json::Map<String, serde_json::Value>,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    attachments: &'a [Attachment],
}

impl<'a> StoredContent<'a> {
    pub(crate) fn of(content: &'a Content) -> Self {
        StoredContent {
            text: &content.text,
            data: &content.data,
            attachments: &content.attachments,
        }
    }
}

/// JSON text for a TEXT column, on either engine: a value the server built always
/// encodes, so a failure is reported as corrupt data rather than a client error.
pub(crate) fn to_json<T: serde::Serialize + ?Sized>(value: &T) -> Result<String, StoreError> {
    serde_json::to_string(value).map_err(|e| StoreError::Corrupt(format!("JSON column: {e}")))
}
