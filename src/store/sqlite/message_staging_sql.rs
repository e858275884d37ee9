//! The statements of the batch's shared insert of staged messages (`message_staging`), one per
//! table, for both ways a batch is written: composed into one multi-statement round trip
//! through sqlx, or run one by one on the writer's direct connection (`direct`).

use super::message_row::{MESSAGE_BINDS, MESSAGE_ROW};
use super::rows::values_list;

/// `size` message rows bound as a `VALUES` list: pk first, then [`MESSAGE_ROW`]; rows
/// whose pk is NULL are padding.
pub(super) fn messages_insert(size: usize) -> String {
    let rows = values_list(MESSAGE_BINDS + 1, size);
    let columns = (1..=MESSAGE_BINDS + 1)
        .map(|i| format!("column{i}"))
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        "INSERT INTO messages (pk, {MESSAGE_ROW})
    SELECT {columns}
    FROM (VALUES {rows}) WHERE column1 IS NOT NULL"
    )
}

/// The inbox entries of the messages just inserted: `[[pk, [[agent, seq, news?], …]], …]`.
pub(super) const INBOX_INSERT: &str =
    "INSERT INTO inbox (agent_pk, seq, message_pk, sender_pk, kind, message_type, priority,
                       created_at, news, cause_by, thread_id)
    SELECT e.value->>0, e.value->>1, m.pk, m.sender_pk, m.kind, m.message_type, m.priority,
           m.created_at, COALESCE(e.value->>2, 1), m.cause_by, m.thread_id
    FROM jsonb_each(?) j CROSS JOIN messages m CROSS JOIN jsonb_each(j.value, '$[1]') e
    WHERE m.pk = j.value->>0";

/// Response links: `[[original, response, responder, status, created_at], …]`.
pub(super) const RESPONSES_INSERT: &str =
    "INSERT INTO responses (original_pk, response_pk, responder_pk, status, created_at)
    SELECT j.value->>0, j.value->>1, j.value->>2, j.value->>3, j.value->>4
    FROM jsonb_each(?) j";

/// Idempotency keys' first answers: `[[agent, key, operation, hash, answer, at], …]`.
pub(super) const KEYS_INSERT: &str =
    "INSERT INTO idempotency_keys (agent_pk, key, operation, request_hash, answer, created_at)
    SELECT j.value->>0, j.value->>1, j.value->>2, unhex(j.value->>3), j.value->>4, j.value->>5
    FROM jsonb_each(?) j";
