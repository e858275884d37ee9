//! Publish and watch: MetaGPT's two-stage delivery (address sets, then news by watch or
//! by name), prefixes, runtime changes, filters, replay, news-only connections, team
//! activity, isolation and every validation rule.

use serde_json::{Value, json};

use crate::support::{Agent, Res, TestApp};

mod activity;
mod validation;

impl TestApp {
    async fn publish(&self, from: &Agent, body: Value) -> Res {
        self.post("/v1/publish")
            .token(&from.token)
            .json(body)
            .send()
            .await
    }

    async fn watch(&self, team: &str, agent: &Agent, patch: Value) {
        self.patch(&format!("/v1/teams/{team}/agents/{}", agent.id))
            .token(&agent.token)
            .json(patch)
            .send()
            .await
            .expect_status(200);
    }
}

fn strings(v: &Value) -> Vec<String> {
    let mut out: Vec<String> = v
        .as_array()
        .unwrap_or_else(|| panic!("not an array: {v}"))
        .iter()
        .map(|s| s.as_str().expect("string").to_owned())
        .collect();
    out.sort();
    out
}

/// The publish entries of an inbox, as (message_id, cause_by, news).
async fn publishes(app: &TestApp, agent: &Agent, query: &str) -> Vec<(String, String, bool)> {
    let res = app.inbox(agent, query).await.expect_status(200);
    res.body["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .map(|m| {
            assert_eq!(m["kind"], "publish", "{m}");
            (
                m["message_id"].as_str().expect("id").to_owned(),
                m["cause_by"].as_str().expect("cause_by").to_owned(),
                m["news"].as_bool().expect("news"),
            )
        })
        .collect()
}

#[tokio::test]
async fn by_default_everyone_but_the_sender_gets_it_and_watchers_take_it_as_news() {
    let app = TestApp::start().await;
    let team = app.team("t").await;
    let a = app.agent(&team, "a", &[]).await;
    let b = app.agent(&team, "b", &[]).await;
    let c = app.agent(&team, "c", &[]).await;
    app.watch("t", &b, json!({"watch": ["WriteDesign"]})).await;
    let res = app
        .publish(
            &a,
            json!({"cause_by": "WriteDesign", "content": {"text": "the design"},
                   "instruct_content": {"files": ["api.md"]}}),
        )
        .await
        .expect_status(201);
    assert_eq!(res.body["send_to"], json!(["<all>"]));
    assert_eq!(strings(&res.body["recipients"]), ["b", "c"]);
    assert_eq!(strings(&res.body["news_for"]), ["b"]);
    assert_eq!(res.body["no_recipients"], false);
    let id = res.str("message_id");
    assert_eq!(
        publishes(&app, &b, "").await,
        [(id.clone(), "WriteDesign".into(), true)]
    );
    assert_eq!(
        publishes(&app, &c, "").await,
        [(id.clone(), "WriteDesign".into(), false)]
    );
    assert!(publishes(&app, &a, "").await.is_empty());
    let entry = app.inbox(&b, "").await.body["messages"][0].clone();
    assert_eq!(entry["sent_from"], "a");
    assert_eq!(entry["send_to"], json!(["<all>"]));
    assert_eq!(entry["instruct_content"], json!({"files": ["api.md"]}));
    assert_eq!(entry["content"]["text"], "the design");
    // The sender reads what it published, like any message it sent.
    let own = app
        .get(&format!("/v1/messages/{id}"))
        .token(&a.token)
        .send()
        .await
        .expect_status(200);
    assert_eq!(
        own.body["message"]["cause_by"], "WriteDesign",
        "{:#}",
        own.body
    );
    app.stop().await;
}

