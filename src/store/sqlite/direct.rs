//! A second connection to the database, driven from the writer's own thread, for the
//! batches that are nothing but staged rows: posts (every SEND_MESSAGE, STOMP SEND,
//! broadcast or publish) and new tasks with their notices (task submissions, A2A
//! `SendMessage`).
//!
//! sqlx runs each connection on a worker thread of its own and hands every statement's
//! result back over a channel. The writer waits on each one, so a batch's transaction
//! was a ping-pong of thread wake-ups: about twenty context switches for a single
//! message's `BEGIN … COMMIT`, some 200 µs of a ~400 µs SEND → receipt on an idle
//! machine, and the fixed cost that every batch pays before the next one can start.
//! Here the same statements run as plain calls on the writer's thread.
//!
//! Only the writer uses it, and only between batches of the sqlx write connection (never
//! while that one has a transaction open), so the two never wait for each other; SQLite
//! keeps their views of the file consistent. Anything unusual (an error of any kind)
//! falls back to the sqlx path, which knows how to isolate a bad post or a task whose
//! id is taken.

use std::path::Path;
use std::time::Duration;

use rusqlite::{Connection, OpenFlags, TransactionBehavior};

use super::rows::Col;
use crate::store::{Durability, StoreOptions};

/// Statements kept prepared: the message insert at each batch size, the three JSON
/// inserts, and the task inserts (three or four per chunk size).
const PREPARED: usize = 64;

/// The writer's direct connection.
pub(crate) struct Direct {
    conn: Connection,
}

impl Direct {
    /// Opens the file the way `connect_options` opens the write connection (the same
    /// durability, foreign keys, no automatic checkpoints: those are the checkpoint
    /// task's), after the migrations ran.
    pub(crate) fn open(path: &Path, opts: StoreOptions) -> rusqlite::Result<Direct> {
        let conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )?;
        let synchronous = match opts.durability {
            Durability::Normal => "NORMAL",
            Durability::Full => "FULL",
        };
        conn.execute_batch(&format!(
            "PRAGMA journal_mode = WAL;
             PRAGMA synchronous = {synchronous};
             PRAGMA foreign_keys = ON;
             PRAGMA temp_store = MEMORY;
             PRAGMA wal_autocheckpoint = 0;
             PRAGMA journal_size_limit = {};
             PRAGMA cache_size = -32768;",
            opts.wal_max_bytes
        ))?;
        conn.busy_timeout(opts.busy_timeout.max(Duration::from_millis(1)))?;
        conn.set_prepared_statement_cache_capacity(PREPARED);
        Ok(Direct { conn })
    }

    /// Runs `statements` (each with its values) in a transaction of its own and commits
    /// it. An error means nothing of it was committed (the transaction rolls back when
    /// dropped).
    pub(super) fn commit(&mut self, statements: &[(&str, Vec<Col<'_>>)]) -> rusqlite::Result<()> {
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        for (sql, values) in statements {
            tx.prepare_cached(sql)?
                .execute(rusqlite::params_from_iter(values))?;
        }
        tx.commit()
    }
}

/// What a failed direct write means for the store: a reused id (a task's, an
/// idempotency key's) is an ordinary outcome the sqlx path isolates, not damage.
pub(super) fn store_error(e: rusqlite::Error) -> crate::store::StoreError {
    match e {
        rusqlite::Error::SqliteFailure(failure, _)
            if failure.code == rusqlite::ErrorCode::ConstraintViolation =>
        {
            crate::store::StoreError::Conflict
        }
        e => crate::store::StoreError::Corrupt(format!("direct write: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use sqlx::{Connection, Row, SqliteConnection};
    use switchboard_types::ids::AgentPk;
    use switchboard_types::messages::{MessageKind, MessageType};

    use crate::model::{AgentRecord, Decided, NewMessage, NewPost};
    use crate::store::Store;
    use crate::store::StoreOptions;

    /// Posts `id` from `sender` to agent 2; whether it was written.
    async fn send(store: &Store, sender: &AgentRecord, id: &str) -> bool {
        let content = serde_json::from_value(serde_json::json!({"text": id})).expect("content");
        let message = NewMessage::new(
            id.into(),
            sender,
            MessageKind::Message,
            MessageType::Information,
            content,
        );
        let post = NewPost {
            message,
            recipient_ids: vec!["b".into()],
            deliver_to: vec![AgentPk(2)],
            response: None,
            charges: Vec::new(),
        };
        let decide = |_: &NewMessage, _| {
            Ok::<_, crate::store::StoreError>(Decided {
                value: (),
                answer: None,
            })
        };
        let outcome = store
            .post(post, None, decide, |(), written| written.map(|_| ()))
            .await;
        outcome.is_ok()
    }

    /// A batch the direct connection cannot write (one of its posts repeats a committed
    /// message id) goes through the sqlx path, which refuses that post alone: the others
    /// are written, and the recipient's inbox numbers stay gap-free.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_post_the_direct_insert_refuses_fails_alone() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("s.db");
        let store = Store::open_sqlite(&path, StoreOptions::default())
            .await
            .expect("store");
        let mut setup = SqliteConnection::connect(&format!("sqlite://{}", path.display()))
            .await
            .expect("setup connection");
        sqlx::raw_sql(
            "INSERT INTO teams (pk, team_id, name, key_id, key_hash, created_at, updated_at)
             VALUES (1, 't', 't', 'k', x'00', 0, 0);
             INSERT INTO agents (pk, team_pk, agent_id, role, capabilities, status,
                                 registered_at, updated_at)
             VALUES (1, 1, 'a', 'r', '[]', 'available', 0, 0),
                    (2, 1, 'b', 'r', '[]', 'available', 0, 0);",
        )
        .execute(&mut setup)
        .await
        .expect("team and agents");
        let sender = store
            .load_agents()
            .await
            .expect("agents")
            .into_iter()
            .find(|a| a.pk == AgentPk(1))
            .expect("agent a");
        assert!(send(&store, &sender, "first").await);

        let sends = ["second", "first", "third", "fourth"].map(|id| {
            let (store, sender) = (store.clone(), sender.clone());
            tokio::spawn(async move { send(&store, &sender, id).await })
        });
        let mut written = Vec::new();
        for send in sends {
            written.push(send.await.expect("joined"));
        }
        assert_eq!(written, [true, false, true, true]);

        let rows = sqlx::query(
            "SELECT m.message_id, i.seq FROM inbox i JOIN messages m ON m.pk = i.message_pk
             WHERE i.agent_pk = 2 ORDER BY i.seq",
        )
        .fetch_all(&mut setup)
        .await
        .expect("inbox");
        let seqs: Vec<i64> = rows.iter().map(|r| r.get(1)).collect();
        assert_eq!(seqs, [1, 2, 3, 4]);
        let mut ids: Vec<String> = rows.iter().map(|r| r.get(0)).collect();
        ids.sort();
        assert_eq!(ids, ["first", "fourth", "second", "third"]);
        store.close().await;
    }
}
