//! STOMP as stomp.py speaks each version (`tests/interop/stomp_protocol.py`): acks and
//! redelivery, transactions, 1.0, header escaping, heart-beats, and who may do what.

use serde_json::{Value, json};

use crate::python;
use crate::support::TestApp;

/// Runs a scenario with two agents of team `t` (and a key of another team).
async fn scenario(
    name: &str,
    adjust: impl FnOnce(&mut switchboard::server::ServerConfig),
) -> Value {
    let app = TestApp::start_with(|config| {
        config.stomp_listen = Some("127.0.0.1:0".parse().expect("addr"));
        adjust(config);
    })
    .await;
    let team = app.wise_team("t").await;
    let other = app.team("other").await;
    let a = app.wise_agent(&team, "alice").await;
    let b = app.agent(&team, "bob", &[]).await;
    let port = app.server().stomp_addr().expect("STOMP listener").port();
    let http_port = app.server().local_addr().port();
    let config = json!({
        "host": "127.0.0.1", "port": port, "http_port": http_port, "team": team.id, "key": team.key,
        "other_team": other.id, "other_key": other.key,
        "a": [a.id, a.token], "b": [b.id, b.token],
    });
    python::run("stomp_protocol.py", &[name, &config.to_string()]).await
}

#[tokio::test]
async fn client_acks_redeliver_what_was_not_acknowledged_after_a_reconnect() {
    if !crate::python::available(
        "client_acks_redeliver_what_was_not_acknowledged_after_a_reconnect",
    ) {
        return;
    }
    let out = scenario("acks", |_| {}).await;
    assert_eq!(out["first"], json!(["one", "two", "three"]));
    assert_eq!(out["redelivered"], json!(["two"]));
}

#[tokio::test]
async fn abort_drops_a_transaction_and_commit_sends_it() {
    if !crate::python::available("abort_drops_a_transaction_and_commit_sends_it") {
        return;
    }
    let out = scenario("transactions", |_| {}).await;
    assert_eq!(out["got"], json!(["kept-1", "kept-2"]));
}

#[tokio::test]
async fn a_stomp_1_0_client_subscribes_and_acknowledges() {
    if !crate::python::available("a_stomp_1_0_client_subscribes_and_acknowledges") {
        return;
    }
    let out = scenario("version10", |_| {}).await;
    assert_eq!(out["got"], "ten");
    assert_eq!(out["headers"]["destination"], "/queue/request/alice");
}

#[tokio::test]
async fn escaped_headers_round_trip_and_content_length_frames_a_nul() {
    if !crate::python::available("escaped_headers_round_trip_and_content_length_frames_a_nul") {
        return;
    }
    let out = scenario("escaping", |_| {}).await;
    assert_eq!(out["subscription"], "sub:with\\odd\r\nchars");
    let error = out["nul_error"].as_str().unwrap_or_default();
    // The whole body arrived (the frame was read by its length): the gate refused it
    // as YAML, not the codec as a broken frame.
    assert!(error.starts_with("body refused"), "{error}");
}

#[tokio::test]
async fn the_server_heart_beats_as_often_as_the_client_asks() {
    if !crate::python::available("the_server_heart_beats_as_often_as_the_client_asks") {
        return;
    }
    let out = scenario("heartbeats", |_| {}).await;
    assert!(out["heartbeats"].as_u64() >= Some(3), "{out}");
}

#[tokio::test]
async fn identities_stay_in_their_lane_and_limits_are_named() {
    if !crate::python::available("identities_stay_in_their_lane_and_limits_are_named") {
        return;
    }
    let out = scenario("rules", |config| config.max_body_bytes = 64 * 1024).await;
    let says = |key: &str, words: &str| {
        let text = out[key].as_str().unwrap_or_default();
        assert!(text.contains(words), "{key}: {text}");
    };
    says("other_agents_queue", "cannot act as 'bob'");
    says("other_teams_key", "does not belong to team 't'");
    says("agent_spoofing", "cannot act as 'bob'");
    // Issue 61, item 10: the team key consumed the queue of, and sent as, an agent with
    // a token of its own.
    says(
        "bridge_as_own_token_agent",
        "agent 'bob' has a token of its own",
    );
    says(
        "bridge_reads_own_token_agent",
        "agent 'bob' has a token of its own",
    );
    says(
        "unknown_destination",
        "unknown destination '/exchange/anything'",
    );
    says("bridge_plain", "team bridge sends Wise Agents messages");
    says("too_large", "frame too large");
    says(
        "transaction_too_large",
        "transaction too large: at most 1024 frames",
    );
    says("too_many_headers", "too many headers");
    says("header_too_long", "header too long");
}

#[tokio::test]
async fn stomp_over_websocket_talks_with_stomp_over_tcp() {
    if !crate::python::available("stomp_over_websocket_talks_with_stomp_over_tcp") {
        return;
    }
    let out = scenario("websocket", |_| {}).await;
    assert_eq!(out["ws_got"], "over tcp");
    assert_eq!(out["tcp_got"], "over websocket");
}

#[tokio::test]
async fn plain_queues_and_topics_carry_any_body_byte_for_byte() {
    if !crate::python::available("plain_queues_and_topics_carry_any_body_byte_for_byte") {
        return;
    }
    let out = scenario("plain", |_| {}).await;
    assert_eq!(out["plain"], 3);
    assert_eq!(out["topic"], "/topic/news");
}
