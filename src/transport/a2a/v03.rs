//! A2A 0.3, for the clients that still speak it: its method names (`message/send`,
//! `message/stream`, `tasks/get`, `tasks/cancel`, `tasks/resubscribe`, …) and its shapes
//! (`kind` discriminators, lower-case states and roles, file parts, the send's result as
//! the bare task). A 0.3 request is rewritten into the 1.0 request and the 1.0 answer
//! back into 0.3, so both versions share one implementation and cannot disagree.
//!
//! Served when the request says `A2A-Version: 0.3`, or names no version and uses a 0.3
//! method name.

use a2a::A2AError;
use serde_json::{Map, Value, json};

/// The protocol dialect of one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    V1,
    V03,
}

impl Dialect {
    /// A result as this dialect shows it (a 1.0 result is unchanged).
    pub fn result(self, value: Value) -> Value {
        match self {
            Dialect::V1 => value,
            Dialect::V03 => result(value),
        }
    }
}

/// The 1.0 method a 0.3 method is, if it is one.
pub fn method(name: &str) -> Option<&'static str> {
    Some(match name {
        "message/send" => "SendMessage",
        "message/stream" => "SendStreamingMessage",
        "tasks/get" => "GetTask",
        "tasks/cancel" => "CancelTask",
        "tasks/resubscribe" => "SubscribeToTask",
        "tasks/pushNotificationConfig/set" => "CreateTaskPushNotificationConfig",
        "tasks/pushNotificationConfig/get" => "GetTaskPushNotificationConfig",
        "tasks/pushNotificationConfig/list" => "ListTaskPushNotificationConfigs",
        "tasks/pushNotificationConfig/delete" => "DeleteTaskPushNotificationConfig",
        "agent/getAuthenticatedExtendedCard" => "GetExtendedAgentCard",
        _ => return None,
    })
}

/// 0.3 params as the params of `method`, the 1.0 method they became; `InvalidParams`
/// for a part without its `kind` (0.3 requires it: without it a part is nothing).
pub fn params(method: &str, mut params: Value) -> Result<Value, A2AError> {
    match method {
        "CreateTaskPushNotificationConfig" => return Ok(push_config_in(params)),
        "GetTaskPushNotificationConfig"
        | "DeleteTaskPushNotificationConfig"
        | "ListTaskPushNotificationConfigs" => return Ok(push_ids_in(params)),
        _ => {}
    }
    if let Some(message) = params.get_mut("message") {
        *message = message_in(message.take())?;
    }
    if let Some(Value::Object(config)) = params.get_mut("configuration") {
        // 0.3 blocks unless told `blocking: false`; 1.0 says it the other way round.
        if let Some(blocking) = config.remove("blocking").and_then(|b| b.as_bool()) {
            config.insert("returnImmediately".into(), json!(!blocking));
        }
        if let Some(push) = config.remove("pushNotificationConfig") {
            config.insert("taskPushNotificationConfig".into(), push_fields_in(push));
        }
    }
    Ok(params)
}

/// `{taskId, pushNotificationConfig: {id, url, token, authentication: {schemes,
/// credentials}}}` as a 1.0 config (without an id: the task's, as 0.3 did).
fn push_config_in(params: Value) -> Value {
    let task_id = params["taskId"].clone();
    let mut config = push_fields_in(params["pushNotificationConfig"].clone());
    if let Value::Object(fields) = &mut config {
        // 0.3 gave a config without an id the task's.
        if fields
            .get("id")
            .is_none_or(|id| id.as_str().is_none_or(str::is_empty))
        {
            fields.insert("id".into(), task_id.clone());
        }
        fields.insert("taskId".into(), task_id);
    }
    config
}

/// A 0.3 `PushNotificationConfig` in 1.0's fields (one scheme: 1.0 has no list).
fn push_fields_in(config: Value) -> Value {
    let Value::Object(mut fields) = config else {
        return config;
    };
    if let Some(Value::Object(mut auth)) = fields.remove("authentication") {
        let scheme = match auth.remove("schemes") {
            Some(Value::Array(schemes)) => schemes.into_iter().next().unwrap_or(Value::Null),
            _ => Value::Null,
        };
        auth.insert("scheme".into(), scheme);
        fields.insert("authentication".into(), Value::Object(auth));
    }
    Value::Object(fields)
}

