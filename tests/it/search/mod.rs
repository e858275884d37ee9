//! Search over what a team said (`docs/search.md`, issue 66): who finds what (an agent
//! what it sent or received, the team key its team's, nobody another team's), words,
//! phrases, prefixes and data strings, every filter, both orders and their pages, every
//! refusal, and retention removing from the index what it removes from the store. Every
//! test here runs on SQLite and again on PostgreSQL (`engines.rs`); `differential.rs`
//! runs one corpus on both at once and compares.

use serde_json::{Value, json};

use crate::support::{ADMIN, Agent, Team, TestApp};

mod cli;
mod differential;
mod retention;

/// The texts of a search's results, in order.
pub(crate) async fn found(app: &TestApp, token: &str, query: &str) -> Vec<String> {
    let res = app
        .get(&format!("/v1/search?{query}"))
        .token(token)
        .send()
        .await
        .expect_status(200);
    texts(&res.body)
}

pub(crate) fn texts(page: &Value) -> Vec<String> {
    page["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(|r| {
            r["message"]["content"]["text"]
                .as_str()
                .expect("text")
                .to_owned()
        })
        .collect()
}

pub(crate) async fn send(app: &TestApp, from: &Agent, to: &[&str], text: &str, extra: Value) {
    let mut body = json!({"sender_agent_id": from.id, "recipient_agent_ids": to,
                          "message_type": "information", "content": {"text": text}});
    crate::support::merge(&mut body, extra);
    app.send_with(from, body).await.expect_status(201);
}

/// A team of `a`, `b`, `c` that said a few things, and another team that said "parser" too.
pub(crate) async fn corpus(app: &TestApp) -> (Team, Agent, Agent, Agent, Team) {
    let team = app.team("said").await;
    let a = app.agent(&team, "a", &[]).await;
    let b = app.agent(&team, "b", &[]).await;
    let c = app.agent(&team, "c", &[]).await;
    send(
        app,
        &a,
        &["b"],
        "The parser change is ready for review",
        json!({
        "content": {"text": "The parser change is ready for review",
                    "data": {"pr": "parser-42", "notes": ["urgent fix", {"owner": "Zoë"}]}},
        "thread_id": "pr-42"}),
    )
    .await;
    send(
        app,
        &b,
        &["a"],
        "Reviewing the parser now",
        json!({"thread_id": "pr-42",
        "message_type": "coordination"}),
    )
    .await;
    send(app, &c, &["a"], "Lunch menu: soup and bread", json!({})).await;
    send(
        app,
        &a,
        &["c"],
        "Change of plans for Friday",
        json!({"message_type": "request"}),
    )
    .await;
    let other = app.team("elsewhere").await;
    let x = app.agent(&other, "x", &[]).await;
    let y = app.agent(&other, "y", &[]).await;
    send(app, &x, &[&y.id], "Their parser is different", json!({})).await;
    (team, a, b, c, other)
}

#[tokio::test]
async fn each_caller_finds_what_it_may_read_and_nothing_of_another_team() {
    let app = TestApp::start().await;
    let (team, a, b, c, other) = corpus(&app).await;
    let newest = "&sort=newest";
    assert_eq!(
        found(&app, &a.token, &format!("q=parser{newest}")).await,
        [
            "Reviewing the parser now",
            "The parser change is ready for review"
        ]
    );
    assert_eq!(
        found(&app, &b.token, &format!("q=parser{newest}")).await,
        [
            "Reviewing the parser now",
            "The parser change is ready for review"
        ]
    );
    // c was party to neither.
    assert!(found(&app, &c.token, "q=parser").await.is_empty());
    assert_eq!(
        found(&app, &c.token, "q=lunch").await,
        ["Lunch menu: soup and bread"]
    );
    // The team key: every message of its team, none of the other's.
    assert_eq!(found(&app, &team.key, "q=parser").await.len(), 2);
    assert_eq!(
        found(&app, &other.key, "q=parser").await,
        ["Their parser is different"]
    );
    assert!(found(&app, &other.key, "q=lunch").await.is_empty());
    app.get("/v1/search?q=parser")
        .token(ADMIN)
        .send()
        .await
        .expect_error(403, "FORBIDDEN");
    app.get("/v1/search?q=parser")
        .send()
        .await
        .expect_error(401, "UNAUTHORIZED");
}

#[tokio::test]
async fn words_phrases_prefixes_and_data_strings_match_alike() {
    let app = TestApp::start().await;
    let (team, ..) = corpus(&app).await;
    let k = &team.key;
    let review = "The parser change is ready for review";
    let one = |q: &str| format!("q={}&sort=newest", urlencoding(q));
    assert_eq!(found(&app, k, &one("\"parser change\"")).await, [review]);
    assert!(found(&app, k, &one("\"change parser\"")).await.is_empty());
    assert_eq!(found(&app, k, &one("PARSER ready")).await, [review]);
    assert_eq!(
        found(&app, k, &one("revi*")).await,
        ["Reviewing the parser now", review]
    );
    // The data's strings, at any depth; its keys are not text.
    assert_eq!(found(&app, k, &one("urgent")).await, [review]);
    assert_eq!(found(&app, k, &one("parser-42")).await, [review]);
    assert!(found(&app, k, &one("owner")).await.is_empty());
    assert_eq!(found(&app, k, &one("Zoë")).await, [review]);
    // Every term must match.
    assert!(found(&app, k, &one("parser lunch")).await.is_empty());
}

