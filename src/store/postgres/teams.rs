//! Teams on PostgreSQL.

use rand::RngCore;
use sqlx::AssertSqlSafe;
use sqlx::postgres::{PgConnection, PgPool};
use switchboard_types::ids::TeamPk;

use crate::model::TeamRecord;
use crate::store::StoreError;
use crate::store::columns::{TEAM_COLUMNS, budgets, loop_guard, team};

/// A retention for its column (the type caps it far below `i64::MAX`).
fn retention(seconds: Option<u64>) -> Option<i64> {
    seconds.map(|s| i64::try_from(s).unwrap_or(i64::MAX))
}

/// Inserts a team with its callback secret (made here: PostgreSQL has no cryptographic
/// random bytes without an extension; SQLite's trigger makes the same `whsec_` + 64 hex
/// digits). [`StoreError::Conflict`] when the id is taken.
pub(super) async fn insert(conn: &mut PgConnection, t: &TeamRecord) -> Result<TeamPk, StoreError> {
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    let secret = format!("whsec_{}", hex::encode(bytes));
    let pk: i64 = sqlx::query_scalar(
        "WITH t AS (
             INSERT INTO teams (team_id, name, key_id, key_hash, communication_enabled,
                                created_at, updated_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING pk, created_at),
         s AS (INSERT INTO team_secrets (team_pk, secret, rotated_at)
               SELECT pk, $8, created_at FROM t)
         SELECT pk FROM t",
    )
    .bind(&*t.team_id)
    .bind(&t.name)
    .bind(&t.key_id)
    .bind(t.key_hash.as_slice())
    .bind(t.communication_enabled)
    .bind(t.created_at.micros())
    .bind(t.updated_at.micros())
    .bind(secret)
    .fetch_one(conn)
    .await?;
    Ok(TeamPk(pk))
}

/// One team, inside the writer's transaction, locked until it commits: concurrent
/// patches from several nodes apply one after the other.
pub(super) async fn get(conn: &mut PgConnection, pk: TeamPk) -> Result<TeamRecord, StoreError> {
    let sql = format!("SELECT {TEAM_COLUMNS} FROM teams WHERE pk = $1 FOR UPDATE");
    team(
        &sqlx::query(AssertSqlSafe(sql))
            .bind(pk.0)
            .fetch_one(conn)
            .await?,
    )
}

pub(super) async fn update(conn: &mut PgConnection, t: &TeamRecord) -> Result<(), StoreError> {
    sqlx::query(
        "UPDATE teams SET name = $1, communication_enabled = $2, stomp_auto_register = $3,
           retain_read_s = $4, retain_unread_s = $5, retain_tasks_s = $6, updated_at = $7,
           loop_guard = $9, budgets = $10, stomp_default_context = $11
         WHERE pk = $8",
    )
    .bind(&t.name)
    .bind(t.communication_enabled)
    .bind(t.stomp_auto_register)
    .bind(retention(t.retention.read_messages_seconds))
    .bind(retention(t.retention.unread_messages_seconds))
    .bind(retention(t.retention.finished_tasks_seconds))
    .bind(t.updated_at.micros())
    .bind(t.pk.0)
    .bind(loop_guard(t)?)
    .bind(budgets(t)?)
    .bind(&t.stomp_default_context)
    .execute(conn)
    .await?;
    Ok(())
}

pub(super) async fn load_all(pool: &PgPool) -> Result<Vec<TeamRecord>, StoreError> {
    let sql = format!("SELECT {TEAM_COLUMNS} FROM teams ORDER BY pk");
    let rows = sqlx::query(AssertSqlSafe(sql)).fetch_all(pool).await?;
    rows.iter().map(team).collect()
}
