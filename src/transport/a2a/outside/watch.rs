//! Hearing about a remote task as soon as it changes: when the agent's card says it
//! streams, the follower holds its `SubscribeToTask` stream open and takes each event as
//! the signal to look (`GetTask`) at once, instead of at its next poll. The stream only
//! wakes: what the task is comes from `GetTask` as before, so a stream that breaks, or
//! an agent that does not stream, costs only the poll interval, never an update.

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use tokio::sync::Notify;
use tokio::task::JoinHandle;

use super::Binding;

/// Wait before a broken stream is opened again.
const REOPEN: Duration = Duration::from_secs(1);

/// A remote task's stream, kept open while this lives.
pub struct Watch {
    changed: Arc<Notify>,
    reader: Option<JoinHandle<()>>,
}

impl Drop for Watch {
    fn drop(&mut self) {
        if let Some(reader) = self.reader.take() {
            reader.abort();
        }
    }
}

impl Watch {
    /// Watches `remote_id` when the agent streams; otherwise a watch that never wakes.
    pub fn start(http: &reqwest::Client, binding: &Binding, remote_id: &str) -> Watch {
        let changed = Arc::new(Notify::new());
        let reader = binding.streaming.then(|| {
            let (http, binding) = (http.clone(), binding.clone());
            let (changed, remote_id) = (changed.clone(), remote_id.to_owned());
            tokio::spawn(async move {
                loop {
                    read(&http, &binding, &remote_id, &changed).await;
                    tokio::time::sleep(REOPEN).await;
                }
            })
        });
        Watch { changed, reader }
    }

    /// Resolves at the next event of the stream (never, without one).
    pub async fn changed(&self) {
        self.changed.notified().await;
    }
}

/// Reads one subscription until it ends; each event wakes the follower.
async fn read(http: &reqwest::Client, binding: &Binding, remote_id: &str, changed: &Notify) {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "SubscribeToTask",
                      "params": {"id": remote_id}});
    let mut request = http
        .post(&binding.interface_url)
        .header("a2a-version", "1.0")
        .header("accept", "text/event-stream")
        .json(&body);
    if let Some(value) = &binding.authorization {
        request = request.header("authorization", value);
    }
    let Ok(mut response) = request.send().await else {
        return;
    };
    if !response.status().is_success() {
        return;
    }
    while let Ok(Some(chunk)) = response.chunk().await {
        if chunk.windows(5).any(|w| w == b"data:") {
            changed.notify_one();
        }
    }
}
