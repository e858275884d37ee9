//! The suite on both engines from one `cargo test`: this test runs the test binary
//! again, every test on PostgreSQL (`SWITCHBOARD_TEST_ENGINE=postgres`: each server a
//! database of its own), so the README's one test command proves both. Without a
//! PostgreSQL it says so and passes, as the other PostgreSQL tests do; with
//! `SWITCHBOARD_TEST_POSTGRES` set (CI) it fails instead.

use std::io::Write;
use std::process::Command;

/// Tests whose subject is SQLite's own (its file, its WAL, a copy from it) or no server
/// at all: they would run on SQLite again.
const SQLITE_OR_STATIC: &[&str] = &[
    "engines::",
    "nodes::",
    "storage::",
    // Runs its stories on both engines itself.
    "store_contract::",
    "large_inbox::",
    "migrate_db::",
    "database_files::",
    "first_start::",
    "layout::",
    "docs::",
    "guide::",
    "readme::",
    "deploy::",
    "differential::",
    // Runs one corpus on both engines itself.
    "search::differential::",
    // Runs on PostgreSQL itself: what it checks cannot happen on SQLite.
    "traffic::a_follower_on_postgresql_misses_no_message_committed_out_of_order",
    // Drives the core on a SQLite file of its own.
    "feed::",
    // How two more frameworks read a tool result: the other adapters' test runs here.
    "mcp::adapters::crewai_and_adk_adapters_hand_the_model_the_whole_answer",
];

#[test]
fn every_test_passes_on_postgresql_too() {
    if crate::support::on_postgres() {
        // This is the inner run: the outer one is the test.
        return;
    }
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let Some(probe) = runtime.block_on(crate::pg::database("engines")) else {
        return;
    };
    runtime.block_on(probe.remove());
    let mut run = Command::new(std::env::current_exe().expect("this test binary"));
    run.env("SWITCHBOARD_TEST_ENGINE", "postgres")
        .args(["--test-threads", "2"]);
    for skip in SQLITE_OR_STATIC {
        run.args(["--skip", skip]);
    }
    let out = run.output().expect("the test binary runs again");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let summary = stdout
        .lines()
        .filter(|l| l.starts_with("test result") || l.starts_with("    "))
        .collect::<Vec<_>>()
        .join("\n");
    // Straight to the terminal, like the SKIPPED notes: a passing test's prints are
    // kept by the harness.
    let _ = writeln!(std::io::stderr(), "\non PostgreSQL: {summary}");
    assert!(
        out.status.success(),
        "the suite fails on PostgreSQL:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
