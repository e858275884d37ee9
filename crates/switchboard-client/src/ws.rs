//! The WebSocket transport: operations as frames with request ids over one connection,
//! live push, and reconnection that resumes after the last entry handed out.
//!
//! A background task owns the connection. Requests wait in a queue while it is down
//! and go out when it is back; a request already written when the connection dropped
//! fails with [`ClientError::Transport`] (it may have taken effect: retry with an
//! idempotency key). Pushed entries are handed out in `seq` order, each once (entries at
//! or below the last handed-out `seq` — the overlap of a replay — are dropped), and
//! acknowledged as they are handed out, so the server's cursor follows the client.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::future::BoxFuture;
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use switchboard_types::{ClientFrame, Operation};
use tokio::sync::{Notify, mpsc, oneshot};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_util::sync::CancellationToken;

use crate::{ClientError, Incoming, Transport, server_error};

/// How long a call waits for its reply (including time spent reconnecting).
const CALL_TIMEOUT: Duration = Duration::from_secs(30);
/// Client pings keep idle connections (and NAT mappings) alive.
const PING_EVERY: Duration = Duration::from_secs(15);
/// Longest wait between reconnection attempts.
const MAX_BACKOFF: Duration = Duration::from_secs(2);

type Reply = oneshot::Sender<Result<Value, ClientError>>;

struct Shared {
    url: String,
    token: String,
    outgoing: mpsc::UnboundedSender<(u64, String)>,
    pending: Mutex<HashMap<u64, Reply>>,
    next_id: AtomicU64,
    /// The last `seq` handed out (or to resume after); -1: let the server decide.
    last_seq: AtomicI64,
    /// Where entries go once `incoming()` was called; until then they wait in `early`.
    subscriber: Mutex<Option<mpsc::Sender<Incoming>>>,
    early: Mutex<VecDeque<Incoming>>,
    reconnect: Notify,
    stop: CancellationToken,
}

/// Talks to the server over one WebSocket.
pub struct WsTransport {
    shared: Arc<Shared>,
}

impl Drop for WsTransport {
    fn drop(&mut self) {
        self.shared.stop.cancel();
    }
}

impl WsTransport {
    /// Connects to `base` (e.g. `http://127.0.0.1:8080`) with an agent token; fails at
    /// once if the server refuses the token or cannot be reached.
    pub async fn connect(base: &str, token: &str) -> Result<WsTransport, ClientError> {
        let base = base.trim_end_matches('/');
        let url = if let Some(rest) = base.strip_prefix("https://") {
            format!("wss://{rest}/v1/ws")
        } else if let Some(rest) = base.strip_prefix("http://") {
            format!("ws://{rest}/v1/ws")
        } else {
            format!("{base}/v1/ws")
        };
        let (outgoing, outgoing_rx) = mpsc::unbounded_channel();
        let shared = Arc::new(Shared {
            url,
            token: token.to_owned(),
            outgoing,
            pending: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(1),
            last_seq: AtomicI64::new(-1),
            subscriber: Mutex::new(None),
            early: Mutex::new(VecDeque::new()),
            reconnect: Notify::new(),
            stop: CancellationToken::new(),
        });
        let first = open(&shared).await?;
        tokio::spawn(run(shared.clone(), first, outgoing_rx));
        Ok(WsTransport { shared })
    }
}

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// Opens a connection resuming after `last_seq`.
async fn open(shared: &Shared) -> Result<Socket, ClientError> {
    let last = shared.last_seq.load(Ordering::Acquire);
    let url = if last >= 0 {
        format!("{}?since={last}", shared.url)
    } else {
        shared.url.clone()
    };
    let mut request = url
        .into_client_request()
        .map_err(|e| ClientError::Transport(e.to_string()))?;
    let header = format!("Bearer {}", shared.token)
        .parse()
        .map_err(|_| ClientError::Transport("the token is not a valid header value".into()))?;
    request.headers_mut().insert("authorization", header);
    match tokio_tungstenite::connect_async(request).await {
        Ok((socket, _)) => Ok(socket),
        Err(tokio_tungstenite::tungstenite::Error::Http(response)) => {
            let status = response.status().as_u16();
            let body = response
                .body()
                .as_deref()
                .and_then(|b| serde_json::from_slice(b).ok())
                .unwrap_or(Value::Null);
            Err(server_error(Some(status), body))
        }
        Err(other) => Err(ClientError::Transport(other.to_string())),
    }
}

