//! One STOMP subscription: an agent's queue, replayed from the queue's cursor, then fed
//! by the hub, in inbox order, each entry once.
//!
//! A subscription is a task of its own with its own live connection in the hub. It never
//! closes for being slow: when its outbox overflows it drops what piled up and carries on
//! from storage (Wise Agents never resubscribe, so a closed subscription would leave the
//! agent deaf).

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use switchboard_types::messages::MessageView;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::frame::{Command, Frame, Version};
use super::queues::{Queue, plain_body, to_wise};
use crate::core::Core;
use crate::core::live::{Connection, LivePush};

/// Entries read from storage at a time.
const PAGE: i64 = 256;

/// How a subscription's messages are acknowledged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AckMode {
    /// Consumed once written to the connection.
    Auto,
    /// An ACK consumes the message and every earlier one.
    Client,
    /// An ACK consumes that message only.
    ClientIndividual,
}

impl AckMode {
    pub fn parse(value: Option<&str>) -> Option<AckMode> {
        match value {
            None | Some("auto") => Some(AckMode::Auto),
            Some("client") => Some(AckMode::Client),
            Some("client-individual") => Some(AckMode::ClientIndividual),
            Some(_) => None,
        }
    }
}

/// What a subscription hands the session to write. Small (a pointer): the session's
/// outbox allocates its slots up front, and on an idle connection they stay empty.
pub enum Out {
    Message(Box<OutMessage>),
    /// The subscription cannot go on: the session sends an `ERROR` with this and closes.
    Fatal(Box<str>),
}

/// A `MESSAGE`; with `consumed`, the queue's cursor moves to that seq once it is
/// written (ack `auto`).
pub struct OutMessage {
    pub frame: Frame,
    pub consumed: Option<(String, i64)>,
    pub agent: switchboard_types::ids::AgentPk,
}

/// The next ack of a subscription that takes them; pending forever for one that does not.
async fn next_ack(acks: &mut Option<mpsc::UnboundedReceiver<AckOp>>) -> Option<AckOp> {
    match acks {
        Some(acks) => acks.recv().await,
        None => std::future::pending().await,
    }
}

/// An `ACK` or `NACK` routed to its subscription.
#[derive(Debug, Clone, Copy)]
pub enum AckOp {
    Ack(i64),
    Nack(i64),
}

/// A subscription's task state.
pub struct Subscription {
    pub core: Core,
    pub id: String,
    pub destination: String,
    pub queue: Queue,
    /// The queue's cursor name.
    pub cursor: String,
    pub ack: AckMode,
    pub version: Version,
    pub conn: Connection,
    pub out: mpsc::Sender<Out>,
    /// `ACK`/`NACK`s routed here; none for ack `auto` (an idle connection's memory).
    pub acks: Option<mpsc::UnboundedReceiver<AckOp>>,
    pub cancel: CancellationToken,
    /// Set before `cancel` when the client ended the subscription (UNSUBSCRIBE,
    /// DISCONNECT), not the connection breaking.
    pub clean: Arc<AtomicBool>,
    /// Every entry up to here was looked at (delivered, or not this queue's).
    pub examined: i64,
    /// Delivered, not yet acknowledged (client modes).
    pub pending: BTreeSet<i64>,
    /// Past the cursor, acknowledged one by one (`client-individual`), now or by an
    /// earlier subscription: not delivered again.
    pub acked: BTreeSet<i64>,
}

/// Why the task stops.
struct Stop;

impl Subscription {
    /// The ack id of an entry: the subscription and the seq, so an `ACK` finds both.
    pub fn ack_id(subscription: &str, seq: i64) -> String {
        format!("{subscription}:{seq}")
    }

    pub async fn run(mut self) {
        let presence = self
            .queue
            .presence_name()
            .map(|queue| self.core.queue_subscribed(self.conn.agent(), queue));
        self.serve().await;
        if let Some(mut presence) = presence {
            presence.clean = self.clean.load(Ordering::Relaxed);
        }
    }

    async fn serve(&mut self) {
        if Box::pin(self.catch_up()).await.is_err() {
            return;
        }
        let cancel = self.cancel.clone();
        let lag = self.conn.lag().clone();
        let removed = self.conn.removed();
        loop {
            let step = tokio::select! {
                biased;
                () = cancel.cancelled() => Err(Stop),
                () = removed.cancelled() => {
                    let _ = self.out.send(Out::Fatal("agent removed".into())).await;
                    Err(Stop)
                }
                () = lag.raised() => {
                    lag.clear();
                    self.conn.drain();
                    Box::pin(self.catch_up()).await
                }
                Some(op) = next_ack(&mut self.acks) => {
                    self.acknowledge(op);
                    Ok(())
                }
                push = self.conn.next_push() => match push {
                    Some(push) => Box::pin(self.push(push)).await,
                    None => Err(Stop),
                },
            };
            if step.is_err() {
                return;
            }
        }
    }

