//! An approval past its time is expired whether or not the sweep has reached it: with
//! the sweep held off (`--tick-scale`), it reads expired, lists under `status=expired`
//! and not under `pending`, cannot be decided, and no longer counts toward its asker's
//! bound of pending approvals.

use reqwest::Method;
use serde_json::json;

use crate::process::{Process, call};
use crate::support::ADMIN;

#[tokio::test]
async fn an_approval_past_its_time_is_expired_before_any_sweep() {
    let dir = tempfile::tempdir().expect("dir");
    let server = Process::start_with(&dir.path().join("a.db"), &["--tick-scale", "10000"]);
    let http = reqwest::Client::new();
    let body = json!({"name": "u", "team_id": "u"});
    let (_, team) = call(&http, &server, Method::POST, "/v1/teams", ADMIN, Some(body)).await;
    let key = team["team_key"].as_str().expect("key").to_owned();
    let body = json!({"agent_id": "a", "role": "r", "capabilities": []});
    let (_, agent) = call(
        &http,
        &server,
        Method::POST,
        "/v1/teams/u/agents",
        &key,
        Some(body),
    )
    .await;
    let token = agent["token"].as_str().expect("token").to_owned();
    let ask = json!({"summary": "Quick?", "expires_in_seconds": 1});
    let (status, asked) = call(
        &http,
        &server,
        Method::POST,
        "/v1/approvals",
        &token,
        Some(ask),
    )
    .await;
    assert_eq!(status, 201, "{asked}");
    let id = asked["approval"]["approval_id"]
        .as_str()
        .expect("id")
        .to_owned();
    tokio::time::sleep(std::time::Duration::from_millis(1_200)).await;

    let list = |status: &'static str| {
        let (http, server, key) = (&http, &server, &key);
        async move {
            let path = format!("/v1/approvals?status={status}");
            let (_, page) = call(http, server, Method::GET, &path, key, None).await;
            page["approvals"].as_array().expect("approvals").len()
        }
    };
    assert_eq!(list("expired").await, 1);
    assert_eq!(list("pending").await, 0);
    let (_, read) = call(
        &http,
        &server,
        Method::GET,
        &format!("/v1/approvals/{id}"),
        &key,
        None,
    )
    .await;
    assert_eq!(read["approval"]["status"], "expired", "{read}");
    let decide = json!({"decision": "approve"});
    let path = format!("/v1/approvals/{id}/decision");
    let (status, refused) = call(&http, &server, Method::POST, &path, &key, Some(decide)).await;
    assert_eq!(
        (status, refused["details"]["status"].clone()),
        (409, json!("expired"))
    );
}
