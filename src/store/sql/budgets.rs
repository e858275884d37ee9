//! Budget counts (`budget_counts`): spent inside the transaction of the send they count.
//! On PostgreSQL a count's row is locked from its increment to the commit, so the nodes'
//! sends spend from it one after another and never past its limit together.

use crate::model::Charge;
use crate::store::StoreError;

for_each_engine! {
    /// Spends one of each charge; [`StoreError::OverBudget`] with the first charge that
    /// would pass its limit. The job's savepoint undoes what was spent before it.
    pub(crate) async fn spend(conn: &mut Conn, charges: &[Charge]) -> Result<(), StoreError> {
        for (i, charge) in charges.iter().enumerate() {
            let used: i64 = sqlx::query_scalar::<Db, i64>(
                "INSERT INTO budget_counts (team_pk, key, window_start, used)
                 VALUES ($1, $2, $3, 1)
                 ON CONFLICT (team_pk, key, window_start)
                 DO UPDATE SET used = budget_counts.used + 1
                 RETURNING used",
            )
            .bind(charge.team.0)
            .bind(&charge.key)
            .bind(charge.window_start)
            .fetch_one(&mut *conn)
            .await?;
            if used > i64::from(charge.limit) {
                return Err(StoreError::OverBudget(i));
            }
        }
        Ok(())
    }

    /// Removes counts of windows that started before `before` (epoch seconds), at most
    /// `limit` rows; how many went.
    pub(crate) async fn expire(
        conn: &mut Conn,
        before: i64,
        limit: i64,
    ) -> Result<u64, StoreError> {
        let done = sqlx::query::<Db>(
            "DELETE FROM budget_counts WHERE (team_pk, key, window_start) IN
               (SELECT team_pk, key, window_start FROM budget_counts WHERE window_start < $1
                ORDER BY window_start LIMIT $2)",
        )
        .bind(before)
        .bind(limit)
        .execute(conn)
        .await?;
        Ok(done.rows_affected())
    }
}
