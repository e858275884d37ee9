//! Same answers on both engines (issue 42): one seeded stream of requests, valid and
//! mutated (the fuzzer's own mutations, `tests/fuzz/mutate.rs`, over its body corpus),
//! sent in the same order to a server on SQLite and to one on PostgreSQL, must get the
//! same status and the same body, generated ids, tokens and timestamps aside. It would
//! have found the NUL-in-text case (PostgreSQL 503, SQLite 201).
//!
//! `FUZZ_SEED` repeats a run; `DIFFERENTIAL_STEPS` (default 1,500) sets its length.

#[path = "../fuzz/mutate.rs"]
#[allow(dead_code)]
mod mutate;

use rand::rngs::StdRng;
use rand::seq::IndexedRandom;
use rand::{Rng, SeedableRng};
use regex::Regex;
use reqwest::Method;
use serde_json::Value;

use crate::support::{ADMIN, TestApp};

/// Where each body of the corpus goes, and who sends it: `a` and `b` are agents, `key`
/// the team key, `admin` the admin token. Task paths name task `t-1`, which `a` submits to
/// `b` first; `{m}` is a message from `a` to `b`, sent first.
const ROUTES: &[(&str, &str, &str, &str)] = &[
    ("send_message", "POST", "/v1/messages", "a"),
    ("broadcast", "POST", "/v1/broadcasts", "a"),
    ("assistance", "POST", "/v1/assistance-requests", "a"),
    ("mark_read", "POST", "/v1/messages/read", "b"),
    ("respond", "POST", "/v1/messages/{m}/responses", "b"),
    ("publish", "POST", "/v1/publish", "a"),
    ("set_watch", "PUT", "/v1/watch", "b"),
    ("submit_task", "POST", "/v1/tasks", "a"),
    ("handoff", "POST", "/v1/tasks/t-1/handoff", "b"),
    ("clarify", "POST", "/v1/tasks/t-1/clarifications", "b"),
    (
        "answer",
        "POST",
        "/v1/tasks/t-1/clarifications/clr_none/answer",
        "a",
    ),
    ("report", "POST", "/v1/tasks/t-1/result", "b"),
    ("cancel", "POST", "/v1/tasks/t-1/cancel", "a"),
    ("register_agent", "POST", "/v1/teams/diff/agents", "key"),
    ("update_agent", "PATCH", "/v1/teams/diff/agents/c", "key"),
    ("update_team", "PATCH", "/v1/teams/diff", "key"),
    ("create_team", "POST", "/v1/teams", "admin"),
];

