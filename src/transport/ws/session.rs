//! One WebSocket session: hello, replay from the cursor, then live pushes, operations,
//! acks and keep-alive, until either side closes.
//!
//! The session is one `select!` loop over client frames, its feed, replies of
//! operations in flight, a heartbeat tick, a kick (agent removed) and server shutdown.
//! The entries come from the core's feed ([`Feed`]), which hands each out once, in
//! sequence order, from the resume cursor: replayed from storage, then live pushes (a
//! gap filled from storage first). The session writes them and applies the lag policy:
//! an overflow during the replay is recovered from storage, one after it closes the
//! connection with 4008.
//!
//! Close codes (see docs/websocket.md): 1000 normal (a client's close is answered with its own
//! code), 1001 server shutting down, 1009 frame too
//! large, 1011 storage unavailable, 1013 server connection limit, 4001 keep-alive
//! timeout, 4003 agent removed, 4008 outbox overflow or a peer that stopped reading
//! (reconnect and resume from your last seq), 4029 too many connections for this agent.
//!
//! Every write is bounded: one that makes no progress within a ping interval means the
//! peer stopped reading (its socket buffers are full, so the write waits for ever and the
//! heartbeat never runs). The session then leaves the hub at once — the agent stops
//! counting as delivered from that moment — and closes with 4008.

use crate::core::trace::traced;
use std::pin::Pin;
use std::time::{Duration, Instant};
use switchboard_types::trace::TraceContext;

use axum::extract::ws::{CloseFrame, Message, Utf8Bytes, WebSocket};
use futures_util::stream::FuturesUnordered;
use futures_util::{SinkExt, StreamExt};
use serde_json::Value;
use switchboard_types::frames::{BadFrame, Hello, ReplyFrame};
use switchboard_types::{ClientFrame, ErrorBody, ErrorCode, Operation, Reply, ServerFrame};
use tokio_util::sync::CancellationToken;

use crate::core::activity::ActivityFrames;
use crate::core::feed::{Feed, FeedItem, Form, Ready};
use crate::core::{Caller, Core};

pub const CLOSE_SHUTDOWN: u16 = 1001;
pub const CLOSE_TOO_BIG: u16 = 1009;
pub const CLOSE_UNAVAILABLE: u16 = 1011;
pub const CLOSE_KEEPALIVE: u16 = 4001;
pub const CLOSE_REMOVED: u16 = 4003;
pub const CLOSE_LAGGING: u16 = 4008;
/// The agent already holds `--ws-max-per-agent` connections.
pub const CLOSE_TOO_MANY: u16 = 4029;
/// The server holds `--ws-max-connections` connections (the standard "try again later").
pub const CLOSE_TRY_LATER: u16 = 1013;

/// Entries read from storage per replay query.
const REPLAY_PAGE: i64 = 1000;
/// Operations of one connection running at once; further frames wait.
const MAX_IN_FLIGHT: usize = 32;

/// What a session needs.
pub struct Session {
    pub core: Core,
    pub caller: Caller,
    /// Replay starts after this sequence number.
    pub resume_after: i64,
    /// Skip entries that are not news.
    pub news_only: bool,
    /// Send `team_activity` frames.
    pub activity: bool,
    pub ping_interval: Duration,
    pub shutdown: CancellationToken,
}

/// Why a session ends.
enum End {
    Close(u16, &'static str),
    /// The client sent a close frame: the WebSocket layer queued the answer (the same
    /// code), which only has to be flushed.
    ClientClosed,
    /// The connection broke: nothing more to send.
    Gone,
    /// A write made no progress within the bound: the peer stopped reading.
    Stalled,
}

/// A write to the socket, bounded by `limit`: [`End::Stalled`] when it makes no
/// progress in time, [`End::Gone`] when the connection broke.
async fn timed(
    limit: Duration,
    write: impl Future<Output = Result<(), axum::Error>>,
) -> Result<(), End> {
    match tokio::time::timeout(limit, write).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(_)) => Err(End::Gone),
        Err(_) => Err(End::Stalled),
    }
}

type Reply_ = Pin<Box<dyn Future<Output = String> + Send>>;

