//! The HTTP transport: one REST request per operation; incoming entries by polling the
//! inbox oldest first after the last sequence number handed out.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures_util::future::BoxFuture;
use serde_json::Value;
use tokio::sync::mpsc;

use super::{ClientError, Incoming, Request, Transport, server_error};
use crate::core::messages::InboxPage;

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

/// Sends one request; the parsed JSON answer on 2xx, the server's error otherwise.
async fn perform(
    http: &reqwest::Client,
    base: &str,
    token: &str,
    request: &Request,
) -> Result<Value, ClientError> {
    let mut url = format!("{base}{}", request.path);
    if let Some(query) = request.query.as_deref().filter(|q| !q.is_empty()) {
        url.push('?');
        url.push_str(query);
    }
    let mut builder = http.request(request.method.clone(), url).bearer_auth(token);
    if request.method != reqwest::Method::GET {
        builder = builder.json(&request.body);
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
    fn call<'a>(&'a self, request: Request) -> BoxFuture<'a, Result<Value, ClientError>> {
        Box::pin(async move { perform(&self.http, &self.base, &self.token, &request).await })
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
                let request = Request::read(
                    "get_messages",
                    "/v1/messages",
                    serde_json::json!({
                        "sort_order": "oldest_first",
                        "after_seq": last,
                        "limit": 100,
                    }),
                );
                let page = match perform(&http, &base, &token, &request).await {
                    Ok(body) => serde_json::from_value::<InboxPage>(body).ok(),
                    Err(err) => {
                        tracing::debug!(error = %err, "inbox poll failed; retrying");
                        None
                    }
                };
                let mut got = 0;
                for view in page.map(|p| p.messages).unwrap_or_default() {
                    let Some(entry) = Incoming::from_view(&view) else {
                        continue;
                    };
                    last = last.max(entry.seq);
                    got += 1;
                    if tx.send(entry).await.is_err() {
                        return;
                    }
                }
                if got < 100 {
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
