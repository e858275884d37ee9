//! Socket settings every accepted connection gets, whichever transport serves it.

use std::time::Duration;

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
