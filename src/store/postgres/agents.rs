//! Saving agents' presence and queue cursors on PostgreSQL, one statement each over
//! `unnest` (the rest: `store/sql/agents.rs`).

use sqlx::postgres::PgConnection;
use switchboard_types::time::Timestamp;

use crate::model::{PresenceRow, QueueCursorRow};
use crate::store::StoreError;

pub(crate) use crate::store::sql::agents::postgres::*;

/// Writes acknowledged cursors and last activity in one statement; a cursor never
/// moves back (another node may have saved a newer one).
pub(crate) async fn save_presence(
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

/// Writes queue cursors in one statement; never backwards. One row per queue (an
/// upsert may not touch a row twice), the furthest cursor kept.
pub(crate) async fn save_queue_cursors(
    conn: &mut PgConnection,
    cursors: &[QueueCursorRow],
) -> Result<(), StoreError> {
    // The last row of a queue says whether it is deaf.
    let mut furthest: std::collections::BTreeMap<(i64, &str), (i64, bool)> = Default::default();
    for c in cursors {
        let at = furthest
            .entry((c.agent.0, c.queue.as_str()))
            .or_insert((0, false));
        *at = (at.0.max(c.acked_seq), c.deaf);
    }
    let agents: Vec<i64> = furthest.keys().map(|(a, _)| *a).collect();
    let queues: Vec<&str> = furthest.keys().map(|(_, q)| *q).collect();
    let seqs: Vec<i64> = furthest.values().map(|(s, _)| *s).collect();
    let deaf: Vec<bool> = furthest.values().map(|(_, d)| *d).collect();
    sqlx::query(
        "INSERT INTO queue_cursors (agent_pk, queue, acked_seq, deaf)
         SELECT * FROM unnest($1::bigint[], $2::text[], $3::bigint[], $4::boolean[])
         ON CONFLICT (agent_pk, queue) DO UPDATE
             SET acked_seq = GREATEST(queue_cursors.acked_seq, excluded.acked_seq),
                 deaf = excluded.deaf",
    )
    .bind(agents)
    .bind(queues)
    .bind(seqs)
    .bind(deaf)
    .execute(conn)
    .await?;
    Ok(())
}
