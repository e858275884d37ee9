//! What an agent can learn from a trace id it writes itself.

use serde_json::json;

use crate::support::TestApp;

const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";

/// Issue 61, item 9: a trace id is anyone's to write in a `traceparent`. An agent that
/// sent one message carrying another pair's trace id could read that whole trace —
/// who sent what to whom, in which thread, with which ids. It now sees the hops it took
/// part in; the team key still sees the whole trace.
#[tokio::test]
async fn a_trace_id_written_by_an_agent_shows_it_only_its_own_hops() {
    let app = TestApp::start().await;
    let team = app.team("traced").await;
    let a = app.agent(&team, "a", &[]).await;
    let b = app.agent(&team, "b", &[]).await;
    let x = app.agent(&team, "x", &[]).await;
    for (from, to, span) in [(&a, "b", "00f067aa0ba902b7"), (&x, "a", "00f067aa0ba902b8")] {
        app.post("/v1/messages")
            .token(&from.token)
            .header("traceparent", &format!("00-{TRACE}-{span}-01"))
            .json(
                json!({"sender_agent_id": from.id, "recipient_agent_ids": [to],
                         "message_type": "information", "thread_id": "private",
                         "content": {"text": "hello"}}),
            )
            .send()
            .await
            .expect_status(201);
    }
    let seen = |token: String| {
        let app = &app;
        async move {
            let trace = app
                .get(&format!("/v1/traces/{TRACE}"))
                .token(&token)
                .send()
                .await
                .expect_status(200);
            trace.body["hops"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|h| {
                    (
                        h["sender_agent_id"].clone(),
                        h["recipient_agent_ids"].clone(),
                    )
                })
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(seen(x.token.clone()).await, [(json!("x"), json!(["a"]))]);
    assert_eq!(seen(b.token.clone()).await, [(json!("a"), json!(["b"]))]);
    assert_eq!(seen(a.token.clone()).await.len(), 2, "a took part in both");
    assert_eq!(seen(team.key.clone()).await.len(), 2);
    app.stop().await;
}
