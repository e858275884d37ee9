//! Hostile clients: what an attacker found, each as a check that fails without its
//! limit (`docs/security.md`, "Limits"). Bounded in time: the servers run with short
//! timeouts, the same code paths as the defaults.

mod connections;
mod held_calls;
mod inputs;
mod lists;
mod logs;
mod loop_guard;
mod mcp;
mod sessions;
mod stomp;
mod task_history;
mod task_moves;
mod traces;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::support::TestApp;

/// The server's address.
pub fn addr(app: &TestApp) -> SocketAddr {
    app.base
        .trim_start_matches("http://")
        .parse()
        .expect("an address")
}

/// A plain TCP connection to the server.
pub async fn socket(at: SocketAddr) -> TcpStream {
    TcpStream::connect(at).await.expect("connect")
}

/// Reads until the server closes the socket or `patience` passes: what it sent, and
/// whether (and after how long) it closed.
pub async fn until_closed(
    stream: &mut TcpStream,
    patience: Duration,
) -> (Vec<u8>, Option<Duration>) {
    let started = Instant::now();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let left = patience.saturating_sub(started.elapsed());
        match tokio::time::timeout(left, stream.read(&mut buf)).await {
            Err(_) => return (got, None),
            Ok(Ok(0)) | Ok(Err(_)) => return (got, Some(started.elapsed())),
            Ok(Ok(n)) => got.extend_from_slice(&buf[..n]),
        }
    }
}

/// `GET /healthz` on a fresh connection, written by hand (no client pool can hide a
/// refused connection): the status line, or `None` when nothing answered in 5 s.
pub async fn healthz(at: SocketAddr) -> Option<String> {
    let attempt = async {
        let mut stream = TcpStream::connect(at).await.ok()?;
        stream
            .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .await
            .ok()?;
        let mut answer = Vec::new();
        stream.read_to_end(&mut answer).await.ok()?;
        let text = String::from_utf8_lossy(&answer).into_owned();
        text.lines().next().map(str::to_owned)
    };
    tokio::time::timeout(Duration::from_secs(5), attempt)
        .await
        .ok()
        .flatten()
}
