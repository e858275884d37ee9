//! Agents.

use sqlx::{Row, SqliteConnection, SqlitePool};
use switchboard_types::ids::AgentPk;
use switchboard_types::time::Timestamp;

use super::rows::to_json;
use crate::model::{AgentRecord, PresenceRow, QueueCursorRow};
use crate::store::StoreError;
use crate::store::columns::{AGENT_COLUMNS as COLUMNS, agent as from_row};

fn capabilities_json(agent: &AgentRecord) -> Result<String, StoreError> {
    to_json(&agent.capabilities)
}

fn addresses_json(agent: &AgentRecord) -> Result<Option<String>, StoreError> {
    agent.addresses.as_ref().map(to_json).transpose()
}

/// Registers an agent and returns its `pk`. An agent id that was removed earlier is
/// taken over (same row, so its history stays attached); an active one is a
/// [`StoreError::Conflict`].
pub(super) async fn insert(
    conn: &mut SqliteConnection,
    agent: &AgentRecord,
) -> Result<AgentPk, StoreError> {
    let pk: Option<i64> = sqlx::query_scalar(
        "INSERT INTO agents (team_pk, agent_id, role, capabilities, address, status,
                             communication_enabled, token_id, token_hash, registered_at,
                             updated_at, removed_at, addresses, watch, stomp_bridge)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, NULL, ?, ?, ?)
         ON CONFLICT (team_pk, agent_id) DO UPDATE SET
             role = excluded.role, capabilities = excluded.capabilities,
             address = excluded.address, status = excluded.status,
             communication_enabled = excluded.communication_enabled,
             token_id = excluded.token_id, token_hash = excluded.token_hash,
             registered_at = excluded.registered_at, updated_at = excluded.updated_at,
             removed_at = NULL, addresses = excluded.addresses, watch = excluded.watch,
             stomp_bridge = excluded.stomp_bridge
         WHERE agents.removed_at IS NOT NULL
         RETURNING pk",
    )
    .bind(agent.team_pk.0)
    .bind(&*agent.agent_id)
    .bind(&agent.role)
    .bind(capabilities_json(agent)?)
    .bind(&agent.address)
    .bind(agent.status.as_str())
    .bind(agent.communication_enabled)
    .bind(&agent.token_id)
    .bind(agent.token_hash.as_ref().map(|h| h.as_slice()))
    .bind(agent.registered_at.micros())
    .bind(agent.updated_at.micros())
    .bind(addresses_json(agent)?)
    .bind(to_json(&agent.watch)?)
    .bind(agent.stomp_bridge)
    .fetch_optional(conn)
    .await?;
    pk.map(AgentPk).ok_or(StoreError::Conflict)
}

/// Reads one agent inside the writer's transaction.
pub(super) async fn get(
    conn: &mut SqliteConnection,
    pk: AgentPk,
) -> Result<AgentRecord, StoreError> {
    let sql = format!("SELECT {COLUMNS} FROM agents WHERE pk = ?");
    let row = sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(pk.0)
        .fetch_one(conn)
        .await?;
    from_row(&row)
}

/// Writes the mutable fields of an agent, including removal (token cleared).
pub(super) async fn update(
    conn: &mut SqliteConnection,
    agent: &AgentRecord,
) -> Result<(), StoreError> {
    sqlx::query(
        "UPDATE agents SET role = ?, capabilities = ?, address = ?, status = ?,
                communication_enabled = ?, token_id = ?, token_hash = ?, updated_at = ?,
                removed_at = ?, addresses = ?, watch = ?
         WHERE pk = ?",
    )
    .bind(&agent.role)
    .bind(capabilities_json(agent)?)
    .bind(&agent.address)
    .bind(agent.status.as_str())
    .bind(agent.communication_enabled)
    .bind(&agent.token_id)
    .bind(agent.token_hash.as_ref().map(|h| h.as_slice()))
    .bind(agent.updated_at.micros())
    .bind(agent.removed_at.map(Timestamp::micros))
    .bind(addresses_json(agent)?)
    .bind(to_json(&agent.watch)?)
    .bind(agent.pk.0)
    .execute(conn)
    .await?;
    Ok(())
}

