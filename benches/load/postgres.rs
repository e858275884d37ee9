//! SEND_MESSAGE on both engines in one run (issue #16's figure): the same load, in
//! alternating slices, against a server on SQLite (its default durability and
//! `--durability full`, the one that survives a power cut as a PostgreSQL commit does)
//! and a server on PostgreSQL (this machine's, or `SWITCHBOARD_BENCH_POSTGRES`: a URL of
//! a database the bench may create databases from).

use hyper::StatusCode;
use sqlx::{Connection, Executor, PgConnection};

use crate::Opts;
use crate::harness::{Row, ServerProcess, Setup, Side, interleaved};
use crate::scenarios::sends_to_first;

const SLICES: u32 = 6;

/// A fresh database on the benchmark's PostgreSQL; `None` when none answers.
pub async fn database() -> Option<(String, String)> {
    let admin = std::env::var("SWITCHBOARD_BENCH_POSTGRES")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".to_owned());
    let mut conn = match PgConnection::connect(&admin).await {
        Ok(conn) => conn,
        Err(err) => {
            eprintln!("  no PostgreSQL at {admin} ({err}); set SWITCHBOARD_BENCH_POSTGRES");
            return None;
        }
    };
    let name = format!("sb_bench_{}", std::process::id());
    let drop = format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)");
    conn.execute(sqlx::AssertSqlSafe(drop)).await.ok()?;
    let create = format!("CREATE DATABASE {name}");
    conn.execute(sqlx::AssertSqlSafe(create)).await.ok()?;
    let (server, _) = admin.rsplit_once('/')?;
    Some((format!("{server}/{name}"), admin))
}

pub async fn drop_database(admin: &str, url: &str) {
    let Some((_, name)) = url.rsplit_once('/') else {
        return;
    };
    if let Ok(mut conn) = PgConnection::connect(admin).await {
        let sql = format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)");
        let _ = conn.execute(sqlx::AssertSqlSafe(sql)).await;
    }
}

pub async fn postgres(opts: Opts) -> Vec<Row> {
    let Some((url, admin)) = database().await else {
        return Vec::new();
    };
    let servers = [
        ("SQLite (default)", ServerProcess::start(&[])),
        (
            "SQLite, --durability full",
            ServerProcess::start(&["--durability", "full"]),
        ),
        (
            "PostgreSQL",
            ServerProcess::start_on(std::path::Path::new(&url), &[]),
        ),
    ];
    let mut sides = Vec::new();
    for (_, server) in &servers {
        let setup = Setup::new(server);
        let (_, agents) = setup.team("bench", "a", opts.connections + 1, &[]).await;
        let agents: Vec<(String, String)> = agents.into_iter().map(|a| (a.id, a.token)).collect();
        sides.push(Side {
            addr: server.addr,
            expect: StatusCode::CREATED,
            make: sends_to_first(server, agents),
        });
    }
    let sides: [Side; 3] = match sides.try_into() {
        Ok(sides) => sides,
        Err(_) => unreachable!("three servers, three sides"),
    };
    let results = interleaved(&opts, SLICES, &sides).await;
    let rates: Vec<f64> = results.iter().map(|r| r.per_second()).collect();
    let mut rows = Vec::new();
    for (i, ((engine, server), result)) in servers.iter().zip(results).enumerate() {
        let note = match i {
            2 => format!(
                "{:.0}% of SQLite's default, {:.0}% of SQLite's full durability (target ≥ 50%)",
                100.0 * rates[2] / rates[0],
                100.0 * rates[2] / rates[1]
            ),
            _ => String::new(),
        };
        rows.push(Row::from_load(
            "postgres",
            format!("{engine}, {} conns, 1 recipient", opts.connections),
            result,
            server.rss_kib(),
            note,
        ));
    }
    drop(servers);
    drop_database(&admin, &url).await;
    rows
}
