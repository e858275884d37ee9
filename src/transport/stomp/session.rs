//! One STOMP connection: `CONNECT` (or `STOMP`), then frames until `DISCONNECT`, an
//! `ERROR` or the peer goes.
//!
//! The session is one loop over the client's frames, what its subscriptions hand it to
//! write, the heart-beat clock and server shutdown. It decodes, checks who may do what
//! with the core's help, and calls the core; a subscription is a task of its own
//! ([`super::subscription`]). An error of the conversation is an `ERROR` frame followed
//! by the end of the connection, as the specification has it; a refused `SEND` is an
//! `ERROR` that leaves the connection open (see [`Session::send_or_refuse`]).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;
use switchboard_types::ids::{AgentId, TeamId};

use futures_util::{Sink, SinkExt, Stream, StreamExt};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

mod end;
mod handshake;
mod send;
mod transactions;

use end::{describe, finish};

use super::StompState;
use super::frame::{Command, Frame, FrameError, Incoming, Version};
use super::queues::{Destination, WISE_ROLE};
use super::subscription::{AckMode, AckOp, Ledger, Out, OutMessage, Subscription};
use crate::core::feed::Form;
use crate::core::{Caller, CoreError};

/// Open transactions per connection and frames per transaction (a transaction is
/// buffered in memory until its COMMIT; the bytes of all of a credential's are bounded
/// by `MAX_BUFFERED_BYTES`).
const MAX_TRANSACTIONS: usize = 16;
const MAX_TRANSACTION_FRAMES: usize = 1024;

/// Frames a session's subscriptions may have waiting to be written.
const OUTBOX: usize = 256;

/// A connection's frames, both ways, at a version the session sets once negotiated.
pub trait Wire:
    Stream<Item = Result<Incoming, FrameError>> + Sink<Option<Frame>, Error = FrameError> + Unpin + Send
{
    fn set_version(&mut self, version: Version);

    /// After an `ERROR`: reads and drops what the client still sends, for a moment, so
    /// the `ERROR` is read before the connection resets (closing a socket with unread
    /// input resets it, and a reset discards what the client had not read yet).
    fn linger(self) -> impl Future<Output = ()> + Send;

    /// Gives back buffer memory while the connection is idle (most are, most of the
    /// time); the buffers grow again with the next frame.
    fn shrink(&mut self) {}
}

/// Quiet time after which a session gives its buffers back.
const IDLE: Duration = Duration::from_secs(2);

/// Who the connection is.
enum Identity {
    /// An agent token: that agent, its own queues only.
    Agent(Caller),
    /// A team key with `login` = the team id: any agent of the team, named by its queue.
    Bridge { caller: Caller, team_id: TeamId },
}

impl Identity {
    /// The credential the connection authenticated with.
    fn caller(&self) -> &Caller {
        match self {
            Identity::Agent(caller) | Identity::Bridge { caller, .. } => caller,
        }
    }
}

/// Why a session ends.
enum End {
    /// Send an `ERROR` with this message (and `receipt-id`, if the frame asked), close.
    Error {
        message: String,
        detail: String,
        receipt: Option<String>,
    },
    /// `DISCONNECT`, answered.
    Disconnect,
    /// The peer went away.
    Gone,
}

impl End {
    fn error(message: impl Into<String>) -> End {
        End::Error {
            message: message.into(),
            detail: String::new(),
            receipt: None,
        }
    }

    fn from_core(err: CoreError) -> End {
        let body = err.into_body();
        End::Error {
            message: body.error_message.clone(),
            detail: format!(
                "{}: {}\n{}",
                <&'static str>::from(body.error_code),
                body.error_message,
                body.suggested_action
            ),
            receipt: None,
        }
    }

    fn with_receipt(self, frame: &Frame) -> End {
        match self {
            End::Error {
                message, detail, ..
            } => End::Error {
                message,
                detail,
                receipt: frame.get("receipt").map(str::to_owned),
            },
            other => other,
        }
    }
}

