//! Table code whose SQL is the same on both engines, written once.
//!
//! Each file here is one table's reads and writes inside [`for_each_engine!`], which
//! compiles them once per engine, with `Db`, `Conn` and `Pool` naming that engine's sqlx
//! types: `sql::settings::sqlite::get` and `sql::settings::postgres::get` are the same
//! source. Placeholders are written `$1`, `$2`, … (PostgreSQL's; sqlx binds SQLite's
//! `$N` by number too). What really differs between the engines — numbering, locks,
//! notifications, the batch insert path — stays in each engine's folder, named for its
//! mechanism (issue 64; `docs/architecture.md`, "Store").

/// Compiles the items given once per engine, as `mod sqlite` and `mod postgres`.
macro_rules! for_each_engine {
    ($($item:item)*) => {
        /// The items above, on SQLite.
        pub(crate) mod sqlite {
            #[allow(unused_imports)]
            use super::*;
            #[allow(dead_code)]
            type Db = sqlx::Sqlite;
            #[allow(dead_code)]
            type Conn = sqlx::SqliteConnection;
            #[allow(dead_code)]
            type Pool = sqlx::SqlitePool;
            $($item)*
        }

        /// The items above, on PostgreSQL.
        pub(crate) mod postgres {
            #[allow(unused_imports)]
            use super::*;
            #[allow(dead_code)]
            type Db = sqlx::Postgres;
            #[allow(dead_code)]
            type Conn = sqlx::PgConnection;
            #[allow(dead_code)]
            type Pool = sqlx::PgPool;
            $($item)*
        }
    };
}

pub(crate) mod budgets;
pub(crate) mod idempotency;
pub(crate) mod remotes;
pub(crate) mod settings;
