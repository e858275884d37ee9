//! Leases on named resources, one implementation for both engines. Whether a grant
//! conflicts is the core's rule (`core/leases.rs`), decided inside the writer's
//! transaction on the team's live rows as this transaction sees them: SQLite has one
//! writer; on PostgreSQL a batch that runs statements of its own holds the writers'
//! advisory lock exclusively (`postgres/writer.rs`), so the nodes decide grants one batch
//! at a time.

use switchboard_types::ids::{AgentPk, TeamPk};
use switchboard_types::time::Timestamp;

use switchboard_types::leases::Pattern;

use crate::model::{LeaseChange, LeaseRecord, LeaseScope, LeaseView};
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

    /// The team's live leases a decision on `scope` needs, and the counts its limits need.
    pub(crate) async fn scoped(
        conn: &mut Conn,
        team: TeamPk,
        now: Timestamp,
        scope: &LeaseScope,
    ) -> Result<LeaseView, StoreError> {
        const LIVE: &str = "FROM leases l JOIN agents a ON a.pk = l.holder_pk
             WHERE l.team_pk = $1 AND l.expires_at > $2 AND a.removed_at IS NULL
               AND l.acquired_at >= a.registered_at";
        let (holder, prefix) = match scope {
            LeaseScope::Id(id) => {
                // Built from constants only.
                let sql = format!("SELECT {LEASE_COLUMNS} {LIVE} AND l.lease_id = $3");
                let rows = sqlx::query::<Db>(sqlx::AssertSqlSafe(sql))
                    .bind(team.0)
                    .bind(now.micros())
                    .bind(id.as_str())
                    .fetch_all(&mut *conn)
                    .await?;
                let leases = rows.iter().map(lease).collect::<Result<_, _>>()?;
                return Ok(LeaseView { leases, ..LeaseView::default() });
            }
            LeaseScope::Around { holder, prefix } => (*holder, prefix.as_str()),
        };
        // The prefixes that enclose this one ($4…), and those that extend it: a byte
        // range from "prefix/" up to "prefix0" ('0' follows '/'), both engines comparing
        // bytes (PostgreSQL's column is of collation "C"). An empty prefix encloses all.
        // Two branches, each by `leases_by_prefix`: with an OR between them SQLite read
        // every live lease of the team by `leases_by_team`, and `+` keeps `expires_at`
        // from being offered as an index constraint it would prefer. A compound select is
        // ordered by position (SQLite matches no `l.pk` by name there).
        const BY_PREFIX: &str = "FROM leases l JOIN agents a ON a.pk = l.holder_pk
             WHERE l.team_pk = $1 AND +l.expires_at > $2 AND a.removed_at IS NULL
               AND l.acquired_at >= a.registered_at";
        let enclosing = Pattern::enclosing_prefixes(prefix);
        let marks: Vec<String> = (0..enclosing.len()).map(|i| format!("${}", i + 4)).collect();
        // Built from constants and placeholders only.
        let sql = if prefix.is_empty() {
            format!("SELECT {LEASE_COLUMNS} {LIVE} AND $3 = '' ORDER BY l.pk")
        } else {
            format!(
                "SELECT {LEASE_COLUMNS} {BY_PREFIX} AND l.prefix IN ({})
                 UNION ALL
                 SELECT {LEASE_COLUMNS} {BY_PREFIX}
                   AND l.prefix >= ($3 || '/') AND l.prefix < ($3 || '0')
                 ORDER BY 1",
                marks.join(", ")
            )
        };
        let mut query = sqlx::query::<Db>(sqlx::AssertSqlSafe(sql))
            .bind(team.0)
            .bind(now.micros())
            .bind(prefix);
        if !prefix.is_empty() {
            for p in &enclosing {
                query = query.bind(*p);
            }
        }
        let rows = query.fetch_all(&mut *conn).await?;
        let leases = rows.iter().map(lease).collect::<Result<_, _>>()?;
        // Both limits' counts in one statement: each statement is a round trip to the
        // database's thread, inside the writer's job every grant waits behind.
        // Built from constants only.
        let sql = format!(
            "SELECT (SELECT COUNT(*) {LIVE} AND l.holder_pk = $3) AS mine,
                    (SELECT COUNT(*) FROM leases WHERE team_pk = $1 AND expires_at > $2) AS all_live"
        );
        let (mine, all): (i64, i64) = sqlx::query_as::<Db, (i64, i64)>(sqlx::AssertSqlSafe(sql))
            .bind(team.0)
            .bind(now.micros())
            .bind(holder.0)
            .fetch_one(&mut *conn)
            .await?;
        Ok(LeaseView {
            leases,
            held_by_holder: usize::try_from(mine).unwrap_or(usize::MAX),
            held_in_team: usize::try_from(all).unwrap_or(usize::MAX),
        })
    }

    /// Writes what a decision on the team's leases chose.
    pub(crate) async fn apply(conn: &mut Conn, change: &LeaseChange) -> Result<(), StoreError> {
        match change {
            LeaseChange::Nothing => {}
            LeaseChange::Grant(l) => {
                sqlx::query::<Db>(
                    "INSERT INTO leases (team_pk, lease_id, holder_pk, resource, prefix,
                                         exclusive, reason, acquired_at, expires_at)
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
                )
                .bind(l.team_pk.0)
                .bind(l.lease_id.as_str())
                .bind(l.holder_pk.0)
                .bind(&l.resource)
                .bind(Pattern::literal_prefix(&l.resource))
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

        async fn count_live_leases(&self, now: Timestamp) -> Result<i64, StoreError> {
            // By the expiry index; a lease whose holder was removed in a crash before its
            // rows went counts until it ends.
            Ok(sqlx::query_scalar::<Db, i64>("SELECT COUNT(*) FROM leases WHERE expires_at > $1")
                .bind(now.micros())
                .fetch_one(&self.read)
                .await?)
        }
    }
}
