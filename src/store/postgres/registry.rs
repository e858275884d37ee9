//! Teams, agents, their cursors and the server's settings on PostgreSQL.

use rand::RngCore;
use sqlx::postgres::{PgConnection, PgPool};
use sqlx::{AssertSqlSafe, Row};
use switchboard_types::ids::{AgentPk, TeamPk};
use switchboard_types::time::Timestamp;

use crate::model::{AgentRecord, NodeConnections, PresenceRow, QueueCursorRow, TeamRecord};
use crate::store::StoreError;
use crate::store::columns::{AGENT_COLUMNS, TEAM_COLUMNS, agent, team, to_json};

pub(super) const ADMIN_TOKEN_HASH: &str = "admin_token_sha256";
/// When the admin token was set: microseconds since the epoch, as decimal text.
pub(super) const ADMIN_TOKEN_SET_AT: &str = "admin_token_set_at";

pub(super) async fn setting(pool: &PgPool, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
    Ok(
        sqlx::query_scalar("SELECT value FROM settings WHERE key = $1")
            .bind(key)
            .fetch_optional(pool)
            .await?,
    )
}

pub(super) async fn put_setting(
    conn: &mut PgConnection,
    key: &str,
    value: &[u8],
) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO settings (key, value) VALUES ($1, $2)
         ON CONFLICT (key) DO UPDATE SET value = excluded.value",
    )
    .bind(key)
    .bind(value)
    .execute(conn)
    .await?;
    Ok(())
}

/// A retention for its column (the type caps it far below `i64::MAX`).
fn retention(seconds: Option<u64>) -> Option<i64> {
    seconds.map(|s| i64::try_from(s).unwrap_or(i64::MAX))
}

/// Inserts a team with its callback secret (made here: PostgreSQL has no cryptographic
/// random bytes without an extension; SQLite's trigger makes the same `whsec_` + 64 hex
/// digits). [`StoreError::Conflict`] when the id is taken.
pub(super) async fn insert_team(
    conn: &mut PgConnection,
    t: &TeamRecord,
) -> Result<TeamPk, StoreError> {
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
    .bind(&t.team_id)
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
pub(super) async fn team_for_update(
    conn: &mut PgConnection,
    pk: TeamPk,
) -> Result<TeamRecord, StoreError> {
    let sql = format!("SELECT {TEAM_COLUMNS} FROM teams WHERE pk = $1 FOR UPDATE");
    team(
        &sqlx::query(AssertSqlSafe(sql))
            .bind(pk.0)
            .fetch_one(conn)
            .await?,
    )
}

pub(super) async fn update_team(conn: &mut PgConnection, t: &TeamRecord) -> Result<(), StoreError> {
    sqlx::query(
        "UPDATE teams SET name = $1, communication_enabled = $2, stomp_auto_register = $3,
           retain_read_s = $4, retain_unread_s = $5, retain_tasks_s = $6, updated_at = $7
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
    .execute(conn)
    .await?;
    Ok(())
}

pub(super) async fn load_teams(pool: &PgPool) -> Result<Vec<TeamRecord>, StoreError> {
    let sql = format!("SELECT {TEAM_COLUMNS} FROM teams ORDER BY pk");
    let rows = sqlx::query(AssertSqlSafe(sql)).fetch_all(pool).await?;
    rows.iter().map(team).collect()
}

/// Registers an agent; an id that was removed earlier is taken over (same row, so its
/// history stays attached), an active one is a [`StoreError::Conflict`].
pub(super) async fn insert_agent(
    conn: &mut PgConnection,
    a: &AgentRecord,
) -> Result<AgentPk, StoreError> {
    let pk: Option<i64> = sqlx::query_scalar(
        "INSERT INTO agents (team_pk, agent_id, role, capabilities, address, status,
                             communication_enabled, token_id, token_hash, registered_at,
                             updated_at, removed_at, addresses, watch)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, NULL, $12, $13)
         ON CONFLICT (team_pk, agent_id) DO UPDATE SET
             role = excluded.role, capabilities = excluded.capabilities,
             address = excluded.address, status = excluded.status,
             communication_enabled = excluded.communication_enabled,
             token_id = excluded.token_id, token_hash = excluded.token_hash,
             registered_at = excluded.registered_at, updated_at = excluded.updated_at,
             removed_at = NULL, addresses = excluded.addresses, watch = excluded.watch
         WHERE agents.removed_at IS NOT NULL
         RETURNING pk",
    )
    .bind(a.team_pk.0)
    .bind(&a.agent_id)
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
    .fetch_optional(conn)
    .await?;
    pk.map(AgentPk).ok_or(StoreError::Conflict)
}

/// One agent inside the writer's transaction, locked until it commits.
pub(super) async fn agent_for_update(
    conn: &mut PgConnection,
    pk: AgentPk,
) -> Result<AgentRecord, StoreError> {
    let sql = format!("SELECT {AGENT_COLUMNS} FROM agents WHERE pk = $1 FOR UPDATE");
    agent(
        &sqlx::query(AssertSqlSafe(sql))
            .bind(pk.0)
            .fetch_one(conn)
            .await?,
    )
}

