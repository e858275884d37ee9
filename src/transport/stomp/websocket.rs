//! STOMP over WebSocket at `/v1/stomp`, for browsers and for clients that can only open
//! WebSockets (stomp.js, stomp.py's `WSConnection`): the same session as on TCP, with
//! WebSocket messages as the byte stream. A message may hold several frames or part of
//! one; frames go out one per message, as text when they are UTF-8.

use std::pin::Pin;
use std::task::{Context, Poll, ready};

use axum::extract::State;
use axum::extract::ws::rejection::WebSocketUpgradeRejection;
use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::response::{IntoResponse, Response};
use bytes::BytesMut;
use futures_util::{Sink, Stream};
use switchboard_types::ErrorBody;
use tokio_util::codec::{Decoder, Encoder};
use utoipa_axum::{router::OpenApiRouter, routes};

use super::StompState;
use super::frame::{Frame, FrameError, Incoming, StompCodec, Version};
use super::session::{self, Wire};
use crate::transport::common::ApiError;
use crate::transport::common::gate::PinLater;

/// The subprotocols STOMP over WebSocket uses, the server's preference first.
const SUBPROTOCOLS: [&str; 3] = ["v12.stomp", "v11.stomp", "v10.stomp"];

/// The STOMP-over-WebSocket route with its OpenAPI description.
pub fn routes() -> OpenApiRouter<StompState> {
    OpenApiRouter::new().routes(routes!(stomp_over_websocket))
}

/// STOMP over WebSocket: upgrade, then speak STOMP 1.0–1.2.
///
/// Subprotocols `v12.stomp`, `v11.stomp`, `v10.stomp` (the answer is one the client
/// offered, or none if it offered none). Credentials travel in the `CONNECT` frame, as
/// on TCP: `passcode` = an agent token, or `login` = a team id and `passcode` = its team
/// key. Destinations: `/queue/request/<agent>` and `/queue/response/<agent>`.
#[utoipa::path(get, path = "/v1/stomp", tag = "live",
    responses(
        (status = 101, description = "Switching to the WebSocket protocol; STOMP frames follow"),
        (status = 400, description = "VALIDATION_ERROR: not a WebSocket upgrade", body = ErrorBody),
    ))]
async fn stomp_over_websocket(
    State(state): State<StompState>,
    upgrade: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Response {
    let upgrade = match upgrade {
        Ok(upgrade) => upgrade,
        Err(rejection) => {
            let body = ErrorBody::validation(
                "upgrade",
                format!("this endpoint needs a WebSocket upgrade: {rejection}"),
            );
            return ApiError(body.into()).into_response();
        }
    };
    let max = state.settings.limits.max_frame_bytes;
    let tracker = state.tracker.clone();
    // Unpinned until CONNECT, as on TCP: a socket that upgraded and never connected is
    // an idle one the gate may let go (300 of them made `/healthz` 503 for 10 s each).
    let place = crate::transport::common::gate::place();
    let mut response = upgrade
        .protocols(SUBPROTOCOLS)
        .read_buffer_size(4 * 1024)
        .write_buffer_size(8 * 1024)
        .max_write_buffer_size(max.saturating_mul(2).max(64 * 1024))
        .max_message_size(max)
        .max_frame_size(max)
        .on_upgrade(move |socket| {
            let wire = WsWire::new(socket, StompCodec::new(state.settings.limits));
            tracker.track_future(async move {
                let Some(slot) = place else {
                    return session::serve(state, wire, "websocket".into(), None).await;
                };
                let shed = slot.clone();
                tokio::select! {
                    () = session::serve(state, wire, "websocket".into(), Some(slot)) => {}
                    // Let go by the gate before it connected, for a newer socket.
                    () = shed.shed() => {}
                }
            })
        });
    response.extensions_mut().insert(PinLater);
    response
}

/// A WebSocket carrying STOMP frames.
struct WsWire {
    socket: WebSocket,
    codec: StompCodec,
    read: BytesMut,
    closed: bool,
}

impl WsWire {
    fn new(socket: WebSocket, codec: StompCodec) -> WsWire {
        WsWire {
            socket,
            codec,
            read: BytesMut::new(),
            closed: false,
        }
    }
}

impl Stream for WsWire {
    type Item = Result<Incoming, FrameError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        loop {
            if this.closed {
                return Poll::Ready(None);
            }
            match this.codec.decode(&mut this.read) {
                Ok(Some(item)) => return Poll::Ready(Some(Ok(item))),
                Ok(None) => {}
                Err(err) => {
                    this.closed = true;
                    return Poll::Ready(Some(Err(err)));
                }
            }
            let message = ready!(Pin::new(&mut this.socket).poll_next(cx));
            match message {
                Some(Ok(Message::Text(text))) => this.read.extend_from_slice(text.as_bytes()),
                Some(Ok(Message::Binary(bytes))) => this.read.extend_from_slice(&bytes),
                Some(Ok(Message::Ping(_) | Message::Pong(_))) => {}
                Some(Ok(Message::Close(_))) | None => {
                    this.closed = true;
                    return Poll::Ready(None);
                }
                Some(Err(err)) => {
                    this.closed = true;
                    return Poll::Ready(Some(Err(FrameError::Io(err.to_string()))));
                }
            }
        }
    }
}

impl Sink<Option<Frame>> for WsWire {
    type Error = FrameError;

    fn poll_ready(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), FrameError>> {
        Pin::new(&mut self.socket).poll_ready(cx).map_err(io_error)
    }

    fn start_send(mut self: Pin<&mut Self>, frame: Option<Frame>) -> Result<(), FrameError> {
        let mut out = BytesMut::new();
        self.codec.encode(frame, &mut out)?;
        let message = match std::str::from_utf8(&out) {
            Ok(text) => Message::Text(text.to_owned().into()),
            Err(_) => Message::Binary(out.freeze()),
        };
        Pin::new(&mut self.socket)
            .start_send(message)
            .map_err(io_error)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), FrameError>> {
        Pin::new(&mut self.socket).poll_flush(cx).map_err(io_error)
    }

    fn poll_close(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), FrameError>> {
        Pin::new(&mut self.socket).poll_close(cx).map_err(io_error)
    }
}

fn io_error(err: axum::Error) -> FrameError {
    FrameError::Io(err.to_string())
}

impl Wire for WsWire {
    fn set_version(&mut self, version: Version) {
        self.codec.version = version;
    }

    /// The WebSocket close handshake already lets the client read the `ERROR`.
    async fn linger(self) {}
}
