//! The bound and the cuts, on a real SQLite file without the server.

use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode};
use sqlx::{ConnectOptions, Row};

use super::{QUICK_RESTART_FRAMES, WalBound, WalIndex, WalWatch, cut_step};

/// A connection in WAL mode that never checkpoints on its own, as the server's.
async fn open(db: &std::path::Path) -> sqlx::SqliteConnection {
    open_paged(db, 4096).await
}

/// As [`open`], for a new file with pages of `page` bytes.
async fn open_paged(db: &std::path::Path, page: u32) -> sqlx::SqliteConnection {
    SqliteConnectOptions::new()
        .filename(db)
        .create_if_missing(true)
        .page_size(page)
        .journal_mode(SqliteJournalMode::Wal)
        .pragma("wal_autocheckpoint", "0")
        .connect()
        .await
        .expect("open")
}

/// The writer's loop without the server: batches of 1 to 16 jobs, each job a row of
/// a few pages, with no passive checkpoint copying the log meanwhile (as when the
/// checkpoints fall behind a busy writer), so the restart at half the bound never
/// finds the log copied and only the bound's own restart keeps it. The file never
/// passes the bound after any batch, with SQLite's 4 KiB pages and with the 1 KiB
/// pages the server creates (where the batch that crossed the bound used to pass it
/// by up to its own size). Nothing here depends on the machine's speed.
#[tokio::test]
async fn the_bound_holds_after_every_batch_whatever_the_page_size() {
    for page in [1024u32, 4096] {
        let dir = tempfile::tempdir().expect("tmp");
        let db = dir.path().join("bound.db");
        let mut conn = open_paged(&db, page).await;
        sqlx::raw_sql("CREATE TABLE t (x BLOB)")
            .execute(&mut conn)
            .await
            .expect("table");
        // Well past the frames a quick restart may leave uncopied, at any page size.
        let max_bytes = 4 * QUICK_RESTART_FRAMES as u64 * u64::from(page);
        let bound = WalBound {
            database: db.clone(),
            file: dir.path().join("bound.db-wal"),
            index: dir.path().join("bound.db-shm"),
            max_bytes,
            busy_timeout: std::time::Duration::from_secs(5),
        };
        let mut watch = WalWatch::new(bound.clone());
        let (mut peak, mut written) = (0, 0);
        let mut batch = 0usize;
        while written < 3 * max_bytes {
            let jobs = 1 + batch % 16;
            watch.before_batch(&mut conn, jobs).await;
            let mut sql = String::from("BEGIN IMMEDIATE;");
            for _ in 0..jobs {
                sql.push_str("INSERT INTO t VALUES (randomblob(1500 + abs(random() % 2500)));");
            }
            sql.push_str("COMMIT;");
            sqlx::raw_sql(sqlx::AssertSqlSafe(sql))
                .execute(&mut conn)
                .await
                .expect("batch");
            let size = bound.size();
            assert!(
                size <= max_bytes,
                "{page}-byte pages: batch {batch} of {jobs} jobs left the WAL at {size} \
                 bytes, over its bound {max_bytes}"
            );
            watch.after_batch(&mut conn).await;
            peak = peak.max(size);
            written += jobs as u64 * 2750;
            batch += 1;
        }
        // The bound was approached, not avoided by restarting early.
        assert!(peak > max_bytes * 3 / 4, "{page}: the WAL peaked at {peak}");
    }
}

/// A passive checkpoint; with no reader, it copies the whole log.
async fn copy_all(conn: &mut sqlx::SqliteConnection) {
    sqlx::query("PRAGMA wal_checkpoint(PASSIVE)")
        .fetch_one(conn)
        .await
        .expect("copied");
}

/// The figures read from the `-shm` file are SQLite's own: the frames a checkpoint
/// reports in the log, and after a passive checkpoint the frames it copied.
#[tokio::test]
async fn the_wal_index_header_reads_as_sqlite_reports_it() {
    let dir = tempfile::tempdir().expect("tmp");
    let db = dir.path().join("index.db");
    let mut conn = open(&db).await;
    sqlx::raw_sql("CREATE TABLE t (x BLOB); INSERT INTO t VALUES (zeroblob(50000));")
        .execute(&mut conn)
        .await
        .expect("write");
    let shm = std::fs::File::open(dir.path().join("index.db-shm")).expect("shm");
    let before = WalIndex::read(&shm).expect("header");
    assert_eq!(before.frame_bytes, 4096 + 24);
    assert!(before.frames > 10, "{before:?}");
    assert_eq!(before.copied, 0);
    let row = sqlx::query("PRAGMA wal_checkpoint(PASSIVE)")
        .fetch_one(&mut conn)
        .await
        .expect("checkpoint");
    let (log, copied): (i64, i64) = (row.get(1), row.get(2));
    let after = WalIndex::read(&shm).expect("header");
    assert_eq!(i64::from(after.frames), log);
    assert_eq!(i64::from(after.copied), copied);
    assert_eq!(after.backlog(), 0);
    assert_eq!(after.log_bytes(), log as u64 * 4120);
}

/// A fully copied log's file is cut one step at a time, each cut by SQLite's own
/// commit, down to nothing; what was written stays, and writes go on after it.
#[tokio::test]
async fn the_log_file_is_cut_one_step_at_a_time() {
    let dir = tempfile::tempdir().expect("tmp");
    let db = dir.path().join("cut.db");
    let mut conn = open(&db).await;
    sqlx::raw_sql("CREATE TABLE t (x BLOB)")
        .execute(&mut conn)
        .await
        .expect("table");
    for _ in 0..40 {
        sqlx::raw_sql("INSERT INTO t VALUES (zeroblob(100000))")
            .execute(&mut conn)
            .await
            .expect("write");
    }
    copy_all(&mut conn).await;
    let bound = WalBound {
        database: db.clone(),
        file: dir.path().join("cut.db-wal"),
        index: dir.path().join("cut.db-shm"),
        max_bytes: 8 * 1024 * 1024,
        busy_timeout: std::time::Duration::ZERO,
    };
    let step = bound.cut_step();
    assert_eq!(step, 1024 * 1024);
    let mut size = bound.size();
    assert!(size > 3 * step, "the log holds {size} bytes");
    let mut cuts = 0;
    while size > 0 {
        // The server cuts only a fully copied log, as here.
        copy_all(&mut conn).await;
        cut_step(&mut conn, &bound, size, 0).await.expect("cut");
        let after = bound.size();
        assert_eq!(after, size.saturating_sub(step), "one step from {size}");
        size = after;
        cuts += 1;
    }
    assert!(cuts >= 4, "{cuts} cuts");
    // Towards a limit above nothing, the last cut stops at it.
    sqlx::raw_sql("INSERT INTO t VALUES (zeroblob(3000000))")
        .execute(&mut conn)
        .await
        .expect("write");
    copy_all(&mut conn).await;
    let limit = bound.size() - step / 2;
    cut_step(&mut conn, &bound, bound.size(), limit)
        .await
        .expect("cut");
    assert_eq!(bound.size(), limit);
    let rows: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM t WHERE length(x) > 0")
        .fetch_one(&mut conn)
        .await
        .expect("read");
    assert_eq!(rows, 41);
}
