//! Accepting connections and serving HTTP on them.
//!
//! The server drives hyper itself (rather than `axum::serve`) for one reason: hyper
//! answers requests it cannot parse — a header block over its buffer — with a bare
//! status and an empty body, before the application sees them. With hyper's buffer
//! raised, such requests reach the middleware, which refuses them with the contract's
//! error body (`transport::http`: 414 over 8 KiB of URI, 431 over 64 KiB of headers).
//! Only requests past hyper's outer bounds (a URI over 64 KiB, a head over 1 MiB, more
//! than 100 headers) still get hyper's bare answer. The header count stays at hyper's
//! default: above it hyper sets up room for that many headers on every request (128
//! cost 7% of the /healthz ceiling under callgrind, 1000 cost more).

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto::Builder;
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

/// hyper's outer bound on a request head's bytes (see the module documentation).
const MAX_HEAD_BYTES: usize = 1024 * 1024;

/// Serves `app` on `listener` until `stop`, then lets the connections finish their
/// requests (upgraded WebSockets are the server's to close) and returns.
pub(super) async fn serve(listener: TcpListener, app: Router, stop: CancellationToken) {
    let mut builder = Builder::new(TokioExecutor::new());
    builder.http1().max_buf_size(MAX_HEAD_BYTES);
    let graceful = GracefulShutdown::new();
    loop {
        let stream = tokio::select! {
            () = stop.cancelled() => break,
            stream = accept(&listener) => stream,
        };
        let service = TowerToHyperService::new(app.clone());
        let connection = builder
            .serve_connection_with_upgrades(TokioIo::new(stream), service)
            .into_owned();
        let connection = graceful.watch(connection);
        tokio::spawn(async move {
            if let Err(err) = connection.await {
                tracing::debug!(error = %err, "connection ended with an error");
            }
        });
    }
    drop(listener);
    graceful.shutdown().await;
}

/// The next connection, counted for `/metrics`, tuned (no Nagle, TCP keep-alive).
async fn accept(listener: &TcpListener) -> CountedStream {
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                crate::transport::common::socket::tune(&stream);
                metrics::gauge!("switchboard_open_connections").increment(1.0);
                return CountedStream(stream);
            }
            Err(err) => {
                // Out of file descriptors and the like: back off instead of spinning.
                tracing::warn!(error = %err, "accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

/// A connection that leaves the open-connections gauge when dropped.
pub(super) struct CountedStream(TcpStream);

impl Drop for CountedStream {
    fn drop(&mut self) {
        metrics::gauge!("switchboard_open_connections").decrement(1.0);
    }
}

impl AsyncRead for CountedStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_read(cx, buf)
    }
}

impl AsyncWrite for CountedStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().0).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().0).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.0.is_write_vectored()
    }
}
