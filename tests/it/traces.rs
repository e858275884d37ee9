//! W3C Trace Context (issue 45): a request through three agents on three transports is
//! one trace, handed out and taken back in each transport's own form; replies are
//! children of what they answer; a malformed `traceparent` starts a new trace; and
//! `GET /v1/traces/{trace_id}` shows the hops to those allowed to see them.

use serde_json::{Value, json};

use crate::python;
use crate::support::{Agent, TestApp};

const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const STATE: &str = "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE";

/// The trace id and span id of a `traceparent`.
fn parts(traceparent: &Value) -> (String, String) {
    let text = traceparent.as_str().unwrap_or_default();
    let fields: Vec<&str> = text.split('-').collect();
    assert_eq!(fields.len(), 4, "{traceparent}");
    (fields[1].to_owned(), fields[2].to_owned())
}

/// A party sees the trace; an agent that took no part does not; a bad id is a 400.
async fn who_sees(app: &TestApp, key: &str, party: &Agent, outsider: &Agent) {
    app.get(&format!("/v1/traces/{TRACE}"))
        .token(&party.token)
        .send()
        .await
        .expect_status(200);
    app.get(&format!("/v1/traces/{TRACE}"))
        .token(&outsider.token)
        .send()
        .await
        .expect_error(404, "NOT_FOUND");
    app.get(&format!("/v1/traces/{}", TRACE.to_uppercase()))
        .token(key)
        .send()
        .await
        .expect_invalid("trace_id");
}

#[tokio::test]
async fn one_request_through_rest_a_websocket_and_stomp_is_one_trace() {
    if !python::available("one_request_through_rest_a_websocket_and_stomp_is_one_trace") {
        return;
    }
    let app = TestApp::start_with(|config| {
        config.stomp_listen = Some("127.0.0.1:0".parse().expect("addr"));
    })
    .await;
    let team = app.wise_team("traced").await;
    let a = app.agent(&team, "A", &[]).await;
    let w = app.agent(&team, "W", &[]).await;
    let s = app.agent(&team, "S", &[]).await;
    let outsider = app.agent(&team, "O", &[]).await;
    let port = app.server().stomp_addr().expect("STOMP").port().to_string();
    let out = python::run(
        "traces.py",
        &[&app.url(""), &port, &a.token, &w.token, &s.token],
    )
    .await;
    let (m1, m2, m3) = (out["m1"].clone(), out["m2"].clone(), out["m3"].clone());
    // Each hop was handed out in the caller's trace, naming the message it came with.
    for got in ["w_got", "s_got", "a_got"] {
        let traceparent = &out[got]["traceparent"];
        let (trace, _) = parts(traceparent);
        assert_eq!(trace, TRACE, "{got}: {out}");
        assert_eq!(out[got]["tracestate"], STATE, "{got}: {out}");
    }
    assert_eq!(out["w_got"]["message_id"], m1, "{out}");
    assert_eq!(out["s_got"]["switchboard-message-id"], m2, "{out}");
    // The trace as stored: three hops, each the child of the one before, the first the
    // child of A's own span.
    let trace = app
        .get(&format!("/v1/traces/{TRACE}"))
        .token(&team.key)
        .send()
        .await
        .expect_status(200);
    let hops = trace.body["hops"].as_array().cloned().unwrap_or_default();
    let ids: Vec<&Value> = hops.iter().map(|h| &h["message_id"]).collect();
    assert_eq!(ids, [&m1, &m2, &m3], "{}", trace.body);
    assert_eq!(hops[0]["parent_span_id"], "00f067aa0ba902b7");
    assert_eq!(hops[1]["parent_span_id"], hops[0]["span_id"]);
    assert_eq!(hops[2]["parent_span_id"], hops[1]["span_id"]);
    let vias: Vec<&Value> = hops.iter().map(|h| &h["via"]).collect();
    assert_eq!(vias, [&json!("rest"), &json!("websocket"), &json!("stomp")]);
    assert_eq!(hops[1]["recipient_agent_ids"], json!(["S"]));
    assert!(
        hops.iter().all(|h| h.get("content").is_none()),
        "no content"
    );
    // The span each agent was handed is the message's own.
    assert_eq!(parts(&out["w_got"]["traceparent"]).1, hops[0]["span_id"]);
    assert_eq!(parts(&out["s_got"]["traceparent"]).1, hops[1]["span_id"]);
    who_sees(&app, &team.key, &s, &outsider).await;
    // The malformed traceparent started a trace of the message's own, without tracestate.
    let m4 = out["m4"].as_str().unwrap_or_default().to_owned();
    let read = app
        .get(&format!("/v1/messages/{m4}"))
        .token(&a.token)
        .send()
        .await
        .expect_status(200);
    let message = &read.body["message"];
    let (own, _) = parts(&message["traceparent"]);
    assert_eq!(format!("msg_{own}"), m4, "{message}");
    assert!(message.get("tracestate").is_none(), "{message}");
    let alone = app
        .get(&format!("/v1/traces/{own}"))
        .token(&a.token)
        .send()
        .await
        .expect_status(200);
    assert_eq!(alone.body["hops"].as_array().map(Vec::len), Some(1));
    assert_eq!(alone.body["hops"][0]["parent_span_id"], Value::Null);
    app.stop().await;
}

