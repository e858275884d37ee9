//! One WebSocket session: hello, replay from the cursor, then live pushes, operations,
//! acks and keep-alive, until either side closes.
//!
//! The session is one `select!` loop over client frames, its outbox, replies of
//! operations in flight, a heartbeat tick, the lag flag, a kick (agent removed) and
//! server shutdown. It writes frames in sequence order and never twice: `last_sent` is
//! the seam between replay and live pushes (a push at or below it was already replayed;
//! a push past `last_sent + 1` means a gap, filled from storage first).
//!
//! Close codes (see README): 1000 normal, 1001 server shutting down, 1009 frame too
//! large, 4001 keep-alive timeout, 4003 agent removed, 4008 outbox overflow (reconnect
//! and resume from your last seq).

use std::pin::Pin;
use std::time::{Duration, Instant};

use axum::extract::ws::{CloseFrame, Message, Utf8Bytes, WebSocket};
use futures_util::stream::FuturesUnordered;
use futures_util::{SinkExt, StreamExt};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::frames::{self, ClientFrame, Op, TaskOp};
use crate::core::{Caller, Core};
use crate::hub::Registration;

pub const CLOSE_NORMAL: u16 = 1000;
pub const CLOSE_SHUTDOWN: u16 = 1001;
pub const CLOSE_TOO_BIG: u16 = 1009;
pub const CLOSE_KEEPALIVE: u16 = 4001;
pub const CLOSE_REMOVED: u16 = 4003;
pub const CLOSE_LAGGING: u16 = 4008;

/// Entries read from storage per replay query.
const REPLAY_PAGE: i64 = 1000;
/// Operations of one connection running at once; further frames wait.
const MAX_IN_FLIGHT: usize = 32;

/// What a session needs.
pub struct Session {
    pub core: Core,
    pub caller: Caller,
    pub agent_pk: i64,
    pub agent_id: String,
    pub team_id: String,
    /// Replay starts after this sequence number.
    pub resume_after: i64,
    pub ping_interval: Duration,
    pub shutdown: CancellationToken,
}

