//! The attacker's scenarios (issue 41): connections that an unauthenticated client opens
//! and never uses, at rising rates, while a well-behaved client asks `/healthz` on a
//! fresh connection every 10 ms.
//!
//! Reported per kind of idle connection and attack rate: how many the attacker still
//! held at the end, the server's open descriptors, `/healthz` p50/p99 (connect included)
//! and the server's memory; and, per kind, the highest rate at which `/healthz` p99 stayed
//! within 50 ms. The server runs with its defaults (descriptor limit raised to the hard
//! limit, the connection cap below it, 30 s header timeout), so what is measured is what an
//! operator gets without tuning.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::Mutex;

use crate::Opts;
use crate::harness::{Row, ServerProcess, quantile_ms};

/// Attack rates tried, connections per second; the ramp stops past the 50 ms mark.
const RATES: &[u64] = &[250, 500, 1000, 2000, 4000];
/// The attacker keeps at most this many sockets (the bench shares the machine's
/// descriptor limit with the server).
const ATTACKER_CAP: usize = 9000;
/// `/healthz` p99 that counts as "still answering well".
const MARK_MS: f64 = 50.0;

#[derive(Clone, Copy)]
enum Kind {
    /// Connects and sends nothing.
    Silent,
    /// Sends part of a request head and stops.
    PartialHead,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Silent => "silent",
            Kind::PartialHead => "partial head",
        }
    }
}

pub async fn hostile(opts: Opts) -> Vec<Row> {
    let mut rows = Vec::new();
    for kind in [Kind::Silent, Kind::PartialHead] {
        let mut best = None;
        for &rate in RATES {
            let (row, p99) = stage(&opts, kind, rate, &[]).await;
            rows.push(row);
            if p99 > MARK_MS {
                break;
            }
            best = Some(rate);
        }
        rows.push(Row {
            scenario: "hostile".to_owned(),
            setting: format!("{} conns: verdict", kind.name()),
            rate: best.map_or("none".to_owned(), |r| format!("{r} conn/s")),
            p50: String::new(),
            p99: String::new(),
            rss: String::new(),
            note: format!("highest attack rate with /healthz p99 ≤ {MARK_MS} ms"),
        });
    }
    // The attacker above stops at its own cap, below the server's: here the server is
    // full (its cap lowered), so each new socket makes it let an idle one go.
    let (mut row, _) = stage(
        &opts,
        Kind::PartialHead,
        4000,
        &["--max-connections", "2000"],
    )
    .await;
    row.setting = "partial head conns at 4000/s, --max-connections 2000".to_owned();
    rows.push(row);
    rows.extend(crate::hostile_caller::rows(&opts).await);
    rows
}

/// One attack rate against a fresh server for `--duration` seconds.
async fn stage(opts: &Opts, kind: Kind, rate: u64, flags: &[&str]) -> (Row, f64) {
    let server = ServerProcess::start(flags);
    let addr = server.addr;
    let held: Arc<Mutex<Vec<TcpStream>>> = Arc::new(Mutex::new(Vec::new()));
    let refused = Arc::new(AtomicU64::new(0));
    let deadline = Instant::now() + opts.duration();

    let attacker = {
        let (held, refused) = (held.clone(), refused.clone());
        tokio::spawn(async move {
            // Every 10 ms, a hundredth of the rate.
            let per_tick = (rate / 100).max(1);
            let mut tick = tokio::time::interval(Duration::from_millis(10));
            while Instant::now() < deadline {
                tick.tick().await;
                if held.lock().await.len() >= ATTACKER_CAP {
                    continue;
                }
                for _ in 0..per_tick {
                    let (held, refused) = (held.clone(), refused.clone());
                    tokio::spawn(async move {
                        match open(addr, kind).await {
                            Some(socket) => held.lock().await.push(socket),
                            None => {
                                refused.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                    });
                }
            }
        })
    };

    let mut latencies = Vec::new();
    let mut failures = 0u64;
    let mut probe = tokio::time::interval(Duration::from_millis(10));
    while Instant::now() < deadline {
        probe.tick().await;
        match healthz(addr).await {
            Some(micros) => latencies.push(micros),
            None => failures += 1,
        }
    }
    let _ = attacker.await;
    let rss = server.rss_kib();
    let fds = std::fs::read_dir(format!("/proc/{}/fd", server.pid())).map_or(0, Iterator::count);
    let (open, closed) = still_open(&held).await;

    let p50 = quantile_ms(&mut latencies, 0.50);
    let p99 = if failures > 0 {
        f64::INFINITY
    } else {
        quantile_ms(&mut latencies, 0.99)
    };
    let row = Row {
        scenario: "hostile".to_owned(),
        setting: format!("{} conns at {rate}/s", kind.name()),
        rate: format!("{open} held"),
        p50: format!("{p50:.2} ms"),
        p99: if p99.is_finite() {
            format!("{p99:.2} ms")
        } else {
            format!("{failures} /healthz failed")
        },
        rss: format!("{:.1} MiB", rss as f64 / 1024.0),
        note: format!(
            "/healthz on a fresh conn every 10 ms; server fds {fds}; {closed} let go by the server, {} refused",
            refused.load(Ordering::Relaxed)
        ),
    };
    (row, p99)
}

/// An attacker's connection of the kind; `None` when the server would not take it.
async fn open(addr: SocketAddr, kind: Kind) -> Option<TcpStream> {
    let mut socket = tokio::time::timeout(Duration::from_secs(2), TcpStream::connect(addr))
        .await
        .ok()?
        .ok()?;
    if let Kind::PartialHead = kind {
        socket
            .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
            .await
            .ok()?;
    }
    Some(socket)
}

/// `/healthz` on a fresh connection, connect included; microseconds, `None` on failure.
pub(crate) async fn healthz(addr: SocketAddr) -> Option<u32> {
    let started = Instant::now();
    let answer = tokio::time::timeout(Duration::from_secs(2), async {
        let mut socket = TcpStream::connect(addr).await.ok()?;
        socket
            .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .await
            .ok()?;
        let mut answer = Vec::new();
        socket.read_to_end(&mut answer).await.ok()?;
        answer.starts_with(b"HTTP/1.1 200").then_some(())
    })
    .await;
    match answer {
        Ok(Some(())) => u32::try_from(started.elapsed().as_micros()).ok(),
        _ => None,
    }
}

/// How many of the attacker's sockets are still open, and how many the server closed.
async fn still_open(held: &Mutex<Vec<TcpStream>>) -> (usize, usize) {
    let sockets = held.lock().await;
    let mut closed = 0;
    for socket in sockets.iter() {
        let mut byte = [0u8; 1];
        // A closed socket reads end of file at once; an open one would block.
        match socket.try_read(&mut byte) {
            Ok(_) => closed += 1,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(_) => closed += 1,
        }
    }
    (sockets.len() - closed, closed)
}
