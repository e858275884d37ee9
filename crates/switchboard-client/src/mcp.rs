//! The MCP stdio bridge: for MCP hosts that only launch local commands. It reads MCP's
//! newline-delimited JSON-RPC messages on stdin and hands each to a running server's
//! `/mcp` endpoint (Streamable HTTP) with the agent's token; every message the server
//! answers — results, errors, progress and resource notifications — goes to stdout, one
//! per line. The server keeps the one implementation of every tool; the bridge only
//! carries, so it can never disagree with it.

use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;

use crate::ClientError;

const SESSION: &str = "mcp-session-id";
const VERSION: &str = "mcp-protocol-version";

/// What the bridge learnt from `initialize`: the session and the negotiated revision.
#[derive(Default, Clone)]
struct Session {
    id: Option<String>,
    version: Option<String>,
}

/// One server, one token, one MCP session.
#[derive(Clone)]
struct Upstream {
    http: reqwest::Client,
    url: String,
    token: String,
    session: Arc<Mutex<Session>>,
    out: mpsc::UnboundedSender<String>,
}

/// How long the bridge waits, once stdin ended, for calls still under way (the longest
/// a `wait_for_messages` lasts, and some).
const DRAIN: std::time::Duration = std::time::Duration::from_secs(65);

/// Runs the bridge until stdin ends; then lets the calls under way finish (a host may
/// write its last requests and close stdin at once) and ends the MCP session on the
/// server.
///
/// Order: `initialize` and every notification (no `id`, such as
/// `notifications/initialized`) are sent one at a time, in the order written, each
/// before anything after it: what follows needs the session they open and complete.
/// Requests are sent side by side (a wait and a send may overlap).
pub async fn bridge_stdio(base_url: &str, token: &str) -> Result<(), ClientError> {
    let (out, mut lines) = mpsc::unbounded_channel::<String>();
    let writer = tokio::spawn(async move {
        let mut stdout = tokio::io::stdout();
        while let Some(line) = lines.recv().await {
            if write_line(&mut stdout, &line).await.is_err() {
                return;
            }
        }
    });
    crate::ensure_tls_provider();
    // No overall timeout: a wait lasts up to a minute and the session's stream for good.
    let http = reqwest::Client::builder()
        .connect_timeout(std::time::Duration::from_secs(10))
        .build()
        .map_err(|e| ClientError::Transport(e.to_string()))?;
    let upstream = Upstream {
        http,
        url: format!("{}/mcp", base_url.trim_end_matches('/')),
        token: token.to_owned(),
        session: Arc::default(),
        out,
    };
    let mut stdin = BufReader::new(tokio::io::stdin()).lines();
    let mut listening = false;
    let mut under_way = tokio::task::JoinSet::new();
    while let Some(line) = stdin
        .next_line()
        .await
        .map_err(|e| ClientError::Transport(format!("reading stdin: {e}")))?
    {
        if line.trim().is_empty() {
            continue;
        }
        let message: Value = match serde_json::from_str(&line) {
            Ok(message) => message,
            Err(e) => {
                upstream.reply_error(&Value::Null, -32700, &format!("not JSON: {e}"), None);
                continue;
            }
        };
        if message["method"] == "initialize" || message.get("id").is_none() {
            upstream.clone().post(message).await;
            continue;
        }
        if !listening && upstream.session().id.is_some() {
            listening = true;
            tokio::spawn(upstream.clone().listen());
        }
        // Calls may overlap (a wait and a send): each goes on its own.
        under_way.spawn(upstream.clone().post(message));
    }
    // Closing the session under a call still on its way would answer it 404.
    let _ = tokio::time::timeout(DRAIN, async {
        while under_way.join_next().await.is_some() {}
    })
    .await;
    upstream.close().await;
    drop(upstream);
    let _ = writer.await;
    Ok(())
}

async fn write_line(out: &mut (impl AsyncWrite + Unpin), line: &str) -> std::io::Result<()> {
    out.write_all(line.as_bytes()).await?;
    out.write_all(b"\n").await?;
    out.flush().await
}

