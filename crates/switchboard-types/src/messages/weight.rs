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
/// Counted without building the text.
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
    if data.is_empty() || serde_json::to_writer(&mut Counted(0), data).is_ok() {
        return Ok(());
    }
    Err(ErrorBody::new(
        ErrorCode::MessageTooLong,
        format!("{field} may hold at most {MAX_DATA_BYTES} bytes of JSON"),
    )
    .with("field", field)
    .with("max_bytes", MAX_DATA_BYTES))
}
