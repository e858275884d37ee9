//! The disk-use gauges of `/metrics`, set in one place for both engines: each reads its
//! own figures (SQLite from its files and counters, PostgreSQL in one query) and hands
//! them here, so the names and the age arithmetic cannot drift apart.

use switchboard_types::time::Timestamp;

/// The database's size on disk.
pub(crate) fn set_database_bytes(bytes: u64) {
    metrics::gauge!("switchboard_store_database_bytes").set(bytes as f64);
}

/// The rows of one table family.
pub(crate) fn set_rows(family: &str, count: i64) {
    metrics::gauge!("switchboard_store_rows", "table" => family.to_owned()).set(count as f64);
}

/// The age of the oldest message kept, from when it was written (microseconds); 0 when
/// none is kept.
pub(crate) fn set_oldest_message(written_at: Option<i64>) {
    let age = written_at.map_or(0.0, |at| {
        (Timestamp::now().micros() - at).max(0) as f64 / 1e6
    });
    metrics::gauge!("switchboard_store_oldest_message_age_seconds").set(age);
}