/// A reply with no trace context of its own is the child of the message it answers; a
/// response too; and a REST read of either carries the trace.
#[tokio::test]
async fn replies_and_responses_are_children_of_what_they_answer() {
    let app = TestApp::start().await;
    let team = app.team("family").await;
    let a = app.agent(&team, "a", &[]).await;
    let b = app.agent(&team, "b", &[]).await;
    let ask = app
        .send_with(
            &a,
            json!({"recipient_agent_ids": ["b"], "message_type": "request", "requires_response": true}),
        )
        .await
        .expect_status(201)
        .str("message_id");
    let reply = app
        .send_with(
            &b,
            json!({"recipient_agent_ids": ["a"], "in_reply_to": ask}),
        )
        .await
        .expect_status(201)
        .str("message_id");
    let response = app
        .post(&format!("/v1/messages/{ask}/responses"))
        .token(&b.token)
        .json(json!({"responder_agent_id": "b", "response_content": {"text": "done", "status": "completed"}}))
        .send()
        .await
        .expect_status(201)
        .str("response_message_id");
    let root = ask.trim_start_matches("msg_").to_owned();
    let trace = app
        .get(&format!("/v1/traces/{root}"))
        .token(&a.token)
        .send()
        .await
        .expect_status(200);
    let hops = trace.body["hops"].as_array().cloned().unwrap_or_default();
    let ids: Vec<&str> = hops
        .iter()
        .filter_map(|h| h["message_id"].as_str())
        .collect();
    assert_eq!(ids, [ask.as_str(), reply.as_str(), response.as_str()]);
    assert_eq!(hops[0]["parent_span_id"], Value::Null);
    assert_eq!(hops[1]["parent_span_id"], hops[0]["span_id"]);
    assert_eq!(hops[2]["parent_span_id"], hops[0]["span_id"]);
    let inbox = app.inbox(&a, "?limit=10").await.expect_status(200);
    for m in inbox.body["messages"]
        .as_array()
        .cloned()
        .unwrap_or_default()
    {
        let (trace, _) = parts(&m["traceparent"]);
        assert_eq!(trace, root, "{m}");
    }
    // A WebSocket frame with a traceparent that is not a string is refused by name.
    let mut ws = app.ws(&a, "").await;
    let bad = ws
        .call(
            "send_message",
            json!({"traceparent": 7, "sender_agent_id": "a", "recipient_agent_ids": ["b"], "content": {"text": "x"}}),
        )
        .await;
    assert_eq!(bad["type"], "ErrorMessage", "{bad}");
    assert_eq!(bad["details"]["field"], "traceparent", "{bad}");
    app.stop().await;
}
