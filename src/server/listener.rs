//! Accepting connections and serving HTTP on them.
//!
//! The server drives hyper itself (rather than `axum::serve`) for two reasons. hyper
//! answers requests it cannot parse — a header block over its buffer — with a bare
//! status and an empty body, before the application sees them; with hyper's buffer
//! raised, such requests reach the middleware, which refuses them with the contract's
//! error body (`transport::http`: 414 over 8 KiB of URI, 431 over 64 KiB of headers).
//! Only requests past hyper's outer bounds (a URI over 64 KiB, a head over 1 MiB, more
//! than 100 headers) still get hyper's bare answer. The header count stays at hyper's
//! default: above it hyper sets up room for that many headers on every request (128
//! cost 7% of the /healthz ceiling under callgrind, 1000 cost more).
//!
//! And every connection is bounded: it takes a place in the connection gate before
//! anything is read (`transport::common::gate`: a full gate lets an idle connection go,
//! or refuses), and hyper closes one that has not sent a whole request head within
//! `--http-header-timeout` of opening or of its last answer (so an idle keep-alive
//! connection, a partial head and a socket that never speaks all end). A body that does
//! not arrive in `--http-body-timeout` is the HTTP layer's (`transport::http`).

use std::convert::Infallible;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::Request;
use axum::response::Response;
use hyper::body::{Frame, Incoming, SizeHint};
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tower::Service;

use crate::transport::common::gate::{Busy, Gate, PinLater, Slot, Ticket, on_place};
use crate::transport::common::socket::Backoff;

/// hyper's outer bound on a request head's bytes (see the module documentation).
const MAX_HEAD_BYTES: usize = 1024 * 1024;

/// What a refused socket is told before it is closed (the gate is full of working
/// connections): the contract's error body, written without waiting.
fn refused_answer() -> &'static [u8] {
    static ANSWER: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
    ANSWER.get_or_init(|| {
        let body = r#"{"success":false,"error_code":"UNAVAILABLE","error_message":"the server holds as many connections as it may","details":{"retry_after_ms":1000},"suggested_action":"Retry in a second."}"#;
        format!(
            "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n\
             Retry-After: 1\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .into_bytes()
    })
}

/// How a connection is served.
#[derive(Clone)]
pub(super) struct HttpLimits {
    /// Time allowed for a request head, from the connection's start or its last answer.
    pub header_timeout: Duration,
}

/// Serves `app` on `listener` until `stop`, then lets the connections finish their
/// requests (upgraded WebSockets are the server's to close) and returns.
///
/// HTTP/1 only, straight on hyper's connection: a version-sniffing builder first waits
/// for the client's first bytes with no timeout of its own, so a socket that never
/// spoke was held for ever.
pub(super) async fn serve(
    listener: TcpListener,
    app: Router,
    stop: CancellationToken,
    gate: Gate,
    limits: HttpLimits,
) {
    let mut http = hyper::server::conn::http1::Builder::new();
    http.max_buf_size(MAX_HEAD_BYTES)
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout);
    let connections = TaskTracker::new();
    let mut backoff = Backoff::default();
    loop {
        let stream = tokio::select! {
            () = stop.cancelled() => break,
            stream = accept(&listener, &mut backoff) => stream,
        };
        let Some(ticket) = gate.admit() else {
            tokio::spawn(refuse(stream));
            continue;
        };
        let slot = ticket.slot().clone();
        let service = Tracked {
            app: app.clone(),
            slot: slot.clone(),
        };
        // The ticket travels with the socket: into hyper, and on into the WebSocket
        // session when the connection upgrades.
        let io = TokioIo::new(stream.admitted(ticket));
        let connection = http
            .serve_connection(io, TowerToHyperService::new(service))
            .with_upgrades();
        let stop = stop.clone();
        connections.spawn(async move {
            let mut connection = std::pin::pin!(connection);
            let served = tokio::select! {
                served = connection.as_mut() => served,
                // The gate let this idle connection go to admit a newer one.
                () = slot.shed() => return,
                () = stop.cancelled() => {
                    connection.as_mut().graceful_shutdown();
                    connection.await
                }
            };
            if let Err(err) = served {
                tracing::debug!(error = %err, "connection ended with an error");
            }
        });
    }
    drop(listener);
    connections.close();
    connections.wait().await;
}

/// Tells a socket the gate refused why, without waiting for it, and closes it.
async fn refuse(mut stream: CountedStream) {
    let _ = stream.stream.try_write(refused_answer());
    let _ = tokio::time::timeout(Duration::from_millis(100), stream.stream.shutdown()).await;
}

/// The next connection, counted for `/metrics`, tuned (no Nagle, TCP keep-alive).
async fn accept(listener: &TcpListener, backoff: &mut Backoff) -> CountedStream {
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                backoff.succeeded();
                crate::transport::common::socket::tune(&stream);
                metrics::gauge!("switchboard_open_connections").increment(1.0);
                return CountedStream {
                    stream,
                    _ticket: None,
                };
            }
            Err(err) => backoff.failed("http", &err).await,
        }
    }
}

/// The application behind one connection's place in the gate: a request keeps the
/// connection busy until its answer has been written to the end (a streamed answer for
/// as long as it streams), and an answer that upgrades the connection (101) pins it
/// unless it says the session pins it later ([`PinLater`]). The request is served with
/// its connection's place at hand (`gate::place`) for the layers that change how the
/// gate sees it.
#[derive(Clone)]
struct Tracked {
    app: Router,
    slot: Arc<Slot>,
}

impl Service<Request<Incoming>> for Tracked {
    type Response = Response;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Service::<Request<Incoming>>::poll_ready(&mut self.app, cx)
    }

    fn call(&mut self, request: Request<Incoming>) -> Self::Future {
        let busy = self.slot.begin();
        let slot = self.slot.clone();
        let answer = on_place(slot.clone(), self.app.call(request));
        Box::pin(async move {
            let response = answer.await?;
            if response.status() == axum::http::StatusCode::SWITCHING_PROTOCOLS
                && response.extensions().get::<PinLater>().is_none()
            {
                slot.pin();
            }
            Ok(response.map(|body| Body::new(BusyBody { body, _busy: busy })))
        })
    }
}

/// A response body that keeps its connection busy until it is dropped.
struct BusyBody {
    body: Body,
    _busy: Busy,
}

impl hyper::body::Body for BusyBody {
    type Data = axum::body::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// A connection that leaves the open-connections gauge, and its place in the gate, when
/// dropped (whoever holds it last: hyper, or the WebSocket session it upgraded to).
pub(super) struct CountedStream {
    stream: TcpStream,
    _ticket: Option<Ticket>,
}

impl CountedStream {
    fn admitted(mut self, ticket: Ticket) -> CountedStream {
        self._ticket = Some(ticket);
        self
    }
}

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
        Pin::new(&mut self.get_mut().stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for CountedStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }
}