enum End {
    Close(u16, &'static str),
    /// The client closed, or the connection broke: nothing more to send.
    Gone,
}

type Reply = Pin<Box<dyn Future<Output = String> + Send>>;

impl Session {
    pub async fn run(self, mut socket: WebSocket) {
        let mut reg = self.core.hub().register(self.agent_pk);
        let end = self.serve(&mut socket, &mut reg).await;
        if let End::Close(code, reason) = end {
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
        tracing::debug!(agent = %self.agent_id, connection = reg.id, "session ended");
    }

    async fn serve(&self, socket: &mut WebSocket, reg: &mut Registration) -> End {
        let hello = frames::hello(
            &self.agent_id,
            &self.team_id,
            reg.id,
            self.resume_after,
            self.ping_interval.as_millis(),
        );
        if socket.send(Message::Text(hello.into())).await.is_err() {
            return End::Gone;
        }
        // Registered before reading storage, so nothing committed from now on can be
        // missed; what replay and the outbox both carry is dropped by `last_sent`.
        let mut last_sent = self.resume_after;
        loop {
            match self.catch_up(socket, &mut last_sent).await {
                Ok(()) => {}
                Err(end) => return end,
            }
            // Live pushes that piled up during a long replay may have overflowed the
            // outbox; everything is in storage, so drop them and catch up again.
            if !reg.lagging.is_raised() {
                break;
            }
            reg.lagging.clear();
            while reg.rx.try_recv().is_ok() {}
        }
        if send_text(socket, frames::caught_up(last_sent))
            .await
            .is_err()
        {
            return End::Gone;
        }

        let mut heartbeat = tokio::time::interval_at(
            tokio::time::Instant::now() + self.ping_interval,
            self.ping_interval,
        );
        heartbeat.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut awaiting_pong = false;
        let mut last_seen_note = Instant::now();
        let mut in_flight: FuturesUnordered<Reply> = FuturesUnordered::new();

        loop {
            tokio::select! {
                biased;
                () = self.shutdown.cancelled() => return End::Close(CLOSE_SHUTDOWN, "server shutting down"),
                () = reg.kicked.cancelled() => return End::Close(CLOSE_REMOVED, "agent removed"),
                () = reg.lagging.raised() => {
                    return End::Close(CLOSE_LAGGING, "outbox overflow: reconnect and resume from your last seq");
                }
                Some(reply) = in_flight.next(), if !in_flight.is_empty() => {
                    if send_text(socket, reply).await.is_err() {
                        return End::Gone;
                    }
                }
                Some(push) = reg.rx.recv() => {
                    if push.seq <= last_sent {
                        continue;
                    }
                    if push.seq > last_sent + 1
                        && let Err(end) = self.catch_up(socket, &mut last_sent).await
                    {
                        return end;
                    }
                    if push.seq == last_sent + 1 {
                        if send_text(socket, push.event.frame(push.seq)).await.is_err() {
                            return End::Gone;
                        }
                        last_sent = push.seq;
                    }
                }
                _ = heartbeat.tick() => {
                    if awaiting_pong {
                        return End::Close(CLOSE_KEEPALIVE, "keep-alive timeout: no pong to the last ping");
                    }
                    awaiting_pong = true;
                    if socket.send(Message::Ping(Default::default())).await.is_err() {
                        return End::Gone;
                    }
                }
                incoming = socket.recv(), if in_flight.len() < MAX_IN_FLIGHT => {
                    let message = match incoming {
                        Some(Ok(message)) => message,
                        Some(Err(err)) => return read_error(err),
                        None => return End::Gone,
                    };
                    awaiting_pong = false;
                    if last_seen_note.elapsed() > Duration::from_secs(1) {
                        self.core.hub().seen(self.agent_pk);
                        last_seen_note = Instant::now();
                    }
                    match message {
                        Message::Text(text) => match frames::decode(text.as_str()) {
                            Ok(ClientFrame::Ack(seq)) => self.core.hub().ack(self.agent_pk, seq),
                            Ok(ClientFrame::Ping) => {
                                if send_text(socket, frames::pong().to_owned()).await.is_err() {
                                    return End::Gone;
                                }
                            }
                            Ok(ClientFrame::Op { request_id, op }) => in_flight.push(self.perform(request_id, *op)),
                            Err(bad) => {
                                if send_text(socket, frames::error_message(&bad, &self.agent_id)).await.is_err() {
                                    return End::Gone;
                                }
                            }
                        },
                        Message::Binary(_) => {
                            let bad = frames::binary_refused();
                            if send_text(socket, frames::error_message(&bad, &self.agent_id)).await.is_err() {
                                return End::Gone;
                            }
                        }
                        Message::Close(_) => return End::Close(CLOSE_NORMAL, "bye"),
                        // Pings are answered by the WebSocket layer itself; a pong is
                        // activity, which is all the heartbeat needs.
                        Message::Ping(_) | Message::Pong(_) => {}
                    }
                }
            }
        }
    }

    /// Sends every stored entry after `last_sent`, in order, a page at a time. The next
    /// page is read from storage while the current one is written to the socket, so the
    /// storage thread and this session work side by side.
    async fn catch_up(&self, socket: &mut WebSocket, last_sent: &mut i64) -> Result<(), End> {
        let mut page = self.read_page(*last_sent).await?;
        loop {
            let full = page.len() as i64 == REPLAY_PAGE;
            let next_after = page.last().map_or(*last_sent, |(seq, _)| *seq);
            let next = async {
                if full {
                    Some(self.read_page(next_after).await)
                } else {
                    None
                }
            };
            let write = async {
                for (seq, frame) in page {
                    // Fed, not sent: the page goes out in as few writes as the buffer allows.
                    socket.feed(Message::Text(frame.into())).await?;
                    *last_sent = seq;
                }
                socket.flush().await
            };
            let (next, written) = tokio::join!(next, write);
            if written.is_err() {
                return Err(End::Gone);
            }
            match next {
                Some(next) => page = next?,
                None => return Ok(()),
            }
        }
    }

    async fn read_page(&self, after: i64) -> Result<Vec<(i64, String)>, End> {
        self.core
            .inbox_after(self.agent_pk, after, REPLAY_PAGE)
            .await
            .map_err(|err| {
                tracing::warn!(error = %err, "replay failed");
                End::Close(1011, "storage unavailable; reconnect later")
            })
    }

    /// Runs an operation; the future yields the reply frame.
    fn perform(&self, request_id: Value, op: Op) -> Reply {
        let core = self.core.clone();
        let caller = self.caller;
        Box::pin(async move {
            match op {
                Op::SendMessage(body, key) => frames::reply(
                    &request_id,
                    core.send_message(&caller, body, key.as_deref()).await,
                ),
                Op::GetMessages(query) => {
                    frames::reply(&request_id, core.get_messages(&caller, query).await)
                }
                Op::GetMessage(id) => {
                    frames::reply(&request_id, core.get_message(&caller, &id).await)
                }
                Op::MarkRead(body) => {
                    frames::reply(&request_id, core.mark_read(&caller, body).await)
                }
                Op::Respond(id, body, key) => frames::reply(
                    &request_id,
                    core.respond(&caller, &id, body, key.as_deref()).await,
                ),
                Op::Broadcast(body, key) => frames::reply(
                    &request_id,
                    core.broadcast(&caller, body, key.as_deref()).await,
                ),
                Op::Assistance(body, key) => frames::reply(
                    &request_id,
                    core.request_assistance(&caller, body, key.as_deref()).await,
                ),
                Op::Task(op) => task_reply(&core, &caller, &request_id, op).await,
                Op::WhoAmI => frames::reply(&request_id, core.whoami(&caller)),
            }
        })
    }
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

/// Runs a task protocol frame; the reply carries the same result or error as REST.
async fn task_reply(core: &Core, caller: &Caller, request_id: &Value, op: TaskOp) -> String {
    match op {
        TaskOp::Submit(request) => {
            frames::reply(request_id, core.submit_task(caller, request).await)
        }
        TaskOp::Report {
            task_id,
            claimed,
            result,
        } => {
            let done = match core.check_claimed(caller, claimed.as_deref(), "agent_id") {
                Ok(()) => core.report_task(caller, &task_id, result).await,
                Err(err) => Err(err),
            };
            frames::reply(request_id, done)
        }
        TaskOp::Handoff { task_id, handoff } => frames::reply(
            request_id,
            core.handoff_task(caller, &task_id, handoff).await,
        ),
        TaskOp::Clarify {
            task_id,
            claimed,
            clarify,
        } => {
            let done = match core.check_claimed(caller, claimed.as_deref(), "requested_by") {
                Ok(()) => core.request_clarification(caller, &task_id, clarify).await,
                Err(err) => Err(err),
            };
            frames::reply(request_id, done)
        }
        TaskOp::Answer {
            task_id,
            clarification_id,
            claimed,
            answer,
        } => {
            let done = match core.check_claimed(caller, claimed.as_deref(), "response_provided_by")
            {
                Ok(()) => {
                    core.answer_clarification(caller, &task_id, &clarification_id, answer)
                        .await
                }
                Err(err) => Err(err),
            };
            frames::reply(request_id, done)
        }
        TaskOp::Cancel { task_id, cancel } => {
            frames::reply(request_id, core.cancel_task(caller, &task_id, cancel).await)
        }
        TaskOp::Get(task_id) => frames::reply(request_id, core.get_task(caller, &task_id).await),
        TaskOp::List(query) => frames::reply(request_id, core.list_tasks(caller, query).await),
    }
}
