//! Leases on named resources, one implementation for both engines. Whether a grant
//! conflicts is the core's rule (`core/leases.rs`), decided inside the writer's
//! transaction on the team's live rows as this transaction sees them: SQLite has one
//! writer; on PostgreSQL a batch that runs statements of its own holds the writers'
//! advisory lock exclusively (`postgres/writer.rs`), so the nodes decide grants one batch
//! at a time.

use switchboard_types::ids::{AgentPk, TeamPk};
use switchboard_types::time::Timestamp;

use crate::model::{LeaseChange, LeaseRecord};
use crate::store::StoreError;
use crate::store::columns::{LEASE_COLUMNS, lease};
use crate::store::engine::Leases;
use crate::store::writer::Writes;

for_each_engine! {
    /// The team's live leases (unexpired, of members), oldest first.
    pub(crate) async fn live<'e>(
        ex: impl sqlx::Executor<'e, Database = Db>,
        team: TeamPk,
        now: Timestamp,
    ) -> Result<Vec<LeaseRecord>, StoreError> {
        // Built from constants only.
        let sql = format!(
            "SELECT {LEASE_COLUMNS} FROM leases l JOIN agents a ON a.pk = l.holder_pk
             WHERE l.team_pk = $1 AND l.expires_at > $2 AND a.removed_at IS NULL
               AND l.acquired_at >= a.registered_at
             ORDER BY l.pk"
        );
        let rows = sqlx::query::<Db>(sqlx::AssertSqlSafe(sql))
            .bind(team.0)
            .bind(now.micros())
            .fetch_all(ex)
            .await?;
        rows.iter().map(lease).collect()
    }

    /// Writes what a decision on the team's leases chose.
    pub(crate) async fn apply(conn: &mut Conn, change: &LeaseChange) -> Result<(), StoreError> {
        match change {
            LeaseChange::Nothing => {}
            LeaseChange::Grant(l) => {
                sqlx::query::<Db>(
                    "INSERT INTO leases (team_pk, lease_id, holder_pk, resource, exclusive,
                                         reason, acquired_at, expires_at)
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
                )
                .bind(l.team_pk.0)
                .bind(l.lease_id.as_str())
                .bind(l.holder_pk.0)
                .bind(&l.resource)
                .bind(l.exclusive)
                .bind(l.reason.as_deref())
                .bind(l.acquired_at.micros())
                .bind(l.expires_at.micros())
                .execute(conn)
                .await?;
            }
            LeaseChange::Extend { pk, expires_at } => {
                sqlx::query::<Db>("UPDATE leases SET expires_at = $1 WHERE pk = $2")
                    .bind(expires_at.micros())
                    .bind(*pk)
                    .execute(conn)
                    .await?;
            }
            LeaseChange::Release { pk } => {
                sqlx::query::<Db>("DELETE FROM leases WHERE pk = $1")
                    .bind(*pk)
                    .execute(conn)
                    .await?;
            }
        }
        Ok(())
    }

    /// Up to `limit` leases that ended by `now`, removed, oldest end first.
    pub(crate) async fn expire(
        conn: &mut Conn,
        now: Timestamp,
        limit: i64,
    ) -> Result<Vec<LeaseRecord>, StoreError> {
        // Built from constants only.
        let sql = format!(
            "DELETE FROM leases WHERE pk IN (
                 SELECT pk FROM leases WHERE expires_at <= $1 ORDER BY expires_at LIMIT $2)
             RETURNING {}",
            LEASE_COLUMNS.replace("l.", "")
        );
        let rows = sqlx::query::<Db>(sqlx::AssertSqlSafe(sql))
            .bind(now.micros())
            .bind(limit)
            .fetch_all(conn)
            .await?;
        rows.iter().map(lease).collect()
    }

    /// Every lease `holder` holds, removed (its holder left the team).
    pub(crate) async fn release_holder(
        conn: &mut Conn,
        holder: AgentPk,
    ) -> Result<Vec<LeaseRecord>, StoreError> {
        let sql = format!(
            "DELETE FROM leases WHERE holder_pk = $1 RETURNING {}",
            LEASE_COLUMNS.replace("l.", "")
        );
        let rows = sqlx::query::<Db>(sqlx::AssertSqlSafe(sql))
            .bind(holder.0)
            .fetch_all(conn)
            .await?;
        rows.iter().map(lease).collect()
    }

    impl Leases for Store {
        async fn team_leases(
            &self,
            team: TeamPk,
            now: Timestamp,
        ) -> Result<Vec<LeaseRecord>, StoreError> {
            live(&self.read, team, now).await
        }

        async fn expire_leases(
            &self,
            now: Timestamp,
            limit: i64,
        ) -> Result<Vec<LeaseRecord>, StoreError> {
            // A read first: with nothing ended (the usual second), no write is queued,
            // so an idle server commits nothing for the sweep.
            let due: Option<i64> =
                sqlx::query_scalar::<Db, i64>("SELECT pk FROM leases WHERE expires_at <= $1 LIMIT 1")
                    .bind(now.micros())
                    .fetch_optional(&self.read)
                    .await?;
            if due.is_none() {
                return Ok(Vec::new());
            }
            on_conn!(self, write_self_contained, |conn| expire(conn, now, limit).await)
        }

        async fn release_leases_of(&self, holder: AgentPk) -> Result<Vec<LeaseRecord>, StoreError> {
            on_conn!(self, write_self_contained, |conn| release_holder(conn, holder).await)
        }
    }
}
