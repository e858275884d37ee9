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
use super::queues::{self, plain_body, to_wise};
use super::replies::{Asked, Replies};
use crate::core::Core;
use crate::core::feed::{Feed, FeedItem, Ready};
use crate::core::queues::QueueName;

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
    pub consumed: Option<(QueueName, i64)>,
    pub agent: switchboard_types::ids::AgentPk,
}

/// An `ACK` or `NACK` routed to its subscription.
#[derive(Debug, Clone, Copy)]
pub enum AckOp {
    Ack(i64),
    Nack(i64),
}

/// What a subscription delivered and what its client acknowledged: written by the
/// subscription's task (which delivers) and by its session (which applies each `ACK` and
/// `NACK` as it reads it). Applied in the session, an acknowledgement takes effect in the
/// order the client sent its frames: an `ACK` followed by `UNSUBSCRIBE` or `DISCONNECT`
/// (even in one write) is recorded before the subscription ends, and a `RECEIPT` for it
/// means it was. (Routed to the task through a channel, the task could see the end first
/// and drop the ACK: the message came again on the next subscription.)
pub struct Ledger {
    core: Core,
    agent: switchboard_types::ids::AgentPk,
    /// The queue whose cursor this is.
    cursor: QueueName,
    ack: AckMode,
    book: std::sync::Mutex<Book>,
}

#[derive(Default)]
struct Book {
    /// Every entry up to here was looked at (delivered, or not this queue's).
    examined: i64,
    /// Delivered, not yet acknowledged (client modes).
    pending: BTreeSet<i64>,
    /// Past the cursor, acknowledged one by one (`client-individual`), now or by an
    /// earlier subscription: not delivered again.
    acked: BTreeSet<i64>,
}

impl Ledger {
    pub fn new(
        core: Core,
        agent: switchboard_types::ids::AgentPk,
        cursor: QueueName,
        ack: AckMode,
        (examined, acked): (i64, BTreeSet<i64>),
    ) -> Ledger {
        Ledger {
            core,
            agent,
            cursor,
            ack,
            book: std::sync::Mutex::new(Book {
                examined,
                pending: BTreeSet::new(),
                acked,
            }),
        }
    }

    fn book(&self) -> std::sync::MutexGuard<'_, Book> {
        self.book.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Entry `seq` was looked at; whether it is to be delivered (not acknowledged one by
    /// one already), and then (client modes) it waits for an ACK — in the same step, so
    /// an ACK of an earlier entry never records the cursor past it. An entry skipped
    /// while nothing waits for an ACK moves the cursor.
    fn examine(&self, seq: i64, carried: bool) -> bool {
        let mut book = self.book();
        book.examined = seq;
        if carried && !book.acked.contains(&seq) {
            if self.ack != AckMode::Auto {
                book.pending.insert(seq);
            }
            return true;
        }
        if self.ack != AckMode::Auto && book.pending.is_empty() {
            self.record(&mut book);
        }
        false
    }

    /// An `ACK` consumes (in `client` mode, everything up to it); a `NACK` leaves the
    /// message unconsumed: it comes again on the next subscription to the queue.
    pub fn acknowledge(&self, op: AckOp) {
        let AckOp::Ack(seq) = op else {
            return;
        };
        let mut book = self.book();
        match self.ack {
            AckMode::Auto => return,
            AckMode::Client => book.pending.retain(|p| *p > seq),
            AckMode::ClientIndividual => {
                if book.pending.remove(&seq) {
                    book.acked.insert(seq);
                }
            }
        }
        self.record(&mut book);
    }

    /// Tells the core how far the queue was consumed: up to the first unacknowledged
    /// entry, and the ones acknowledged past it.
    fn record(&self, book: &mut Book) {
        let cursor = book
            .pending
            .first()
            .map_or(book.examined, |first| first - 1);
        book.acked.retain(|s| *s > cursor);
        self.core
            .queues()
            .queue_consumed(self.agent, &self.cursor, cursor, &book.acked);
    }
}

/// A subscription's task state.
pub struct Subscription {
    pub core: Core,
    pub id: String,
    pub destination: String,
    pub queue: QueueName,
    pub ack: AckMode,
    pub version: Version,
    /// The agent's entries after the queue's cursor, each handed out once (the core's
    /// feed of the subscription's connection).
    pub feed: Feed,
    /// Cancelled when the agent was removed.
    pub removed: CancellationToken,
    pub out: mpsc::Sender<Out>,
    /// What was delivered and acknowledged, shared with the session.
    pub ledger: Arc<Ledger>,
    pub cancel: CancellationToken,
    /// Set before `cancel` when the client ended the subscription (UNSUBSCRIBE,
    /// DISCONNECT), not the connection breaking.
    pub clean: Arc<AtomicBool>,
    /// Where a request handed out on a request queue is remembered, for the reply.
    pub replies: Arc<Replies>,
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
            .core
            .queues()
            .queue_subscribed(self.feed.agent(), &self.queue);
        self.serve().await;
        if let Some(mut presence) = presence {
            presence.clean = self.clean.load(Ordering::Relaxed);
        }
    }

