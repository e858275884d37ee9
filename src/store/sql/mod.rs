//! Table code whose SQL is the same on both engines, written once.
//!
//! Each file here is one table's reads and writes inside [`for_each_engine!`], which
//! compiles them once per engine, with `Db`, `Conn` and `Pool` naming that engine's sqlx
//! types: `sql::settings::sqlite::get` and `sql::settings::postgres::get` are the same
//! source. Placeholders are written `$1`, `$2`, … (PostgreSQL's; sqlx binds SQLite's
//! `$N` by number too). What really differs between the engines — numbering, locks,
//! notifications, the batch insert path — stays in each engine's folder, named for its
//! mechanism (issue 64; `docs/architecture.md`, "Store").

/// A job of the group commit that runs `$body` on the batch's connection (after what
/// the batch staged) and answers its value: `write_then` in a savepoint of its own,
/// `write_self_contained` for a job that leaves nothing behind when it fails.
macro_rules! on_conn {
    ($store:expr, $how:ident, |$conn:ident| $body:expr) => {
        $store
            .$how(
                move |tx| {
                    Box::pin(async move {
                        let $conn = tx.conn().await?;
                        $body
                    })
                },
                Ok,
            )
            .await
    };
}

/// Compiles the items given once per engine, as `mod sqlite` and `mod postgres`.
macro_rules! for_each_engine {
    ($($item:item)*) => {
        /// The items above, on SQLite.
        pub(crate) mod sqlite {
            #[allow(unused_imports)]
            use super::*;
            #[allow(unused_imports)]
            use crate::store::sqlite as engine;
            #[allow(dead_code)]
            type Store = crate::store::sqlite::SqliteStore;
            #[allow(dead_code)]
            type Tx = crate::store::sqlite::Tx;
            #[allow(dead_code)]
            type Db = sqlx::Sqlite;
            #[allow(dead_code)]
            type Conn = sqlx::SqliteConnection;
            #[allow(dead_code)]
            type Pool = sqlx::SqlitePool;
            /// A row read to be changed: one writer per database, so no lock is needed.
            #[allow(dead_code)]
            const FOR_UPDATE: &str = "";
            /// What makes a read transaction's reads one snapshot: nothing, SQLite takes
            /// it at the first read and holds it to the end.
            #[allow(dead_code)]
            const ONE_SNAPSHOT: &str = "";
            /// An inbox read by thread: SQLite is told the index (left to itself it
            /// walked the agent's whole inbox).
            #[allow(dead_code)]
            const INBOX_BY_THREAD: &str = " INDEXED BY inbox_by_thread";
            /// Unread entries, when no window bounds the walk.
            #[allow(dead_code)]
            const INBOX_UNREAD: &str = " INDEXED BY inbox_unread";
            /// Open tasks, through the partial index (finished ones are never walked).
            #[allow(dead_code)]
            const TASKS_OPEN: &str = " INDEXED BY tasks_open";
            /// A team's messages, newest first.
            #[allow(dead_code)]
            const MESSAGES_BY_TEAM: &str = " INDEXED BY messages_by_team";
            $($item)*
        }

        /// The items above, on PostgreSQL.
        pub(crate) mod postgres {
            #[allow(unused_imports)]
            use super::*;
            #[allow(unused_imports)]
            use crate::store::postgres as engine;
            #[allow(dead_code)]
            type Store = crate::store::postgres::PgStore;
            #[allow(dead_code)]
            type Tx = crate::store::postgres::writer::PgTx;
            #[allow(dead_code)]
            type Db = sqlx::Postgres;
            #[allow(dead_code)]
            type Conn = sqlx::PgConnection;
            #[allow(dead_code)]
            type Pool = sqlx::PgPool;
            /// A row read to be changed: locked until the commit (several nodes write).
            #[allow(dead_code)]
            const FOR_UPDATE: &str = " FOR UPDATE";
            /// What makes a read transaction's reads one snapshot.
            #[allow(dead_code)]
            const ONE_SNAPSHOT: &str = "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY";
            /// An inbox read by thread: PostgreSQL's planner finds the index.
            #[allow(dead_code)]
            const INBOX_BY_THREAD: &str = "";
            #[allow(dead_code)]
            const INBOX_UNREAD: &str = "";
            #[allow(dead_code)]
            const TASKS_OPEN: &str = "";
            #[allow(dead_code)]
            const MESSAGES_BY_TEAM: &str = "";
            $($item)*
        }
    };
}

pub(crate) mod agents;
pub(crate) mod approvals;
pub(crate) mod budgets;
pub(crate) mod callbacks;
pub(crate) mod claims;
pub(crate) mod decided;
pub(crate) mod idempotency;
pub(crate) mod inbox;
pub(crate) mod leases;
pub(crate) mod messages;
pub(crate) mod registry;
pub(crate) mod remotes;
pub(crate) mod search;
pub(crate) mod settings;
pub(crate) mod tasks;
pub(crate) mod teams;
pub(crate) mod webhooks;