/// One engine's server and the credentials the stream uses on it.
struct Side {
    app: TestApp,
    tokens: [(&'static str, String); 5],
    message: String,
}

impl Side {
    async fn new(app: TestApp) -> Side {
        let team = app.team("diff").await;
        let a = app.agent(&team, "a", &["summarise"]).await;
        let b = app.agent(&team, "b", &["summarise", "review"]).await;
        app.agent(&team, "c", &["review"]).await;
        let message = app.send(&a, &[&b], "first").await;
        app.post("/v1/tasks")
            .token(&a.token)
            .json(
                serde_json::json!({"task_id": "t-1", "description": "Summarise",
                                     "originating_agent_id": "a", "target_agent_id": "b"}),
            )
            .send()
            .await
            .expect_status(201);
        Side {
            tokens: [
                ("a", a.token),
                ("b", b.token),
                ("key", team.key),
                ("admin", ADMIN.to_owned()),
                ("none", String::new()),
            ],
            message,
            app,
        }
    }

    async fn call(&self, method: &str, path: &str, who: &str, body: &[u8]) -> (u16, Value) {
        let token = &self
            .tokens
            .iter()
            .find(|(w, _)| *w == who)
            .expect("a caller")
            .1;
        let path = path.replace("{m}", &self.message);
        let method = Method::from_bytes(method.as_bytes()).expect("a method");
        let res = self
            .app
            .req(method, &path)
            .token(token)
            .header("content-type", "application/json")
            .raw(body.to_vec())
            .send()
            .await;
        (res.status, res.body)
    }
}

#[tokio::test]
async fn both_engines_answer_a_seeded_stream_alike() {
    if crate::support::on_postgres() {
        return; // it starts one server on each engine itself
    }
    let Some(pg) = TestApp::start_on_postgres().await else {
        return;
    };
    let sqlite = Side::new(TestApp::start_on_sqlite_with(|_| {}).await).await;
    let pg = Side::new(pg).await;
    let seed = std::env::var("FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(42u64);
    let steps: usize = std::env::var("DIFFERENTIAL_STEPS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1500);
    let corpus = body_corpus();
    let others: Vec<Vec<u8>> = corpus.iter().map(|(_, b)| b.clone()).collect();
    let mut rng = StdRng::seed_from_u64(seed);
    let normal = Normalizer::new();
    let mut differences = Vec::new();
    let mut statuses = std::collections::BTreeMap::<u16, usize>::new();
    for step in 0..steps {
        let (kind, seed_body) = corpus.choose(&mut rng).expect("a seed");
        let route = ROUTES.iter().find(|r| r.0 == kind.as_str());
        let Some(&(_, method, path, mut who)) = route else {
            continue;
        };
        let body = if rng.random_bool(0.3) {
            seed_body.clone()
        } else {
            mutate::mutate(&mut rng, seed_body, &others)
        };
        if rng.random_range(0..20) == 0 {
            who = ["a", "b", "key", "admin", "none"][rng.random_range(0..5)];
        }
        let body = loopback_only(body);
        let (s1, b1) = sqlite.call(method, path, who, &body).await;
        let (s2, b2) = pg.call(method, path, who, &body).await;
        *statuses.entry(s1).or_default() += 1;
        let (n1, n2) = (normal.apply(&b1), normal.apply(&b2));
        if kind == "update_team" {
            // A team switched off would refuse the rest of the stream alike: on again.
            let on = br#"{"communication_enabled": true}"#;
            for side in [&sqlite, &pg] {
                let (status, body) = side.call("PATCH", "/v1/teams/diff", "key", on).await;
                assert_eq!(status, 200, "{body}");
            }
        }
        if s1 != s2 || n1 != n2 {
            differences.push(format!(
                "step {step} {method} {path} as {who}: {}\n  SQLite {s1}: {n1}\n  PostgreSQL {s2}: {n2}",
                String::from_utf8_lossy(&body)
            ));
        }
    }
    eprintln!("differential (FUZZ_SEED={seed}): statuses {statuses:?}");
    // The stream reaches both the operations and their refusals.
    let accepted: usize = statuses.range(200..300).map(|(_, n)| n).sum();
    let refused: usize = statuses.range(400..500).map(|(_, n)| n).sum();
    assert!(
        accepted * 20 >= steps && refused * 5 >= steps,
        "{statuses:?}"
    );
    assert!(
        differences.is_empty(),
        "{} of {steps} requests answered differently (FUZZ_SEED={seed}):\n{}",
        differences.len(),
        differences.join("\n")
    );
}

/// The fuzzer's body seeds: (kind, bytes).
fn body_corpus() -> Vec<(String, Vec<u8>)> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/body");
    let mut seeds: Vec<(String, Vec<u8>)> = std::fs::read_dir(&dir)
        .expect("the body corpus")
        .filter_map(Result::ok)
        .map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let kind = name.split('.').next().unwrap_or_default().to_owned();
            (kind, std::fs::read(e.path()).expect("a seed"))
        })
        .collect();
    seeds.sort();
    seeds
}

/// Every URL in a body that parses as JSON points at a closed loopback port, so no
/// mutation can make the server call a host on the internet (a callback, an attachment).
fn loopback_only(body: Vec<u8>) -> Vec<u8> {
    fn walk(value: &mut Value) -> bool {
        match value {
            Value::String(s) if s.contains("://") || s.contains("example") => {
                *s = "http://127.0.0.1:9/hook".to_owned();
                true
            }
            Value::Array(items) => items.iter_mut().fold(false, |a, v| walk(v) | a),
            Value::Object(map) => map.values_mut().fold(false, |a, v| walk(v) | a),
            _ => false,
        }
    }
    let Ok(mut value) = serde_json::from_slice::<Value>(&body) else {
        return body;
    };
    if walk(&mut value) {
        serde_json::to_vec(&value).expect("json")
    } else {
        body
    }
}

/// Replaces what differs between two servers by nature: generated ids, tokens, keys,
/// timestamps.
struct Normalizer(Vec<(Regex, &'static str)>);

impl Normalizer {
    fn new() -> Normalizer {
        let rules = [
            (r"sb_[a-z]+_[0-9a-f]{16}_[0-9a-f]{64}", "<token>"),
            // Derived from generated ids, or random (a task whose id the client chose).
            (
                r"\b00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}\b",
                "<traceparent>",
            ),
            (r"\b[a-z]+_[0-9a-f]{32}\b", "<ordered id>"),
            (r"\b[a-z]+-[0-9a-f]{16}\b", "<random id>"),
            (
                r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)",
                "<time>",
            ),
        ];
        Normalizer(
            rules
                .into_iter()
                .map(|(re, to)| (Regex::new(re).expect("a regex"), to))
                .collect(),
        )
    }

    fn apply(&self, value: &Value) -> Value {
        match value {
            Value::String(s) => {
                let mut s = s.clone();
                for (re, to) in &self.0 {
                    s = re.replace_all(&s, *to).into_owned();
                }
                Value::String(s)
            }
            Value::Array(items) => Value::Array(items.iter().map(|v| self.apply(v)).collect()),
            Value::Object(map) => Value::Object(
                map.iter()
                    .map(|(k, v)| (k.clone(), self.apply(v)))
                    .collect(),
            ),
            other => other.clone(),
        }
    }
}