/// `{id, pushNotificationConfigId}` (0.3 names the task `id`) as 1.0's `{taskId, id}`.
/// A 0.3 config without an id was given the task's id, so that is the default.
fn push_ids_in(params: Value) -> Value {
    let task_id = params["id"].clone();
    let config_id = match &params["pushNotificationConfigId"] {
        Value::Null => task_id.clone(),
        id => id.clone(),
    };
    json!({ "taskId": task_id, "id": config_id })
}

/// A 1.0 config in 0.3's shape.
pub fn push_config_out(config: Value) -> Value {
    let Value::Object(mut fields) = config else {
        return config;
    };
    let task_id = fields.remove("taskId").unwrap_or(Value::Null);
    if let Some(Value::Object(mut auth)) = fields.remove("authentication") {
        let scheme = auth.remove("scheme").unwrap_or(Value::Null);
        auth.insert("schemes".into(), json!([scheme]));
        fields.insert("authentication".into(), Value::Object(auth));
    }
    json!({ "taskId": task_id, "pushNotificationConfig": fields })
}

fn message_in(message: Value) -> Result<Value, A2AError> {
    let Value::Object(mut fields) = message else {
        return Ok(message);
    };
    fields.remove("kind");
    if let Some(role) = fields.get_mut("role")
        && let Some(name) = role.as_str()
    {
        *role = json!(format!("ROLE_{}", name.to_ascii_uppercase()));
    }
    if let Some(Value::Array(parts)) = fields.get_mut("parts") {
        for (at, part) in parts.iter_mut().enumerate() {
            let kind = part.get("kind").and_then(Value::as_str);
            if !matches!(kind, Some("text" | "data" | "file")) {
                return Err(A2AError::invalid_params(format!(
                    "message.parts[{at}]: a 0.3 part has a kind: \"text\", \"data\" or \"file\""
                )));
            }
            *part = part_in(part.take());
        }
    }
    Ok(Value::Object(fields))
}

fn part_in(part: Value) -> Value {
    let Value::Object(mut fields) = part else {
        return part;
    };
    let kind = fields.remove("kind");
    if kind.as_ref().and_then(Value::as_str) != Some("file") {
        return Value::Object(fields);
    }
    let Some(Value::Object(file)) = fields.remove("file") else {
        return Value::Object(fields);
    };
    let mut out = Map::new();
    for (from, to) in [
        ("uri", "url"),
        ("bytes", "raw"),
        ("mimeType", "mediaType"),
        ("name", "filename"),
    ] {
        if let Some(value) = file.get(from) {
            out.insert(to.into(), value.clone());
        }
    }
    if let Some(metadata) = fields.remove("metadata") {
        out.insert("metadata".into(), metadata);
    }
    Value::Object(out)
}

