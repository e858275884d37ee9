//! Timestamps: microseconds since the Unix epoch inside, RFC 3339 UTC outside.
//!
//! One type so that every timestamp on the wire has the same shape
//! (`2026-11-22T10:15:30.123456Z`, always six fractional digits, always `Z`), which keeps
//! them comparable as strings, and so that storage keeps a plain sortable integer.

use std::borrow::Cow;
use std::fmt;

use chrono::{DateTime, SecondsFormat, Utc};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use utoipa::openapi::schema::{KnownFormat, ObjectBuilder, SchemaFormat, Type};
use utoipa::openapi::{RefOr, Schema};

/// A point in time with microsecond precision, in UTC.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(i64);

impl Timestamp {
    pub fn now() -> Self {
        Timestamp(Utc::now().timestamp_micros())
    }

    pub fn from_micros(micros: i64) -> Self {
        Timestamp(micros)
    }

    pub fn micros(self) -> i64 {
        self.0
    }

    /// Parses RFC 3339 with any offset; the result is in UTC.
    pub fn parse(text: &str) -> Option<Self> {
        DateTime::parse_from_rfc3339(text)
            .ok()
            .map(|dt| Timestamp(dt.with_timezone(&Utc).timestamp_micros()))
    }

    pub fn plus_millis(self, millis: i64) -> Self {
        Timestamp(self.0.saturating_add(millis.saturating_mul(1000)))
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match DateTime::<Utc>::from_timestamp_micros(self.0) {
            Some(dt) => f.write_str(&dt.to_rfc3339_opts(SecondsFormat::Micros, true)),
            None => write!(f, "invalid-timestamp({})", self.0),
        }
    }
}

impl Serialize for Timestamp {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Timestamp {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = Cow::<'de, str>::deserialize(deserializer)?;
        Timestamp::parse(&text).ok_or_else(|| {
            serde::de::Error::custom(format!(
                "'{text}' is not an RFC 3339 timestamp (e.g. 2026-11-22T10:15:30Z)"
            ))
        })
    }
}

impl utoipa::PartialSchema for Timestamp {
    fn schema() -> RefOr<Schema> {
        ObjectBuilder::new()
            .schema_type(Type::String)
            .format(Some(SchemaFormat::KnownFormat(KnownFormat::DateTime)))
            .description(Some("RFC 3339 timestamp in UTC"))
            .examples([serde_json::json!("2026-11-22T10:15:30.123456Z")])
            .into()
    }
}

impl utoipa::ToSchema for Timestamp {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_through_rfc3339_in_utc() {
        let ts = Timestamp::parse("2026-11-22T11:15:30.5+01:00").expect("valid");
        assert_eq!(ts.to_string(), "2026-11-22T10:15:30.500000Z");
        assert_eq!(Timestamp::parse(&ts.to_string()), Some(ts));
    }

    #[test]
    fn rejects_non_rfc3339() {
        assert_eq!(Timestamp::parse("yesterday"), None);
        assert_eq!(Timestamp::parse("2026-11-22 10:15:30"), None);
    }
}
