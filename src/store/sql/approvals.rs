//! Approvals, one implementation for both engines. A decision and an expiry are one
//! conditional `UPDATE … WHERE status = 'pending'`: whichever commits first wins, on
//! any node, and the other changes no row (`core/approvals.rs` says what that means).

use switchboard_types::ids::{AgentPk, ApprovalId, TaskPk, TeamPk};
use switchboard_types::time::Timestamp;

use crate::model::{ApprovalDecision, ApprovalListSpec, ApprovalRecord};
use crate::store::StoreError;
use crate::store::columns::{APPROVAL_COLUMNS, approval, to_json};
use crate::store::engine::Approvals;
use crate::store::writer::Writes;

for_each_engine! {
    async fn insert(conn: &mut Conn, a: &ApprovalRecord) -> Result<(), StoreError> {
        sqlx::query::<Db>(
            "INSERT INTO approvals (team_pk, approval_id, asker_pk, task_pk, task_id, summary,
                                    details, options, status, created_at, expires_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 'pending', $9, $10)",
        )
        .bind(a.team_pk.0)
        .bind(a.approval_id.as_str())
        .bind(a.asker_pk.0)
        .bind(a.task_pk.map(|t| t.0))
        .bind(a.task_id.as_deref())
        .bind(&a.summary)
        .bind(a.details.as_deref())
        .bind(to_json(&a.options)?)
        .bind(a.created_at.micros())
        .bind(a.expires_at.micros())
        .execute(conn)
        .await?;
        Ok(())
    }

    async fn decide(
        conn: &mut Conn,
        d: &ApprovalDecision,
    ) -> Result<Option<ApprovalRecord>, StoreError> {
        let decided_with: &'static str = d.decided_with.into();
        // Built from constants only.
        let sql = format!(
            "UPDATE approvals SET status = 'decided', decision = $1, comment = $2,
                 decider_pk = $3, decided_with = $4, decided_at = $5
             WHERE pk = $6 AND status = 'pending' AND expires_at > $5
             RETURNING {APPROVAL_COLUMNS}"
        );
        let row = sqlx::query::<Db>(sqlx::AssertSqlSafe(sql))
            .bind(&d.decision)
            .bind(d.comment.as_deref())
            .bind(d.decider_pk.map(|a| a.0))
            .bind(decided_with)
            .bind(d.at.micros())
            .bind(d.pk)
            .fetch_optional(conn)
            .await?;
        row.as_ref().map(approval).transpose()
    }

    async fn expire(
        conn: &mut Conn,
        now: Timestamp,
        limit: i64,
    ) -> Result<Vec<ApprovalRecord>, StoreError> {
        // Built from constants only.
        let sql = format!(
            "UPDATE approvals SET status = 'expired', decided_at = $1
             WHERE pk IN (SELECT pk FROM approvals WHERE status = 'pending' AND expires_at <= $1
                          ORDER BY expires_at LIMIT $2)
               AND status = 'pending'
             RETURNING {APPROVAL_COLUMNS}"
        );
        let rows = sqlx::query::<Db>(sqlx::AssertSqlSafe(sql))
            .bind(now.micros())
            .bind(limit)
            .fetch_all(conn)
            .await?;
        rows.iter().map(approval).collect()
    }

    impl Approvals for Store {
        async fn insert_approval(&self, record: ApprovalRecord) -> Result<(), StoreError> {
            on_conn!(self, write_self_contained, |conn| insert(conn, &record).await)
        }

        async fn decide_approval(
            &self,
            decision: ApprovalDecision,
        ) -> Result<Option<ApprovalRecord>, StoreError> {
            on_conn!(self, write_self_contained, |conn| decide(conn, &decision).await)
        }

        async fn expire_approvals(
            &self,
            now: Timestamp,
            limit: i64,
        ) -> Result<Vec<ApprovalRecord>, StoreError> {
            // A read first: with nothing due (the usual second), no write is queued.
            let due: Option<i64> = sqlx::query_scalar::<Db, i64>(
                "SELECT pk FROM approvals WHERE status = 'pending' AND expires_at <= $1 LIMIT 1",
            )
            .bind(now.micros())
            .fetch_optional(&self.read)
            .await?;
            if due.is_none() {
                return Ok(Vec::new());
            }
            on_conn!(self, write_self_contained, |conn| expire(conn, now, limit).await)
        }

        async fn approval(
            &self,
            team: TeamPk,
            approval_id: ApprovalId,
        ) -> Result<Option<ApprovalRecord>, StoreError> {
            // Built from constants only.
            let sql = format!(
                "SELECT {APPROVAL_COLUMNS} FROM approvals WHERE approval_id = $1 AND team_pk = $2"
            );
            let row = sqlx::query::<Db>(sqlx::AssertSqlSafe(sql))
                .bind(approval_id.as_str())
                .bind(team.0)
                .fetch_optional(&self.read)
                .await?;
            row.as_ref().map(approval).transpose()
        }

        async fn list_approvals(
            &self,
            team: TeamPk,
            spec: ApprovalListSpec,
        ) -> Result<Vec<ApprovalRecord>, StoreError> {
            let status: Option<&'static str> = spec.status.map(Into::into);
            // Built from constants only; an absent filter is a NULL that matches all. A
            // pending row past its time is expired, whether or not the sweep wrote so.
            let sql = format!(
                "SELECT {APPROVAL_COLUMNS} FROM approvals
                 WHERE team_pk = $1
                   AND ($2 IS NULL OR (CASE WHEN status = 'pending' AND expires_at <= $7
                                            THEN 'expired' ELSE status END) = $2)
                   AND ($3 IS NULL OR asker_pk = $3)
                   AND ($4 IS NULL OR task_pk = $4)
                   AND ($5 IS NULL OR pk < $5)
                 ORDER BY pk DESC LIMIT $6"
            );
            let rows = sqlx::query::<Db>(sqlx::AssertSqlSafe(sql))
                .bind(team.0)
                .bind(status)
                .bind(spec.asker.map(|a| a.0))
                .bind(spec.task.map(|t| t.0))
                .bind(spec.before)
                .bind(spec.limit)
                .bind(spec.now.micros())
                .fetch_all(&self.read)
                .await?;
            rows.iter().map(approval).collect()
        }

        async fn pending_approvals_of(
            &self,
            asker: AgentPk,
            now: Timestamp,
        ) -> Result<i64, StoreError> {
            Ok(sqlx::query_scalar::<Db, i64>(
                "SELECT COUNT(*) FROM approvals
                 WHERE asker_pk = $1 AND status = 'pending' AND expires_at > $2",
            )
            .bind(asker.0)
            .bind(now.micros())
            .fetch_one(&self.read)
            .await?)
        }

        async fn task_approvals(&self, task: TaskPk) -> Result<Vec<ApprovalRecord>, StoreError> {
            // Built from constants only.
            let sql = format!(
                "SELECT {APPROVAL_COLUMNS} FROM approvals WHERE task_pk = $1 ORDER BY pk"
            );
            let rows = sqlx::query::<Db>(sqlx::AssertSqlSafe(sql))
                .bind(task.0)
                .fetch_all(&self.read)
                .await?;
            rows.iter().map(approval).collect()
        }

        async fn count_pending_approvals(&self) -> Result<i64, StoreError> {
            Ok(sqlx::query_scalar::<Db, i64>(
                "SELECT COUNT(*) FROM approvals WHERE status = 'pending'",
            )
            .fetch_one(&self.read)
            .await?)
        }
    }
}
