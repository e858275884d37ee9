//! The history the workers record: each operation with its real-time invocation and
//! completion and what it was answered.

use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::Value;

use super::Cluster;

/// One operation of the history.
#[derive(Debug, Clone)]
pub(super) struct Event {
    pub(super) worker: usize,
    pub(super) what: What,
    pub(super) node: usize,
    pub(super) invoked: Instant,
    pub(super) completed: Instant,
    /// The status, or `None` when nothing answered.
    pub(super) status: Option<u16>,
    /// The error code and message of a refusal.
    pub(super) refusal: Option<String>,
}

/// What an operation did (the ids it named).
#[derive(Debug, Clone)]
pub(super) enum What {
    Send {
        to: String,
        id: Option<String>,
    },
    ReadMessage {
        id: String,
    },
    Register {
        agent: String,
    },
    UseToken {
        agent: String,
    },
    Remove {
        agent: String,
    },
    SubmitTask {
        task: String,
    },
    FinishTask {
        task: String,
    },
    MarkRead {
        id: String,
    },
    /// A broadcast, a publish or a response, and the message id it answered with.
    Write {
        kind: &'static str,
        id: Option<String>,
    },
    /// Read by the recipient after a mark; `read` is what the answer said.
    ReadMark {
        id: String,
        read: bool,
    },
}

pub(super) struct Req<'a> {
    pub(super) method: Method,
    pub(super) path: String,
    pub(super) token: &'a str,
    pub(super) body: Option<Value>,
}

impl Cluster {
    pub(super) async fn op(
        &self,
        worker: usize,
        node: usize,
        what: What,
        req: Req<'_>,
    ) -> (Option<u16>, Value) {
        let base = self.bases.read().expect("bases")[node].clone();
        let invoked = Instant::now();
        let mut builder = self
            .http
            .request(req.method, format!("{base}{}", req.path))
            .bearer_auth(req.token)
            .timeout(Duration::from_secs(3));
        if let Some(body) = req.body {
            builder = builder.json(&body);
        }
        let answered = match builder.send().await {
            Ok(res) => {
                let status = res.status().as_u16();
                Some((status, res.json::<Value>().await.unwrap_or(Value::Null)))
            }
            Err(_) => None,
        };
        let status = answered.as_ref().map(|(s, _)| *s);
        let mut what = what;
        match (&mut what, &answered) {
            (What::Send { id, .. }, Some((201, body))) => {
                *id = body["message_id"].as_str().map(str::to_owned);
            }
            (What::Write { id, .. }, Some((200..=299, body))) => {
                *id = super::writes::written_id(body).map(str::to_owned);
            }
            (What::ReadMark { read, .. }, Some((200, body))) => {
                *read = body["message"]["read_status"] == true;
            }
            _ => {}
        }
        self.history.lock().expect("history").push(Event {
            worker,
            what,
            node,
            invoked,
            completed: Instant::now(),
            status,
            refusal: answered.as_ref().and_then(|(_, b)| {
                let code = b["error_code"].as_str()?;
                Some(format!(
                    "{code}: {}",
                    b["error_message"].as_str().unwrap_or("")
                ))
            }),
        });
        (status, answered.map_or(Value::Null, |(_, b)| b))
    }
}
