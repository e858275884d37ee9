//! What exists because several nodes share the database: each node's heartbeat and live
//! connections, the registry epoch each change takes after it commits and the wait until
//! every live node has read the registry again (migration 0007; see
//! `docs/architecture.md`, "No stale yes across nodes"), and the holds on outside agents.

use std::time::{Duration, Instant};

use sqlx::Row;
use sqlx::postgres::PgPool;
use switchboard_types::ids::AgentPk;
use switchboard_types::time::Timestamp;

use super::PgStore;
use crate::model::NodeConnections;
use crate::store::StoreError;

impl PgStore {
    /// After a registry change committed: takes the next epoch, tells every node, and
    /// waits until every node whose heartbeat is younger than `expiry` has read the
    /// registry at that epoch or later, for at most `expiry` (a node that does not get
    /// there in that time has no fresh heartbeat by then, and fences itself: it reads the
    /// registry again before it serves a request).
    pub async fn registry_barrier(&self, expiry: Duration) -> Result<(), StoreError> {
        let me = self.node.get().map_or("", String::as_str);
        let epoch = next_registry_epoch(&self.read, me).await?;
        let deadline = Instant::now() + expiry;
        let mut pause = Duration::from_millis(1);
        loop {
            let now = Timestamp::now();
            let fresh_after = Timestamp::from_micros(now.micros() - expiry.as_micros() as i64);
            let behind = nodes_behind(&self.read, epoch, fresh_after, me).await?;
            if behind == 0 {
                return Ok(());
            }
            if Instant::now() >= deadline {
                tracing::warn!(
                    behind,
                    epoch,
                    "nodes did not take up a registry change in time; they fence themselves"
                );
                return Ok(());
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_millis(50));
        }
    }
}

/// Takes the next registry epoch, after a registry change committed, and tells every node
/// (itself included) to read the registry again: a reload started after this statement
/// sees the change.
async fn next_registry_epoch(pool: &PgPool, me: &str) -> Result<i64, StoreError> {
    let epoch: i64 = sqlx::query_scalar(
        "SELECT e FROM (SELECT nextval('registry_epoch') AS e, pg_notify($1, 'e' || $2) AS n) s",
    )
    .bind(super::listen::CHANNEL)
    .bind(me)
    .fetch_one(pool)
    .await?;
    Ok(epoch)
}

/// The newest registry epoch taken so far (0 before the first).
pub(super) async fn registry_epoch(pool: &PgPool) -> Result<i64, StoreError> {
    let epoch: i64 = sqlx::query_scalar(
        "SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM registry_epoch",
    )
    .fetch_one(pool)
    .await?;
    Ok(epoch)
}

/// Records that `node` holds the registry as of `epoch` (never lowering it).
pub(super) async fn registry_seen(
    pool: &PgPool,
    node: &str,
    epoch: i64,
    now: Timestamp,
) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO nodes (node_id, heartbeat_at, registry_seen) VALUES ($1, $2, $3)
         ON CONFLICT (node_id) DO UPDATE
             SET registry_seen = GREATEST(nodes.registry_seen, excluded.registry_seen)",
    )
    .bind(node)
    .bind(now.micros())
    .bind(epoch)
    .execute(pool)
    .await?;
    Ok(())
}

/// How many nodes with a heartbeat newer than `fresh_after` hold a registry older than
/// `epoch`.
async fn nodes_behind(
    pool: &PgPool,
    epoch: i64,
    fresh_after: Timestamp,
    me: &str,
) -> Result<i64, StoreError> {
    let behind: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM nodes
         WHERE heartbeat_at > $1 AND registry_seen < $2 AND node_id <> $3",
    )
    .bind(fresh_after.micros())
    .bind(epoch)
    .bind(me)
    .fetch_one(pool)
    .await?;
    Ok(behind)
}

/// Writes `node`'s heartbeat alone.
pub(super) async fn heartbeat(pool: &PgPool, node: &str, now: Timestamp) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO nodes (node_id, heartbeat_at) VALUES ($1, $2)
         ON CONFLICT (node_id) DO UPDATE SET heartbeat_at = excluded.heartbeat_at",
    )
    .bind(node)
    .bind(now.micros())
    .execute(pool)
    .await?;
    Ok(())
}

/// Takes or renews `node`'s hold on every outside A2A agent that no other node holds
/// (or whose holder let its hold run out) for `lease`; the agents `node` holds now.
pub(super) async fn hold_remote_agents(
    pool: &PgPool,
    node: &str,
    lease: Duration,
) -> Result<Vec<AgentPk>, StoreError> {
    let held: Vec<i64> = sqlx::query_scalar(
        "UPDATE a2a_remotes
         SET held_by = $1, held_until = now() + make_interval(secs => $2)
         WHERE held_by IS NULL OR held_by = $1 OR held_until < now()
         RETURNING agent_pk",
    )
    .bind(node)
    .bind(lease.as_secs_f64())
    .fetch_all(pool)
    .await?;
    Ok(held.into_iter().map(AgentPk).collect())
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
