//! Agents.

use sqlx::{Row, SqliteConnection, SqlitePool, sqlite::SqliteRow};

use super::teams::hash_from;
use super::{StoreError, flag};
use crate::core::registry::AgentRecord;
use crate::core::time::Timestamp;

const COLUMNS: &str = "pk, team_pk, agent_id, role, capabilities, address, status, \
     communication_enabled, token_id, token_hash, registered_at, updated_at, removed_at";

fn from_row(row: &SqliteRow) -> Result<AgentRecord, StoreError> {
    let capabilities: String = row.try_get("capabilities")?;
    let capabilities: Vec<String> = serde_json::from_str(&capabilities)
        .map_err(|e| StoreError::Corrupt(format!("agent capabilities: {e}")))?;
    let status: String = row.try_get("status")?;
    let token_hash: Option<Vec<u8>> = row.try_get("token_hash")?;
    Ok(AgentRecord {
        pk: row.try_get("pk")?,
        team_pk: row.try_get("team_pk")?,
        agent_id: row.try_get("agent_id")?,
        role: row.try_get("role")?,
        capabilities,
        address: row.try_get("address")?,
        status: status
            .parse()
            .map_err(|_| StoreError::Corrupt(format!("agent status '{status}'")))?,
        communication_enabled: flag(row.try_get("communication_enabled")?),
        token_id: row.try_get("token_id")?,
        token_hash: token_hash.map(hash_from).transpose()?,
        registered_at: Timestamp::from_micros(row.try_get("registered_at")?),
        updated_at: Timestamp::from_micros(row.try_get("updated_at")?),
        removed_at: row
            .try_get::<Option<i64>, _>("removed_at")?
            .map(Timestamp::from_micros),
    })
}

fn capabilities_json(agent: &AgentRecord) -> String {
    serde_json::Value::from(agent.capabilities.clone()).to_string()
}

/// Registers an agent and returns its `pk`. An agent id that was removed earlier is
/// taken over (same row, so its history stays attached); an active one is a
/// [`StoreError::Conflict`].
pub async fn insert(conn: &mut SqliteConnection, agent: &AgentRecord) -> Result<i64, StoreError> {
    let pk: Option<i64> = sqlx::query_scalar(
        "INSERT INTO agents (team_pk, agent_id, role, capabilities, address, status,
                             communication_enabled, token_id, token_hash, registered_at,
                             updated_at, removed_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, NULL)
         ON CONFLICT (team_pk, agent_id) DO UPDATE SET
             role = excluded.role, capabilities = excluded.capabilities,
             address = excluded.address, status = excluded.status,
             communication_enabled = excluded.communication_enabled,
             token_id = excluded.token_id, token_hash = excluded.token_hash,
             registered_at = excluded.registered_at, updated_at = excluded.updated_at,
             removed_at = NULL
         WHERE agents.removed_at IS NOT NULL
         RETURNING pk",
    )
    .bind(agent.team_pk)
    .bind(&agent.agent_id)
    .bind(&agent.role)
    .bind(capabilities_json(agent))
    .bind(&agent.address)
    .bind(agent.status.as_str())
    .bind(agent.communication_enabled)
    .bind(&agent.token_id)
    .bind(agent.token_hash.as_ref().map(|h| h.as_slice()))
    .bind(agent.registered_at.micros())
    .bind(agent.updated_at.micros())
    .fetch_optional(conn)
    .await?;
    pk.ok_or(StoreError::Conflict)
}

/// Reads one agent inside the writer's transaction.
pub async fn get(conn: &mut SqliteConnection, pk: i64) -> Result<AgentRecord, StoreError> {
    let sql = format!("SELECT {COLUMNS} FROM agents WHERE pk = ?");
    let row = sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(pk)
        .fetch_one(conn)
        .await?;
    from_row(&row)
}

/// Writes the mutable fields of an agent, including removal (token cleared).
pub async fn update(conn: &mut SqliteConnection, agent: &AgentRecord) -> Result<(), StoreError> {
    sqlx::query(
        "UPDATE agents SET role = ?, capabilities = ?, address = ?, status = ?,
                communication_enabled = ?, token_id = ?, token_hash = ?, updated_at = ?,
                removed_at = ?
         WHERE pk = ?",
    )
    .bind(&agent.role)
    .bind(capabilities_json(agent))
    .bind(&agent.address)
    .bind(agent.status.as_str())
    .bind(agent.communication_enabled)
    .bind(&agent.token_id)
    .bind(agent.token_hash.as_ref().map(|h| h.as_slice()))
    .bind(agent.updated_at.micros())
    .bind(agent.removed_at.map(Timestamp::micros))
    .bind(agent.pk)
    .execute(conn)
    .await?;
    Ok(())
}

/// Every agent (removed ones too: messages keep pointing at them), for the registry.
pub async fn load_all(pool: &SqlitePool) -> Result<Vec<AgentRecord>, StoreError> {
    let sql = format!("SELECT {COLUMNS} FROM agents ORDER BY pk");
    sqlx::query(sqlx::AssertSqlSafe(sql))
        .fetch_all(pool)
        .await?
        .iter()
        .map(from_row)
        .collect()
}

/// Every agent's acknowledged cursor and last activity, for the hub at start-up.
pub async fn load_presence(
    pool: &SqlitePool,
) -> Result<Vec<(i64, i64, Option<Timestamp>)>, StoreError> {
    let rows = sqlx::query("SELECT pk, acked_seq, last_seen_at FROM agents")
        .fetch_all(pool)
        .await?;
    rows.iter()
        .map(|r| {
            Ok((
                r.try_get("pk")?,
                r.try_get("acked_seq")?,
                r.try_get::<Option<i64>, _>("last_seen_at")?
                    .map(Timestamp::from_micros),
            ))
        })
        .collect()
}

/// Writes acknowledged cursors and last activity, `(agent pk, acked seq, last seen)`,
/// in one statement (a cursor never moves back).
pub async fn save_presence(
    conn: &mut SqliteConnection,
    agents: &[(i64, i64, Option<Timestamp>)],
) -> Result<(), StoreError> {
    let rows: Vec<(i64, i64, Option<i64>)> = agents
        .iter()
        .map(|(pk, acked, seen)| (*pk, *acked, seen.map(Timestamp::micros)))
        .collect();
    let json =
        serde_json::to_string(&rows).map_err(|e| StoreError::Corrupt(format!("presence: {e}")))?;
    sqlx::query(
        "UPDATE agents SET acked_seq = MAX(acked_seq, j.value->>1),
                           last_seen_at = COALESCE(j.value->>2, last_seen_at)
         FROM json_each(?) j WHERE agents.pk = j.value->>0",
    )
    .bind(json)
    .execute(conn)
    .await?;
    Ok(())
}