/// A subscription as the session keeps it.
struct Handle {
    /// What it delivered and what was acknowledged (ack `auto` takes no acks).
    ledger: Arc<Ledger>,
    cancel: CancellationToken,
    clean: Arc<AtomicBool>,
}

impl Handle {
    /// Ends the subscription; `clean` when the client asked for it.
    fn end(&self, clean: bool) {
        self.clean.store(clean, Ordering::Relaxed);
        self.cancel.cancel();
    }
}

static SESSIONS: AtomicU64 = AtomicU64::new(1);

/// A connected session.
struct Session<'a, W: Wire> {
    state: &'a StompState,
    wire: W,
    version: Version,
    identity: Identity,
    session_id: String,
    subscriptions: HashMap<String, Handle>,
    /// Agents this connection subscribed for (named in the log when it ends).
    agents: HashSet<String>,
    transactions: HashMap<String, Vec<Frame>>,
    /// The connection's place in its credential's count, and the bytes its transactions
    /// hold against the credential's buffer.
    hold: crate::core::sessions::SessionHold,
    /// Cancelled when the connection's agent is removed (never for a bridge): the
    /// session ends at once, subscribed or not.
    removed: CancellationToken,
    out_tx: mpsc::Sender<Out>,
    out_rx: mpsc::Receiver<Out>,
    /// How often the server sends a heart-beat when otherwise silent (zero: never).
    send_every: Duration,
    /// How long the client may stay silent (zero: forever).
    silence_limit: Duration,
    last_write: Instant,
    last_read: Instant,
    /// The buffers were given back since the last traffic.
    shrunk: bool,
}

/// Serves one connection, from its first frame to its end. `place` is its place in the
/// connection gate (over TCP and over WebSocket alike): let go while it has not
/// connected, pinned once it has (an authenticated session is bounded by its
/// credential's caps instead). `None` where nothing gates it.
pub async fn serve<W: Wire>(
    state: StompState,
    mut wire: W,
    peer: String,
    place: Option<std::sync::Arc<crate::transport::common::gate::Slot>>,
) {
    metrics::gauge!("switchboard_stomp_connections").increment(1.0);
    let connected = tokio::time::timeout(
        state.settings.connect_timeout,
        Box::pin(handshake::connect(&state, &mut wire)),
    )
    .await;
    let session = match connected {
        Ok(Ok(session)) => session,
        Ok(Err(end)) => {
            finish(wire, end).await;
            metrics::gauge!("switchboard_stomp_connections").decrement(1.0);
            return;
        }
        Err(_) => {
            finish(wire, End::error("no CONNECT frame in time")).await;
            metrics::gauge!("switchboard_stomp_connections").decrement(1.0);
            return;
        }
    };
    if let Some(place) = place {
        place.pin();
    }
    let (version, identity, heart_beat, hold) = session;
    let removed = match state.core.live().removal_signal(identity.caller()) {
        Ok(removed) => removed,
        Err(err) => {
            finish(wire, End::from_core(err)).await;
            metrics::gauge!("switchboard_stomp_connections").decrement(1.0);
            return;
        }
    };
    let (out_tx, out_rx) = mpsc::channel(OUTBOX);
    let session_id = format!("stomp-{}", SESSIONS.fetch_add(1, Ordering::Relaxed));
    let (team, who) = describe(&state, &identity);
    tracing::info!(session = %session_id, %peer, team = %team, identity = %who, version = version.as_str(), "STOMP session started");
    let mut session = Session {
        state: &state,
        wire,
        version,
        identity,
        session_id,
        subscriptions: HashMap::new(),
        agents: HashSet::new(),
        transactions: HashMap::new(),
        hold,
        removed,
        out_tx,
        out_rx,
        send_every: heart_beat.0,
        silence_limit: heart_beat.1,
        last_write: Instant::now(),
        last_read: Instant::now(),
        shrunk: false,
    };
    let end = session.run().await;
    let clean = matches!(end, End::Disconnect);
    for handle in session.subscriptions.values() {
        handle.end(clean);
    }
    let agents: Vec<&String> = session.agents.iter().collect();
    tracing::info!(session = %session.session_id, team = %team, agents = ?agents, "STOMP session ended");
    finish(session.wire, end).await;
    metrics::gauge!("switchboard_stomp_connections").decrement(1.0);
}

