//! `switchboard migrate-db`: a SQLite deployment copied into PostgreSQL, table for
//! table, every key kept, then verified.
//!
//! The copy is one read transaction on the SQLite file (a consistent snapshot, even if
//! a server still writes to it) and one transaction on PostgreSQL: it commits only when
//! every table's row count matches the source's, so a failed or interrupted copy leaves
//! the target as empty as it was. The target's own triggers are off while rows arrive
//! (`DISABLE TRIGGER USER`, inside the transaction: no other session ever sees them
//! off): the counters they keep are copied as they are, and the webhook trigger would
//! otherwise queue every copied history entry a second time.

use std::path::Path;

use futures_util::TryStreamExt;
use sqlx::sqlite::{SqliteConnectOptions, SqliteRow};
use sqlx::{ConnectOptions, Connection, Postgres, QueryBuilder, Row, SqliteConnection};

use super::tables::{Kind, TABLES, Table};
use crate::store::StoreError;

/// PostgreSQL takes at most 65,535 bind parameters per statement.
const MAX_PARAMS: usize = 60_000;
/// Rows per INSERT, at most (fewer for wide tables).
const MAX_ROWS: usize = 1_000;

/// One value on its way across.
enum Value {
    Int(Option<i64>),
    Text(Option<String>),
    Bytes(Option<Vec<u8>>),
    Flag(Option<bool>),
}

/// How many rows of a table were copied (and found on both sides).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Copied {
    pub table: &'static str,
    pub rows: u64,
}

/// Copies the SQLite deployment at `from` into the PostgreSQL database at `to` (migrated
/// first), which must hold no deployment yet. Returns every table's row count, the same
/// on both sides.
pub async fn sqlite_to_postgres(from: &Path, to: &str) -> Result<Vec<Copied>, StoreError> {
    let mut source = open_source(from).await?;
    // A server still writing the file would make the copy a moment's, not the last
    // state's: refused while one serves it.
    let _serving = crate::store::sqlite::lock::take_shared(from)?;
    carries_every_column(&mut source).await?;
    let pool = super::open(to).await?;
    let mut src = source.begin().await?;
    let mut dst = pool.begin().await?;
    for table in TABLES {
        let sql = format!("ALTER TABLE {} DISABLE TRIGGER USER", table.name);
        sqlx::query(sqlx::AssertSqlSafe(sql))
            .execute(&mut *dst)
            .await?;
    }
    // Checked once the tables are locked (the ALTERs above take them): a second copy
    // running at the same time waits here, then finds the first one's rows.
    let held: i64 = sqlx::query_scalar(
        "SELECT (SELECT COUNT(*) FROM teams) + (SELECT COUNT(*) FROM settings)
              + (SELECT COUNT(*) FROM agents)",
    )
    .fetch_one(&mut *dst)
    .await?;
    if held > 0 {
        return Err(StoreError::Copy(
            "the PostgreSQL database already holds a deployment (teams, agents or settings); \
             copy into an empty database"
                .into(),
        ));
    }
    // The migration seeded the counted families with zeros; the source's counts replace them.
    sqlx::query("DELETE FROM row_counts")
        .execute(&mut *dst)
        .await?;
    let mut copied = Vec::with_capacity(TABLES.len());
    for table in TABLES {
        let rows = copy_table(table, &mut src, &mut dst).await?;
        copied.push(Copied {
            table: table.name,
            rows,
        });
    }
    for table in TABLES {
        let sql = format!("ALTER TABLE {} ENABLE TRIGGER USER", table.name);
        sqlx::query(sqlx::AssertSqlSafe(sql))
            .execute(&mut *dst)
            .await?;
    }
    settle(&mut dst).await?;
    verify(&copied, &mut src, &mut dst).await?;
    dst.commit().await?;
    src.rollback().await?;
    Ok(copied)
}

/// The source file, read only, at exactly this binary's SQLite schema.
async fn open_source(from: &Path) -> Result<SqliteConnection, StoreError> {
    if !from.is_file() {
        return Err(StoreError::Copy(format!(
            "{} is not a file (give the SQLite database `switchboard serve --database` used)",
            from.display()
        )));
    }
    let mut conn = SqliteConnectOptions::new()
        .filename(from)
        .read_only(true)
        .connect()
        .await?;
    let migrated: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = '_sqlx_migrations'",
    )
    .fetch_one(&mut conn)
    .await?;
    if migrated == 0 {
        return Err(StoreError::NotOurs {
            path: from.to_path_buf(),
            reason: "it has no Switchboard migration history".into(),
        });
    }
    let version: Option<i64> =
        sqlx::query_scalar("SELECT MAX(version) FROM _sqlx_migrations WHERE success")
            .fetch_one(&mut conn)
            .await?;
    let ours = crate::store::sqlite::MIGRATOR
        .iter()
        .map(|m| m.version)
        .max()
        .unwrap_or(0);
    match version.unwrap_or(0) {
        v if v < ours => Err(StoreError::Copy(format!(
            "{} is at migration {v}, older than this binary's {ours}: start `switchboard serve \
             --database {}` once to bring it up to date, stop it, then copy",
            from.display(),
            from.display()
        ))),
        v if v > ours => Err(StoreError::Newer {
            database: v,
            binary: ours,
        }),
        _ => Ok(conn),
    }
}

