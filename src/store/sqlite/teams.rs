//! Inserting a team on SQLite (the rest: `store/sql/teams.rs`).

use sqlx::SqliteConnection;
use switchboard_types::ids::TeamPk;

use crate::model::TeamRecord;
use crate::store::StoreError;

pub(crate) use crate::store::sql::teams::sqlite::*;

/// Inserts a new team and returns its `pk`; [`StoreError::Conflict`] when the id is taken.
pub(crate) async fn insert(
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
