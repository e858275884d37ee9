//! The HTTP transport: one REST request per operation; incoming entries by polling the
//! inbox oldest first after the last sequence number handed out.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use switchboard_types::MessageOp;

use futures_util::future::BoxFuture;
use serde_json::Value;
use tokio::sync::mpsc;

use switchboard_types::Operation;
use switchboard_types::inbox::{InboxPage, InboxQuery};
use switchboard_types::messages::SortOrder;

use crate::rest::{RestCall, rest_call};
use crate::{ClientError, Incoming, Transport, server_error};

/// Entries asked for per poll.
const POLL_PAGE: i64 = 100;

/// Talks to the server with plain HTTP requests.
pub struct HttpTransport {
    http: reqwest::Client,
    base: String,
    token: String,
    /// Wait between two polls that found nothing new.
    pub poll_interval: Duration,
    polling: AtomicBool,
}

impl HttpTransport {
    /// A transport for `base` (e.g. `http://127.0.0.1:8080`) with an agent token.
    pub fn new(base: &str, token: &str) -> Result<HttpTransport, ClientError> {
        crate::ensure_tls_provider();
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(30))
            .build()
            .map_err(|e| ClientError::Transport(e.to_string()))?;
        Ok(HttpTransport {
            http,
            base: base.trim_end_matches('/').to_owned(),
            token: token.to_owned(),
            poll_interval: Duration::from_millis(250),
            polling: AtomicBool::new(false),
        })
    }
}

impl HttpTransport {
    /// Registers an outside A2A agent by its card (the team key or the admin token).
    pub async fn register_remote_agent(
        &self,
        team_id: &str,
        body: &switchboard_types::agents::RegisterRemoteAgent,
    ) -> Result<switchboard_types::agents::RemoteAgentRegistered, ClientError> {
        let request = crate::rest::register_remote_agent(team_id, body)?;
        let answer = perform(&self.http, &self.base, &self.token, &request).await?;
        serde_json::from_value(answer).map_err(|e| ClientError::Decode(e.to_string()))
    }
}

/// Sends one request; the parsed JSON answer on 2xx, the server's error otherwise.
async fn perform(
    http: &reqwest::Client,
    base: &str,
    token: &str,
    request: &RestCall,
) -> Result<Value, ClientError> {
    let mut url = format!("{base}{}", request.path);
    if let Some(query) = request.query.as_deref().filter(|q| !q.is_empty()) {
        url.push('?');
        url.push_str(query);
    }
    let mut builder = http.request(request.method.clone(), url).bearer_auth(token);
    if let Some(body) = &request.body {
        builder = builder.json(body);
    }
    if let Some(key) = &request.idempotency_key {
        builder = builder.header("Idempotency-Key", key);
    }
    let response = builder
        .send()
        .await
        .map_err(|e| ClientError::Transport(e.to_string()))?;
    let status = response.status();
    let body: Value = response
        .json()
        .await
        .map_err(|e| ClientError::Decode(format!("HTTP {status}: {e}")))?;
    if status.is_success() {
        Ok(body)
    } else {
        Err(server_error(Some(status.as_u16()), body))
    }
}

impl Transport for HttpTransport {
    fn call<'a>(&'a self, operation: Operation) -> BoxFuture<'a, Result<Value, ClientError>> {
        Box::pin(async move {
            perform(&self.http, &self.base, &self.token, &rest_call(&operation)?).await
        })
    }

    fn incoming(&self, after: Option<i64>) -> mpsc::Receiver<Incoming> {
        let (tx, rx) = mpsc::channel(256);
        if self.polling.swap(true, Ordering::AcqRel) {
            tracing::warn!("incoming() was already called on this transport");
            return rx;
        }
        let (http, base, token, interval) = (
            self.http.clone(),
            self.base.clone(),
            self.token.clone(),
            self.poll_interval,
        );
        tokio::spawn(async move {
            let mut last = after.unwrap_or(0);
            loop {
                let poll = Operation::Messages(MessageOp::GetMessages(InboxQuery {
                    sort_order: Some(SortOrder::OldestFirst),
                    after_seq: Some(last),
                    limit: Some(POLL_PAGE),
                    ..InboxQuery::default()
                }));
                let page = match rest_call(&poll) {
                    Ok(request) => match perform(&http, &base, &token, &request).await {
                        Ok(body) => serde_json::from_value::<InboxPage>(body)
                            .map_err(|e| ClientError::Decode(e.to_string())),
                        Err(err) => Err(err),
                    },
                    Err(err) => Err(err),
                };
                let views = match page {
                    Ok(page) => page.messages,
                    Err(err) => {
                        tracing::debug!(error = %err, "inbox poll failed; retrying");
                        Vec::new()
                    }
                };
                let mut got = 0;
                for view in views {
                    let entry = match Incoming::from_view(&view) {
                        Ok(entry) => entry,
                        Err(err) => {
                            tracing::warn!(error = %err, "an inbox entry could not be framed");
                            continue;
                        }
                    };
                    last = last.max(entry.seq);
                    got += 1;
                    if tx.send(entry).await.is_err() {
                        return;
                    }
                }
                if got < POLL_PAGE {
                    tokio::select! {
                        () = tx.closed() => return,
                        () = tokio::time::sleep(interval) => {}
                    }
                }
            }
        });
        rx
    }
}
