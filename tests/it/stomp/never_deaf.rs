//! A Wise Agents team never goes deaf or mute (issue 62): every route that left one so
//! on the code before, driven with stomp.py exactly as Wise Agents' transport drives it
//! (`tests/interop/stomp_never_deaf.py`, whose listener dies as Wise Agents' does on a
//! body it cannot take), and what the server keeps of it read back through REST.

use serde_json::{Value, json};

use super::wire::presence;
use crate::python;
use crate::support::{Agent, Team, TestApp};

async fn start() -> TestApp {
    TestApp::start_with(|config| {
        config.stomp_listen = Some("127.0.0.1:0".parse().expect("addr"));
    })
    .await
}

/// Runs a scenario of `stomp_never_deaf.py` with the team's shared credentials (or, as
/// `key`, whatever the scenario takes there) and `ops`, a REST agent.
async fn scenario(app: &TestApp, team: &Team, key: &str, ops: &Agent, name: &str) -> Value {
    let stomp = app.server().stomp_addr().expect("STOMP listener");
    let http = app.server().local_addr().port().to_string();
    let port = stomp.port().to_string();
    let args = [name, "127.0.0.1", &port, &http, &team.id, key, &ops.token];
    let out = python::run("stomp_never_deaf.py", &args).await;
    assert_eq!(out["crashes"].as_u64().unwrap_or(0), 0, "{out}");
    out
}

/// The texts of a page of the team's traffic.
fn texts(page: &Value) -> Vec<String> {
    page["entries"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|e| e["message"]["content"]["text"].as_str().map(str::to_owned))
        .collect()
}

/// Item 1: a REST broadcast, a message and a publish that name no Wise Agents context
/// reached Wise agents with `_context_name: null` and killed every listener. Now they are
/// not handed to Wise agents (kept in the inbox, counted), the team still converses, and
/// once the team names the context its deployment creates, a broadcast arrives in it.
#[tokio::test]
async fn a_rest_broadcast_never_deafens_a_wise_team() {
    if !python::available("a_rest_broadcast_never_deafens_a_wise_team") {
        return;
    }
    let app = start().await;
    let team = app.team("wise").await;
    let ops = app.agent(&team, "ops", &[]).await;
    let out = scenario(&app, &team, &team.key, &ops, "broadcast").await;
    assert_eq!(out["errors"], json!([]), "{out}");
    assert_eq!(out["reply"], "re: still there?");
    assert_eq!(out["again"], "re: and now?");
    let a = out["a_requests"].as_array().cloned().unwrap_or_default();
    assert_eq!(
        a.first(),
        Some(&json!(["in the CLI context", "CLI.ctx"])),
        "{out}"
    );
    assert_eq!(a.len(), 3, "{out}");
    assert_eq!(
        a[1][1], "CLI.ctx",
        "the broadcast, in the default context: {out}"
    );
    // Nothing withheld was lost: the team's traffic has it all.
    let traffic = app
        .get("/v1/teams/wise/messages?limit=100")
        .token(&team.key)
        .send()
        .await
        .expect_status(200);
    let all = texts(&traffic.body);
    assert!(all.iter().any(|t| t == "no context here"), "{all:?}");
    assert!(all.iter().any(|t| t == "to everyone"), "{all:?}");
    let metrics = app.get("/metrics").send().await.expect_status(200);
    let text = metrics.body.as_str().unwrap_or_default().to_owned();
    assert!(
        text.lines()
            .any(|l| l.starts_with("switchboard_stomp_withheld_total") && !l.ends_with(" 0")),
        "{text}"
    );
}

/// Item 2 (and 6: `UNSUBSCRIBE` by an id the reconnected connection never had): Wise
/// Agents reconnect a dropped request connection without subscribing again and send on
/// it. Those sends were refused with an `ERROR` that closed the connection again.
#[tokio::test]
async fn a_wise_agent_whose_connection_dropped_is_not_mute() {
    if !python::available("a_wise_agent_whose_connection_dropped_is_not_mute") {
        return;
    }
    let app = start().await;
    let team = app.wise_team("wise").await;
    let ops = app.agent(&team, "ops", &[]).await;
    let out = scenario(&app, &team, &team.key, &ops, "dropped").await;
    assert_eq!(
        out["answers"],
        json!([
            "re: before the drop",
            "re: after the drop",
            "re: and once more"
        ])
    );
    assert_eq!(out["errors"], json!([]), "{out}");
    // It sends again, but it never subscribed again: it is deaf on its request queue,
    // and says so after it stopped (restarting the process is what brings its requests
    // back; they wait in its inbox meanwhile).
    assert_eq!(
        presence(&app, &team, "WiseA").await,
        (json!([]), json!(true))
    );
}

