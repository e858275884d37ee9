//! PostgreSQL for the tests: a database of its own per test, on the server that
//! `SWITCHBOARD_TEST_POSTGRES` names (a URL of a database the tests may create
//! databases from; `.ci/run` sets it and checks that the server answers).
//!
//! Without the variable the tests try this machine's usual server
//! (`postgres://postgres@127.0.0.1:5432/postgres`); when nothing answers there, a test
//! that needs PostgreSQL says so on the terminal and passes without running — with the
//! variable set, it fails instead: CI never skips them.

use std::io::Write;
use std::sync::atomic::{AtomicU32, Ordering};

use sqlx::postgres::PgConnection;
use sqlx::{Connection, Executor};

const DEFAULT: &str = "postgres://postgres@127.0.0.1:5432/postgres";

/// A database created for one test.
pub struct PgDatabase {
    pub url: String,
    admin: String,
    name: String,
}

static NEXT: AtomicU32 = AtomicU32::new(0);

/// A fresh, empty database, or `None` (with a note on the terminal) when no PostgreSQL
/// was asked for and none answers.
pub async fn database(test: &str) -> Option<PgDatabase> {
    let (admin, required) = match std::env::var("SWITCHBOARD_TEST_POSTGRES") {
        Ok(url) if !url.is_empty() => (url, true),
        _ => (DEFAULT.to_owned(), false),
    };
    let mut conn = match PgConnection::connect(&admin).await {
        Ok(conn) => conn,
        Err(err) if !required => {
            // Straight to the terminal: the test harness keeps `eprintln!` of a
            // passing test to itself.
            let _ = writeln!(
                std::io::stderr(),
                "\nSKIPPED {test}: no PostgreSQL at {admin} ({err}); set \
                 SWITCHBOARD_TEST_POSTGRES to run the PostgreSQL tests"
            );
            return None;
        }
        Err(err) => panic!("SWITCHBOARD_TEST_POSTGRES={admin} does not answer: {err}"),
    };
    let name = format!(
        "sb_it_{}_{}_{}",
        test,
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    );
    conn.execute(sqlx::AssertSqlSafe(format!(
        "DROP DATABASE IF EXISTS {name}"
    )))
    .await
    .expect("drop an old test database");
    conn.execute(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
        .await
        .expect("create a test database");
    let url = match admin.rsplit_once('/') {
        Some((server, _)) => format!("{server}/{name}"),
        None => panic!("SWITCHBOARD_TEST_POSTGRES must end in /<database>: {admin}"),
    };
    Some(PgDatabase { url, admin, name })
}

/// A connection to the server the test databases are made on (to act on one of them
/// from outside, as an operator would).
pub async fn admin() -> PgConnection {
    let admin = match std::env::var("SWITCHBOARD_TEST_POSTGRES") {
        Ok(url) if !url.is_empty() => url,
        _ => DEFAULT.to_owned(),
    };
    PgConnection::connect(&admin)
        .await
        .expect("connect to PostgreSQL")
}

impl PgDatabase {
    /// A connection to this database.
    pub async fn connect(&self) -> PgConnection {
        PgConnection::connect(&self.url)
            .await
            .expect("connect to the test database")
    }

    /// Removes the database (its connections are closed first).
    pub async fn remove(self) {
        let mut conn = PgConnection::connect(&self.admin)
            .await
            .expect("connect to PostgreSQL");
        conn.execute(sqlx::AssertSqlSafe(format!(
            "DROP DATABASE IF EXISTS {} WITH (FORCE)",
            self.name
        )))
        .await
        .expect("drop the test database");
    }
}
