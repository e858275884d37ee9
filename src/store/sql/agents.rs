//! Agents, their presence and their STOMP queue cursors: read and written the same way on
//! both engines, except saving presence and queue cursors in one statement (SQLite over
//! `json_each`, PostgreSQL over `unnest`: each engine's `agents.rs`).

use sqlx::Row;
use switchboard_types::ids::AgentPk;
use switchboard_types::time::Timestamp;

use crate::model::{AgentRecord, PresenceRow, QueueCursorRow};
use crate::store::StoreError;
use crate::store::columns::{AGENT_COLUMNS, agent, to_json};

for_each_engine! {
    /// Registers an agent; an id that was removed earlier is taken over (same row, so its
    /// history stays attached), an active one is a [`StoreError::Conflict`].
    pub(crate) async fn insert(conn: &mut Conn, a: &AgentRecord) -> Result<AgentPk, StoreError> {
        let pk: Option<i64> = sqlx::query_scalar::<Db, _>(
            "INSERT INTO agents (team_pk, agent_id, role, capabilities, address, status,
                                 communication_enabled, token_id, token_hash, registered_at,
                                 updated_at, removed_at, addresses, watch, stomp_bridge)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, NULL, $12, $13, $14)
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
        .bind(a.team_pk.0)
        .bind(&*a.agent_id)
        .bind(&a.role)
        .bind(to_json(&a.capabilities)?)
        .bind(&a.address)
        .bind(a.status.as_str())
        .bind(a.communication_enabled)
        .bind(&a.token_id)
        .bind(a.token_hash.as_ref().map(|h| h.as_slice()))
        .bind(a.registered_at.micros())
        .bind(a.updated_at.micros())
        .bind(a.addresses.as_ref().map(to_json).transpose()?)
        .bind(to_json(&a.watch)?)
        .bind(a.stomp_bridge)
        .fetch_optional(conn)
        .await?;
        pk.map(AgentPk).ok_or(StoreError::Conflict)
    }

    /// One agent inside the writer's transaction, locked until it commits.
    pub(crate) async fn get(conn: &mut Conn, pk: AgentPk) -> Result<AgentRecord, StoreError> {
        let sql = format!("SELECT {AGENT_COLUMNS} FROM agents WHERE pk = $1{FOR_UPDATE}");
        agent(
            &sqlx::query::<Db>(sqlx::AssertSqlSafe(sql))
                .bind(pk.0)
                .fetch_one(conn)
                .await?,
        )
    }

    /// Writes the mutable fields of an agent, removal included (token cleared).
    pub(crate) async fn update(conn: &mut Conn, a: &AgentRecord) -> Result<(), StoreError> {
        sqlx::query(
            "UPDATE agents SET role = $1, capabilities = $2, address = $3, status = $4,
                    communication_enabled = $5, token_id = $6, token_hash = $7, updated_at = $8,
                    removed_at = $9, addresses = $10, watch = $11
             WHERE pk = $12",
        )
        .bind(&a.role)
        .bind(to_json(&a.capabilities)?)
        .bind(&a.address)
        .bind(a.status.as_str())
        .bind(a.communication_enabled)
        .bind(&a.token_id)
        .bind(a.token_hash.as_ref().map(|h| h.as_slice()))
        .bind(a.updated_at.micros())
        .bind(a.removed_at.map(Timestamp::micros))
        .bind(a.addresses.as_ref().map(to_json).transpose()?)
        .bind(to_json(&a.watch)?)
        .bind(a.pk.0)
        .execute(conn)
        .await?;
        Ok(())
    }

    /// Every agent (removed ones too: messages keep pointing at them), for the registry.
    pub(crate) async fn load_all(pool: &Pool) -> Result<Vec<AgentRecord>, StoreError> {
        let sql = format!("SELECT {AGENT_COLUMNS} FROM agents ORDER BY pk");
        let rows = sqlx::query::<Db>(sqlx::AssertSqlSafe(sql))
            .fetch_all(pool)
            .await?;
        rows.iter().map(agent).collect()
    }

    /// Every agent's acknowledged cursor and last activity, for the hub at start-up.
    pub(crate) async fn load_presence(pool: &Pool) -> Result<Vec<PresenceRow>, StoreError> {
        let rows = sqlx::query::<Db>("SELECT pk, acked_seq, last_seen_at FROM agents")
            .fetch_all(pool)
            .await?;
        rows.iter()
            .map(|r| {
                Ok(PresenceRow {
                    agent: AgentPk(r.try_get(0)?),
                    acked_seq: r.try_get(1)?,
                    last_seen_at: r.try_get::<Option<i64>, _>(2)?.map(Timestamp::from_micros),
                })
            })
            .collect()
    }

    /// Where one of an agent's STOMP queues stands (0: nothing consumed yet).
    pub(crate) async fn queue_cursor(
        pool: &Pool,
        agent: AgentPk,
        queue: &str,
    ) -> Result<i64, StoreError> {
        let seq: Option<i64> = sqlx::query_scalar::<Db, _>(
            "SELECT acked_seq FROM queue_cursors WHERE agent_pk = $1 AND queue = $2",
        )
        .bind(agent.0)
        .bind(queue)
        .fetch_optional(pool)
        .await?;
        Ok(seq.unwrap_or(0))
    }

    /// The deaf queues of agents that are still members.
    pub(crate) async fn deaf_queues(pool: &Pool) -> Result<Vec<QueueCursorRow>, StoreError> {
        let rows: Vec<(i64, String, i64)> = sqlx::query_as::<Db, _>(
            "SELECT q.agent_pk, q.queue, q.acked_seq FROM queue_cursors q
               JOIN agents a ON a.pk = q.agent_pk
             WHERE q.deaf AND a.removed_at IS NULL",
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
}