/// Item 3: a `SEND` to an agent that had not started yet was `INVALID_RECIPIENT`, an
/// `ERROR`, and the sender's connection closed. Now the agent gets a queue to wait in,
/// as on a broker, and past the bound a refusal keeps the sender's connection.
#[tokio::test]
async fn a_send_to_an_agent_not_started_yet_waits_for_it() {
    if !python::available("a_send_to_an_agent_not_started_yet_waits_for_it") {
        return;
    }
    let app = start().await;
    let team = app.wise_team("wise").await;
    let ops = app.agent(&team, "ops", &[]).await;
    let out = scenario(&app, &team, &team.key, &ops, "any_order").await;
    assert_eq!(out["waited"]["_message"], "who starts first?");
    assert_eq!(out["waited"]["_sender"], "WiseFirst");
    assert_eq!(out["answer"], "me, later");
    assert_eq!(out["a_connected"], true);
    let errors = out["errors"].as_array().cloned().unwrap_or_default();
    // The bound: 64 agents waiting for a first subscription, the 65th refused.
    assert_eq!(out["ghosts_taken"], 64, "{out}");
    assert_eq!(errors.len(), 1, "{out}");
    assert!(
        errors[0].as_str().is_some_and(|e| e.contains("at most 64")),
        "{out}"
    );
    assert_eq!(out["spammer_connected"], true, "{out}");
    let later = app
        .get("/v1/teams/wise/agents/WiseLater")
        .token(&team.key)
        .send()
        .await
        .expect_status(200);
    assert_eq!(later.body["agent"]["role"], "wise-agent", "{}", later.body);
}

/// Item 5: a Wise agent's reply to a REST request (a new message to the requester's
/// response queue, with no `_chat_id`) came in unlinked: `in_reply_to: null`, no
/// response on the original, a new thread.
#[tokio::test]
async fn a_wise_reply_to_a_rest_request_is_its_response() {
    if !python::available("a_wise_reply_to_a_rest_request_is_its_response") {
        return;
    }
    let app = start().await;
    let team = app.wise_team("wise").await;
    let ops = app.agent(&team, "ops", &[]).await;
    let out = scenario(&app, &team, &team.key, &ops, "answer_rest").await;
    let original = out["original"]
        .as_str()
        .expect("the original's id")
        .to_owned();
    let detail = app
        .get(&format!("/v1/messages/{original}"))
        .token(&ops.token)
        .send()
        .await
        .expect_status(200);
    let responses = detail.body["responses"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(responses.len(), 1, "{}", detail.body);
    assert_eq!(
        responses[0]["responder_agent_id"], "WiseW",
        "{}",
        detail.body
    );
    let inbox = app
        .get("/v1/messages?limit=5")
        .token(&ops.token)
        .send()
        .await
        .expect_status(200);
    let reply = &inbox.body["messages"][0];
    assert_eq!(reply["content"]["text"], "all green", "{}", inbox.body);
    assert_eq!(reply["in_reply_to"], original.as_str());
    assert_eq!(reply["thread_id"], "standup");
}

/// Item 6: a plain queue dropped the sender's own headers; a broker keeps them. The
/// server's own headers still cannot be forged.
#[tokio::test]
async fn a_plain_queue_keeps_the_senders_own_headers() {
    if !python::available("a_plain_queue_keeps_the_senders_own_headers") {
        return;
    }
    let app = start().await;
    let team = app.team("plain").await;
    let ops = app.agent(&team, "ops", &[]).await;
    let reader = app.agent(&team, "reader", &[]).await;
    let out = scenario(&app, &team, &reader.token, &ops, "plain_headers").await;
    let headers = &out["headers"];
    assert_eq!(headers["x-correlation"], "abc-1", "{out}");
    assert_eq!(headers["priority-hint"], "high", "{out}");
    assert_eq!(headers["switchboard-sender"], "ops", "{out}");
}

/// The team's default Wise Agents context: at most 255 characters, `""` clears it,
/// `null` is no value (as every PATCH field).
#[tokio::test]
async fn a_team_names_its_default_wise_context() {
    let app = start().await;
    let team = app.team("ctx").await;
    let patch = |body: Value| {
        app.patch("/v1/teams/ctx")
            .token(&team.key)
            .json(body)
            .send()
    };
    let got = app.get("/v1/teams/ctx").token(&team.key).send().await;
    assert_eq!(
        got.expect_status(200).body["stomp_default_context"],
        Value::Null
    );
    let long = patch(json!({"stomp_default_context": "x".repeat(256)})).await;
    let long = long.expect_error(400, "VALIDATION_ERROR");
    assert_eq!(long.body["details"]["field"], "stomp_default_context");
    let set = patch(json!({"stomp_default_context": "CLI.ctx"})).await;
    assert_eq!(
        set.expect_status(200).body["stomp_default_context"],
        "CLI.ctx"
    );
    patch(json!({"stomp_default_context": null}))
        .await
        .expect_error(400, "VALIDATION_ERROR");
    let cleared = patch(json!({"stomp_default_context": ""})).await;
    assert_eq!(
        cleared.expect_status(200).body["stomp_default_context"],
        Value::Null
    );
}
