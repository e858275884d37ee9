//! A WebSocket client for tests: a real tokio-tungstenite connection with helpers that
//! read as scenarios.

use std::collections::VecDeque;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::{Error, Message};
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

use crate::support::{Agent, TestApp};

/// How long a test waits for a frame that should come.
pub const PATIENCE: Duration = Duration::from_secs(10);

pub struct Ws {
    pub stream: WebSocketStream<MaybeTlsStream<TcpStream>>,
    /// Frames read while looking for something else (e.g. pushes before a reply).
    pending: VecDeque<Value>,
    next_request: u64,
}

impl TestApp {
    /// Opens `/v1/ws{query}` as `agent` (token in the Authorization header) and reads
    /// the `hello` frame.
    pub async fn ws(&self, agent: &Agent, query: &str) -> Ws {
        let mut ws = self
            .ws_connect(&format!("/v1/ws{query}"), Some(&agent.token))
            .await
            .expect("WebSocket opens");
        let hello = ws.next().await;
        assert_eq!(hello["type"], "hello", "{hello}");
        assert_eq!(hello["agent_id"], agent.id.as_str());
        ws
    }

    /// Like [`TestApp::ws`], and waits for `caught_up` (replay done); returns the
    /// replayed frames with it.
    pub async fn ws_caught_up(&self, agent: &Agent, query: &str) -> (Ws, Vec<Value>, i64) {
        let mut ws = self.ws(agent, query).await;
        let (replayed, seq) = ws.until_caught_up().await;
        (ws, replayed, seq)
    }

    /// A raw connection attempt: the HTTP error (status, JSON body) if refused.
    pub async fn ws_connect(&self, path: &str, token: Option<&str>) -> Result<Ws, (u16, Value)> {
        Ws::connect(&self.base, path, token).await
    }
}

impl Ws {
    /// A raw connection attempt to the server at `base` (`http://…`), which need not be
    /// a [`TestApp`] (a server process, say).
    pub async fn connect(base: &str, path: &str, token: Option<&str>) -> Result<Ws, (u16, Value)> {
        let url = format!("{base}{path}").replacen("http://", "ws://", 1);
        let mut request = url.into_client_request().expect("request");
        if let Some(token) = token {
            request.headers_mut().insert(
                "authorization",
                format!("Bearer {token}").parse().expect("header"),
            );
        }
        match tokio_tungstenite::connect_async(request).await {
            Ok((stream, _)) => Ok(Ws {
                stream,
                pending: VecDeque::new(),
                next_request: 1,
            }),
            Err(Error::Http(response)) => {
                let status = response.status().as_u16();
                let body = response
                    .body()
                    .as_deref()
                    .and_then(|b| serde_json::from_slice(b).ok())
                    .unwrap_or(Value::Null);
                Err((status, body))
            }
            Err(other) => panic!("connection failed: {other}"),
        }
    }

    /// A connection attempt that never panics: what a client does against a node that
    /// may be down (the reason when it is).
    pub async fn connect_quiet(base: &str, path: &str, token: &str) -> Result<Ws, String> {
        let url = format!("{base}{path}").replacen("http://", "ws://", 1);
        let mut request = url.into_client_request().map_err(|e| e.to_string())?;
        let bearer = format!("Bearer {token}")
            .parse()
            .map_err(|_| "a token header")?;
        request.headers_mut().insert("authorization", bearer);
        let (stream, _) = tokio_tungstenite::connect_async(request)
            .await
            .map_err(|e| e.to_string())?;
        Ok(Ws {
            stream,
            pending: VecDeque::new(),
            next_request: 1,
        })
    }

    /// The next JSON frame (pings and pongs are skipped; they are answered by the
    /// library).
    pub async fn next(&mut self) -> Value {
        if let Some(frame) = self.pending.pop_front() {
            return frame;
        }
        self.read().await
    }

    async fn read(&mut self) -> Value {
        loop {
            let message = tokio::time::timeout(PATIENCE, self.stream.next())
                .await
                .expect("a frame arrives in time")
                .expect("the connection is open")
                .expect("the frame is readable");
            match message {
                Message::Text(text) => {
                    if std::env::var_os("TEST_FRAMES").is_some() {
                        eprintln!("frame: {text}");
                    }
                    return serde_json::from_str(text.as_str()).expect("frames are JSON");
                }
                Message::Ping(_) | Message::Pong(_) => continue,
                other => panic!("unexpected frame {other:?}"),
            }
        }
    }

    /// The next raw frame, pings and pongs included.
    pub async fn next_raw(&mut self) -> Message {
        tokio::time::timeout(PATIENCE, self.stream.next())
            .await
            .expect("a frame arrives in time")
            .expect("the connection is open")
            .expect("the frame is readable")
    }

    /// The next frame of `type`, keeping the others for later.
    pub async fn next_of(&mut self, kind: &str) -> Value {
        if let Some(at) = self.pending.iter().position(|f| f["type"] == kind) {
            return self.pending.remove(at).expect("present");
        }
        loop {
            let frame = self.read().await;
            if frame["type"] == kind {
                return frame;
            }
            self.pending.push_back(frame);
        }
    }

    /// Frames up to `caught_up`, and its seq.
    pub async fn until_caught_up(&mut self) -> (Vec<Value>, i64) {
        let mut frames = Vec::new();
        loop {
            let frame = self.next().await;
            if frame["type"] == "caught_up" {
                return (frames, frame["seq"].as_i64().expect("seq"));
            }
            frames.push(frame);
        }
    }

    pub async fn send(&mut self, frame: Value) {
        self.stream
            .send(Message::Text(frame.to_string().into()))
            .await
            .expect("sent");
    }

    pub async fn send_raw(&mut self, message: Message) {
        self.stream.send(message).await.expect("sent");
    }

    /// Sends an operation with a fresh request id and returns the answer to it: a
    /// `reply`, or an `ErrorMessage` if the frame could not be understood.
    pub async fn call(&mut self, op: &str, mut fields: Value) -> Value {
        let id = format!("req-{}", self.next_request);
        self.next_request += 1;
        fields["type"] = json!(op);
        fields["request_id"] = json!(id);
        self.send(fields).await;
        loop {
            if let Some(at) = self.pending.iter().position(|f| {
                (f["type"] == "reply" || f["type"] == "ErrorMessage")
                    && f["request_id"] == id.as_str()
            }) {
                return self.pending.remove(at).expect("present");
            }
            let frame = self.read().await;
            self.pending.push_back(frame);
        }
    }

    /// Reads until the server closes; returns its close frame.
    pub async fn closed(&mut self) -> Option<CloseFrame> {
        loop {
            match tokio::time::timeout(PATIENCE, self.stream.next())
                .await
                .expect("closes in time")
            {
                Some(Ok(Message::Close(frame))) => return frame,
                Some(Ok(_)) => continue,
                Some(Err(_)) | None => return None,
            }
        }
    }

    /// Proves the connection is alive and nothing else is queued: a ping is answered by
    /// the very next frame.
    pub async fn assert_quiet(&mut self) {
        assert!(
            self.pending.is_empty(),
            "unexpected frames: {:?}",
            self.pending
        );
        self.send(json!({"type": "ping"})).await;
        let frame = self.read().await;
        assert_eq!(
            frame["type"], "pong",
            "expected nothing but the pong, got {frame}"
        );
    }
}