/// Keeps a connection up until the transport is dropped.
async fn run(
    shared: Arc<Shared>,
    first: Socket,
    mut outgoing: mpsc::UnboundedReceiver<(u64, String)>,
) {
    let mut socket = Some(first);
    let mut backoff = Duration::from_millis(50);
    loop {
        let current = match socket.take() {
            Some(s) => s,
            None => match open(&shared).await {
                Ok(s) => s,
                Err(err @ ClientError::Server { .. }) => {
                    tracing::warn!(error = %err, "the server refused the WebSocket; giving up");
                    fail_all(&shared, &err.to_string());
                    return;
                }
                Err(err) => {
                    tracing::debug!(error = %err, "reconnecting");
                    tokio::select! {
                        () = shared.stop.cancelled() => return,
                        () = tokio::time::sleep(backoff) => {}
                    }
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                    continue;
                }
            },
        };
        backoff = Duration::from_millis(50);
        let written = session(&shared, current, &mut outgoing).await;
        // Requests written to the dropped connection may or may not have been done.
        let mut pending = shared.pending.lock().unwrap_or_else(|p| p.into_inner());
        for id in written {
            if let Some(reply) = pending.remove(&id) {
                let _ = reply.send(Err(ClientError::Transport(
                    "the connection dropped before the reply; the operation may have taken effect"
                        .into(),
                )));
            }
        }
        drop(pending);
        if shared.stop.is_cancelled() {
            return;
        }
    }
}

fn fail_all(shared: &Shared, why: &str) {
    let mut pending = shared.pending.lock().unwrap_or_else(|p| p.into_inner());
    for (_, reply) in pending.drain() {
        let _ = reply.send(Err(ClientError::Transport(why.to_owned())));
    }
}

/// One connection's life; returns the ids of requests written to it.
async fn session(
    shared: &Shared,
    socket: Socket,
    outgoing: &mut mpsc::UnboundedReceiver<(u64, String)>,
) -> HashSet<u64> {
    let (mut sink, mut stream) = socket.split();
    let mut written = HashSet::new();
    let mut ping = tokio::time::interval(PING_EVERY);
    ping.tick().await;
    loop {
        tokio::select! {
            () = shared.stop.cancelled() => {
                let _ = sink.send(Message::Close(None)).await;
                return written;
            }
            () = shared.reconnect.notified() => return written,
            _ = ping.tick() => {
                let ping = r#"{"type":"ping"}"#.to_owned();
                if sink.send(Message::Text(ping.into())).await.is_err() {
                    return written;
                }
            }
            out = outgoing.recv() => {
                let Some((id, text)) = out else { return written };
                if sink.send(Message::Text(text.into())).await.is_err() {
                    // Not written: fail it now rather than guess.
                    if let Some(reply) = shared.pending.lock().unwrap_or_else(|p| p.into_inner()).remove(&id) {
                        let _ = reply.send(Err(ClientError::Transport("the connection dropped".into())));
                    }
                    return written;
                }
                written.insert(id);
            }
            message = stream.next() => {
                let text = match message {
                    Some(Ok(Message::Text(text))) => text,
                    Some(Ok(Message::Close(_))) | None | Some(Err(_)) => return written,
                    Some(Ok(_)) => continue,
                };
                let Ok(frame) = serde_json::from_str::<Value>(text.as_str()) else { continue };
                if let Some(ack) = handle(shared, frame, &mut written).await
                    && sink.send(Message::Text(ack.into())).await.is_err()
                {
                    return written;
                }
            }
        }
    }
}