/// The state of a session between frames.
struct Live<'a> {
    session: &'a Session,
    socket: &'a mut WebSocket,
    /// The agent's entries, each handed out once, from the resume cursor.
    feed: &'a mut Feed,
    agent_id: &'a str,
    /// Cancelled when the agent was removed.
    removed: CancellationToken,
    awaiting_pong: bool,
    last_seen_note: Instant,
    in_flight: FuturesUnordered<Reply_>,
    /// The team's activity frames, when the client asked for them.
    activity: Option<ActivityFrames>,
}

impl Session {
    pub async fn run(self, mut socket: WebSocket) {
        let mut conn = match self.core.live().connect(&self.caller) {
            Ok(conn) => conn,
            Err(err) => {
                tracing::debug!(error = %err, "connection refused after the upgrade");
                let (code, reason) = match err.code() {
                    ErrorCode::RateLimited => {
                        (CLOSE_TOO_MANY, "too many connections for this agent")
                    }
                    ErrorCode::Unavailable => (CLOSE_TRY_LATER, "server connection limit reached"),
                    _ => (CLOSE_REMOVED, "agent removed"),
                };
                close(&mut socket, code, reason).await;
                return;
            }
        };
        conn.news_only = self.news_only;
        let hello = ServerFrame::<Value>::Hello(Hello {
            agent_id: conn.agent_id.clone(),
            team_id: conn.team_id.clone(),
            connection_id: conn.id(),
            resume_after: self.resume_after,
            heartbeat_interval_ms: u64::try_from(self.ping_interval.as_millis())
                .unwrap_or(u64::MAX),
        });
        let (agent_id, id, removed) = (conn.agent_id.clone(), conn.id(), conn.removed());
        let mut feed = self
            .core
            .live()
            .feed_live(conn, self.resume_after, Form::Frames);
        let end = self
            .serve(&mut socket, &mut feed, &hello, (&agent_id, removed))
            .await;
        tracing::debug!(agent = %agent_id, connection = id, "session ended");
        // Out of the hub before anything else: nothing more is counted as delivered to
        // this connection while its close is attempted.
        drop(feed);
        match end {
            End::Close(code, reason) => close(&mut socket, code, reason).await,
            End::Stalled => {
                metrics::counter!("switchboard_ws_stalled_total").increment(1);
                close(&mut socket, CLOSE_LAGGING, "the connection stopped reading").await;
            }
            End::ClientClosed => {
                // Sends the close frame the WebSocket layer queued in answer.
                let _ = tokio::time::timeout(Duration::from_secs(1), socket.flush()).await;
            }
            End::Gone => {}
        }
    }

    async fn serve(
        &self,
        socket: &mut WebSocket,
        feed: &mut Feed,
        hello: &ServerFrame<Value>,
        (agent_id, removed): (&str, CancellationToken),
    ) -> End {
        let limit = self.ping_interval;
        if let Err(end) = timed(limit, send_frame(socket, hello)).await {
            return end;
        }
        let mut live = Live {
            session: self,
            socket,
            feed,
            agent_id,
            removed,
            awaiting_pong: false,
            last_seen_note: Instant::now(),
            in_flight: FuturesUnordered::new(),
            activity: None,
        };
        if let Err(end) = live.replay().await {
            return end;
        }
        let caught_up = ServerFrame::<Value>::CaughtUp {
            seq: live.feed.cursor(),
        };
        if let Err(end) = timed(limit, send_frame(live.socket, &caught_up)).await {
            return end;
        }
        if self.activity {
            // The first frame follows shortly: watching asks for a fresh computation.
            live.activity = self.core.live().watch_activity(&self.caller).ok();
        }
        live.run().await
    }
}