impl Upstream {
    fn session(&self) -> Session {
        self.session
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    fn request(&self, method: reqwest::Method) -> reqwest::RequestBuilder {
        let session = self.session();
        let mut request = self
            .http
            .request(method, &self.url)
            .bearer_auth(&self.token)
            .header("accept", "application/json, text/event-stream");
        if let Some(id) = session.id {
            request = request.header(SESSION, id);
        }
        if let Some(version) = session.version {
            request = request.header(VERSION, version);
        }
        request
    }

    /// Sends one message and forwards whatever the server answers with.
    async fn post(self, message: Value) {
        let id = message.get("id").cloned();
        let initialize = message["method"] == "initialize";
        let sent = self
            .request(reqwest::Method::POST)
            .header("content-type", "application/json")
            .body(message.to_string())
            .send()
            .await;
        let response = match sent {
            Ok(response) => response,
            Err(e) => {
                if let Some(id) = &id {
                    self.reply_error(
                        id,
                        -32000,
                        &format!("the server cannot be reached: {e}"),
                        None,
                    );
                }
                return;
            }
        };
        if initialize && let Some(session) = response.headers().get(SESSION) {
            let mut known = self.session.lock().unwrap_or_else(|p| p.into_inner());
            known.id = session.to_str().ok().map(str::to_owned);
        }
        let status = response.status();
        if !status.is_success() {
            let body: Option<Value> = response.json().await.ok();
            if let Some(id) = &id {
                let text = body
                    .as_ref()
                    .and_then(|b| b["error_message"].as_str())
                    .map_or_else(|| format!("the server answered {status}"), str::to_owned);
                self.reply_error(id, -32000, &text, body);
            }
            return;
        }
        let sse = response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|t| t.starts_with("text/event-stream"));
        if sse {
            self.forward_events(response, initialize).await;
        } else if let Ok(text) = response.text().await
            && !text.trim().is_empty()
        {
            self.forward(text.trim(), initialize);
        }
    }

    /// The server-to-client stream of the session (resource and other notifications
    /// that answer no request).
    async fn listen(self) {
        if let Ok(response) = self.request(reqwest::Method::GET).send().await
            && response.status().is_success()
        {
            self.forward_events(response, false).await;
        }
    }

    async fn forward_events(&self, mut response: reqwest::Response, initialize: bool) {
        let mut buffer = String::new();
        while let Ok(Some(chunk)) = response.chunk().await {
            buffer.push_str(&String::from_utf8_lossy(&chunk));
            while let Some(end) = event_end(&buffer) {
                let event: String = buffer.drain(..end.0).collect();
                buffer.drain(..end.1);
                let data: Vec<&str> = event
                    .lines()
                    .filter_map(|l| l.strip_prefix("data:"))
                    .map(|d| d.strip_prefix(' ').unwrap_or(d))
                    .collect();
                let data = data.join("\n");
                if !data.trim().is_empty() {
                    self.forward(&data, initialize);
                }
            }
        }
    }

    /// Hands one JSON-RPC message to the host (after noting the negotiated revision).
    fn forward(&self, text: &str, initialize: bool) {
        if initialize
            && let Ok(value) = serde_json::from_str::<Value>(text)
            && let Some(version) = value["result"]["protocolVersion"].as_str()
        {
            let mut known = self.session.lock().unwrap_or_else(|p| p.into_inner());
            known.version = Some(version.to_owned());
        }
        let line = text.replace('\n', " ");
        let _ = self.out.send(line);
    }

    fn reply_error(&self, id: &Value, code: i64, message: &str, data: Option<Value>) {
        let mut error = json!({"code": code, "message": message});
        if let Some(data) = data {
            error["data"] = data;
        }
        let reply = json!({"jsonrpc": "2.0", "id": id, "error": error});
        let _ = self.out.send(reply.to_string());
    }

    /// Ends the session on the server (the host closed stdin).
    async fn close(&self) {
        if self.session().id.is_some() {
            let _ = self.request(reqwest::Method::DELETE).send().await;
        }
    }
}

/// Where the first complete event of an SSE buffer ends: (its length, the separator's).
fn event_end(buffer: &str) -> Option<(usize, usize)> {
    let lf = buffer.find("\n\n").map(|at| (at, 2));
    let crlf = buffer.find("\r\n\r\n").map(|at| (at, 4));
    match (lf, crlf) {
        (Some(a), Some(b)) => Some(if a.0 <= b.0 { a } else { b }),
        (a, b) => a.or(b),
    }
}

#[cfg(test)]
mod tests {
    use super::event_end;

    #[test]
    fn events_end_at_a_blank_line_of_either_kind() {
        assert_eq!(event_end("data: x\n\nrest"), Some((7, 2)));
        assert_eq!(event_end("data: x\r\n\r\n"), Some((7, 4)));
        assert_eq!(event_end("data: x\n"), None);
    }
}
