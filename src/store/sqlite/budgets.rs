//! Budget counts (`budget_counts`): spent inside the transaction of the send they count.

use sqlx::SqliteConnection;

use crate::model::Charge;
use crate::store::StoreError;

/// Spends one of each charge; [`StoreError::OverBudget`] with the first charge that
/// would pass its limit. The caller's savepoint undoes what was spent before it.
pub(super) async fn spend(
    conn: &mut SqliteConnection,
    charges: &[Charge],
) -> Result<(), StoreError> {
    for (i, charge) in charges.iter().enumerate() {
        let used: i64 = sqlx::query_scalar(
            "INSERT INTO budget_counts (team_pk, key, window_start, used) VALUES (?, ?, ?, 1)
             ON CONFLICT (team_pk, key, window_start) DO UPDATE SET used = used + 1
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
pub(super) async fn expire(
    conn: &mut SqliteConnection,
    before: i64,
    limit: i64,
) -> Result<u64, StoreError> {
    let done = sqlx::query(
        "DELETE FROM budget_counts WHERE rowid IN (
           SELECT rowid FROM budget_counts WHERE window_start < ?
           ORDER BY window_start LIMIT ?)",
    )
    .bind(before)
    .bind(limit)
    .execute(conn)
    .await?;
    Ok(done.rows_affected())
}
