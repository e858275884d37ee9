//! Teams.

use sqlx::{SqliteConnection, SqlitePool};
use switchboard_types::ids::TeamPk;

use crate::model::TeamRecord;
use crate::store::StoreError;
use crate::store::columns::{TEAM_COLUMNS as COLUMNS, team as from_row};

/// A retention for its column (the type caps it far below `i64::MAX`).
fn retention(seconds: Option<u64>) -> Option<i64> {
    seconds.map(|s| i64::try_from(s).unwrap_or(i64::MAX))
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
    .bind(&*team.team_id)
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
           retain_read_s = ?, retain_unread_s = ?, retain_tasks_s = ?, updated_at = ?,
           loop_guard = ?, budgets = ?, stomp_default_context = ?
         WHERE pk = ?",
    )
    .bind(&team.name)
    .bind(team.communication_enabled)
    .bind(team.stomp_auto_register)
    .bind(retention(team.retention.read_messages_seconds))
    .bind(retention(team.retention.unread_messages_seconds))
    .bind(retention(team.retention.finished_tasks_seconds))
    .bind(team.updated_at.micros())
    .bind(crate::store::columns::loop_guard(team)?)
    .bind(crate::store::columns::budgets(team)?)
    .bind(&team.stomp_default_context)
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
