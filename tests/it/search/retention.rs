//! Retention removes from the index what it removes from the store: a message past its
//! team's retention is found by nobody after the pass, on either engine; a kept one still
//! is.

use crate::retention::{pass_at, read_and_keep_read_for_a_minute, sent_at};
use crate::support::TestApp;

use super::found;

#[tokio::test]
async fn a_message_retention_removed_is_found_no_more() {
    let mut app = TestApp::start().await;
    let team = app.team("forget").await;
    let a = app.agent(&team, "a", &[]).await;
    let b = app.agent(&team, "b", &[]).await;
    let gone = app.send(&a, &[&b], "ephemeral zebra").await;
    let kept = app.send(&a, &[&b], "lasting zebra").await;
    read_and_keep_read_for_a_minute(&app, &team, &b, std::slice::from_ref(&gone)).await;
    assert_eq!(found(&app, &team.key, "q=zebra").await.len(), 2);
    let later = sent_at(&app, &b, &kept).await.micros() + 61_000_000;
    app.pause().await;
    pass_at(&app, switchboard_types::time::Timestamp::from_micros(later)).await;
    app.restart().await;
    assert_eq!(found(&app, &team.key, "q=zebra").await, ["lasting zebra"]);
    assert!(found(&app, &b.token, "q=ephemeral").await.is_empty());
    assert!(found(&app, &a.token, "q=ephemeral").await.is_empty());
    app.stop().await;
}
