//! An answer given before the request body was read in full reaches the client.
//!
//! A request refused before its body is read (413 past `--max-body-bytes`, 401 on a
//! large POST, a 400 from a decoder that stopped early) leaves the rest of the body in
//! the socket. Closing a socket with unread input makes the kernel send a reset instead
//! of a FIN, and a reset may arrive at the client before it has read the answer: its TCP
//! stack then throws the answer away (RFC 9112 §9.6) and the client sees "connection
//! reset" where the server sent a clear 413. The official MCP client did, under load, in
//! 2 of 3 runs. So the unread rest is read and dropped before the answer goes out — a
//! "lingering close", as Apache and nginx do it — up to [`LINGER_BYTES`] and within the
//! body deadline (`--http-body-timeout`), which the outer layer already puts on the body,
//! and within [`LINGER_TIME`]. Past any bound the connection closes as before: the client
//! sent far more, or far slower, than it was told it may.

use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::middleware::Next;
use axum::response::Response;
use http_body::{Frame, SizeHint};
use http_body_util::BodyExt;

/// Most bytes of an unread request body read and dropped after the handler answered.
pub const LINGER_BYTES: usize = 64 * 1024 * 1024;

/// Longest a refused request's unread body is drained (within the body deadline too):
/// enough for a client sending at any real speed to finish and read the answer, short
/// for one that trickles.
pub const LINGER_TIME: std::time::Duration = std::time::Duration::from_secs(5);

/// The request body, shared between the handler and this layer, so what the handler
/// left unread can be drained after it answered.
#[derive(Clone)]
struct Shared(Arc<Mutex<Option<Body>>>);

impl Shared {
    fn take(&self) -> Option<Body> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).take()
    }
}

impl http_body::Body for Shared {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let mut body = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        match body.as_mut() {
            Some(body) => Pin::new(body).poll_frame(cx),
            None => Poll::Ready(None),
        }
    }

    fn is_end_stream(&self) -> bool {
        let body = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        body.as_ref().is_none_or(http_body::Body::is_end_stream)
    }

    fn size_hint(&self) -> SizeHint {
        let body = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        body.as_ref()
            .map_or_else(|| SizeHint::with_exact(0), http_body::Body::size_hint)
    }
}

/// Runs the request; if its body was not read to the end, reads and drops the rest
/// (bounded) before the answer is sent. A request without a body costs nothing.
///
/// While it drains, the connection rests in the gate: its answer is decided, and a peer
/// that trickles the rest of a body it was refused (a byte a second after a 401) must
/// not keep a place a newer connection needs (found: 300 such sockets made `/healthz`
/// 503). A full gate lets a resting connection go; otherwise the drain ends within
/// [`LINGER_TIME`].
pub async fn drain_unread_body(request: Request, next: Next) -> Response {
    if http_body::Body::is_end_stream(request.body()) {
        return next.run(request).await;
    }
    let place = crate::transport::common::gate::place();
    let (parts, body) = request.into_parts();
    let shared = Shared(Arc::new(Mutex::new(Some(body))));
    let response = next
        .run(Request::from_parts(parts, Body::new(shared.clone())))
        .await;
    if let Some(rest) = shared.take()
        && !http_body::Body::is_end_stream(&rest)
    {
        let _resting = place.map(|slot| slot.rest());
        let _ = tokio::time::timeout(LINGER_TIME, drain(rest)).await;
    }
    response
}

/// Reads frames until the body ends, fails (the deadline included) or passes
/// [`LINGER_BYTES`].
async fn drain(mut body: Body) {
    let mut read = 0usize;
    while read <= LINGER_BYTES {
        match body.frame().await {
            Some(Ok(frame)) => read += frame.data_ref().map_or(0, Bytes::len),
            Some(Err(_)) | None => return,
        }
    }
}