#[tokio::test]
async fn address_sets_decide_who_gets_it_and_a_name_makes_it_news() {
    let app = TestApp::start().await;
    let team = app.team("t").await;
    let a = app.agent(&team, "a", &[]).await;
    let b = app.agent(&team, "b", &[]).await;
    let c = app.agent(&team, "c", &[]).await;
    let d = app.agent(&team, "d", &[]).await;
    app.watch("t", &b, json!({"addresses": ["engineer", "Alex"]}))
        .await;
    let view = app
        .get("/v1/teams/t/agents/b")
        .token(&b.token)
        .send()
        .await
        .expect_status(200);
    assert_eq!(view.body["agent"]["addresses"], json!(["engineer", "Alex"]));
    // c keeps the default: its id and its role.
    let view = app
        .get("/v1/teams/t/agents/c")
        .token(&c.token)
        .send()
        .await
        .expect_status(200);
    assert_eq!(view.body["agent"]["addresses"], json!(["c", "role of c"]));
    let to =
        |send_to: Value| json!({"cause_by": "Tag", "content": {"text": "x"}, "send_to": send_to});
    let res = app
        .publish(&a, to(json!(["engineer"])))
        .await
        .expect_status(201);
    assert_eq!(strings(&res.body["recipients"]), ["b"]);
    assert!(
        strings(&res.body["news_for"]).is_empty(),
        "an address is not a name"
    );
    // b's id is no longer one of its addresses, so naming it reaches nobody…
    let res = app.publish(&a, to(json!(["b"]))).await.expect_status(201);
    assert!(strings(&res.body["recipients"]).is_empty());
    // …while c's id is its default address, and naming it makes it news.
    let res = app
        .publish(&a, to(json!(["c", "role of d"])))
        .await
        .expect_status(201);
    assert_eq!(strings(&res.body["recipients"]), ["c", "d"]);
    assert_eq!(strings(&res.body["news_for"]), ["c"]);
    assert_eq!(publishes(&app, &d, "").await.len(), 1);
    // An empty list restores the default.
    app.watch("t", &b, json!({"addresses": []})).await;
    let res = app.publish(&a, to(json!(["b"]))).await.expect_status(201);
    assert_eq!(strings(&res.body["recipients"]), ["b"]);
    assert_eq!(strings(&res.body["news_for"]), ["b"]);
    app.stop().await;
}

#[tokio::test]
async fn self_reaches_the_sender_and_is_news_for_it() {
    let app = TestApp::start().await;
    let team = app.team("t").await;
    let a = app.agent(&team, "a", &[]).await;
    let b = app.agent(&team, "b", &[]).await;
    let res = app
        .publish(&a, json!({"cause_by": "Think", "content": {"text": "note to self"}, "send_to": ["<self>"]}))
        .await
        .expect_status(201);
    assert_eq!(strings(&res.body["recipients"]), ["a"]);
    assert_eq!(strings(&res.body["news_for"]), ["a"]);
    assert!(publishes(&app, &a, "").await[0].2);
    assert!(publishes(&app, &b, "").await.is_empty());
    let res = app
        .publish(&a, json!({"cause_by": "Think", "content": {"text": "both"}, "send_to": ["<self>", "<all>"]}))
        .await
        .expect_status(201);
    assert_eq!(strings(&res.body["recipients"]), ["a", "b"]);
    assert_eq!(strings(&res.body["news_for"]), ["a"]);
    app.stop().await;
}

#[tokio::test]
async fn prefixes_and_runtime_changes_decide_the_next_message() {
    let app = TestApp::start().await;
    let team = app.team("t").await;
    let a = app.agent(&team, "a", &[]).await;
    let b = app.agent(&team, "b", &[]).await;
    // Watch set at registration.
    app.post("/v1/teams/t/agents")
        .token(&team.key)
        .json(
            json!({"agent_id": "r", "role": "reviewer", "capabilities": [], "watch": ["review.*"]}),
        )
        .send()
        .await
        .expect_status(201);
    let news = |res: &Res| strings(&res.body["news_for"]);
    let publish =
        |tag: &'static str| app.publish(&a, json!({"cause_by": tag, "content": {"text": tag}}));
    assert_eq!(
        news(&publish("review.code").await.expect_status(201)),
        ["r"]
    );
    assert!(news(&publish("review").await.expect_status(201)).is_empty());
    assert!(news(&publish("WriteCode").await.expect_status(201)).is_empty());
    // Changed over REST: the next message follows the new set.
    app.watch("t", &b, json!({"watch": ["WriteCode"]})).await;
    assert_eq!(news(&publish("WriteCode").await.expect_status(201)), ["b"]);
    // Changed over the socket.
    let (mut ws, _, _) = app.ws_caught_up(&b, "").await;
    let reply = ws
        .call(
            "set_watch",
            json!({"watch": ["RunCode"], "addresses": ["runner"]}),
        )
        .await;
    assert_eq!(reply["ok"], true, "{reply}");
    assert_eq!(reply["result"]["agent"]["watch"], json!(["RunCode"]));
    assert_eq!(reply["result"]["agent"]["addresses"], json!(["runner"]));
    assert!(news(&publish("WriteCode").await.expect_status(201)).is_empty());
    let res = app
        .publish(
            &a,
            json!({"cause_by": "RunCode", "content": {"text": "run"}, "send_to": ["runner"]}),
        )
        .await
        .expect_status(201);
    assert_eq!(strings(&res.body["recipients"]), ["b"]);
    assert_eq!(news(&res), ["b"]);
    let refused = ws.call("set_watch", json!({})).await;
    assert_eq!(refused["ok"], false);
    assert_eq!(refused["error"]["details"]["field"], "body");
    let refused = ws
        .call("set_watch", json!({"agent_id": "a", "watch": []}))
        .await;
    assert_eq!(refused["error"]["error_code"], "FORBIDDEN", "{refused}");
    app.stop().await;
}

