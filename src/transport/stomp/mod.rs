//! STOMP (issue #12): Wise Agents processes, and any STOMP client, using Switchboard as
//! their broker.
//!
//! [`frame`] is the wire codec (1.0, 1.1 and 1.2, as stomp.py speaks them), [`wise`] the
//! gate a Wise Agents body must pass to be relayed and the body written for a Wise
//! Agents receiver, [`queues`] how an agent's inbox is read as its two queues,
//! [`session`] one connection and [`subscription`] one subscription. The listener is
//! here: `--stomp-listen ADDR` (off by default).

pub mod frame;
pub mod queues;
pub mod replies;
pub mod session;
pub mod subscription;
pub mod websocket;
pub mod wise;

use std::time::Duration;
use switchboard_types::ids::TeamId;

use bytes::BytesMut;
use tokio::io::AsyncReadExt;
use tokio::net::{TcpListener, TcpStream};
use tokio_util::codec::Framed;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::core::Core;
use frame::{Limits, StompCodec, Version};

/// Settings of the STOMP transport.
#[derive(Debug, Clone)]
pub struct StompSettings {
    pub limits: Limits,
    /// The heart-beat the server asks of clients (zero: none; the client's own asks
    /// are always honoured).
    pub heart_beat: Duration,
    /// How long a new connection has to send `CONNECT`.
    pub connect_timeout: Duration,
    /// How long a write may make no progress before the session ends: the client stopped
    /// reading (its socket buffers are full) and would hold the session for ever.
    pub write_stall: Duration,
    /// Clients without credentials act as this team's bridge (`--stomp-anonymous-team`;
    /// unsafe anywhere but a laptop). `None`: credentials are required.
    pub anonymous_team: Option<TeamId>,
}

/// What every STOMP session needs.
#[derive(Clone)]
pub struct StompState {
    pub core: Core,
    pub settings: StompSettings,
    /// Cancelled at shutdown: every session ends with an `ERROR`.
    pub shutdown: CancellationToken,
    /// Sessions and subscriptions, so shutdown can wait for them.
    pub tracker: TaskTracker,
    /// The server's connection budget (STOMP over TCP takes its places from it too).
    pub gate: crate::transport::common::gate::Gate,
    /// Which request a Wise Agents reply answers.
    pub replies: std::sync::Arc<replies::Replies>,
}

impl session::Wire for Framed<TcpStream, StompCodec> {
    fn set_version(&mut self, version: Version) {
        self.codec_mut().version = version;
    }

    async fn linger(self) {
        let mut stream = self.into_inner();
        let mut scratch = vec![0u8; 16 * 1024];
        let drain = async {
            // Bounded: a client that keeps sending gets cut off after this much.
            let mut left: usize = 8 * 1024 * 1024;
            while left > 0 {
                match stream.read(&mut scratch).await {
                    Ok(0) | Err(_) => return,
                    Ok(n) => left = left.saturating_sub(n),
                }
            }
        };
        let _ = tokio::time::timeout(LINGER, drain).await;
    }

    fn shrink(&mut self) {
        if self.read_buffer().is_empty() {
            *self.read_buffer_mut() = BytesMut::new();
        }
        if self.write_buffer().is_empty() {
            *self.write_buffer_mut() = BytesMut::new();
        }
    }
}

/// How long a connection that got an `ERROR` is read from before it is dropped.
const LINGER: Duration = Duration::from_secs(1);

/// Accepts STOMP connections until shutdown.
pub async fn listen(listener: TcpListener, state: StompState) {
    let mut backoff = crate::transport::common::socket::Backoff::default();
    loop {
        let accepted = tokio::select! {
            () = state.shutdown.cancelled() => return,
            accepted = listener.accept() => accepted,
        };
        let (stream, peer) = match accepted {
            Ok(accepted) => accepted,
            Err(err) => {
                // Out of descriptors, usually: wait rather than spin.
                backoff.failed("stomp", &err).await;
                continue;
            }
        };
        backoff.succeeded();
        // A place in the server's connection budget, or the socket is closed at once.
        let Some(ticket) = state.gate.admit() else {
            continue;
        };
        crate::transport::common::socket::tune(&stream);
        // A small first read buffer: a CONNECT is short, and most connections then sit
        // idle; it grows with bigger frames.
        let codec = StompCodec::new(state.settings.limits);
        let wire = Framed::with_capacity(stream, codec, 1024);
        let place = ticket.slot().clone();
        let session = session::serve(state.clone(), wire, peer.to_string(), Some(place));
        state.tracker.spawn(async move {
            tokio::select! {
                () = session => {}
                // Let go by the gate before it connected, for a newer socket.
                () = ticket.slot().shed() => {}
            }
        });
    }
}
