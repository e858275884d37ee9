//! Saving agents' presence and queue cursors on SQLite, one statement each over
//! `json_each` (the rest: `store/sql/agents.rs`).

use sqlx::SqliteConnection;
use switchboard_types::time::Timestamp;

use super::rows::to_json;
use crate::model::{PresenceRow, QueueCursorRow};
use crate::store::StoreError;

pub(crate) use crate::store::sql::agents::sqlite::*;

/// Writes acknowledged cursors and last activity, `(agent pk, acked seq, last seen)`,
/// in one statement (a cursor never moves back).
pub(crate) async fn save_presence(
    conn: &mut SqliteConnection,
    agents: &[PresenceRow],
) -> Result<(), StoreError> {
    let rows: Vec<(i64, i64, Option<i64>)> = agents
        .iter()
        .map(|p| {
            (
                p.agent.0,
                p.acked_seq,
                p.last_seen_at.map(Timestamp::micros),
            )
        })
        .collect();
    let json = to_json(&rows)?;
    sqlx::query(
        "UPDATE agents SET acked_seq = MAX(acked_seq, j.value->>1),
                           last_seen_at = COALESCE(j.value->>2, last_seen_at)
         FROM json_each(?) j WHERE agents.pk = j.value->>0",
    )
    .bind(json)
    .execute(conn)
    .await?;
    Ok(())
}

/// Writes queue cursors in one statement; like the agents' cursors, never backwards.
pub(crate) async fn save_queue_cursors(
    conn: &mut SqliteConnection,
    cursors: &[QueueCursorRow],
) -> Result<(), StoreError> {
    let rows: Vec<(i64, &str, i64, bool)> = cursors
        .iter()
        .map(|c| (c.agent.0, c.queue.as_str(), c.acked_seq, c.deaf))
        .collect();
    sqlx::query(
        "INSERT INTO queue_cursors (agent_pk, queue, acked_seq, deaf)
         SELECT j.value->>0, j.value->>1, j.value->>2, j.value->>3 FROM json_each(?) j WHERE true
         ON CONFLICT (agent_pk, queue) DO UPDATE
             SET acked_seq = MAX(acked_seq, excluded.acked_seq), deaf = excluded.deaf",
    )
    .bind(to_json(&rows)?)
    .execute(conn)
    .await?;
    Ok(())
}
