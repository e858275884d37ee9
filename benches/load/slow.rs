//! A slow reader: connections that never read while a sender keeps broadcasting to
//! them. Each connection's outbox is bounded, so the server's memory must stop growing
//! at the bound (the connections are closed with 4008), whatever the sender does.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use futures_util::StreamExt;
use hyper::StatusCode;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

use crate::Opts;
use crate::harness::{Row, ServerProcess, Setup, http_load};

/// 99 connections that never read a frame, and a sender broadcasting 1 KiB updates to
/// all of them from `--connections` HTTP connections. Reported: the peak of the
/// server's memory during the load over its memory before, per slow connection, and how
/// many of them the server closed for lagging.
pub async fn slow_readers(opts: Opts) -> Vec<Row> {
    const AGENTS: usize = 100;
    let server = ServerProcess::start(&[]);
    let (_, agents) = Setup::new(&server).team("slow", "s", AGENTS, &[]).await;
    let mut sockets = Vec::new();
    for agent in &agents[1..] {
        let url = format!("ws://{}/v1/ws", server.addr);
        let mut request = url.into_client_request().expect("request");
        request.headers_mut().insert(
            "authorization",
            format!("Bearer {}", agent.token).parse().expect("header"),
        );
        let (socket, _) = tokio_tungstenite::connect_async(request)
            .await
            .expect("connect");
        sockets.push(socket);
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let before = server.rss_kib();
    let (peak, sampling) = sample_peak(server.pid());

    let (sender, token) = (agents[0].id.clone(), agents[0].token.clone());
    let host = server.addr.to_string();
    let summary = "x".repeat(1024);
    let make = Arc::new(move |_conn: usize, i: u64| {
        let body = format!(
            r#"{{"sender_agent_id":"{sender}","update_type":"progress","urgency":"info","content":{{"summary":"{i} {summary}"}}}}"#
        );
        crate::scenarios::post(&host, "/v1/broadcasts", &token, body)
    });
    let result = http_load(
        server.addr,
        opts.connections.min(16),
        opts.warmup(),
        opts.duration(),
        StatusCode::CREATED,
        make,
    )
    .await;
    sampling.store(false, Ordering::Relaxed);
    let peak = peak.load(Ordering::Relaxed).max(server.rss_kib());
    let closed = count_lagging_closes(sockets).await;
    let growth = peak.saturating_sub(before);
    vec![Row::from_load(
        "ws_slow_readers",
        format!("{} never-reading conns", AGENTS - 1),
        result,
        peak,
        format!(
            "peak +{:.1} MiB over {:.1} MiB ({:.0} KiB per slow conn); {closed} closed with 4008",
            growth as f64 / 1024.0,
            before as f64 / 1024.0,
            growth as f64 / (AGENTS - 1) as f64
        ),
    )]
}

/// Samples the server's memory every 50 ms until the flag is cleared; the highest.
fn sample_peak(pid: u32) -> (Arc<AtomicU64>, Arc<AtomicBool>) {
    let peak = Arc::new(AtomicU64::new(0));
    let running = Arc::new(AtomicBool::new(true));
    let (p, r) = (peak.clone(), running.clone());
    std::thread::spawn(move || {
        while r.load(Ordering::Relaxed) {
            let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
            let kib = status
                .lines()
                .find_map(|l| l.strip_prefix("RssAnon:"))
                .and_then(|v| v.split_whitespace().next())
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0);
            p.fetch_max(kib, Ordering::Relaxed);
            std::thread::sleep(Duration::from_millis(50));
        }
    });
    (peak, running)
}

/// Reads what each never-reading connection was sent; how many ended with 4008.
async fn count_lagging_closes(
    sockets: Vec<
        tokio_tungstenite::WebSocketStream<
            tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>,
        >,
    >,
) -> usize {
    let mut closed = 0;
    for mut socket in sockets {
        let drained = tokio::time::timeout(Duration::from_secs(5), async {
            while let Some(Ok(message)) = socket.next().await {
                if let Message::Close(Some(frame)) = message {
                    return u16::from(frame.code) == 4008;
                }
            }
            false
        })
        .await;
        closed += usize::from(drained.unwrap_or(false));
    }
    closed
}
