//! Page cursors: opaque to clients, so the server can change what is in them, and
//! checked on the way back in, because a client may send anything. Public so that the
//! fuzzer reaches them exactly as a request does.

use base64::Engine;
use switchboard_types::ids::TaskPk;
use switchboard_types::messages::SortOrder;

use super::{CoreError, CoreResult};

/// An inbox cursor: the sort order and the last sequence number returned. The order is
/// inside so that a cursor of one order cannot silently page the other.
pub fn encode_inbox(order: SortOrder, seq: i64) -> String {
    let raw = format!("v1:{}:{seq}", order_tag(order));
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(raw)
}

fn order_tag(order: SortOrder) -> &'static str {
    match order {
        SortOrder::NewestFirst => "n",
        SortOrder::OldestFirst => "o",
    }
}

/// The sequence number an inbox cursor continues after, or a `cursor` validation error.
pub fn decode_inbox(cursor: &str, order: SortOrder) -> CoreResult<i64> {
    let invalid =
        || CoreError::validation("cursor", "cursor is not a next_cursor this server gave out");
    let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(cursor)
        .map_err(|_| invalid())?;
    let raw = String::from_utf8(raw).map_err(|_| invalid())?;
    let mut parts = raw.split(':');
    match (
        parts.next(),
        parts.next(),
        parts.next().map(str::parse::<i64>),
        parts.next(),
    ) {
        (Some("v1"), Some(tag), Some(Ok(seq)), None) if tag == order_tag(order) => Ok(seq),
        (Some("v1"), Some(_), Some(Ok(_)), None) => Err(CoreError::validation(
            "cursor",
            "this cursor belongs to the other sort_order; keep the sort_order of the first page",
        )),
        _ => Err(invalid()),
    }
}

/// A task-list cursor: the last task returned (lists run newest first).
pub fn encode_task(task: TaskPk) -> String {
    format!("t{task}")
}

/// The task a task-list cursor continues after, or a `cursor` validation error.
pub fn decode_task(cursor: &str) -> CoreResult<TaskPk> {
    cursor
        .strip_prefix('t')
        .and_then(|n| n.parse::<i64>().ok())
        .filter(|n| *n > 0)
        .map(TaskPk)
        .ok_or_else(|| CoreError::validation("cursor", "cursor is not a next_cursor of this list"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip_and_keep_their_order() {
        let c = encode_inbox(SortOrder::NewestFirst, 42);
        assert_eq!(decode_inbox(&c, SortOrder::NewestFirst).ok(), Some(42));
        assert!(decode_inbox(&c, SortOrder::OldestFirst).is_err());
        assert!(decode_inbox("garbage!", SortOrder::NewestFirst).is_err());
        let t = encode_task(TaskPk(7));
        assert_eq!(decode_task(&t).ok(), Some(TaskPk(7)));
        for bad in ["t0", "t-1", "7", "t", "tx"] {
            assert!(decode_task(bad).is_err(), "{bad}");
        }
    }
}
