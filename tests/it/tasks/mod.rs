//! The task protocol end to end: submission and assignment, clarification rounds,
//! handoff, results, cancel, signed callbacks to a real HTTP receiver, the registry by
//! message, illegal transitions, restarts and team isolation.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use hmac::{Hmac, Mac};
use serde_json::{Value, json};
use sha2::Sha256;

use crate::support::{Agent, Res, Team, TestApp};

/// A callback receiver: records every POST; answers 503 while `failures` is above zero
/// (counting down), 200 afterwards.
#[derive(Clone, Default)]
pub(crate) struct Receiver {
    calls: Arc<Mutex<Vec<(HeaderMap, String, u16)>>>,
    failures: Arc<Mutex<u32>>,
    /// How long each call takes to answer.
    delay: Arc<Mutex<Duration>>,
    /// How long the first calls take instead, one per call, in order.
    first_delays: Arc<Mutex<Vec<Duration>>>,
    /// Every call's headers as it arrived, before it was answered.
    arrived: Arc<Mutex<Vec<HeaderMap>>>,
}

impl Receiver {
    /// Starts it on an ephemeral port; returns its URL.
    pub(crate) async fn start(&self) -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let app = axum::Router::new()
            .route("/hook", axum::routing::post(receive))
            .with_state(self.clone());
        tokio::spawn(async move { axum::serve(listener, app).await });
        format!("http://{addr}/hook")
    }

    /// Makes every call take `delay` before it is answered (and recorded).
    pub(crate) fn answer_after(&self, delay: Duration) {
        *self.delay.lock().expect("lock") = delay;
    }

    /// Makes the next call not yet answered take `delay` (others as before).
    pub(crate) fn hold_next(&self, delay: Duration) {
        self.first_delays.lock().expect("lock").push(delay);
    }

    /// Headers of every call that arrived, answered or not.
    pub(crate) fn arrived(&self) -> Vec<HeaderMap> {
        self.arrived.lock().expect("lock").clone()
    }

    pub(crate) fn fail_next(&self, n: u32) {
        *self.failures.lock().expect("lock") = n;
    }

    /// Bodies of the accepted (200) calls.
    pub(crate) fn delivered(&self) -> Vec<Value> {
        self.calls
            .lock()
            .expect("lock")
            .iter()
            .filter(|(_, _, status)| *status == 200)
            .map(|(_, body, _)| serde_json::from_str(body).expect("JSON body"))
            .collect()
    }

    pub(crate) fn calls(&self) -> Vec<(HeaderMap, String, u16)> {
        self.calls.lock().expect("lock").clone()
    }

    /// Waits until `n` callbacks were accepted.
    pub(crate) async fn wait_for(&self, n: usize) -> Vec<Value> {
        for _ in 0..1200 {
            let delivered = self.delivered();
            if delivered.len() >= n {
                return delivered;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        panic!("expected {n} callbacks, got {:?}", self.delivered());
    }
}

async fn receive(State(r): State<Receiver>, headers: HeaderMap, body: String) -> StatusCode {
    r.arrived.lock().expect("lock").push(headers.clone());
    let delay = {
        let mut first = r.first_delays.lock().expect("lock");
        match first.is_empty() {
            true => *r.delay.lock().expect("lock"),
            false => first.remove(0),
        }
    };
    tokio::time::sleep(delay).await;
    let status = {
        let mut failures = r.failures.lock().expect("lock");
        if *failures > 0 {
            *failures -= 1;
            503
        } else {
            200
        }
    };
    r.calls.lock().expect("lock").push((headers, body, status));
    StatusCode::from_u16(status).expect("status")
}

/// Verifies `Switchboard-Signature: t=…,v1=…` the way docs/tasks.md tells receivers to.
pub(crate) fn verify(secret: &str, headers: &HeaderMap, body: &str) -> bool {
    let Some(header) = headers
        .get("switchboard-signature")
        .and_then(|v| v.to_str().ok())
    else {
        return false;
    };
    let mut t = None;
    let mut v1 = None;
    for part in header.split(',') {
        match part.split_once('=') {
            Some(("t", value)) => t = Some(value.to_owned()),
            Some(("v1", value)) => v1 = Some(value.to_owned()),
            _ => {}
        }
    }
    let (Some(t), Some(v1)) = (t, v1) else {
        return false;
    };
    let Ok(expected) = hex::decode(v1) else {
        return false;
    };
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("key");
    mac.update(format!("{t}.{body}").as_bytes());
    mac.verify_slice(&expected).is_ok()
}

/// A server that calls private addresses and retries callbacks quickly.
async fn app() -> TestApp {
    TestApp::start_with(|c| {
        c.callbacks.allow_private = true;
        c.callbacks.retry_base = Duration::from_millis(20);
    })
    .await
}

impl TestApp {
    pub(crate) async fn submit(&self, from: &Agent, fields: Value) -> Res {
        let mut body = json!({"description": "do the thing", "originating_agent_id": from.id});
        crate::support::merge(&mut body, fields);
        self.post("/v1/tasks")
            .token(&from.token)
            .json(body)
            .send()
            .await
    }

    pub(crate) async fn task_action(
        &self,
        who: &Agent,
        task_id: &str,
        action: &str,
        body: Value,
    ) -> Res {
        self.post(&format!("/v1/tasks/{task_id}/{action}"))
            .token(&who.token)
            .json(body)
            .send()
            .await
    }

    pub(crate) async fn task(&self, who: &Agent, task_id: &str) -> Res {
        self.get(&format!("/v1/tasks/{task_id}"))
            .token(&who.token)
            .send()
            .await
    }

    pub(crate) async fn secret(&self, team: &Team) -> String {
        self.get(&format!("/v1/teams/{}/callback-secret", team.id))
            .token(&team.key)
            .send()
            .await
            .expect_status(200)
            .str("secret")
    }
}

/// The kinds of a task's events, oldest first, from `GET /v1/tasks/{id}`.
pub(crate) fn kinds(detail: &Value) -> Vec<String> {
    detail["events"]
        .as_array()
        .expect("events")
        .iter()
        .map(|e| e["kind"].as_str().expect("kind").to_owned())
        .collect()
}

pub(crate) mod claims;
mod claims_gone;
mod claims_race;
mod lifecycle;
mod namesakes;
mod registry;
mod rules;
mod story;
