//! One trace across a delegation (issue 45): A on REST asks W on a WebSocket; W hands the
//! work as a task to an outside A2A agent (the official SDK's server side,
//! `tests/interop/a2a_remote.py`) with a callback to a receiver; the result comes back to
//! W, who answers A. Every frame, header, callback and span of it is in A's trace, with
//! the parent links right: the task is a child of the message W acted on, its
//! notifications and callbacks children of the task, W's answer a child of the result.

use std::time::Duration;

use serde_json::{Value, json};

use crate::python;
use crate::support::{Agent, TestApp};
use crate::tasks::Receiver;
use crate::wsclient::Ws;

const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CALLER_SPAN: &str = "00f067aa0ba902b7";
const STATE: &str = "rojo=00f067aa0ba902b7";

/// The trace id and span id of a `traceparent`, after checking it is in [`TRACE`].
fn in_trace(traceparent: &Value) -> String {
    let text = traceparent.as_str().unwrap_or_default();
    let fields: Vec<&str> = text.split('-').collect();
    assert_eq!(fields.len(), 4, "a traceparent: {traceparent}");
    assert_eq!(fields[1], TRACE, "in the caller's trace: {traceparent}");
    fields[2].to_owned()
}

/// What W went through: the message it was asked, the task it made, the result it got,
/// and the response it gave.
struct Journey {
    ask: String,
    task: Value,
    result: Value,
    response: String,
}

/// A asks W over REST; W delegates over its socket, waits for the result, and answers A
/// over its socket, continuing from the frame it acts on each time.
async fn journey(app: &TestApp, a: &Agent, w_live: &mut Ws, hook: &str) -> Journey {
    let ask = app
        .post("/v1/messages")
        .token(&a.token)
        .header("traceparent", &format!("00-{TRACE}-{CALLER_SPAN}-01"))
        .header("tracestate", STATE)
        .json(json!({"sender_agent_id": "A", "recipient_agent_ids": ["W"],
                     "message_type": "request", "requires_response": true,
                     "content": {"text": "say hello in French"}}))
        .send()
        .await
        .expect_status(201)
        .str("message_id");
    let asked = w_live.next_of("message").await;
    assert_eq!(asked["message"]["message_id"], ask.as_str(), "{asked}");
    let submitted = w_live
        .call(
            "TaskRequest",
            json!({"traceparent": asked["message"]["traceparent"],
                   "tracestate": asked["message"]["tracestate"],
                   "description": "hello", "originating_agent_id": "W",
                   "target_agent_id": "Translator-Bot", "callback_url": hook}),
        )
        .await;
    assert_eq!(submitted["type"], "reply", "{submitted}");
    let task = submitted["result"]["task"].clone();
    let result = loop {
        let frame = w_live.next_of("TaskResponse").await;
        if frame["status"] == "success" {
            break frame;
        }
    };
    assert_eq!(result["result_data"], json!({"echo": "hello"}), "{result}");
    let answered = w_live
        .call(
            "respond_to_message",
            json!({"traceparent": result["traceparent"], "original_message_id": ask,
                   "responder_agent_id": "W",
                   "response_content": {"text": "bonjour", "status": "completed"}}),
        )
        .await;
    assert_eq!(answered["type"], "reply", "{answered}");
    let response = answered["result"]["response_message_id"]
        .as_str()
        .unwrap_or_else(|| panic!("a response id: {answered}"))
        .to_owned();
    Journey {
        ask,
        task,
        result,
        response,
    }
}