#[tokio::test]
async fn nobody_addressed_is_said_stored_and_counted() {
    let app = TestApp::start().await;
    let team = app.team("t").await;
    let a = app.agent(&team, "a", &[]).await;
    let _b = app.agent(&team, "b", &[]).await;
    let metric = |text: &str| -> f64 {
        text.lines()
            .find_map(|l| l.strip_prefix("switchboard_publish_no_recipients_total "))
            .map_or(0.0, |v| v.trim().parse().expect("number"))
    };
    let scrape = || async {
        let res = app.get("/metrics").send().await.expect_status(200);
        res.body.as_str().unwrap_or_default().to_owned()
    };
    let before = metric(&scrape().await);
    let res = app
        .publish(
            &a,
            json!({"cause_by": "Tag", "content": {"text": "into the void"}, "send_to": ["nobody"]}),
        )
        .await
        .expect_status(201);
    assert_eq!(res.body["no_recipients"], true);
    assert_eq!(res.body["recipients"], json!([]));
    let id = res.str("message_id");
    app.get(&format!("/v1/messages/{id}"))
        .token(&a.token)
        .send()
        .await
        .expect_status(200);
    let after = metric(&scrape().await);
    // At least this one (the recorder is the process's, shared by tests running beside).
    assert!(after - before >= 1.0, "{before} → {after}");
    app.stop().await;
}

#[tokio::test]
async fn inbox_filters_news_only_and_cause_by() {
    let app = TestApp::start().await;
    let team = app.team("t").await;
    let a = app.agent(&team, "a", &[]).await;
    let b = app.agent(&team, "b", &[]).await;
    app.watch("t", &b, json!({"watch": ["Code"]})).await;
    for tag in ["Code", "Test", "Code", "review.docs", "review.code"] {
        app.publish(&a, json!({"cause_by": tag, "content": {"text": tag}}))
            .await
            .expect_status(201);
    }
    let direct = app.send(&a, &[&b], "a direct message").await;
    let tags = |items: Vec<(String, String, bool)>| -> Vec<String> {
        items.into_iter().map(|(_, tag, _)| tag).collect()
    };
    assert_eq!(
        tags(publishes(&app, &b, "?kinds=publish&sort_order=oldest_first").await),
        ["Code", "Test", "Code", "review.docs", "review.code"]
    );
    assert_eq!(
        tags(publishes(&app, &b, "?cause_by=Code").await),
        ["Code", "Code"]
    );
    assert_eq!(
        tags(publishes(&app, &b, "?cause_by=review.*&sort_order=oldest_first").await),
        ["review.docs", "review.code"]
    );
    // News only: the watched publishes and everything addressed by name.
    let news = app.inbox(&b, "?news_only=true").await.expect_status(200);
    let ids = crate::support::ids_of(&news);
    assert_eq!(ids.len(), 3, "{:#}", news.body);
    assert_eq!(ids[0], direct);
    assert_eq!(news.body["messages"][0]["kind"], "message");
    assert!(news.body["messages"][0].get("news").is_none());
    app.inbox(&b, "?cause_by=").await.expect_invalid("cause_by");
    app.inbox(&b, "?news_only=maybe")
        .await
        .expect_invalid("news_only");
    app.stop().await;
}

