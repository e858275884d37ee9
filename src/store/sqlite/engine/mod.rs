//! What the SQLite engine offers the core (the traits of [`crate::store::engine`]), one
//! file per resource as on PostgreSQL. Reads run on the pool and see everything
//! committed before they start; writes become jobs of the group commit. This process is
//! the only node: what the multi-node mechanisms do here is written in
//! `store/lifecycle.rs`.

mod messages;
mod tasks;

use super::SqliteStore;
use crate::store::StoreError;

impl SqliteStore {
    /// Checks that the database answers (readiness).
    pub(crate) async fn ping(&self) -> Result<(), StoreError> {
        sqlx::query("SELECT 1").execute(&self.read).await?;
        Ok(())
    }

    /// Finishes queued writes, checkpoints the WAL and closes every connection.
    pub(crate) async fn close(&self) {
        self.checkpoints.stop.cancel();
        if let Some(task) = self.checkpoints.task.lock().await.take() {
            let _ = task.await;
        }
        self.writer.close().await;
        self.read.close().await;
        // The file is free for the next server only once every connection is closed.
        // A poisoned lock only means a panic elsewhere; the claim is dropped either way.
        let claim = match self.serving.lock() {
            Ok(mut guard) => guard.take(),
            Err(poisoned) => poisoned.into_inner().take(),
        };
        drop(claim);
    }
}
