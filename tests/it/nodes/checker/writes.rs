//! The other writes under the faults: a broadcast, a publish, and a response to a request,
//! each through one node, its message read back by id through another (a read that began
//! after the write's answer must find it). What they add to inboxes is checked with every
//! inbox (seqs gap-free and alike on every node) and by the listeners.

use reqwest::Method;
use serde_json::{Value, json};

use super::{Cluster, Me, Req, What};

/// One of the three writes, chosen by `which`; `to` answers the request.
pub(super) async fn write_then_read(
    cluster: &Cluster,
    me: &Me<'_>,
    (x, y): (usize, usize),
    (to, to_token): (&str, &str),
    (n, which): (u32, u32),
) {
    let text = format!("{}/{n}", me.w);
    let (kind, path, token, body) = match which % 3 {
        0 => (
            "broadcast",
            "/v1/broadcasts".to_owned(),
            me.token,
            json!({"sender_agent_id": me.id, "update_type": "progress", "urgency": "info",
                   "content": {"summary": text, "details": "checked", "impact": "none",
                               "action_required": false}}),
        ),
        1 => (
            "publish",
            "/v1/publish".to_owned(),
            me.token,
            json!({"cause_by": "chk.work", "content": {"text": text}}),
        ),
        _ => {
            let Some(asked) = ask(cluster, me, x, to, &text).await else {
                return;
            };
            (
                "respond",
                format!("/v1/messages/{asked}/responses"),
                to_token,
                json!({"responder_agent_id": to,
                       "response_content": {"text": text, "status": "completed"}}),
            )
        }
    };
    let req = Req {
        method: Method::POST,
        path,
        token,
        body: Some(body),
    };
    let (_, answer) = cluster
        .op(me.w, y, What::Write { kind, id: None }, req)
        .await;
    if let Some(id) = written_id(&answer) {
        // The writer (or, for a response, the asker it went to) reads it through the other.
        super::read_back(cluster, me, x, id).await;
    }
}

/// The message id an acknowledged write answered with.
pub(super) fn written_id(answer: &Value) -> Option<&str> {
    ["broadcast_id", "response_message_id", "message_id"]
        .iter()
        .find_map(|key| answer[key].as_str())
}

/// Sends `to` a request that needs a response, through node `x`; its id.
async fn ask(cluster: &Cluster, me: &Me<'_>, x: usize, to: &str, text: &str) -> Option<String> {
    let body = json!({"sender_agent_id": me.id, "recipient_agent_ids": [to],
                      "message_type": "request", "requires_response": true,
                      "content": {"text": text}});
    let req = Req {
        method: Method::POST,
        path: "/v1/messages".into(),
        token: me.token,
        body: Some(body),
    };
    let what = What::Send {
        to: to.to_owned(),
        id: None,
    };
    let (status, answer) = cluster.op(me.w, x, what, req).await;
    (status == Some(201))
        .then(|| answer["message_id"].as_str().map(str::to_owned))
        .flatten()
}
