//! The handshake: `CONNECT` or `STOMP`, version and heart-beat negotiation, and who the
//! connection is.

use std::time::Duration;
use switchboard_types::ids::TeamId;

use futures_util::{SinkExt, StreamExt};

use super::{End, Identity, Wire};
use crate::core::Caller;
use crate::core::sessions::{SessionHold, SessionKind};
use crate::transport::stomp::StompState;
use crate::transport::stomp::frame::{Command, Frame, Incoming, Version};
use switchboard_types::routing::Via;

/// The negotiated version, who the connection is, (send every, silence limit), and the
/// connection's place in its credential's count of STOMP connections.
pub(super) type Connected = (Version, Identity, (Duration, Duration), SessionHold);

/// The shortest interval between the server's heart-beats, whatever the client asks: a
/// client asking `heart-beat:0,1` got a beat every 2 ms (300 such connections took a
/// quarter of a core). Negotiated up, never down.
const MIN_HEART_BEAT_MS: u64 = 1000;

/// Reads `CONNECT` or `STOMP`, negotiates, authenticates and answers `CONNECTED`.
pub(super) async fn connect<W: Wire>(state: &StompState, wire: &mut W) -> Result<Connected, End> {
    let frame = loop {
        match wire.next().await {
            Some(Ok(Incoming::Frame(frame))) => break frame,
            Some(Ok(Incoming::HeartBeat)) => {}
            Some(Err(err)) => return Err(End::error(err.to_string())),
            None => return Err(End::Gone),
        }
    };
    metrics::counter!("switchboard_stomp_frames_in_total").increment(1);
    if !matches!(frame.command, Command::Connect | Command::Stomp) {
        return Err(End::error(format!(
            "expected CONNECT or STOMP, got {}",
            frame.command.as_str()
        )));
    }
    let Some(version) = Version::negotiate(frame.get("accept-version")) else {
        return Err(End::Error {
            message: "Supported protocol versions are 1.0 1.1 1.2".into(),
            detail: String::new(),
            receipt: None,
        });
    };
    let identity = authenticate(state, &frame).await?;
    // Every connection counts, subscribed or not, for agents and bridges alike.
    let hold = state
        .core
        .live()
        .hold_session(identity.caller(), SessionKind::Stomp)
        .map_err(End::from_core)?;
    let (client_sends, client_wants) = match (version, frame.get("heart-beat")) {
        (Version::V1_0, _) | (_, None) => (0, 0),
        (_, Some(value)) => parse_heart_beat(value)
            .ok_or_else(|| End::error(format!("heart-beat '{value}' is not two numbers")))?,
    };
    let ask = u64::try_from(state.settings.heart_beat.as_millis()).unwrap_or(u64::MAX);
    let client_wants = match client_wants {
        0 => 0,
        wants => wants.max(MIN_HEART_BEAT_MS),
    };
    let send_every = Duration::from_millis(client_wants);
    // The client's heart-beats are due only if both sides want them; allow twice the
    // negotiated interval for the network.
    let silence_limit = if ask > 0 && client_sends > 0 {
        Duration::from_millis(ask.max(client_sends).saturating_mul(2))
    } else {
        Duration::ZERO
    };
    wire.set_version(version);
    let connected = Frame::new(Command::Connected)
        .header("version", version.as_str())
        .header("heart-beat", format!("{client_wants},{ask}"))
        .header("server", concat!("switchboard/", env!("CARGO_PKG_VERSION")));
    wire.send(Some(connected)).await.map_err(|_| End::Gone)?;
    metrics::counter!("switchboard_stomp_frames_out_total").increment(1);
    Ok((version, identity, (send_every, silence_limit), hold))
}

fn parse_heart_beat(value: &str) -> Option<(u64, u64)> {
    let (x, y) = value.split_once(',')?;
    Some((x.trim().parse().ok()?, y.trim().parse().ok()?))
}

/// `passcode` an agent token: that agent. `login` a team id and `passcode` its key: a
/// team bridge.
async fn authenticate(state: &StompState, frame: &Frame) -> Result<Identity, End> {
    let Some(passcode) = frame.get("passcode").filter(|p| !p.is_empty()) else {
        if let Some(team_id) = &state.settings.anonymous_team {
            let caller = state
                .core
                .queues()
                .anonymous_team(team_id)
                .map_err(End::from_core)?;
            return Ok(Identity::Bridge {
                caller,
                team_id: team_id.clone(),
            });
        }
        return Err(End::error(
            "credentials required: passcode = an agent token, or login = a team id and passcode = its team key",
        ));
    };
    let caller = state
        .core
        .identity()
        .authenticate(passcode)
        .await
        .map_err(End::from_core)?;
    match caller {
        Caller::Agent { .. } => Ok(Identity::Agent(caller.by(Via::Stomp))),
        Caller::Team { .. } => {
            let Some(team_id) = frame.get("login").filter(|l| !l.is_empty()) else {
                return Err(End::error("a team key needs login = the team id"));
            };
            let team_id = TeamId::from(team_id);
            // The key must be this team's (the core says so on first use, too).
            state
                .core
                .queues()
                .team_of_key(&caller, &team_id)
                .map_err(End::from_core)?;
            Ok(Identity::Bridge { caller, team_id })
        }
        Caller::Admin => Err(End::error(
            "the admin token cannot connect: use an agent token or a team key",
        )),
    }
}
