//! How a session ends: the closing frame its end calls for, and who it was, for the log.

use std::time::Duration;

use futures_util::SinkExt;

use super::super::StompState;
use super::super::frame::{Command, Frame};
use super::{End, Identity, Wire};

/// Team and identity, for the log.
pub(super) fn describe(state: &StompState, identity: &Identity) -> (String, String) {
    match identity {
        Identity::Agent(caller) => match state.core.identity().acting_agent(caller) {
            Ok((team, agent)) => (team.team_id.to_string(), agent.agent_id.to_string()),
            Err(_) => (String::new(), String::new()),
        },
        Identity::Bridge { team_id, .. } => (team_id.to_string(), "team bridge".into()),
    }
}

/// An `ERROR` frame: the short reason as `message`, the code and what to do in the body,
/// and `receipt-id` when the frame it answers asked for a receipt.
pub(super) fn error_frame(message: String, detail: String, receipt: Option<String>) -> Frame {
    let mut frame = Frame::new(Command::Error).header("message", message);
    if let Some(receipt) = receipt {
        frame = frame.header("receipt-id", receipt);
    }
    frame
        .header("content-type", "text/plain")
        .header("content-length", detail.len().to_string())
        .body(detail)
}

/// Sends the closing frame the end calls for, and closes.
pub(super) async fn finish<W: Wire>(mut wire: W, end: End) {
    let frame = match end {
        End::Error {
            message,
            detail,
            receipt,
        } => Some(error_frame(message, detail, receipt)),
        End::Disconnect | End::Gone => None,
    };
    let error = frame.is_some();
    if let Some(frame) = frame {
        let _ = tokio::time::timeout(Duration::from_secs(1), wire.send(Some(frame))).await;
        metrics::counter!("switchboard_stomp_frames_out_total").increment(1);
    }
    let _ = tokio::time::timeout(Duration::from_secs(1), wire.close()).await;
    if error {
        wire.linger().await;
    }
}
