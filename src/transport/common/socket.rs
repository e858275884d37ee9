//! Socket settings every accepted connection gets, whichever transport serves it.

use std::time::{Duration, Instant};

use tokio::net::TcpStream;

/// Nagle's algorithm off (small frames and answers must leave at once) and TCP
/// keep-alive on, so a peer whose machine vanished without a FIN is noticed within about
/// two minutes even when its protocol has no heart-beat of its own (STOMP without
/// heart-beats, STOMP over WebSocket, an idle HTTP keep-alive connection): its session
/// ends and its live connections stop counting.
pub fn tune(stream: &TcpStream) {
    if let Err(err) = stream.set_nodelay(true) {
        tracing::debug!(error = %err, "set_nodelay failed");
    }
    let keep_alive = socket2::TcpKeepalive::new()
        .with_time(Duration::from_secs(60))
        .with_interval(Duration::from_secs(10))
        .with_retries(5);
    if let Err(err) = socket2::SockRef::from(stream).set_tcp_keepalive(&keep_alive) {
        tracing::debug!(error = %err, "TCP keep-alive not set");
    }
}

/// Accept errors (out of descriptors, mostly) are waited out with a growing pause, and
/// said once per interval with a count rather than once per try.
#[derive(Default)]
pub struct Backoff {
    pause: Duration,
    failures: u64,
    said: Option<Instant>,
}

impl Backoff {
    /// After a failed accept: says so (at most every ten seconds) and waits.
    pub async fn failed(&mut self, listener: &str, err: &std::io::Error) {
        self.failures += 1;
        if self
            .said
            .is_none_or(|at| at.elapsed() >= Duration::from_secs(10))
        {
            tracing::warn!(
                error = %err,
                listener,
                failures = self.failures,
                "accept failed; waiting before the next try"
            );
            self.said = Some(Instant::now());
            self.failures = 0;
        }
        self.pause = (self.pause * 2).clamp(Duration::from_millis(5), Duration::from_secs(1));
        tokio::time::sleep(self.pause).await;
    }

    /// After an accept that worked.
    pub fn succeeded(&mut self) {
        self.pause = Duration::ZERO;
    }
}
