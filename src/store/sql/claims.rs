//! Claimable work's reads, one implementation for both engines: a role's open tasks in
//! claim order (by the `tasks_offered` index, one seek per priority), the claims whose
//! lease ran out (by `tasks_leased`), and an agent's claims.

use switchboard_types::ids::{AgentPk, TeamPk};
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
            limit: i64,
        ) -> Result<Vec<TaskRecord>, StoreError> {
            // Built from constants only.
            let sql = format!(
                "SELECT {TASK_COLUMNS} FROM tasks
                 WHERE team_pk = $1 AND assignee_role = $2 AND priority = $3 AND status = 'open'
                 ORDER BY pk LIMIT $4"
            );
            let mut found = Vec::new();
            for priority in MOST_URGENT_FIRST {
                let wanted = limit - found.len() as i64;
                if wanted <= 0 {
                    break;
                }
                let rows = sqlx::query::<Db>(sqlx::AssertSqlSafe(sql.clone()))
                    .bind(team.0)
                    .bind(role.as_str())
                    .bind(priority.as_str())
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
