//! What a message may weigh, and a page of them: the bounds that keep one answer (and
//! one replay page) from growing with what senders chose to send.

use serde_json::{Map, Value};

use crate::error::{ErrorBody, ErrorCode};

/// Most bytes of a message's `content.data` (and of a task's `data`), written as JSON,
/// whatever `--max-body-bytes` allows: with the text and the attachments' bounds, what
/// one inbox entry may weigh, which is what makes a page's byte bound mean something.
pub const MAX_DATA_BYTES: usize = 2 * 1024 * 1024;
/// Most bytes of messages one GET_MESSAGES page carries (their content, as stored):
/// a page stops early at it, with `next_cursor`, but always holds at least one entry.
pub const MAX_PAGE_BYTES: usize = 4 * 1024 * 1024;

/// Refuses a `data` object of more than [`MAX_DATA_BYTES`] as JSON (`MESSAGE_TOO_LONG`).
/// Counted without building the text, and only when a bound read off the tree (every
/// byte of every string escaped to six) could pass the limit: writing the JSON to count
/// it was a tenth of the round's creep of a STOMP SEND (whose data holds the raw body).
pub fn check_data_size(field: &str, data: &Map<String, Value>) -> Result<(), ErrorBody> {
    struct Counted(usize);
    impl std::io::Write for Counted {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0 += bytes.len();
            if self.0 > MAX_DATA_BYTES {
                return Err(std::io::Error::other("over the bound"));
            }
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    if data.is_empty()
        || object_bound(data) <= MAX_DATA_BYTES
        || serde_json::to_writer(&mut Counted(0), data).is_ok()
    {
        return Ok(());
    }
    Err(ErrorBody::new(
        ErrorCode::MessageTooLong,
        format!("{field} may hold at most {MAX_DATA_BYTES} bytes of JSON"),
    )
    .with("field", field)
    .with("max_bytes", MAX_DATA_BYTES))
}

/// The most bytes `value` can take as JSON: a string's every byte escaped (`\u00XX`, six
/// bytes), a number at its longest. Never below the exact count.
fn bound(value: &Value) -> usize {
    match value {
        Value::Null | Value::Bool(_) => 5,
        Value::Number(_) => 32,
        Value::String(s) => 2 + 6 * s.len(),
        Value::Array(items) => 2 + items.iter().map(|v| bound(v) + 1).sum::<usize>(),
        Value::Object(map) => object_bound(map),
    }
}

fn object_bound(map: &Map<String, Value>) -> usize {
    2 + map
        .iter()
        .map(|(k, v)| 2 + 6 * k.len() + 1 + bound(v) + 1)
        .sum::<usize>()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shortcut may only ever let through what the exact count lets through.
    #[test]
    fn the_bound_is_never_below_the_json() {
        let samples = serde_json::json!({
            "controls": "\u{0}\u{1}\u{1f}\"\\\n\t",
            "wide": "é漢字🙂\u{2028}",
            "numbers": [0, -1, u64::MAX, i64::MIN, 1.5e300, -2.2250738585072014e-308],
            "nested": {"a": [null, true, false, {"": ""}], "\u{7}key": []},
        });
        let Value::Object(map) = samples else {
            unreachable!()
        };
        let exact = serde_json::to_vec(&map)
            .map(|v| v.len())
            .unwrap_or(usize::MAX);
        assert!(
            object_bound(&map) >= exact,
            "{} < {exact}",
            object_bound(&map)
        );
        for value in map.values() {
            let exact = serde_json::to_vec(value)
                .map(|v| v.len())
                .unwrap_or(usize::MAX);
            assert!(bound(value) >= exact);
        }
    }

    #[test]
    fn data_past_the_limit_is_refused_and_data_at_it_is_not() {
        // `{"k":"…"}` is 8 bytes around the string.
        let at = |n: usize| {
            let mut map = Map::new();
            map.insert("k".into(), Value::String("x".repeat(n)));
            map
        };
        assert!(check_data_size("data", &at(MAX_DATA_BYTES - 8)).is_ok());
        let refused = check_data_size("data", &at(MAX_DATA_BYTES - 7)).expect_err("one byte over");
        assert_eq!(refused.error_code, ErrorCode::MessageTooLong);
    }
}