/// A 1.0 result (a task, `{"task": …}`, or a stream event) in 0.3's shape.
fn result(value: Value) -> Value {
    let Value::Object(mut fields) = value else {
        return value;
    };
    if let Some(task) = fields.remove("task") {
        return task_out(task);
    }
    if let Some(Value::Object(mut update)) = fields.remove("statusUpdate") {
        let state = update["status"]["state"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let done = matches!(
            state.as_str(),
            "TASK_STATE_COMPLETED"
                | "TASK_STATE_FAILED"
                | "TASK_STATE_CANCELED"
                | "TASK_STATE_REJECTED"
                | "TASK_STATE_INPUT_REQUIRED"
        );
        if let Some(status) = update.remove("status") {
            update.insert("status".into(), status_out(status));
        }
        update.insert("kind".into(), json!("status-update"));
        update.insert("final".into(), json!(done));
        return Value::Object(update);
    }
    if let Some(Value::Object(mut update)) = fields.remove("artifactUpdate") {
        if let Some(artifact) = update.remove("artifact") {
            update.insert("artifact".into(), artifact_out(artifact));
        }
        update.insert("kind".into(), json!("artifact-update"));
        return Value::Object(update);
    }
    if fields.contains_key("id") && fields.contains_key("status") {
        return task_out(Value::Object(fields));
    }
    Value::Object(fields)
}

fn task_out(task: Value) -> Value {
    let Value::Object(mut fields) = task else {
        return task;
    };
    fields.insert("kind".into(), json!("task"));
    if let Some(status) = fields.remove("status") {
        fields.insert("status".into(), status_out(status));
    }
    if let Some(Value::Array(history)) = fields.get_mut("history") {
        for message in history.iter_mut() {
            *message = message_out(message.take());
        }
    }
    if let Some(Value::Array(artifacts)) = fields.get_mut("artifacts") {
        for artifact in artifacts.iter_mut() {
            *artifact = artifact_out(artifact.take());
        }
    }
    Value::Object(fields)
}

fn status_out(status: Value) -> Value {
    let Value::Object(mut fields) = status else {
        return status;
    };
    if let Some(state) = fields.get_mut("state")
        && let Some(name) = state.as_str()
    {
        let plain = name.strip_prefix("TASK_STATE_").unwrap_or(name);
        *state = json!(plain.to_ascii_lowercase().replace('_', "-"));
    }
    if let Some(message) = fields.remove("message") {
        fields.insert("message".into(), message_out(message));
    }
    Value::Object(fields)
}

fn message_out(message: Value) -> Value {
    let Value::Object(mut fields) = message else {
        return message;
    };
    fields.insert("kind".into(), json!("message"));
    if let Some(role) = fields.get_mut("role")
        && let Some(name) = role.as_str()
    {
        let plain = name.strip_prefix("ROLE_").unwrap_or(name);
        *role = json!(plain.to_ascii_lowercase());
    }
    parts_out(&mut fields);
    Value::Object(fields)
}

fn artifact_out(artifact: Value) -> Value {
    let Value::Object(mut fields) = artifact else {
        return artifact;
    };
    parts_out(&mut fields);
    Value::Object(fields)
}

fn parts_out(fields: &mut Map<String, Value>) {
    if let Some(Value::Array(parts)) = fields.get_mut("parts") {
        for part in parts.iter_mut() {
            *part = part_out(part.take());
        }
    }
}

fn part_out(part: Value) -> Value {
    let Value::Object(mut fields) = part else {
        return part;
    };
    let metadata = fields.remove("metadata");
    let mut out = if let Some(text) = fields.remove("text") {
        json!({"kind": "text", "text": text})
    } else if let Some(data) = fields.remove("data") {
        // 0.3 data parts hold objects only.
        let data = if data.is_object() {
            data
        } else {
            json!({ "value": data })
        };
        json!({"kind": "data", "data": data})
    } else {
        let mut file = Map::new();
        for (from, to) in [
            ("url", "uri"),
            ("raw", "bytes"),
            ("mediaType", "mimeType"),
            ("filename", "name"),
        ] {
            if let Some(value) = fields.remove(from) {
                file.insert(to.into(), value);
            }
        }
        json!({"kind": "file", "file": file})
    };
    if let Some(metadata) = metadata {
        out["metadata"] = metadata;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_03_send_becomes_a_10_send() {
        let params = params(
            "SendMessage",
            json!({
                "message": {"kind": "message", "messageId": "m", "role": "user",
                            "parts": [{"kind": "text", "text": "hi"},
                                      {"kind": "data", "data": {"a": 1}},
                                      {"kind": "file", "file": {"uri": "http://x/f", "mimeType": "text/plain", "name": "f"}}]},
                "configuration": {"blocking": false}
            }),
        )
        .expect("a valid 0.3 send");
        assert_eq!(
            params,
            json!({
                "message": {"messageId": "m", "role": "ROLE_USER",
                            "parts": [{"text": "hi"}, {"data": {"a": 1}},
                                      {"url": "http://x/f", "mediaType": "text/plain", "filename": "f"}]},
                "configuration": {"returnImmediately": true}
            })
        );
    }

    #[test]
    fn a_10_task_and_events_become_03() {
        let task = json!({"task": {"id": "t", "contextId": "c",
            "status": {"state": "TASK_STATE_INPUT_REQUIRED",
                       "message": {"messageId": "q", "role": "ROLE_AGENT", "parts": [{"text": "which?"}]}},
            "artifacts": [{"artifactId": "r", "parts": [{"data": 5}]}]}});
        assert_eq!(
            Dialect::V03.result(task),
            json!({"id": "t", "contextId": "c", "kind": "task",
                "status": {"state": "input-required",
                           "message": {"messageId": "q", "role": "agent", "kind": "message",
                                       "parts": [{"kind": "text", "text": "which?"}]}},
                "artifacts": [{"artifactId": "r", "parts": [{"kind": "data", "data": {"value": 5}}]}]})
        );
        let update = json!({"statusUpdate": {"taskId": "t", "contextId": "c",
            "status": {"state": "TASK_STATE_COMPLETED"}}});
        assert_eq!(
            Dialect::V03.result(update),
            json!({"taskId": "t", "contextId": "c", "status": {"state": "completed"},
                   "kind": "status-update", "final": true})
        );
        assert_eq!(method("tasks/resubscribe"), Some("SubscribeToTask"));
        assert_eq!(method("SendMessage"), None);
    }
}
