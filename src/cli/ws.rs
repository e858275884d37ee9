//! `switchboard agent ws`: the WebSocket hub by hand, as a reader of docs/websocket.md
//! types it — so the docs need no tool beyond this binary. Frames in are lines out; lines
//! in are frames out.

use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

use super::{Failure, inert_json, print_error, print_line};

/// Connects to `/v1/ws`, prints what arrives, sends what is typed.
pub(super) async fn ws(
    url: &str,
    token: &str,
    since: Option<i64>,
    news_only: bool,
    activity: bool,
    linger: f64,
) -> Result<(), Failure> {
    let mut query = Vec::new();
    if let Some(since) = since {
        query.push(format!("since={since}"));
    }
    if news_only {
        query.push("news_only=true".to_owned());
    }
    if activity {
        query.push("activity=true".to_owned());
    }
    let base = url.trim_end_matches('/').replacen("http", "ws", 1);
    let address = match query.is_empty() {
        true => format!("{base}/v1/ws"),
        false => format!("{base}/v1/ws?{}", query.join("&")),
    };
    let mut request = address
        .as_str()
        .into_client_request()
        .map_err(|e| Failure::Usage(format!("{address}: {e}")))?;
    let header = format!("Bearer {token}")
        .parse()
        .map_err(|_| Failure::Usage("the token is not a valid header value".into()))?;
    request.headers_mut().insert("authorization", header);
    let (socket, _) = tokio_tungstenite::connect_async(request)
        .await
        .map_err(|e| switchboard_client::ClientError::Transport(e.to_string()))?;
    let (mut sink, mut stream) = socket.split();
    let printer = tokio::spawn(async move {
        while let Some(Ok(frame)) = stream.next().await {
            match frame {
                Message::Text(text) => print_line(&inert_json(&text)),
                Message::Close(Some(close)) => {
                    print_error(&format!(
                        "closed: {} {}",
                        u16::from(close.code),
                        close.reason
                    ));
                    break;
                }
                Message::Close(None) => break,
                _ => {}
            }
        }
    });
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        if line.trim().is_empty() {
            continue;
        }
        if sink.send(Message::text(line)).await.is_err() || printer.is_finished() {
            break;
        }
    }
    // The answers to the last frames may still be on their way.
    let wait = Duration::from_secs_f64(linger.clamp(0.0, 3600.0));
    let _ = tokio::time::timeout(wait, printer).await;
    let _ = sink.close().await;
    Ok(())
}
