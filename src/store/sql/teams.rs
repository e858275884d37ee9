//! Teams: read and changed the same way on both engines. Inserting one is each engine's
//! own (`sqlite/teams.rs`, `postgres/teams.rs`): SQLite's trigger makes the callback
//! secret, PostgreSQL has no cryptographic random bytes without an extension.

use switchboard_types::ids::TeamPk;

use crate::model::TeamRecord;
use crate::store::StoreError;
use crate::store::columns::{TEAM_COLUMNS, budgets, loop_guard, team, to_json};

/// A retention for its column (the type caps it far below `i64::MAX`).
fn retention(seconds: Option<u64>) -> Option<i64> {
    seconds.map(|s| i64::try_from(s).unwrap_or(i64::MAX))
}

for_each_engine! {
    /// One team, inside the writer's transaction (it sees earlier jobs of the batch);
    /// on PostgreSQL locked until the commit, so concurrent patches from several nodes
    /// apply one after the other.
    pub(crate) async fn get(conn: &mut Conn, pk: TeamPk) -> Result<TeamRecord, StoreError> {
        let sql = format!("SELECT {TEAM_COLUMNS} FROM teams WHERE pk = $1{FOR_UPDATE}");
        let row = sqlx::query::<Db>(sqlx::AssertSqlSafe(sql))
            .bind(pk.0)
            .fetch_one(conn)
            .await?;
        team(&row)
    }

    /// Writes the mutable fields of a team.
    pub(crate) async fn update(conn: &mut Conn, t: &TeamRecord) -> Result<(), StoreError> {
        sqlx::query::<Db>(
            "UPDATE teams SET name = $1, communication_enabled = $2, stomp_auto_register = $3,
               retain_read_s = $4, retain_unread_s = $5, retain_tasks_s = $6, updated_at = $7,
               loop_guard = $9, budgets = $10, stomp_default_context = $11,
               max_attempts = $12, key_id = $13, key_hash = $14, approvers = $15
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
        .bind(t.max_attempts)
        .bind(&t.key_id)
        .bind(t.key_hash.as_slice())
        .bind(to_json(&t.approvers)?)
        .execute(conn)
        .await?;
        Ok(())
    }

    /// Every team, for filling the registry at start-up.
    pub(crate) async fn load_all(pool: &Pool) -> Result<Vec<TeamRecord>, StoreError> {
        let sql = format!("SELECT {TEAM_COLUMNS} FROM teams ORDER BY pk");
        let rows = sqlx::query::<Db>(sqlx::AssertSqlSafe(sql))
            .fetch_all(pool)
            .await?;
        rows.iter().map(team).collect()
    }
}
