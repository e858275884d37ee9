//! `nodes_checker`: the several-nodes consistency checker (`tests/it/nodes/checker`) run
//! long, as a row of the table — only when named, like the soak:
//! `cargo bench --bench load -- nodes_checker --minutes 10`. It runs the checker test with
//! `CHECKER_SECONDS` set from `--minutes`, on this machine's PostgreSQL (or
//! `SWITCHBOARD_BENCH_POSTGRES`), restarting PostgreSQL in every fault round when
//! `pg_lsclusters` finds a cluster this user may restart (or as `CHECKER_PG_RESTART` says),
//! and reports the checker's own line: operations, faults, live connections, callbacks and
//! violations (which must be 0).

use std::process::Command;

use crate::Opts;
use crate::harness::Row;

pub async fn nodes_checker(opts: Opts) -> Vec<Row> {
    let postgres = std::env::var("SWITCHBOARD_BENCH_POSTGRES")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".to_owned());
    let mut test = Command::new(env!("CARGO"));
    test.args(["test", "--locked", "--test", "it", "--"])
        .args([
            "--exact",
            "nodes::checker::three_nodes_under_faults_keep_every_promise",
        ])
        .arg("--nocapture")
        .env("SWITCHBOARD_TEST_POSTGRES", postgres)
        .env("CHECKER_SECONDS", (opts.minutes * 60).to_string());
    if std::env::var_os("CHECKER_PG_RESTART").is_none()
        && let Some(restart) = restart_command()
    {
        test.env("CHECKER_PG_RESTART", restart);
    }
    let started = std::time::Instant::now();
    let out = tokio::task::spawn_blocking(move || test.output())
        .await
        .expect("the checker runs")
        .expect("cargo runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let line = stderr
        .lines()
        .find(|l| l.starts_with("checker: "))
        .unwrap_or("no checker line (see the test's output)")
        .trim_start_matches("checker: ")
        .to_owned();
    if !out.status.success() {
        eprintln!("{stderr}");
    }
    vec![Row {
        scenario: "nodes_checker".into(),
        setting: format!("{} min, 3 nodes", opts.minutes),
        rate: format!("{:.0} s", started.elapsed().as_secs_f64()),
        p50: "—".into(),
        p99: "—".into(),
        rss: "—".into(),
        note: if out.status.success() {
            line
        } else {
            format!("FAILED: {line}")
        },
    }]
}

/// `pg_ctlcluster <version> <name> restart` for the first online cluster, if any.
fn restart_command() -> Option<String> {
    let out = Command::new("pg_lsclusters").arg("-h").output().ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let online = text
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|f| f.get(3) == Some(&"online"))?;
    Some(format!("pg_ctlcluster {} {} restart", online[0], online[1]))
}