/// Writes the mutable fields of an agent, removal included (token cleared).
pub(super) async fn update_agent(
    conn: &mut PgConnection,
    a: &AgentRecord,
) -> Result<(), StoreError> {
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

pub(super) async fn load_agents(pool: &PgPool) -> Result<Vec<AgentRecord>, StoreError> {
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

/// Writes queue cursors in one statement; never backwards. One row per queue (an
/// upsert may not touch a row twice), the furthest cursor kept.
pub(super) async fn save_queue_cursors(
    conn: &mut PgConnection,
    cursors: &[QueueCursorRow],
) -> Result<(), StoreError> {
    let mut furthest: std::collections::BTreeMap<(i64, &str), i64> = Default::default();
    for c in cursors {
        let seq = furthest.entry((c.agent.0, c.queue.as_str())).or_insert(0);
        *seq = (*seq).max(c.acked_seq);
    }
    let agents: Vec<i64> = furthest.keys().map(|(a, _)| *a).collect();
    let queues: Vec<&str> = furthest.keys().map(|(_, q)| *q).collect();
    let seqs: Vec<i64> = furthest.values().copied().collect();
    sqlx::query(
        "INSERT INTO queue_cursors (agent_pk, queue, acked_seq)
         SELECT * FROM unnest($1::bigint[], $2::text[], $3::bigint[])
         ON CONFLICT (agent_pk, queue) DO UPDATE
             SET acked_seq = GREATEST(queue_cursors.acked_seq, excluded.acked_seq)",
    )
    .bind(agents)
    .bind(queues)
    .bind(seqs)
    .execute(conn)
    .await?;
    Ok(())
}

/// Writes this node's heartbeat and, when given, its live connections (replacing its
/// earlier rows), and reads the other nodes' whose heartbeat is newer than
/// `fresh_after`, in one transaction on a pooled connection (the writer's batches never
/// wait for it).
pub(super) async fn sync_connections(
    pool: &PgPool,
    node: &str,
    mine: Option<&[NodeConnections]>,
    now: Timestamp,
    fresh_after: Timestamp,
) -> Result<Vec<NodeConnections>, StoreError> {
    let mut tx = pool.begin().await?;
    sqlx::query(
        "INSERT INTO nodes (node_id, heartbeat_at) VALUES ($1, $2)
         ON CONFLICT (node_id) DO UPDATE SET heartbeat_at = excluded.heartbeat_at",
    )
    .bind(node)
    .bind(now.micros())
    .execute(&mut *tx)
    .await?;
    if let Some(mine) = mine {
        replace_connections(&mut tx, node, mine).await?;
    }
    let rows = sqlx::query(
        "SELECT c.agent_pk, c.routes, c.since FROM node_connections c
         JOIN nodes n ON n.node_id = c.node_id
         WHERE c.node_id <> $1 AND n.heartbeat_at > $2",
    )
    .bind(node)
    .bind(fresh_after.micros())
    .fetch_all(&mut *tx)
    .await?;
    tx.commit().await?;
    rows.iter()
        .map(|r| {
            let routes: String = r.try_get(1)?;
            Ok(NodeConnections {
                agent: AgentPk(r.try_get(0)?),
                routes: routes.split(',').filter_map(|r| r.parse().ok()).collect(),
                since: Timestamp::from_micros(r.try_get(2)?),
            })
        })
        .collect()
}

/// Makes the node's rows of `node_connections` be `mine`: rows of agents no longer
/// connected go, the others are inserted or updated in place. (Deleting every row and
/// inserting the set again in one statement failed on the primary key whenever an agent
/// stayed connected: the statement's parts share one snapshot, so the insert still sees
/// the rows the delete removes.)
async fn replace_connections(
    tx: &mut sqlx::Transaction<'_, sqlx::Postgres>,
    node: &str,
    mine: &[NodeConnections],
) -> Result<(), StoreError> {
    let agents: Vec<i64> = mine.iter().map(|c| c.agent.0).collect();
    let routes: Vec<String> = mine
        .iter()
        .map(|c| {
            let names: Vec<&str> = c.routes.iter().map(|r| r.as_str()).collect();
            names.join(",")
        })
        .collect();
    let since: Vec<i64> = mine.iter().map(|c| c.since.micros()).collect();
    sqlx::query(
        "WITH gone AS (DELETE FROM node_connections
                       WHERE node_id = $1 AND agent_pk <> ALL($2::bigint[]))
         INSERT INTO node_connections (node_id, agent_pk, routes, since)
         SELECT $1, * FROM unnest($2::bigint[], $3::text[], $4::bigint[])
         ON CONFLICT (node_id, agent_pk) DO UPDATE
         SET routes = excluded.routes, since = excluded.since",
    )
    .bind(node)
    .bind(agents)
    .bind(routes)
    .bind(since)
    .execute(&mut **tx)
    .await?;
    Ok(())
}
