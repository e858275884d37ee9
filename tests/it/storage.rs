//! Storage under sustained writes: the write-ahead log keeps to its bound and shrinks
//! back when the load eases.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use serde_json::json;

use crate::support::TestApp;

/// The size of a file, 0 when it does not exist.
fn size(path: &std::path::Path) -> u64 {
    std::fs::metadata(path).map_or(0, |m| m.len())
}

/// Watches a file's size every millisecond until stopped; the largest seen.
fn watch_peak(path: std::path::PathBuf) -> (Arc<AtomicU64>, Arc<AtomicBool>) {
    let peak = Arc::new(AtomicU64::new(0));
    let running = Arc::new(AtomicBool::new(true));
    let (p, r) = (peak.clone(), running.clone());
    std::thread::spawn(move || {
        while r.load(Ordering::Relaxed) {
            p.fetch_max(size(&path), Ordering::Relaxed);
            std::thread::sleep(Duration::from_millis(1));
        }
    });
    (peak, running)
}

/// Waits up to `patience` for `check`; whether it came true.
async fn eventually(patience: Duration, check: impl Fn() -> bool) -> bool {
    let deadline = tokio::time::Instant::now() + patience;
    while tokio::time::Instant::now() < deadline {
        if check() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    check()
}

/// Sixteen senders write five times the bound through the log as fast as they can; the
/// log never grows past the bound, is cut back to an eighth of it once the load
/// eases, and to nothing once writes stop.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_wal_keeps_to_its_bound_and_shrinks_when_writes_stop() {
    const BOUND: u64 = 4 * 1024 * 1024;
    let app = TestApp::start_with(|c| c.wal_max_bytes = BOUND).await;
    let team = app.team("wal").await;
    let a = app.agent(&team, "a", &[]).await;
    let _b = app.agent(&team, "b", &[]).await;
    let mut wal = app.database().into_os_string();
    wal.push("-wal");
    let wal = std::path::PathBuf::from(wal);
    let (peak, watching) = watch_peak(wal.clone());

    let text = "w".repeat(1900);
    let per_sender = (5 * BOUND / 1900 / 16) as usize;
    let senders = (0..16).map(|s| {
        let (app, a, text) = (&app, &a, &text);
        async move {
            for i in 0..per_sender {
                app.send_with(
                    a,
                    json!({"recipient_agent_ids": ["b"], "content": {"text": format!("{s}/{i} {text}")}}),
                )
                .await
                .expect_status(201);
            }
        }
    });
    futures_util::future::join_all(senders).await;
    let during = peak.load(Ordering::Relaxed);
    assert!(during > 0, "the WAL was never seen");
    assert!(
        during <= BOUND,
        "the WAL reached {during} bytes, over its bound {BOUND}"
    );

    let small = BOUND / 8;
    assert!(
        eventually(Duration::from_secs(5), || size(&wal) <= small).await,
        "the WAL stayed at {} bytes, over its small limit {small}",
        size(&wal)
    );
    assert!(
        eventually(Duration::from_secs(5), || size(&wal) == 0).await,
        "an idle server's WAL stayed at {} bytes",
        size(&wal)
    );
    watching.store(false, Ordering::Relaxed);
    assert_eq!(
        app.inbox(&_b, "?limit=1").await.body["total_count"],
        (16 * per_sender) as u64,
        "every send is there"
    );
    app.stop().await;
}
