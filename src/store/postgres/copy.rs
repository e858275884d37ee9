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

use crate::store::StoreError;

/// How a column is read from SQLite and written to PostgreSQL.
#[derive(Clone, Copy)]
enum Kind {
    Int,
    Text,
    Bytes,
    /// INTEGER 0/1 in SQLite, BOOLEAN here.
    Flag,
}

use Kind::{Bytes, Flag, Int, Text};

/// One table to copy: its columns, the order rows are read in, whether its `pk` is an
/// identity (moved past the copied keys afterwards).
struct Table {
    name: &'static str,
    order: &'static str,
    identity: bool,
    columns: &'static [(&'static str, Kind)],
}

/// Every table, parents before children (the foreign keys stay checked).
const TABLES: &[Table] = &[
    Table {
        name: "settings",
        order: "key",
        identity: false,
        columns: &[("key", Text), ("value", Bytes)],
    },
    Table {
        name: "teams",
        order: "pk",
        identity: true,
        columns: &[
            ("pk", Int),
            ("team_id", Text),
            ("name", Text),
            ("key_id", Text),
            ("key_hash", Bytes),
            ("communication_enabled", Flag),
            ("created_at", Int),
            ("updated_at", Int),
            ("retain_read_s", Int),
            ("retain_unread_s", Int),
            ("retain_tasks_s", Int),
            ("stomp_auto_register", Flag),
        ],
    },
    Table {
        name: "team_secrets",
        order: "team_pk",
        identity: false,
        columns: &[("team_pk", Int), ("secret", Text), ("rotated_at", Int)],
    },
    Table {
        name: "agents",
        order: "pk",
        identity: true,
        columns: &[
            ("pk", Int),
            ("team_pk", Int),
            ("agent_id", Text),
            ("role", Text),
            ("capabilities", Text),
            ("address", Text),
            ("status", Text),
            ("communication_enabled", Flag),
            ("token_id", Text),
            ("token_hash", Bytes),
            ("registered_at", Int),
            ("updated_at", Int),
            ("removed_at", Int),
            ("acked_seq", Int),
            ("last_seen_at", Int),
            ("addresses", Text),
            ("watch", Text),
        ],
    },
    Table {
        name: "inbox_counts",
        order: "agent_pk",
        identity: false,
        columns: &[
            ("agent_pk", Int),
            ("total", Int),
            ("unread", Int),
            ("sent", Int),
            ("responded", Int),
            ("quiet_unread", Int),
            ("quiet_total", Int),
            ("last_seq", Int),
        ],
    },
    Table {
        name: "queue_cursors",
        order: "agent_pk, queue",
        identity: false,
        columns: &[("agent_pk", Int), ("queue", Text), ("acked_seq", Int)],
    },
    Table {
        name: "a2a_remotes",
        order: "agent_pk",
        identity: false,
        columns: &[
            ("agent_pk", Int),
            ("team_pk", Int),
            ("card_url", Text),
            ("interface_url", Text),
            ("authorization", Text),
            ("card", Text),
            ("refreshed_at", Int),
            ("created_at", Int),
        ],
    },
    Table {
        name: "messages",
        order: "pk",
        identity: true,
        columns: &[
            ("pk", Int),
            ("message_id", Text),
            ("team_pk", Int),
            ("kind", Text),
            ("sender_pk", Int),
            ("sender_role", Text),
            ("message_type", Text),
            ("priority", Text),
            ("content", Text),
            ("requires_response", Flag),
            ("response_deadline", Int),
            ("context_reference", Text),
            ("thread_id", Text),
            ("in_reply_to", Text),
            ("response_status", Text),
            ("recipient_ids", Text),
            ("created_at", Int),
            ("cause_by", Text),
            ("send_to", Text),
            ("instruct_content", Text),
            ("via", Text),
            ("route", Text),
        ],
    },
    Table {
        name: "inbox",
        order: "agent_pk, seq",
        identity: false,
        columns: &[
            ("agent_pk", Int),
            ("seq", Int),
            ("message_pk", Int),
            ("sender_pk", Int),
            ("kind", Text),
            ("message_type", Text),
            ("priority", Text),
            ("created_at", Int),
            ("read_at", Int),
            ("news", Flag),
            ("cause_by", Text),
            ("thread_id", Text),
        ],
    },
    Table {
        name: "responses",
        order: "original_pk, response_pk",
        identity: false,
        columns: &[
            ("original_pk", Int),
            ("response_pk", Int),
            ("responder_pk", Int),
            ("status", Text),
            ("created_at", Int),
        ],
    },
    Table {
        name: "idempotency_keys",
        order: "agent_pk, key",
        identity: false,
        columns: &[
            ("agent_pk", Int),
            ("key", Text),
            ("operation", Text),
            ("request_hash", Bytes),
            ("answer", Text),
            ("created_at", Int),
        ],
    },
    Table {
        name: "tasks",
        order: "pk",
        identity: true,
        columns: &[
            ("pk", Int),
            ("team_pk", Int),
            ("task_id", Text),
            ("description", Text),
            ("data", Text),
            ("originator_pk", Int),
            ("assignee_pk", Int),
            ("callback_url", Text),
            ("priority", Text),
            ("required_capabilities", Text),
            ("target_agent_id", Text),
            ("status", Text),
            ("clarification_id", Text),
            ("question", Text),
            ("context", Text),
            ("result_data", Text),
            ("callback_delivery", Text),
            ("version", Int),
            ("created_at", Int),
            ("updated_at", Int),
        ],
    },
    Table {
        name: "task_assignees",
        order: "agent_pk, task_pk",
        identity: false,
        columns: &[("task_pk", Int), ("agent_pk", Int)],
    },
    Table {
        name: "task_events",
        order: "task_pk, seq",
        identity: false,
        columns: &[
            ("task_pk", Int),
            ("seq", Int),
            ("kind", Text),
            ("actor_pk", Int),
            ("status", Text),
            ("data", Text),
            ("created_at", Int),
        ],
    },
    Table {
        name: "task_webhooks",
        order: "pk",
        identity: true,
        columns: &[
            ("pk", Int),
            ("task_pk", Int),
            ("team_pk", Int),
            ("webhook_id", Text),
            ("format", Text),
            ("url", Text),
            ("token", Text),
            ("auth_scheme", Text),
            ("auth_credentials", Text),
            ("created_at", Int),
        ],
    },
    Table {
        name: "callbacks",
        order: "pk",
        identity: true,
        columns: &[
            ("pk", Int),
            ("task_pk", Int),
            ("team_pk", Int),
            ("url", Text),
            ("event_seq", Int),
            ("body", Text),
            ("state", Text),
            ("attempts", Int),
            ("next_attempt_at", Int),
            ("last_error", Text),
            ("last_status", Int),
            ("created_at", Int),
            ("finished_at", Int),
            ("webhook_pk", Int),
        ],
    },
    Table {
        name: "row_counts",
        order: "family",
        identity: false,
        columns: &[("family", Text), ("n", Int)],
    },
];

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
    let pool = super::open(to).await?;
    let mut src = source.begin().await?;
    let mut dst = pool.begin().await?;
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
    for table in TABLES {
        let sql = format!("ALTER TABLE {} DISABLE TRIGGER USER", table.name);
        sqlx::query(sqlx::AssertSqlSafe(sql))
            .execute(&mut *dst)
            .await?;
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
                Int => Value::Int(row.try_get(i)?),
                Text => Value::Text(row.try_get(i)?),
                Bytes => Value::Bytes(row.try_get(i)?),
                Flag => Value::Flag(row.try_get::<Option<i64>, _>(i)?.map(|v| v != 0)),
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

/// What the copy cannot carry as rows: identities moved past the copied keys, and each
/// recipient's seq counter past every seq it has held or acknowledged.
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
    // The source's counter, and never behind a cursor a client holds: an inbox that
    // retention emptied must not hand out numbers its agent already acknowledged.
    sqlx::query(
        "UPDATE inbox_counts c
         SET last_seq = GREATEST(
             c.last_seq,
             a.acked_seq,
             COALESCE((SELECT MAX(i.seq) FROM inbox i WHERE i.agent_pk = c.agent_pk), 0),
             COALESCE((SELECT MAX(q.acked_seq) FROM queue_cursors q
                       WHERE q.agent_pk = c.agent_pk), 0))
         FROM agents a WHERE a.pk = c.agent_pk",
    )
    .execute(&mut *dst)
    .await?;
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