impl Live<'_> {
    /// Replays what the agent missed. Live pushes that piled up during a long replay may
    /// have overflowed the outbox; everything is in storage, so they are dropped and the
    /// replay goes on from storage.
    async fn replay(&mut self) -> Result<(), End> {
        loop {
            while self.feed.is_behind() {
                self.send_batch().await?;
            }
            if !self.feed.lagged() {
                return Ok(());
            }
            self.feed.recover();
        }
    }

    /// The live loop: see the module documentation.
    async fn run(&mut self) -> End {
        let interval = self.session.ping_interval;
        let mut heartbeat =
            tokio::time::interval_at(tokio::time::Instant::now() + interval, interval);
        heartbeat.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let shutdown = self.session.shutdown.clone();
        let removed = self.removed.clone();
        loop {
            let step = tokio::select! {
                biased;
                () = shutdown.cancelled() => Err(End::Close(CLOSE_SHUTDOWN, "server shutting down")),
                () = removed.cancelled() => Err(End::Close(CLOSE_REMOVED, "agent removed")),
                Some(reply) = self.in_flight.next(), if !self.in_flight.is_empty() => {
                    self.write(Message::Text(reply.into())).await
                }
                ready = self.feed.ready() => match ready {
                    Ready::Entries => self.send_batch().await,
                    Ready::Lagged => Err(End::Close(
                        CLOSE_LAGGING,
                        "outbox overflow: reconnect and resume from your last seq",
                    )),
                    Ready::Closed => Err(End::Gone),
                },
                _ = heartbeat.tick() => self.heartbeat().await,
                frame = next_activity(&mut self.activity) => match frame {
                    Some(frame) => self.write(Message::Text(frame.to_string().into())).await,
                    None => {
                        self.activity = None;
                        Ok(())
                    }
                },
                incoming = self.socket.recv(), if self.in_flight.len() < MAX_IN_FLIGHT => {
                    self.incoming(incoming).await
                }
            };
            if let Err(end) = step {
                return end;
            }
        }
    }

    /// Writes the feed's next entries: a page from storage, or the next live push.
    /// Fed, not sent, one by one: a page goes out in as few writes as the buffer allows.
    async fn send_batch(&mut self) -> Result<(), End> {
        let entries = self.feed.next_batch(REPLAY_PAGE).await.map_err(|err| {
            tracing::warn!(error = %err, "replay failed");
            End::Close(CLOSE_UNAVAILABLE, "storage unavailable; reconnect later")
        })?;
        if entries.is_empty() {
            return Ok(());
        }
        let limit = self.session.ping_interval;
        for entry in entries {
            if let FeedItem::Frame(frame) = entry.item {
                timed(limit, self.socket.feed(Message::Text(frame.into()))).await?;
            }
        }
        timed(limit, self.socket.flush()).await
    }

    async fn heartbeat(&mut self) -> Result<(), End> {
        if self.awaiting_pong {
            return Err(End::Close(
                CLOSE_KEEPALIVE,
                "keep-alive timeout: no pong to the last ping",
            ));
        }
        self.awaiting_pong = true;
        self.write(Message::Ping(Default::default())).await
    }

    /// Writes one message, bounded (see the module documentation).
    async fn write(&mut self, message: Message) -> Result<(), End> {
        timed(self.session.ping_interval, self.socket.send(message)).await
    }

    /// Writes one frame, bounded.
    async fn write_frame(&mut self, frame: &ServerFrame) -> Result<(), End> {
        match frame.to_text() {
            Ok(text) => self.write(Message::Text(text.into())).await,
            Err(err) => {
                tracing::error!(error = %err, "a frame could not be rendered");
                Ok(())
            }
        }
    }

    /// Handles one message from the client.
    async fn incoming(
        &mut self,
        incoming: Option<Result<Message, axum::Error>>,
    ) -> Result<(), End> {
        let message = match incoming {
            Some(Ok(message)) => message,
            Some(Err(err)) => return Err(read_error(err)),
            None => return Err(End::Gone),
        };
        self.awaiting_pong = false;
        if self.last_seen_note.elapsed() > Duration::from_secs(1) {
            self.feed.seen();
            self.last_seen_note = Instant::now();
        }
        match message {
            Message::Text(text) => match ClientFrame::decode(text.as_str()) {
                Ok(ClientFrame::Ack { seq }) => match self.feed.ack(seq) {
                    Ok(()) => Ok(()),
                    Err(err) => {
                        let bad = BadFrame {
                            request_id: None,
                            error: err.into_body(),
                        };
                        self.refuse(&bad).await
                    }
                },
                Ok(ClientFrame::Ping) => self.write_frame(&ServerFrame::<Value>::Pong).await,
                Ok(ClientFrame::Request {
                    request_id,
                    operation,
                    trace,
                }) => {
                    self.in_flight
                        .push(self.perform(request_id, *operation, trace));
                    Ok(())
                }
                Err(bad) => self.refuse(&bad).await,
            },
            Message::Binary(_) => {
                let bad = BadFrame {
                    request_id: None,
                    error: ErrorBody::new(
                        ErrorCode::ValidationError,
                        "binary frames are not supported; send JSON text frames",
                    )
                    .with("field", "frame"),
                };
                self.refuse(&bad).await
            }
            Message::Close(_) => Err(End::ClientClosed),
            // Pings are answered by the WebSocket layer itself; a pong is activity,
            // which is all the heartbeat needs.
            Message::Ping(_) | Message::Pong(_) => Ok(()),
        }
    }

    /// Answers a frame that could not be understood; the connection stays open.
    async fn refuse(&mut self, bad: &BadFrame) -> Result<(), End> {
        let frame = bad.to_frame(self.agent_id);
        self.write_frame(&frame).await
    }

    /// Runs an operation; the future yields the reply frame.
    fn perform(&self, request_id: Value, operation: Operation, trace: TraceContext) -> Reply_ {
        let core = self.session.core.clone();
        let caller = self.session.caller;
        Box::pin(async move {
            let frame = match traced(trace, core.dispatch(&caller, operation)).await {
                Ok(reply) => ServerFrame::<Reply>::Reply(ReplyFrame {
                    request_id,
                    ok: true,
                    result: Some(reply),
                    error: None,
                }),
                Err(err) => ServerFrame::Reply(ReplyFrame {
                    request_id,
                    ok: false,
                    result: None,
                    error: Some(err.into_body()),
                }),
            };
            frame.to_text().unwrap_or_else(|err| {
                tracing::error!(error = %err, "a reply could not be rendered");
                internal_reply()
            })
        })
    }
}