/// Every agent (removed ones too: messages keep pointing at them), for the registry.
pub(super) async fn load_all(pool: &SqlitePool) -> Result<Vec<AgentRecord>, StoreError> {
    let sql = format!("SELECT {COLUMNS} FROM agents ORDER BY pk");
    sqlx::query(sqlx::AssertSqlSafe(sql))
        .fetch_all(pool)
        .await?
        .iter()
        .map(from_row)
        .collect()
}

/// Every agent's acknowledged cursor and last activity, for the hub at start-up.
pub(super) async fn load_presence(pool: &SqlitePool) -> Result<Vec<PresenceRow>, StoreError> {
    let rows = sqlx::query("SELECT pk, acked_seq, last_seen_at FROM agents")
        .fetch_all(pool)
        .await?;
    rows.iter()
        .map(|r| {
            Ok(PresenceRow {
                agent: AgentPk(r.try_get("pk")?),
                acked_seq: r.try_get("acked_seq")?,
                last_seen_at: r
                    .try_get::<Option<i64>, _>("last_seen_at")?
                    .map(Timestamp::from_micros),
            })
        })
        .collect()
}

/// Writes acknowledged cursors and last activity, `(agent pk, acked seq, last seen)`,
/// in one statement (a cursor never moves back).
pub(super) async fn save_presence(
    conn: &mut SqliteConnection,
    agents: &[PresenceRow],
) -> Result<(), StoreError> {
    let rows: Vec<(i64, i64, Option<i64>)> = agents
        .iter()
        .map(|p| {
            (
                p.agent.0,
                p.acked_seq,
                p.last_seen_at.map(Timestamp::micros),
            )
        })
        .collect();
    let json = to_json(&rows)?;
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

/// Where one of an agent's STOMP queues stands (0: nothing consumed yet).
pub(super) async fn queue_cursor(
    pool: &SqlitePool,
    agent: AgentPk,
    queue: &str,
) -> Result<i64, StoreError> {
    let seq: Option<i64> =
        sqlx::query_scalar("SELECT acked_seq FROM queue_cursors WHERE agent_pk = ? AND queue = ?")
            .bind(agent.0)
            .bind(queue)
            .fetch_optional(pool)
            .await?;
    Ok(seq.unwrap_or(0))
}

/// The deaf queues of agents that are still members.
pub(super) async fn deaf_queues(pool: &SqlitePool) -> Result<Vec<QueueCursorRow>, StoreError> {
    let rows: Vec<(i64, String, i64)> = sqlx::query_as(
        "SELECT q.agent_pk, q.queue, q.acked_seq FROM queue_cursors q
           JOIN agents a ON a.pk = q.agent_pk
         WHERE q.deaf <> 0 AND a.removed_at IS NULL",
    )
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .map(|(agent, queue, acked_seq)| QueueCursorRow {
            agent: AgentPk(agent),
            queue,
            acked_seq,
            deaf: true,
        })
        .collect())
}

/// Writes queue cursors in one statement; like the agents' cursors, never backwards.
pub(super) async fn save_queue_cursors(
    conn: &mut SqliteConnection,
    cursors: &[QueueCursorRow],
) -> Result<(), StoreError> {
    let rows: Vec<(i64, &str, i64, bool)> = cursors
        .iter()
        .map(|c| (c.agent.0, c.queue.as_str(), c.acked_seq, c.deaf))
        .collect();
    sqlx::query(
        "INSERT INTO queue_cursors (agent_pk, queue, acked_seq, deaf)
         SELECT j.value->>0, j.value->>1, j.value->>2, j.value->>3 FROM json_each(?) j WHERE true
         ON CONFLICT (agent_pk, queue) DO UPDATE
             SET acked_seq = MAX(acked_seq, excluded.acked_seq), deaf = excluded.deaf",
    )
    .bind(to_json(&rows)?)
    .execute(conn)
    .await?;
    Ok(())
}