/// Refuses a source with a table or column [`TABLES`] does not name: it would be left
/// behind without a word. The source is at this binary's schema, so a refusal here is a
/// migration that forgot the copy (the migrate-db test catches it first). The search
/// index (`messages_fts` and its shadow tables) is not copied: PostgreSQL builds its own
/// from the messages (a generated column).
async fn carries_every_column(source: &mut SqliteConnection) -> Result<(), StoreError> {
    let rows = sqlx::query(
        "SELECT m.name, p.name FROM sqlite_master m, pragma_table_info(m.name) p
         WHERE m.type = 'table' AND m.name NOT LIKE 'sqlite_%' AND m.name <> '_sqlx_migrations'
           AND m.name NOT LIKE 'messages_fts%'
         ORDER BY m.name, p.cid",
    )
    .fetch_all(&mut *source)
    .await?;
    let mut missing = Vec::new();
    for row in rows {
        let (table, column): (String, String) = (row.try_get(0)?, row.try_get(1)?);
        let known = TABLES
            .iter()
            .find(|t| t.name == table)
            .is_some_and(|t| t.columns.iter().any(|(name, _)| *name == column));
        if !known {
            missing.push(format!("{table}.{column}"));
        }
    }
    if missing.is_empty() {
        return Ok(());
    }
    Err(StoreError::Copy(format!(
        "this binary's copy does not carry {} of the SQLite schema; nothing was copied",
        missing.join(", ")
    )))
}

/// Streams one table across in multi-row INSERTs; returns how many rows went.
async fn copy_table(
    table: &Table,
    src: &mut SqliteConnection,
    dst: &mut sqlx::PgConnection,
) -> Result<u64, StoreError> {
    let names: Vec<&str> = table.columns.iter().map(|(name, _)| *name).collect();
    let select = format!(
        "SELECT {} FROM {} ORDER BY {}",
        names.join(", "),
        table.name,
        table.order
    );
    let insert = format!(
        "INSERT INTO {} ({}) ",
        table.name,
        names
            .iter()
            .map(|n| format!("\"{n}\""))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let per_insert = (MAX_PARAMS / table.columns.len()).min(MAX_ROWS);
    let mut rows = sqlx::query(sqlx::AssertSqlSafe(select)).fetch(&mut *src);
    let mut chunk: Vec<Vec<Value>> = Vec::with_capacity(per_insert);
    let mut total = 0u64;
    while let Some(row) = rows.try_next().await? {
        chunk.push(values(table, &row)?);
        if chunk.len() == per_insert {
            total += insert_rows(&insert, &mut chunk, dst).await?;
        }
    }
    total += insert_rows(&insert, &mut chunk, dst).await?;
    Ok(total)
}

/// A source row's values, by the table's column kinds.
fn values(table: &Table, row: &SqliteRow) -> Result<Vec<Value>, StoreError> {
    table
        .columns
        .iter()
        .enumerate()
        .map(|(i, (_, kind))| {
            Ok(match kind {
                Kind::Int => Value::Int(row.try_get(i)?),
                Kind::Text => Value::Text(row.try_get(i)?),
                Kind::Bytes => Value::Bytes(row.try_get(i)?),
                Kind::Flag => Value::Flag(row.try_get::<Option<i64>, _>(i)?.map(|v| v != 0)),
            })
        })
        .collect()
}

/// Inserts the rows of `chunk` (emptying it) in one statement.
async fn insert_rows(
    insert: &str,
    chunk: &mut Vec<Vec<Value>>,
    dst: &mut sqlx::PgConnection,
) -> Result<u64, StoreError> {
    if chunk.is_empty() {
        return Ok(0);
    }
    let mut query: QueryBuilder<Postgres> = QueryBuilder::new(insert);
    query.push_values(chunk.drain(..), |mut out, row| {
        for value in row {
            match value {
                Value::Int(v) => out.push_bind(v),
                Value::Text(v) => out.push_bind(v),
                Value::Bytes(v) => out.push_bind(v),
                Value::Flag(v) => out.push_bind(v),
            };
        }
    });
    let done = query.build().execute(&mut *dst).await?;
    Ok(done.rows_affected())
}

/// What the copy cannot carry as rows: identities moved past the copied keys. (Each
/// recipient's seq counter is a row: SQLite keeps it past every seq held or
/// acknowledged since migration 0018, so it is copied as it is.)
async fn settle(dst: &mut sqlx::PgConnection) -> Result<(), StoreError> {
    for table in TABLES.iter().filter(|t| t.identity) {
        let sql = format!(
            "SELECT setval(pg_get_serial_sequence('{0}', 'pk'),
                           COALESCE((SELECT MAX(pk) FROM {0}), 0) + 1, false)",
            table.name
        );
        sqlx::query(sqlx::AssertSqlSafe(sql))
            .execute(&mut *dst)
            .await?;
    }
    Ok(())
}

/// Counts every table on both sides (the source in its snapshot, the target in the
/// copy's transaction); any difference fails the copy.
async fn verify(
    copied: &[Copied],
    src: &mut SqliteConnection,
    dst: &mut sqlx::PgConnection,
) -> Result<(), StoreError> {
    for entry in copied {
        let sql = format!("SELECT COUNT(*) FROM {}", entry.table);
        let source: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(sql.clone()))
            .fetch_one(&mut *src)
            .await?;
        let target: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
            .fetch_one(&mut *dst)
            .await?;
        if source != target || u64::try_from(target).ok() != Some(entry.rows) {
            return Err(StoreError::Copy(format!(
                "{}: {source} rows in SQLite, {target} in PostgreSQL after copying {}",
                entry.table, entry.rows
            )));
        }
    }
    Ok(())
}