/// Handles one server frame; returns an ack to send, if any.
async fn handle(shared: &Shared, frame: Value, written: &mut HashSet<u64>) -> Option<String> {
    let kind = frame["type"].as_str().unwrap_or_default();
    match kind {
        "reply" | "ErrorMessage" if frame.get("request_id").is_some() => {
            let id = frame["request_id"].as_u64()?;
            written.remove(&id);
            let reply = shared
                .pending
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(&id);
            if let Some(reply) = reply {
                let result = if kind == "ErrorMessage" {
                    Err(server_error(None, frame))
                } else if frame["ok"] == true {
                    Ok(frame["result"].clone())
                } else {
                    Err(server_error(None, frame["error"].clone()))
                };
                let _ = reply.send(result);
            }
            None
        }
        "hello" | "caught_up" | "pong" | "reply" => None,
        _ => {
            let seq = frame["seq"].as_i64()?;
            if seq <= shared.last_seq.load(Ordering::Acquire) {
                return None;
            }
            let entry = Incoming { seq, frame };
            let subscriber = shared
                .subscriber
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone();
            match subscriber {
                Some(tx) => {
                    if tx.send(entry).await.is_err() {
                        return None;
                    }
                }
                None => shared
                    .early
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push_back(entry),
            }
            shared.last_seq.store(seq, Ordering::Release);
            ClientFrame::Ack { seq }.encode().ok()
        }
    }
}

impl Transport for WsTransport {
    fn call<'a>(&'a self, operation: Operation) -> BoxFuture<'a, Result<Value, ClientError>> {
        Box::pin(async move {
            let id = self.shared.next_id.fetch_add(1, Ordering::Relaxed);
            let frame = ClientFrame::Request {
                request_id: json!(id),
                operation: Box::new(operation),
                trace: Default::default(),
            };
            let frame = frame
                .encode()
                .map_err(|e| ClientError::Transport(e.to_string()))?;
            let (tx, rx) = oneshot::channel();
            self.shared
                .pending
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(id, tx);
            if self.shared.outgoing.send((id, frame)).is_err() {
                return Err(ClientError::Transport("the transport is closed".into()));
            }
            match tokio::time::timeout(CALL_TIMEOUT, rx).await {
                Ok(Ok(result)) => result,
                Ok(Err(_)) => Err(ClientError::Transport("the transport is closed".into())),
                Err(_) => {
                    self.shared
                        .pending
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .remove(&id);
                    Err(ClientError::Transport(format!(
                        "no reply within {} s",
                        CALL_TIMEOUT.as_secs()
                    )))
                }
            }
        })
    }

    fn incoming(&self, after: Option<i64>) -> mpsc::Receiver<Incoming> {
        let (tx, rx) = mpsc::channel(1024);
        let mut subscriber = self
            .shared
            .subscriber
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if subscriber.is_some() {
            tracing::warn!("incoming() was already called on this transport");
            return rx;
        }
        let mut early = self.shared.early.lock().unwrap_or_else(|p| p.into_inner());
        match after {
            Some(after) => {
                // Start over from `after`: drop what arrived early and replay.
                early.clear();
                self.shared.last_seq.store(after, Ordering::Release);
                self.shared.reconnect.notify_one();
            }
            None => {
                for entry in early.drain(..) {
                    if let Err(full) = tx.try_send(entry) {
                        // More early entries than the channel holds: replay the rest
                        // instead, from the first one not handed out.
                        let seq = full.into_inner().seq;
                        self.shared.last_seq.store(seq - 1, Ordering::Release);
                        self.shared.reconnect.notify_one();
                        break;
                    }
                }
            }
        }
        *subscriber = Some(tx);
        rx
    }
}