impl<W: Wire> Session<'_, W> {
    async fn run(&mut self) -> End {
        // Waited on once for the whole session, not once per frame: each fresh wait
        // registers with (and leaves) the token's waiter list under its lock.
        let mut shutdown = std::pin::pin!(self.state.shutdown.clone().cancelled_owned());
        let mut removed = std::pin::pin!(self.removed.clone().cancelled_owned());
        // One timer for the heart-beat, the idle shrink and the read deadline, moved to
        // the earliest of them only when that changes: a fresh timer per frame is a
        // registration and a removal in the runtime's timer wheel, twice per SEND.
        let mut timer = std::pin::pin!(tokio::time::sleep_until(Instant::now()));
        let mut armed: Option<Instant> = None;
        loop {
            let due = self.next_timer();
            if due != armed {
                if let Some(at) = due {
                    timer.as_mut().reset(at);
                }
                armed = due;
            }
            let step = tokio::select! {
                biased;
                () = &mut shutdown => Err(End::error("server shutting down")),
                () = &mut removed => Err(End::error("the agent was removed")),
                Some(out) = self.out_rx.recv() => self.write_out(out).await,
                () = &mut timer, if armed.is_some() => {
                    armed = None;
                    self.on_timer().await
                }
                incoming = self.wire.next() => match incoming {
                    Some(Ok(Incoming::HeartBeat)) => {
                        self.last_read = Instant::now();
                        self.shrunk = false;
                        Ok(())
                    }
                    Some(Ok(Incoming::Frame(frame))) => {
                        self.last_read = Instant::now();
                        self.shrunk = false;
                        metrics::counter!("switchboard_stomp_frames_in_total").increment(1);
                        // Boxed: an idle session keeps only its small loop state,
                        // not room for the largest operation's future.
                        Box::pin(self.frame(frame)).await
                    }
                    Some(Err(err)) => Err(End::error(err.to_string())),
                    None => Err(End::Gone),
                },
            };
            if let Err(end) = step {
                return end;
            }
        }
    }

    /// When the session's timer must next fire: the earliest of the heart-beat it owes,
    /// the idle shrink, and the client's read deadline.
    fn next_timer(&self) -> Option<Instant> {
        let idle = (!self.shrunk).then(|| self.last_read.max(self.last_write) + IDLE);
        [self.next_heart_beat(), idle, self.read_deadline()]
            .into_iter()
            .flatten()
            .min()
    }

    /// The timer fired: whichever of its reasons is due now.
    async fn on_timer(&mut self) -> Result<(), End> {
        let now = Instant::now();
        if self.read_deadline().is_some_and(|at| at <= now) {
            return Err(End::error("heart-beat timeout: nothing received in time"));
        }
        if self.next_heart_beat().is_some_and(|at| at <= now) {
            self.write(None).await?;
        }
        if !self.shrunk && self.last_read.max(self.last_write) + IDLE <= now {
            self.wire.shrink();
            self.shrunk = true;
        }
        Ok(())
    }

    fn next_heart_beat(&self) -> Option<Instant> {
        (!self.send_every.is_zero()).then(|| self.last_write + self.send_every)
    }

    fn read_deadline(&self) -> Option<Instant> {
        (!self.silence_limit.is_zero()).then(|| self.last_read + self.silence_limit)
    }

    /// Writes a frame (or a heart-beat), bounded by `write_stall`: a client that stopped
    /// reading ends its session (its subscriptions leave the hub with it) instead of
    /// holding it in the write.
    async fn write(&mut self, frame: Option<Frame>) -> Result<(), End> {
        let counted = frame.is_some();
        let stall = self.state.settings.write_stall;
        let mut send = self.wire.send(frame);
        // Almost every write fits the socket's buffer and is done at the first poll; the
        // stall timer is armed only for one that waits (a timer per frame was two trips
        // through the runtime's timer wheel per SEND).
        let sent = match futures_util::poll!(&mut send) {
            std::task::Poll::Ready(sent) => Ok(sent),
            std::task::Poll::Pending => tokio::time::timeout(stall, send).await,
        };
        match sent {
            Ok(Ok(())) => {}
            Ok(Err(_)) => return Err(End::Gone),
            Err(_) => {
                metrics::counter!("switchboard_stomp_stalled_total").increment(1);
                tracing::info!(session = %self.session_id, "STOMP client stopped reading; session ended");
                return Err(End::Gone);
            }
        }
        self.last_write = Instant::now();
        self.shrunk = false;
        if counted {
            metrics::counter!("switchboard_stomp_frames_out_total").increment(1);
        }
        Ok(())
    }

    async fn write_out(&mut self, out: Out) -> Result<(), End> {
        match out {
            Out::Message(message) => {
                let OutMessage {
                    frame,
                    consumed,
                    agent,
                } = *message;
                self.write(Some(frame)).await?;
                if let Some((queue, seq)) = consumed {
                    let none = std::collections::BTreeSet::new();
                    self.state
                        .core
                        .queues()
                        .queue_consumed(agent, &queue, seq, &none);
                }
                Ok(())
            }
            Out::Fatal(message) => Err(End::error(message.into_string())),
        }
    }

    /// Handles one client frame, then its receipt.
    async fn frame(&mut self, frame: Frame) -> Result<(), End> {
        let done = match frame.command {
            Command::Send | Command::Ack | Command::Nack if frame.get("transaction").is_some() => {
                self.buffer(&frame)
            }
            // A refused SEND was answered by its ERROR: no RECEIPT.
            Command::Send if !self.send_or_refuse(&frame).await? => return Ok(()),
            Command::Send => Ok(()),
            Command::Subscribe => self.subscribe(&frame).await,
            Command::Unsubscribe => self.unsubscribe(&frame),
            Command::Ack => self.ack(&frame, true),
            Command::Nack => self.ack(&frame, false),
            Command::Begin => self.begin(&frame),
            Command::Commit => self.commit(&frame).await,
            Command::Abort => self.abort(&frame),
            Command::Disconnect => {
                self.receipt(&frame).await?;
                return Err(End::Disconnect);
            }
            Command::Connect | Command::Stomp => Err(End::error("already connected")),
            Command::Connected | Command::Message | Command::Receipt | Command::Error => Err(
                End::error(format!("{} is a server frame", frame.command.as_str())),
            ),
        };
        done.map_err(|end| end.with_receipt(&frame))?;
        self.receipt(&frame).await
    }

    async fn receipt(&mut self, frame: &Frame) -> Result<(), End> {
        match frame.get("receipt") {
            Some(id) => {
                let receipt = Frame::new(Command::Receipt).header("receipt-id", id);
                self.write(Some(receipt)).await
            }
            None => Ok(()),
        }
    }

    async fn subscribe(&mut self, frame: &Frame) -> Result<(), End> {
        let destination = required(frame, "destination")?;
        let id = match (frame.get("id"), self.version) {
            (Some(id), _) => id.to_owned(),
            (None, Version::V1_0) => destination.to_owned(),
            (None, _) => return Err(End::error("SUBSCRIBE needs an id header")),
        };
        let Some(ack) = AckMode::parse(frame.get("ack")) else {
            return Err(End::error("ack must be auto, client or client-individual"));
        };
        if self.subscriptions.contains_key(&id) {
            return Err(End::error(format!(
                "subscription id '{id}' is already in use"
            )));
        }
        let Some(to) = Destination::parse(destination) else {
            return Err(unknown_destination(destination));
        };
        let core = &self.state.core;
        let agent = to.agent_id.as_deref().map(AgentId::from);
        let caller = match (&self.identity, &agent) {
            // A topic is read from the subscriber's own inbox.
            (Identity::Agent(caller), None) => Ok(*caller),
            (Identity::Agent(caller), Some(agent)) => core.queues().act_as(caller, None, agent, None).await,
            (Identity::Bridge { caller, team_id }, Some(agent)) => {
                core.queues().act_as(caller, Some(team_id), agent, Some(WISE_ROLE)).await
            }
            (Identity::Bridge { .. }, None) => {
                return Err(End::error(
                    "a team bridge subscribes to agents' queues; connect with an agent token to subscribe to a topic",
                ));
            }
        }
        .map_err(End::from_core)?;
        let conn = core.live().connect(&caller).map_err(End::from_core)?;
        let (examined, acked) = core
            .queues()
            .queue_cursor(conn.agent(), &to.queue)
            .await
            .map_err(End::from_core)?;
        let ledger = Arc::new(Ledger::new(
            core.clone(),
            conn.agent(),
            to.queue.clone(),
            ack,
            (examined, acked),
        ));
        let cancel = CancellationToken::new();
        let clean = Arc::new(AtomicBool::new(false));
        tracing::debug!(session = %self.session_id, subscription = %id, destination, agent = %conn.agent_id, "STOMP subscription");
        let subscription = Subscription {
            core: core.clone(),
            id: id.clone(),
            destination: to.to_header(),
            queue: to.queue.clone(),
            ack,
            version: self.version,
            removed: conn.removed(),
            feed: core.live().feed_live(conn, examined, Form::Views),
            out: self.out_tx.clone(),
            ledger: ledger.clone(),
            cancel: cancel.clone(),
            clean: clean.clone(),
            replies: self.state.replies.clone(),
        };
        if let Some(agent) = to.agent_id {
            self.agents.insert(agent);
        }
        self.state.tracker.spawn(subscription.run());
        self.subscriptions.insert(
            id,
            Handle {
                ledger,
                cancel,
                clean,
            },
        );
        Ok(())
    }

    fn unsubscribe(&mut self, frame: &Frame) -> Result<(), End> {
        let id = match (frame.get("id"), self.version) {
            (Some(id), _) => id,
            (None, Version::V1_0) => required(frame, "destination")?,
            (None, _) => return Err(End::error("UNSUBSCRIBE needs an id header")),
        };
        // An id this connection does not hold is already not subscribed: a Wise Agents
        // process that reconnected without subscribing again unsubscribes on stop with
        // the id of its first connection, and a broker answers that with nothing.
        match self.subscriptions.remove(id) {
            Some(handle) => handle.end(true),
            None => {
                tracing::debug!(session = %self.session_id, subscription = id, "UNSUBSCRIBE of no subscription")
            }
        }
        Ok(())
    }

    /// `ACK` / `NACK`: routed to the subscription by the ack id (`<subscription>:<seq>`).
    fn ack(&mut self, frame: &Frame, ack: bool) -> Result<(), End> {
        let header = if self.version == Version::V1_2 {
            "id"
        } else {
            "message-id"
        };
        let id = required(frame, header)?;
        let parsed = id
            .rsplit_once(':')
            .and_then(|(sub, seq)| Some((sub, seq.parse::<i64>().ok()?)));
        let Some((subscription, seq)) = parsed else {
            return Err(End::error(format!("'{id}' is not an id this server gave")));
        };
        let Some(handle) = self.subscriptions.get(subscription) else {
            return Err(End::error(format!("no subscription '{subscription}'")));
        };
        let op = if ack {
            AckOp::Ack(seq)
        } else {
            AckOp::Nack(seq)
        };
        // Applied now, before the next frame is read: frames take effect in order.
        handle.ledger.acknowledge(op);
        Ok(())
    }
}

fn required<'f>(frame: &'f Frame, header: &str) -> Result<&'f str, End> {
    frame.get(header).ok_or_else(|| {
        End::error(format!(
            "{} needs a {header} header",
            frame.command.as_str()
        ))
    })
}

fn unknown_destination(destination: &str) -> End {
    End::error(format!(
        "unknown destination '{destination}': this server has /queue/request/<agent>, \
         /queue/response/<agent>, /queue/<agent> and /topic/<tag>"
    ))
}
