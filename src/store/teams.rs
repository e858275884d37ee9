//! Teams.

use sqlx::{Row, SqliteConnection, SqlitePool, sqlite::SqliteRow};

use super::{StoreError, flag};
use crate::core::auth::SecretHash;
use crate::core::registry::TeamRecord;
use crate::core::time::Timestamp;

const COLUMNS: &str =
    "pk, team_id, name, key_id, key_hash, communication_enabled, created_at, updated_at";

fn from_row(row: &SqliteRow) -> Result<TeamRecord, StoreError> {
    let key_hash: Vec<u8> = row.try_get("key_hash")?;
    Ok(TeamRecord {
        pk: row.try_get("pk")?,
        team_id: row.try_get("team_id")?,
        name: row.try_get("name")?,
        key_id: row.try_get("key_id")?,
        key_hash: hash_from(key_hash)?,
        communication_enabled: flag(row.try_get("communication_enabled")?),
        created_at: Timestamp::from_micros(row.try_get("created_at")?),
        updated_at: Timestamp::from_micros(row.try_get("updated_at")?),
    })
}

pub(crate) fn hash_from(bytes: Vec<u8>) -> Result<SecretHash, StoreError> {
    SecretHash::try_from(bytes.as_slice())
        .map_err(|_| StoreError::Corrupt(format!("a stored digest has {} bytes", bytes.len())))
}

/// Inserts a new team and returns its `pk`; [`StoreError::Conflict`] when the id is taken.
pub async fn insert(conn: &mut SqliteConnection, team: &TeamRecord) -> Result<i64, StoreError> {
    let pk = sqlx::query_scalar(
        "INSERT INTO teams (team_id, name, key_id, key_hash, communication_enabled, created_at, updated_at)
         VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING pk",
    )
    .bind(&team.team_id)
    .bind(&team.name)
    .bind(&team.key_id)
    .bind(team.key_hash.as_slice())
    .bind(team.communication_enabled)
    .bind(team.created_at.micros())
    .bind(team.updated_at.micros())
    .fetch_one(conn)
    .await?;
    Ok(pk)
}

/// Reads one team inside the writer's transaction (sees earlier jobs of the batch).
pub async fn get(conn: &mut SqliteConnection, pk: i64) -> Result<TeamRecord, StoreError> {
    let sql = format!("SELECT {COLUMNS} FROM teams WHERE pk = ?");
    let row = sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(pk)
        .fetch_one(conn)
        .await?;
    from_row(&row)
}

/// Writes the mutable fields of a team.
pub async fn update(conn: &mut SqliteConnection, team: &TeamRecord) -> Result<(), StoreError> {
    sqlx::query(
        "UPDATE teams SET name = ?, communication_enabled = ?, updated_at = ? WHERE pk = ?",
    )
    .bind(&team.name)
    .bind(team.communication_enabled)
    .bind(team.updated_at.micros())
    .bind(team.pk)
    .execute(conn)
    .await?;
    Ok(())
}

/// Every team, for filling the registry at start-up.
pub async fn load_all(pool: &SqlitePool) -> Result<Vec<TeamRecord>, StoreError> {
    let sql = format!("SELECT {COLUMNS} FROM teams ORDER BY pk");
    sqlx::query(sqlx::AssertSqlSafe(sql))
        .fetch_all(pool)
        .await?
        .iter()
        .map(from_row)
        .collect()
}