    async fn serve(&mut self) {
        // Waited on once, not once per delivery (see the session's loop).
        let mut cancel = std::pin::pin!(self.cancel.clone().cancelled_owned());
        let mut removed = std::pin::pin!(self.removed.clone().cancelled_owned());
        loop {
            let step = tokio::select! {
                biased;
                () = &mut cancel => Err(Stop),
                () = &mut removed => {
                    let _ = self.out.send(Out::Fatal("agent removed".into())).await;
                    Err(Stop)
                }
                ready = self.feed.ready() => match ready {
                    Ready::Entries => Box::pin(self.deliver_batch()).await,
                    // Everything dropped is in storage: read on from there.
                    Ready::Lagged => {
                        self.feed.recover();
                        Ok(())
                    }
                    Ready::Closed => Err(Stop),
                },
            };
            if step.is_err() {
                return;
            }
        }
    }

    /// Delivers the feed's next entries: a page from storage, or the next live push.
    async fn deliver_batch(&mut self) -> Result<(), Stop> {
        let entries = match self.feed.next_batch(PAGE).await {
            Ok(entries) => entries,
            Err(err) => {
                tracing::warn!(error = %err, "STOMP replay failed");
                let _ = self
                    .out
                    .send(Out::Fatal("storage unavailable; reconnect later".into()))
                    .await;
                return Err(Stop);
            }
        };
        for entry in entries {
            match entry.item {
                FeedItem::View(view) => self.deliver_at(entry.seq, &view).await?,
                // Routed to another transport: looked at, not this queue's.
                FeedItem::Skipped | FeedItem::Frame(_) => {
                    self.ledger.examine(entry.seq, false);
                }
            }
        }
        Ok(())
    }

    /// The `WiseAgentMessage` for an entry of a Wise Agents queue — or `None` when the
    /// real classes could not take it. Wise Agents look the message's `_context_name`
    /// up in their registry and their listener thread dies when it is missing (no
    /// name: an AttributeError, or Redis refusing `None`), which leaves the process
    /// deaf for good. A message that names no context (`context_reference`, inherited
    /// by replies) takes the team's `stomp_default_context`; with neither it is not
    /// handed to Wise agents at all: it stays in the inbox, readable through REST, the
    /// WebSocket and MCP, and is counted and logged.
    fn wise_body(&self, view: &MessageView) -> Option<Vec<u8>> {
        let mut wise = to_wise(view);
        if wise.context_name.is_none() {
            wise.context_name = self.core.queues().default_context(self.feed.agent());
        }
        if wise.context_name.is_none() {
            metrics::counter!("switchboard_stomp_withheld_total").increment(1);
            tracing::warn!(
                message_id = %view.message_id,
                destination = %self.destination,
                "not handed to a Wise Agents queue: the message names no context and the \
                 team has no stomp_default_context (Wise Agents crash on a message without \
                 one); it stays in the inbox"
            );
            return None;
        }
        Some(wise.to_yaml().into_bytes())
    }

    /// Delivers entry `seq` of the inbox, if it is this queue's.
    async fn deliver_at(&mut self, seq: i64, view: &MessageView) -> Result<(), Stop> {
        let carried = queues::carries(&self.queue, view);
        let wise = match carried && queues::is_wise(&self.queue) {
            true => self.wise_body(view),
            false => None,
        };
        let carried = carried && (wise.is_some() || !queues::is_wise(&self.queue));
        if !self.ledger.examine(seq, carried) {
            return Ok(());
        }
        let (body, content_type) = match wise {
            Some(wise) => (wise, "text/plain;charset=utf-8".to_owned()),
            None => plain_body(view),
        };
        if self.queue == QueueName::Request && !queues::from_wise(view) {
            let asked = Asked {
                message_id: view.message_id.clone(),
                requires_response: view.requires_response,
            };
            self.replies
                .handed(self.feed.agent(), &view.sender_agent_id, asked);
        }
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
            .header("switchboard-sender", view.sender_agent_id.clone());
        let frame = view.trace_fields().fold(frame, |frame, (name, value)| {
            frame.header(name, value.to_owned())
        });
        let frame = frame
            .header("content-length", body.len().to_string())
            .header("content-type", content_type);
        // A plain queue's or topic's message keeps its sender's own headers, as a
        // broker's does: after ours, so none of them can stand for one of ours.
        let frame = match queues::is_wise(&self.queue) {
            true => frame,
            false => queues::plain_headers(view)
                .fold(frame, |frame, (name, value)| frame.header(name, value)),
        };
        let frame = frame.body(body);
        let consumed = match self.ack {
            AckMode::Auto => Some((self.queue.clone(), seq)),
            AckMode::Client | AckMode::ClientIndividual => None,
        };
        let out = Out::Message(Box::new(OutMessage {
            frame,
            consumed,
            agent: self.feed.agent(),
        }));
        self.out.send(out).await.map_err(|_| Stop)
    }
}