#[tokio::test]
async fn a_request_delegated_over_a2a_is_one_trace() {
    if !python::available("a_request_delegated_over_a2a_is_one_trace") {
        return;
    }
    let (collector, ready) = python::start("otlp_receiver.py", &["6", "60", "2"]).await;
    let otlp = format!("http://127.0.0.1:{}", ready["port"]);
    let app = TestApp::start_with(|c| {
        c.callbacks.allow_private = true;
        c.otlp_endpoint = Some(otlp);
    })
    .await;
    let team = app.team("journey").await;
    let a = app.agent(&team, "A", &[]).await;
    let w = app.agent(&team, "W", &[]).await;
    let (_remote, remote) = python::start("a2a_remote.py", &[]).await;
    let outside = format!("http://127.0.0.1:{}", remote["port"]);
    app.post(&format!("/v1/teams/{}/a2a-agents", team.id))
        .token(&team.key)
        .json(json!({"card_url": outside}))
        .send()
        .await
        .expect_status(201);
    let receiver = Receiver::default();
    let hook = receiver.start().await;
    let (mut w_live, _, _) = app.ws_caught_up(&w, "").await;
    let j = journey(&app, &a, &mut w_live, &hook).await;

    // The stored trace: A's message, a child of A's span; the task, a child of the
    // message W acted on; its notifications, children of the task; W's answer, a child
    // of the result it acted on.
    let task_id = j.task["task_id"].as_str().unwrap_or_default().to_owned();
    let task_span = in_trace(&j.task["traceparent"]);
    assert_eq!(j.task["tracestate"], STATE, "{}", j.task);
    let trace = app
        .get(&format!("/v1/traces/{TRACE}"))
        .token(&team.key)
        .send()
        .await
        .expect_status(200)
        .body;
    let hops = trace["hops"].as_array().cloned().unwrap_or_default();
    let hop = |id: &str| -> Value {
        hops.iter()
            .find(|h| h["message_id"] == id)
            .cloned()
            .unwrap_or_else(|| panic!("no hop {id} in {trace:#}"))
    };
    let ask = hop(&j.ask);
    assert_eq!(ask["parent_span_id"], CALLER_SPAN);
    assert_eq!(trace["tasks"][0]["task_id"], task_id.as_str(), "{trace:#}");
    assert_eq!(trace["tasks"][0]["span_id"], task_span.as_str());
    assert_eq!(trace["tasks"][0]["parent_span_id"], ask["span_id"]);
    let notices: Vec<&Value> = hops.iter().filter(|h| h["kind"] == "task").collect();
    assert!(
        notices.len() >= 2,
        "a request and a result at least: {trace:#}"
    );
    for notice in &notices {
        assert_eq!(notice["parent_span_id"], task_span.as_str(), "{notice}");
    }
    let result = hop(j.result["message_id"].as_str().unwrap_or_default());
    assert_eq!(in_trace(&j.result["traceparent"]), result["span_id"]);
    assert_eq!(hop(&j.response)["parent_span_id"], result["span_id"]);
    // A reads the answer in its trace too.
    let read = app
        .get(&format!("/v1/messages/{}", j.response))
        .token(&a.token)
        .send()
        .await
        .expect_status(200);
    in_trace(&read.body["message"]["traceparent"]);

    outside_and_callbacks(&outside, &receiver, &task_span).await;
    let out = python::finish(collector).await;
    spans_reach_the_collector(&out, &trace, &task_span);
    app.stop().await;
}

/// The outside agent was handed the task's span as HTTP headers and as the A2A message's
/// metadata; every callback POST carried it as a header.
async fn outside_and_callbacks(outside: &str, receiver: &Receiver, task_span: &str) {
    let expected = format!("00-{TRACE}-{task_span}-01");
    let seen: Value = reqwest::get(format!("{outside}/traces"))
        .await
        .expect("the outside agent answers")
        .json()
        .await
        .expect("JSON");
    assert!(
        seen["headers"]
            .as_array()
            .is_some_and(|h| h.contains(&json!({"traceparent": expected, "tracestate": STATE}))),
        "the SendMessage call carried the task's span: {seen:#}"
    );
    assert_eq!(
        seen["metadata"][0]["traceparent"],
        expected.as_str(),
        "{seen:#}"
    );
    assert_eq!(seen["metadata"][0]["tracestate"], STATE, "{seen:#}");
    // The last change's callback may still be on its way.
    let mut calls = receiver.arrived();
    for _ in 0..100 {
        if calls.len() >= 3 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        calls = receiver.arrived();
    }
    assert!(calls.len() >= 3, "a callback per change: {calls:?}");
    for headers in &calls {
        assert_eq!(headers["traceparent"], expected.as_str(), "{headers:?}");
        assert_eq!(headers["tracestate"], STATE, "{headers:?}");
    }
}

/// Every hop and the task reached the collector as spans of the trace, with the same
/// parents; each callback attempt is a span under the task.
fn spans_reach_the_collector(out: &Value, trace: &Value, task_span: &str) {
    let spans = out["spans"].as_array().cloned().unwrap_or_default();
    let by_id = |id: &Value| -> Value {
        spans
            .iter()
            .find(|s| s["span_id"] == *id)
            .cloned()
            .unwrap_or_else(|| panic!("no span {id} among {spans:#?}"))
    };
    for hop in trace["hops"].as_array().into_iter().flatten() {
        let span = by_id(&hop["span_id"]);
        assert_eq!(span["trace_id"], TRACE, "{span}");
        assert_eq!(span["parent_span_id"], hop["parent_span_id"], "{span}");
        assert_eq!(
            span["attributes"]["switchboard.message_id"],
            hop["message_id"]
        );
    }
    let task = by_id(&json!(task_span));
    assert_eq!(task["name"], "switchboard.task", "{task}");
    assert_eq!(task["trace_id"], TRACE);
    assert_eq!(task["parent_span_id"], trace["tasks"][0]["parent_span_id"]);
    assert_eq!(
        task["attributes"]["switchboard.assignee_agent_id"],
        "Translator-Bot"
    );
    let callbacks: Vec<&Value> = spans
        .iter()
        .filter(|s| s["name"] == "switchboard.callback")
        .collect();
    assert!(
        !callbacks.is_empty(),
        "callback attempts are spans: {spans:#?}"
    );
    for span in callbacks {
        assert_eq!(span["trace_id"], TRACE, "{span}");
        assert_eq!(span["parent_span_id"], task_span, "{span}");
        assert_eq!(
            span["attributes"]["http.response.status_code"], "200",
            "{span}"
        );
    }
    assert!(
        !out.to_string().contains("say hello in French"),
        "no content reaches the collector"
    );
}
