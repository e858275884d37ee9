//! Teams.

use sqlx::{Row, SqliteConnection, SqlitePool, sqlite::SqliteRow};
use switchboard_types::ids::TeamPk;
use switchboard_types::teams::Retention;
use switchboard_types::time::Timestamp;

use super::rows::flag;
use crate::store::StoreError;
use crate::store::records::{SecretHash, TeamRecord};

const COLUMNS: &str = "pk, team_id, name, key_id, key_hash, communication_enabled,
    retain_read_s, retain_unread_s, retain_tasks_s, stomp_auto_register, created_at, updated_at";

/// A stored retention column: positive seconds or NULL.
fn seconds(row: &SqliteRow, column: &str) -> Result<Option<u64>, StoreError> {
    row.try_get::<Option<i64>, _>(column)?
        .map(|s| u64::try_from(s).map_err(|_| StoreError::Corrupt(format!("{column} = {s}"))))
        .transpose()
}

/// A retention for its column (the type caps it far below `i64::MAX`).
fn column(seconds: Option<u64>) -> Option<i64> {
    seconds.map(|s| i64::try_from(s).unwrap_or(i64::MAX))
}

fn from_row(row: &SqliteRow) -> Result<TeamRecord, StoreError> {
    let key_hash: Vec<u8> = row.try_get("key_hash")?;
    Ok(TeamRecord {
        pk: TeamPk(row.try_get("pk")?),
        team_id: row.try_get("team_id")?,
        name: row.try_get("name")?,
        key_id: row.try_get("key_id")?,
        key_hash: hash_from(key_hash)?,
        communication_enabled: flag(row.try_get("communication_enabled")?),
        stomp_auto_register: flag(row.try_get("stomp_auto_register")?),
        retention: Retention {
            read_messages_seconds: seconds(row, "retain_read_s")?,
            unread_messages_seconds: seconds(row, "retain_unread_s")?,
            finished_tasks_seconds: seconds(row, "retain_tasks_s")?,
        },
        created_at: Timestamp::from_micros(row.try_get("created_at")?),
        updated_at: Timestamp::from_micros(row.try_get("updated_at")?),
    })
}

pub(super) fn hash_from(bytes: Vec<u8>) -> Result<SecretHash, StoreError> {
    SecretHash::try_from(bytes.as_slice())
        .map_err(|_| StoreError::Corrupt(format!("a stored digest has {} bytes", bytes.len())))
}

/// Inserts a new team and returns its `pk`; [`StoreError::Conflict`] when the id is taken.
pub(super) async fn insert(
    conn: &mut SqliteConnection,
    team: &TeamRecord,
) -> Result<TeamPk, StoreError> {
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
    Ok(TeamPk(pk))
}

/// Reads one team inside the writer's transaction (sees earlier jobs of the batch).
pub(super) async fn get(conn: &mut SqliteConnection, pk: TeamPk) -> Result<TeamRecord, StoreError> {
    let sql = format!("SELECT {COLUMNS} FROM teams WHERE pk = ?");
    let row = sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(pk.0)
        .fetch_one(conn)
        .await?;
    from_row(&row)
}

/// Writes the mutable fields of a team.
pub(super) async fn update(
    conn: &mut SqliteConnection,
    team: &TeamRecord,
) -> Result<(), StoreError> {
    sqlx::query(
        "UPDATE teams SET name = ?, communication_enabled = ?, stomp_auto_register = ?,
           retain_read_s = ?, retain_unread_s = ?, retain_tasks_s = ?, updated_at = ?
         WHERE pk = ?",
    )
    .bind(&team.name)
    .bind(team.communication_enabled)
    .bind(team.stomp_auto_register)
    .bind(column(team.retention.read_messages_seconds))
    .bind(column(team.retention.unread_messages_seconds))
    .bind(column(team.retention.finished_tasks_seconds))
    .bind(team.updated_at.micros())
    .bind(team.pk.0)
    .execute(conn)
    .await?;
    Ok(())
}

/// Every team, for filling the registry at start-up.
pub(super) async fn load_all(pool: &SqlitePool) -> Result<Vec<TeamRecord>, StoreError> {
    let sql = format!("SELECT {COLUMNS} FROM teams ORDER BY pk");
    sqlx::query(sqlx::AssertSqlSafe(sql))
        .fetch_all(pool)
        .await?
        .iter()
        .map(from_row)
        .collect()
}