    async fn push(&mut self, push: LivePush) -> Result<(), Stop> {
        let seq = push.seq();
        if seq <= self.examined {
            return Ok(());
        }
        if seq == self.examined + 1
            && let Some(view) = push.message()
        {
            return self.deliver_at(seq, view).await;
        }
        // A gap, or an entry that is not a plain message (a task notification): storage
        // has it in the shape this task needs.
        Box::pin(self.catch_up()).await
    }

    /// Delivers every stored entry after `examined`.
    async fn catch_up(&mut self) -> Result<(), Stop> {
        loop {
            let page = match self
                .core
                .inbox_views_after(&self.conn, self.examined, PAGE)
                .await
            {
                Ok(page) => page,
                Err(err) => {
                    tracing::warn!(error = %err, "STOMP replay failed");
                    let _ = self
                        .out
                        .send(Out::Fatal("storage unavailable; reconnect later".into()))
                        .await;
                    return Err(Stop);
                }
            };
            for view in &page.items {
                self.deliver(view).await?;
            }
            if !page.more {
                return Ok(());
            }
        }
    }

    async fn deliver(&mut self, view: &MessageView) -> Result<(), Stop> {
        match view.seq {
            Some(seq) => self.deliver_at(seq, view).await,
            None => Ok(()),
        }
    }

    /// Delivers entry `seq` of the inbox, if it is this queue's.
    async fn deliver_at(&mut self, seq: i64, view: &MessageView) -> Result<(), Stop> {
        self.examined = seq;
        if !self.queue.carries(view) || self.acked.contains(&seq) {
            if self.ack != AckMode::Auto && self.pending.is_empty() {
                self.record();
            }
            return Ok(());
        }
        let (body, content_type) = if self.queue.is_wise() {
            let yaml = to_wise(view).to_yaml().into_bytes();
            (yaml, "text/plain;charset=utf-8".to_owned())
        } else {
            plain_body(view)
        };
        let ack_id = Subscription::ack_id(&self.id, seq);
        let mut frame = Frame::new(Command::Message)
            .header("destination", self.destination.clone())
            .header("message-id", ack_id.clone())
            .header("subscription", self.id.clone());
        if self.ack != AckMode::Auto && self.version == Version::V1_2 {
            frame = frame.header("ack", ack_id);
        }
        // The headers the server vouches for first (the first of a name is the one that
        // counts), the one a peer wrote (its content type) last.
        let frame = frame
            .header("switchboard-seq", seq.to_string())
            .header("switchboard-message-id", view.message_id.clone())
            .header("switchboard-sender", view.sender_agent_id.clone())
            .header("content-length", body.len().to_string())
            .header("content-type", content_type)
            .body(body);
        let consumed = match self.ack {
            AckMode::Auto => Some((self.cursor.clone(), seq)),
            AckMode::Client | AckMode::ClientIndividual => {
                self.pending.insert(seq);
                None
            }
        };
        let out = Out::Message(Box::new(OutMessage {
            frame,
            consumed,
            agent: self.conn.agent(),
        }));
        self.out.send(out).await.map_err(|_| Stop)
    }

    /// An `ACK` consumes (in `client` mode, everything up to it); a `NACK` leaves the
    /// message unconsumed: it comes again on the next subscription to the queue.
    fn acknowledge(&mut self, op: AckOp) {
        let AckOp::Ack(seq) = op else {
            return;
        };
        match self.ack {
            AckMode::Auto => return,
            AckMode::Client => self.pending.retain(|p| *p > seq),
            AckMode::ClientIndividual => {
                if self.pending.remove(&seq) {
                    self.acked.insert(seq);
                }
            }
        }
        self.record();
    }

    /// Tells the core how far the queue was consumed: up to the first unacknowledged
    /// entry, and the ones acknowledged past it.
    fn record(&mut self) {
        let cursor = self
            .pending
            .first()
            .map_or(self.examined, |first| first - 1);
        self.acked.retain(|s| *s > cursor);
        self.core
            .queue_consumed(self.conn.agent(), &self.cursor, cursor, &self.acked);
    }
}