#[tokio::test]
async fn publishes_are_pushed_and_replayed_and_news_only_connections_skip_the_rest() {
    let app = TestApp::start().await;
    let team = app.team("t").await;
    let a = app.agent(&team, "a", &[]).await;
    let b = app.agent(&team, "b", &[]).await;
    app.watch("t", &b, json!({"watch": ["Code"]})).await;
    let (mut all, _, _) = app.ws_caught_up(&b, "?since=0").await;
    let (mut news, _, _) = app.ws_caught_up(&b, "?since=0&news_only=true").await;
    app.publish(
        &a,
        json!({"cause_by": "Test", "content": {"text": "quiet"}}),
    )
    .await
    .expect_status(201);
    app.publish(
        &a,
        json!({"cause_by": "Code", "content": {"text": "news"}, "send_to": ["b"]}),
    )
    .await
    .expect_status(201);
    let first = all.next_of("message").await;
    assert_eq!(first["seq"], 1);
    assert_eq!(first["message"]["cause_by"], "Test");
    assert_eq!(first["message"]["news"], false);
    assert_eq!(first["message"]["sent_from"], "a");
    assert_eq!(first["message"]["send_to"], json!(["<all>"]));
    let second = all.next_of("message").await;
    assert_eq!(second["seq"], 2);
    assert_eq!(second["message"]["news"], true);
    assert_eq!(second["message"]["send_to"], json!(["b"]));
    let only = news.next_of("message").await;
    assert_eq!(only["seq"], 2, "the quiet entry is skipped: {only}");
    news.assert_quiet().await;
    // Acknowledging past a skipped entry is allowed: it was not withheld by accident.
    news.send(json!({"type": "ack", "seq": 2})).await;
    news.assert_quiet().await;
    drop(all);
    drop(news);
    // Replay after reconnecting: both, or only the news.
    let (_, replayed, last) = app.ws_caught_up(&b, "?since=0").await;
    assert_eq!(last, 2);
    let tags: Vec<&str> = replayed
        .iter()
        .map(|f| f["message"]["cause_by"].as_str().expect("tag"))
        .collect();
    assert_eq!(tags, ["Test", "Code"]);
    let (_, replayed, last) = app.ws_caught_up(&b, "?since=0&news_only=true").await;
    assert_eq!(last, 2, "caught_up names the last entry looked at");
    assert_eq!(replayed.len(), 1);
    assert_eq!(replayed[0]["message"]["cause_by"], "Code");
    app.stop().await;
}

#[tokio::test]
async fn teams_are_isolated() {
    let app = TestApp::start().await;
    let one = app.team("one").await;
    let two = app.team("two").await;
    let a = app.agent(&one, "a", &[]).await;
    let b = app.agent(&one, "b", &[]).await;
    let x = app.agent(&two, "x", &[]).await;
    for agent in [&b, &x] {
        let team = if agent.id == "x" { "two" } else { "one" };
        app.watch(
            team,
            agent,
            json!({"addresses": ["shared"], "watch": ["Tag"]}),
        )
        .await;
    }
    let res = app
        .publish(
            &a,
            json!({"cause_by": "Tag", "content": {"text": "x"}, "send_to": ["shared", "x"]}),
        )
        .await
        .expect_status(201);
    assert_eq!(strings(&res.body["recipients"]), ["b"]);
    assert!(publishes(&app, &x, "").await.is_empty());
    app.stop().await;
}

#[tokio::test]
async fn a_retried_publish_with_its_idempotency_key_is_written_once() {
    let app = TestApp::start().await;
    let team = app.team("t").await;
    let a = app.agent(&team, "a", &[]).await;
    let b = app.agent(&team, "b", &[]).await;
    let body = json!({"cause_by": "Tag", "content": {"text": "once"}});
    let send = |body: Value| {
        app.post("/v1/publish")
            .token(&a.token)
            .header("Idempotency-Key", "pub-1")
            .json(body)
            .send()
    };
    let first = send(body.clone()).await.expect_status(201);
    let again = send(body).await.expect_status(201);
    assert_eq!(first.body, again.body);
    assert_eq!(publishes(&app, &b, "").await.len(), 1);
    // The same key for another publish is a conflict.
    send(json!({"cause_by": "Tag", "content": {"text": "twice"}}))
        .await
        .expect_error(409, "CONFLICT");
    app.stop().await;
}
