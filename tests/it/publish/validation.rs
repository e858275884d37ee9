//! Every validation rule of publish and of the subscription sets, with its error.

use serde_json::{Value, json};

use crate::support::TestApp;

#[tokio::test]
async fn publish_bodies_are_validated() {
    let app = TestApp::start().await;
    let team = app.team("t").await;
    let a = app.agent(&team, "a", &[]).await;
    let _b = app.agent(&team, "b", &[]).await;
    let body = |patch: Value| {
        let mut body = json!({"cause_by": "Tag", "content": {"text": "x"}});
        crate::support::merge(&mut body, patch);
        body
    };
    app.publish(&a, body(json!({"cause_by": null})))
        .await
        .expect_invalid("cause_by");
    app.publish(&a, body(json!({"cause_by": " "})))
        .await
        .expect_invalid("cause_by");
    app.publish(&a, body(json!({"cause_by": "x".repeat(201)})))
        .await
        .expect_invalid("cause_by");
    // The server's own tags (lease events) are not a client's to publish under.
    let reserved = app
        .publish(&a, body(json!({"cause_by": "switchboard.lease"})))
        .await
        .expect_invalid("cause_by");
    assert_eq!(reserved.body["details"]["reserved_prefix"], "switchboard.");
    app.publish(&a, body(json!({"cause_by": "Switchboard.lease"})))
        .await
        .expect_status(201);
    app.publish(&a, body(json!({"send_to": []})))
        .await
        .expect_invalid("send_to");
    let many: Vec<String> = (0..65).map(|i| format!("x{i}")).collect();
    app.publish(&a, body(json!({"send_to": many})))
        .await
        .expect_invalid("send_to");
    app.publish(&a, body(json!({"send_to": ["b", ""]})))
        .await
        .expect_invalid("send_to[1]");
    app.publish(&a, body(json!({"send_to": "b"})))
        .await
        .expect_invalid("send_to");
    app.publish(&a, body(json!({"content": {"text": ""}})))
        .await
        .expect_invalid("content.text");
    app.publish(&a, body(json!({"content": {"text": "x".repeat(2001)}})))
        .await
        .expect_error(400, "MESSAGE_TOO_LONG");
    app.publish(&a, body(json!({"thread_id": "x".repeat(257)})))
        .await
        .expect_invalid("thread_id");
    app.publish(&a, body(json!({"surprise": 1})))
        .await
        .expect_invalid("surprise");
    app.publish(&a, body(json!({"sender_agent_id": "b"})))
        .await
        .expect_error(403, "FORBIDDEN");
    app.post("/v1/publish")
        .token("sb_agent_nope_nope")
        .json(body(json!({})))
        .send()
        .await
        .expect_error(401, "UNAUTHORIZED");
    app.post("/v1/publish")
        .token(&team.key)
        .json(body(json!({})))
        .send()
        .await
        .expect_error(403, "FORBIDDEN");
    app.stop().await;
}

#[tokio::test]
async fn subscriptions_and_switches_are_checked() {
    let app = TestApp::start().await;
    let team = app.team("t").await;
    let a = app.agent(&team, "a", &[]).await;
    let body = json!({"cause_by": "Tag", "content": {"text": "x"}});
    let patch = |p: Value| {
        app.patch("/v1/teams/t/agents/a")
            .token(&a.token)
            .json(p)
            .send()
    };
    let tags: Vec<String> = (0..65).map(|i| format!("t{i}")).collect();
    patch(json!({"watch": tags})).await.expect_invalid("watch");
    let addresses: Vec<String> = (0..33).map(|i| format!("a{i}")).collect();
    patch(json!({"addresses": addresses}))
        .await
        .expect_invalid("addresses");
    patch(json!({"addresses": ["x".repeat(201)]}))
        .await
        .expect_invalid("addresses[0]");
    patch(json!({"watch": ["ok", "  "]}))
        .await
        .expect_invalid("watch[1]");
    app.post("/v1/teams/t/agents")
        .token(&team.key)
        .json(json!({"agent_id": "z", "role": "r", "capabilities": [], "watch": [""]}))
        .send()
        .await
        .expect_invalid("watch[0]");
    // Communication switched off: refused like any send.
    app.patch("/v1/teams/t/agents/a")
        .token(&team.key)
        .json(json!({"communication_enabled": false}))
        .send()
        .await
        .expect_status(200);
    app.publish(&a, body)
        .await
        .expect_error(403, "COMMUNICATION_DISABLED");
    app.stop().await;
}