#[tokio::test]
async fn every_filter_narrows_and_pages_walk_each_result_once() {
    let app = TestApp::start().await;
    let (team, a, ..) = corpus(&app).await;
    let k = &team.key;
    let all = "q=parser";
    assert_eq!(
        found(&app, k, &format!("{all}&sender=b")).await,
        ["Reviewing the parser now"]
    );
    assert_eq!(found(&app, k, &format!("{all}&recipient=b")).await.len(), 1);
    assert_eq!(
        found(&app, k, &format!("{all}&thread_id=pr-42"))
            .await
            .len(),
        2
    );
    assert_eq!(
        found(&app, k, &format!("{all}&message_type=coordination"))
            .await
            .len(),
        1
    );
    assert_eq!(
        found(&app, k, "q=change&message_type=request").await,
        ["Change of plans for Friday"]
    );
    assert!(
        found(&app, k, &format!("{all}&kind=broadcast"))
            .await
            .is_empty()
    );
    assert!(
        found(
            &app,
            k,
            &format!("{all}&since_timestamp=2999-01-01T00:00:00Z")
        )
        .await
        .is_empty()
    );
    assert_eq!(
        found(
            &app,
            k,
            &format!("{all}&until_timestamp=2999-01-01T00:00:00Z")
        )
        .await
        .len(),
        2
    );
    // Pages of one, newest first and by relevance: each result once, and all of them.
    for sort in ["newest", "relevance"] {
        let mut seen = Vec::new();
        let mut cursor = String::new();
        loop {
            let page = app
                .get(&format!("/v1/search?q=the&limit=1&sort={sort}{cursor}"))
                .token(&a.token)
                .send()
                .await
                .expect_status(200);
            seen.extend(texts(&page.body));
            match page.body["next_cursor"].as_str() {
                Some(next) => cursor = format!("&cursor={next}"),
                None => break,
            }
        }
        seen.sort();
        assert_eq!(
            seen,
            [
                "Reviewing the parser now",
                "The parser change is ready for review"
            ],
            "{sort}"
        );
    }
}

#[tokio::test]
async fn every_refusal_names_its_field() {
    let app = TestApp::start().await;
    let (team, ..) = corpus(&app).await;
    for (query, field) in [
        ("q=", "q"),
        ("q=%20--%20", "q"),
        ("q=a*", "q"),
        (&*format!("q={}", "w%20".repeat(11)), "q"),
        (&*format!("q={}", "w".repeat(257)), "q"),
        ("q=x&limit=0", "limit"),
        ("q=x&limit=101", "limit"),
        ("q=x&cursor=abc", "cursor"),
        ("q=x&sort=best", "sort"),
        ("q=x&since_timestamp=yesterday", "since_timestamp"),
    ] {
        let res = app
            .get(&format!("/v1/search?{query}"))
            .token(&team.key)
            .send()
            .await
            .expect_error(400, "VALIDATION_ERROR");
        assert_eq!(res.body["details"]["field"], field, "{query}: {}", res.body);
    }
    app.get("/v1/search")
        .token(&team.key)
        .send()
        .await
        .expect_error(400, "VALIDATION_ERROR");
    app.get("/v1/search?q=x&sender=ghost")
        .token(&team.key)
        .send()
        .await
        .expect_error(404, "AGENT_NOT_FOUND");
}

/// Percent-encodes a query value (space, quote, star and the rest of the non-alphanumerics).
pub(crate) fn urlencoding(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// `docs/search.md`'s walkthrough after the README's: the coder finds the request it got
/// and the broadcast it sent (its data says "Parser can merge"); the team key finds the
/// request by a phrase and a prefix.
#[tokio::test]
async fn the_search_walkthrough_works_as_written() {
    let app = crate::readme::walkthrough_server().await;
    let script = format!(
        "{}echo '=== docs/search.md'\n{}",
        crate::readme::readme(),
        crate::readme::walkthrough("docs/search.md", "search")
    );
    let out = crate::readme::run(&app, &script).await;
    let answers = crate::readme::page_answers(&out, "docs/search.md");
    assert_eq!(answers.len(), 2, "{out}");
    let mut heard = texts(&answers[0]);
    heard.sort();
    assert_eq!(
        heard,
        ["Please review the parser change", "Review done"],
        "{out}"
    );
    assert_eq!(
        texts(&answers[1]),
        ["Please review the parser change"],
        "{out}"
    );
    app.stop().await;
}
