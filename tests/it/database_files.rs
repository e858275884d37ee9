//! What the server does with a `--database` file that is not its own.

use std::process::{Command, Stdio};

use crate::support::ADMIN;

/// A `--database` that names a damaged file, a file that is no database, or another
/// program's SQLite database is refused at start with a clear error, and the file is
/// left byte for byte as it was (no WAL switch, no tables of ours added).
#[tokio::test]
async fn a_file_that_is_not_ours_is_refused_and_left_untouched() {
    use sqlx::{ConnectOptions, Executor};
    let dir = tempfile::tempdir().expect("tempdir");
    let damaged = dir.path().join("damaged.db");
    let noise: Vec<u8> = (0..50_000u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    std::fs::write(&damaged, noise).expect("write");
    let text = dir.path().join("notes.db");
    std::fs::write(&text, "shopping list: milk, eggs\n").expect("write");
    let foreign = dir.path().join("crm.db");
    {
        let mut conn = sqlx::sqlite::SqliteConnectOptions::new()
            .filename(&foreign)
            .create_if_missing(true)
            .connect()
            .await
            .expect("create");
        conn.execute("CREATE TABLE customers (id INTEGER, name TEXT); INSERT INTO customers VALUES (1, 'Ada')")
            .await
            .expect("fill");
    }
    for (file, why) in [
        (&damaged, "SQLite cannot read it"),
        (&text, "SQLite cannot read it"),
        (&foreign, "another program's database (tables: customers)"),
    ] {
        let before = std::fs::read(file).expect("read");
        let mut child = Command::new(env!("CARGO_BIN_EXE_switchboard"))
            .args([
                "serve",
                "--listen",
                "127.0.0.1:0",
                "--admin-token",
                ADMIN,
                "--database",
            ])
            .arg(file)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        let status = loop {
            if let Some(status) = child.try_wait().expect("wait") {
                break status;
            }
            if std::time::Instant::now() > deadline {
                let _ = child.kill();
                panic!("the server started on {}", file.display());
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        };
        let mut stderr = String::new();
        std::io::Read::read_to_string(&mut child.stderr.take().expect("stderr"), &mut stderr)
            .expect("stderr");
        assert!(!status.success(), "{}", file.display());
        assert!(stderr.contains("is not a Switchboard database"), "{stderr}");
        assert!(stderr.contains(why), "{stderr}");
        assert!(stderr.contains("left untouched"), "{stderr}");
        assert_eq!(
            std::fs::read(file).expect("read"),
            before,
            "{} changed",
            file.display()
        );
        let wal = file.with_extension("db-wal");
        assert!(!wal.exists(), "{} got a WAL", file.display());
    }
}