/// The next activity frame of a connection that watches its team's activity; pending
/// forever for one that does not. `None` when the watch ended.
async fn next_activity(frames: &mut Option<ActivityFrames>) -> Option<std::sync::Arc<str>> {
    let Some(frames) = frames else {
        return std::future::pending().await;
    };
    loop {
        frames.changed().await.ok()?;
        if let Some(frame) = frames.borrow_and_update().clone() {
            return Some(frame);
        }
    }
}

/// The reply when even a reply could not be rendered.
fn internal_reply() -> String {
    r#"{"type":"reply","ok":false,"error":{"success":false,"error_code":"INTERNAL_ERROR","error_message":"the server could not render its answer","details":{},"suggested_action":"Retry later and report the request id to the operator."}}"#.to_owned()
}

async fn close(socket: &mut WebSocket, code: u16, reason: &'static str) {
    let frame = CloseFrame {
        code,
        reason: Utf8Bytes::from_static(reason),
    };
    // The peer may be gone or stuck; do not wait for it long.
    let _ = tokio::time::timeout(
        Duration::from_secs(1),
        socket.send(Message::Close(Some(frame))),
    )
    .await;
}

async fn send_frame(socket: &mut WebSocket, frame: &ServerFrame) -> Result<(), axum::Error> {
    let text = frame.to_text().map_err(axum::Error::new)?;
    send_text(socket, text).await
}

async fn send_text(socket: &mut WebSocket, text: String) -> Result<(), axum::Error> {
    socket.send(Message::Text(text.into())).await
}

fn read_error(err: axum::Error) -> End {
    use tokio_tungstenite::tungstenite::Error as WsError;
    let inner = err.into_inner();
    match inner.downcast_ref::<WsError>() {
        // An oversized frame or message.
        Some(WsError::Capacity(_)) => End::Close(CLOSE_TOO_BIG, "frame too large"),
        _ => {
            tracing::debug!(error = %inner, "connection read failed");
            End::Gone
        }
    }
}
