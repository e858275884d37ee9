//! Read marks across nodes: the recipient marks a message read through one node, then
//! reads it through another; a read that began after the mark's answer must show it read.

use reqwest::Method;
use serde_json::json;

use super::{Cluster, Req, What};

/// Marks message `id` read as its recipient `(agent, token)` through one node; reads it
/// back through the other.
pub(super) async fn mark_then_read(
    cluster: &Cluster,
    worker: usize,
    (x, y): (usize, usize),
    (agent, token): (&str, &str),
    id: &str,
) {
    let req = Req {
        method: Method::POST,
        path: "/v1/messages/read".into(),
        token,
        body: Some(json!({"agent_id": agent, "message_ids": [id]})),
    };
    let marked = What::MarkRead { id: id.to_owned() };
    if cluster.op(worker, x, marked, req).await.0 != Some(200) {
        return;
    }
    let req = Req {
        method: Method::GET,
        path: format!("/v1/messages/{id}"),
        token,
        body: None,
    };
    let read = What::ReadMark {
        id: id.to_owned(),
        read: false,
    };
    cluster.op(worker, y, read, req).await;
}
