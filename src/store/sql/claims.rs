//! Claimable work's reads, one implementation for both engines: a role's open tasks in
//! claim order (by the `tasks_offered` index, one seek per priority), the claims whose
//! lease ran out (by `tasks_leased`), and an agent's claims.

use switchboard_types::ids::{AgentPk, TaskPk, TeamPk};
use switchboard_types::messages::Priority;
use switchboard_types::time::Timestamp;

use crate::model::TaskRecord;
use crate::store::StoreError;
use crate::store::columns::{TASK_COLUMNS, task};
use crate::store::engine::Claims;

/// The order claims take priorities in.
const MOST_URGENT_FIRST: [Priority; 4] = [
    Priority::Urgent,
    Priority::High,
    Priority::Normal,
    Priority::Low,
];

for_each_engine! {
    impl Claims for Store {
        async fn offered_tasks(
            &self,
            team: TeamPk,
            role: String,
            after: Option<(Priority, TaskPk)>,
            limit: i64,
        ) -> Result<Vec<TaskRecord>, StoreError> {
            // Built from constants only.
            let sql = format!(
                "SELECT {TASK_COLUMNS} FROM tasks
                 WHERE team_pk = $1 AND assignee_role = $2 AND priority = $3 AND status = 'open'
                   AND pk > $4
                 ORDER BY pk LIMIT $5"
            );
            // The priorities from `after`'s on; within its own, the tasks after its key.
            let start = after.map_or(0, |(priority, _)| {
                MOST_URGENT_FIRST.iter().position(|p| *p == priority).unwrap_or(0)
            });
            let mut found = Vec::new();
            for (i, priority) in MOST_URGENT_FIRST.iter().enumerate().skip(start) {
                let wanted = limit - found.len() as i64;
                if wanted <= 0 {
                    break;
                }
                let past = match after {
                    Some((_, pk)) if i == start => pk.0,
                    _ => 0,
                };
                let rows = sqlx::query::<Db>(sqlx::AssertSqlSafe(sql.clone()))
                    .bind(team.0)
                    .bind(role.as_str())
                    .bind(priority.as_str())
                    .bind(past)
                    .bind(wanted)
                    .fetch_all(&self.read)
                    .await?;
                for row in &rows {
                    found.push(task(row)?);
                }
            }
            Ok(found)
        }

        async fn lapsed_claims(
            &self,
            now: Timestamp,
            limit: i64,
        ) -> Result<Vec<TaskRecord>, StoreError> {
            // Built from constants only.
            let sql = format!(
                "SELECT {TASK_COLUMNS} FROM tasks
                 WHERE lease_expires_at IS NOT NULL AND lease_expires_at <= $1
                 ORDER BY lease_expires_at LIMIT $2"
            );
            let rows = sqlx::query::<Db>(sqlx::AssertSqlSafe(sql))
                .bind(now.micros())
                .bind(limit)
                .fetch_all(&self.read)
                .await?;
            rows.iter().map(task).collect()
        }

        async fn claims_of(&self, team: TeamPk, agent: AgentPk) -> Result<Vec<TaskRecord>, StoreError> {
            // Built from constants only.
            let sql = format!(
                "SELECT {TASK_COLUMNS} FROM tasks
                 WHERE team_pk = $1 AND assignee_pk = $2 AND assignee_role IS NOT NULL
                   AND (status = 'in-progress' OR status = 'input-required')
                 ORDER BY pk"
            );
            let rows = sqlx::query::<Db>(sqlx::AssertSqlSafe(sql))
                .bind(team.0)
                .bind(agent.0)
                .fetch_all(&self.read)
                .await?;
            rows.iter().map(task).collect()
        }
    }
}
