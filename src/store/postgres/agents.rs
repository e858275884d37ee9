//! Agents, their presence and their STOMP queue cursors on PostgreSQL.

use sqlx::postgres::{PgConnection, PgPool};
use sqlx::{AssertSqlSafe, Row};
use switchboard_types::ids::AgentPk;
use switchboard_types::time::Timestamp;

use crate::model::{AgentRecord, PresenceRow, QueueCursorRow};
use crate::store::StoreError;
use crate::store::columns::{AGENT_COLUMNS, agent, to_json};

/// Registers an agent; an id that was removed earlier is taken over (same row, so its
/// history stays attached), an active one is a [`StoreError::Conflict`].
pub(super) async fn insert(
    conn: &mut PgConnection,
    a: &AgentRecord,
) -> Result<AgentPk, StoreError> {
    let pk: Option<i64> = sqlx::query_scalar(
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
pub(super) async fn get(conn: &mut PgConnection, pk: AgentPk) -> Result<AgentRecord, StoreError> {
    let sql = format!("SELECT {AGENT_COLUMNS} FROM agents WHERE pk = $1 FOR UPDATE");
    agent(
        &sqlx::query(AssertSqlSafe(sql))
            .bind(pk.0)
            .fetch_one(conn)
            .await?,
    )
}

/// Writes the mutable fields of an agent, removal included (token cleared).
pub(super) async fn update(conn: &mut PgConnection, a: &AgentRecord) -> Result<(), StoreError> {
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

pub(super) async fn load_all(pool: &PgPool) -> Result<Vec<AgentRecord>, StoreError> {
    let sql = format!("SELECT {AGENT_COLUMNS} FROM agents ORDER BY pk");
    let rows = sqlx::query(AssertSqlSafe(sql)).fetch_all(pool).await?;
    rows.iter().map(agent).collect()
}

pub(super) async fn load_presence(pool: &PgPool) -> Result<Vec<PresenceRow>, StoreError> {
    let rows = sqlx::query("SELECT pk, acked_seq, last_seen_at FROM agents")
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

/// Writes acknowledged cursors and last activity in one statement; a cursor never
/// moves back (another node may have saved a newer one).
pub(super) async fn save_presence(
    conn: &mut PgConnection,
    rows: &[PresenceRow],
) -> Result<(), StoreError> {
    let pks: Vec<i64> = rows.iter().map(|p| p.agent.0).collect();
    let seqs: Vec<i64> = rows.iter().map(|p| p.acked_seq).collect();
    let seen: Vec<Option<i64>> = rows
        .iter()
        .map(|p| p.last_seen_at.map(Timestamp::micros))
        .collect();
    sqlx::query(
        "UPDATE agents a SET acked_seq = GREATEST(a.acked_seq, u.seq),
                             last_seen_at = COALESCE(u.seen, a.last_seen_at)
         FROM (SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::bigint[])
               AS u(pk, seq, seen) ORDER BY pk) u
         WHERE a.pk = u.pk",
    )
    .bind(pks)
    .bind(seqs)
    .bind(seen)
    .execute(conn)
    .await?;
    Ok(())
}

pub(super) async fn queue_cursor(
    pool: &PgPool,
    agent: AgentPk,
    queue: &str,
) -> Result<i64, StoreError> {
    let seq: Option<i64> = sqlx::query_scalar(
        "SELECT acked_seq FROM queue_cursors WHERE agent_pk = $1 AND queue = $2",
    )
    .bind(agent.0)
    .bind(queue)
    .fetch_optional(pool)
    .await?;
    Ok(seq.unwrap_or(0))
}

/// The deaf queues of agents that are still members.
pub(super) async fn deaf_queues(pool: &PgPool) -> Result<Vec<QueueCursorRow>, StoreError> {
    let rows: Vec<(i64, String, i64)> = sqlx::query_as(
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

/// Writes queue cursors in one statement; never backwards. One row per queue (an
/// upsert may not touch a row twice), the furthest cursor kept.
pub(super) async fn save_queue_cursors(
    conn: &mut PgConnection,
    cursors: &[QueueCursorRow],
) -> Result<(), StoreError> {
    // The last row of a queue says whether it is deaf.
    let mut furthest: std::collections::BTreeMap<(i64, &str), (i64, bool)> = Default::default();
    for c in cursors {
        let at = furthest
            .entry((c.agent.0, c.queue.as_str()))
            .or_insert((0, false));
        *at = (at.0.max(c.acked_seq), c.deaf);
    }
    let agents: Vec<i64> = furthest.keys().map(|(a, _)| *a).collect();
    let queues: Vec<&str> = furthest.keys().map(|(_, q)| *q).collect();
    let seqs: Vec<i64> = furthest.values().map(|(s, _)| *s).collect();
    let deaf: Vec<bool> = furthest.values().map(|(_, d)| *d).collect();
    sqlx::query(
        "INSERT INTO queue_cursors (agent_pk, queue, acked_seq, deaf)
         SELECT * FROM unnest($1::bigint[], $2::text[], $3::bigint[], $4::boolean[])
         ON CONFLICT (agent_pk, queue) DO UPDATE
             SET acked_seq = GREATEST(queue_cursors.acked_seq, excluded.acked_seq),
                 deaf = excluded.deaf",
    )
    .bind(agents)
    .bind(queues)
    .bind(seqs)
    .bind(deaf)
    .execute(conn)
    .await?;
    Ok(())
}
