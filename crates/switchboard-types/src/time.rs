//! Timestamps: microseconds since the Unix epoch inside, RFC 3339 UTC outside.
//!
//! One type so that every timestamp on the wire has the same shape
//! (`2026-11-22T10:15:30.123456Z`, always six fractional digits, always `Z`), which keeps
//! them comparable as strings, and so that storage keeps a plain sortable integer.

use std::borrow::Cow;
use std::fmt;
use std::time::{SystemTime, UNIX_EPOCH};

use chrono::{DateTime, Datelike, SecondsFormat, Timelike, Utc};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A point in time with microsecond precision, in UTC.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(i64);

impl Timestamp {
    /// The system clock read as microseconds directly: `Utc::now()` would turn the
    /// reading into a calendar date and back (a few hundred instructions, taken several
    /// times by every send).
    pub fn now() -> Self {
        let micros = match SystemTime::now().duration_since(UNIX_EPOCH) {
            Ok(after) => i64::try_from(after.as_micros()).unwrap_or(i64::MAX),
            Err(before) => i64::try_from(before.duration().as_micros()).map_or(i64::MIN, |m| -m),
        };
        Timestamp(micros)
    }

    pub fn from_micros(micros: i64) -> Self {
        Timestamp(micros)
    }

    pub fn micros(self) -> i64 {
        self.0
    }

    /// Parses RFC 3339 with any offset; the result is in UTC. An instant whose UTC year
    /// leaves 0000–9999 (`9999-12-31T23:00:00-05:00`) is refused: it could not be
    /// written back as RFC 3339, so it would come out of the API unreadable.
    pub fn parse(text: &str) -> Option<Self> {
        DateTime::parse_from_rfc3339(text)
            .ok()
            .map(|dt| dt.with_timezone(&Utc))
            .filter(|utc| (0..=9999).contains(&utc.year()))
            .map(|utc| Timestamp(utc.timestamp_micros()))
    }

    pub fn plus_millis(self, millis: i64) -> Self {
        Timestamp(self.0.saturating_add(millis.saturating_mul(1000)))
    }
}

/// Length of `YYYY-MM-DDTHH:MM:SS.ffffffZ`.
const RFC3339_LEN: usize = 27;

impl Timestamp {
    /// The wire form written digit by digit into a fixed buffer: every answer and every
    /// pushed frame carries timestamps (an inbox page fifty of them), and going through
    /// chrono's formatter cost an allocation and the `fmt` machinery each. `None` for
    /// years outside 0–9999, which take the general path.
    fn rfc3339(self) -> Option<[u8; RFC3339_LEN]> {
        let dt = DateTime::<Utc>::from_timestamp_micros(self.0)?;
        let year = u32::try_from(dt.year()).ok().filter(|y| *y <= 9999)?;
        let micros = dt.timestamp_subsec_micros();
        if micros >= 1_000_000 {
            return None;
        }
        let mut out = *b"0000-00-00T00:00:00.000000Z";
        put_digits(&mut out[0..4], year);
        put_digits(&mut out[5..7], dt.month());
        put_digits(&mut out[8..10], dt.day());
        put_digits(&mut out[11..13], dt.hour());
        put_digits(&mut out[14..16], dt.minute());
        put_digits(&mut out[17..19], dt.second());
        put_digits(&mut out[20..26], micros);
        Some(out)
    }
}

/// Writes `value` as decimal digits filling `out`, zero-padded on the left.
fn put_digits(out: &mut [u8], mut value: u32) {
    for digit in out.iter_mut().rev() {
        *digit = b'0' + (value % 10) as u8;
        value /= 10;
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(text) = self.rfc3339()
            && let Ok(text) = std::str::from_utf8(&text)
        {
            return f.write_str(text);
        }
        match DateTime::<Utc>::from_timestamp_micros(self.0) {
            Some(dt) => f.write_str(&dt.to_rfc3339_opts(SecondsFormat::Micros, true)),
            None => write!(f, "invalid-timestamp({})", self.0),
        }
    }
}

impl Serialize for Timestamp {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        if let Some(text) = self.rfc3339()
            && let Ok(text) = std::str::from_utf8(&text)
        {
            return serializer.serialize_str(text);
        }
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

#[cfg(feature = "openapi")]
impl utoipa::PartialSchema for Timestamp {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::Schema> {
        use utoipa::openapi::schema::{KnownFormat, ObjectBuilder, SchemaFormat, Type};
        ObjectBuilder::new()
            .schema_type(Type::String)
            .format(Some(SchemaFormat::KnownFormat(KnownFormat::DateTime)))
            .description(Some("RFC 3339 timestamp in UTC"))
            .examples([serde_json::json!("2026-11-22T10:15:30.123456Z")])
            .into()
    }
}

#[cfg(feature = "openapi")]
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

    /// Found by the fuzzer: an offset can carry an instant past 9999 in UTC, which
    /// RFC 3339 cannot write; such an instant is refused rather than echoed unreadable.
    #[test]
    fn instants_outside_four_digit_years_are_refused() {
        assert_eq!(Timestamp::parse("9999-12-31T23:00:00-05:00"), None);
        assert_eq!(Timestamp::parse("0000-01-01T00:30:00+01:00"), None);
        let last = Timestamp::parse("9999-12-31T23:59:59.999999Z").expect("in range");
        assert_eq!(Timestamp::parse(&last.to_string()), Some(last));
    }

    #[test]
    fn now_reads_the_clock_chrono_reads() {
        let before = Utc::now().timestamp_micros();
        let now = Timestamp::now().micros();
        let after = Utc::now().timestamp_micros();
        assert!(before <= now && now <= after, "{before} {now} {after}");
    }

    #[test]
    fn fast_formatting_matches_chrono() {
        let chrono_text = |micros: i64| {
            DateTime::<Utc>::from_timestamp_micros(micros)
                .expect("in range")
                .to_rfc3339_opts(SecondsFormat::Micros, true)
        };
        let mut micros = -62_135_596_800_000_000; // 0001-01-01T00:00:00Z
        while micros < 253_402_300_799_999_999 {
            // 9999-12-31T23:59:59.999999Z
            let ts = Timestamp::from_micros(micros);
            assert_eq!(ts.to_string(), chrono_text(micros));
            assert_eq!(
                serde_json::to_string(&ts).expect("json"),
                format!("\"{}\"", chrono_text(micros))
            );
            micros += 7_777_777_777_777; // about every 90 days, odd digits everywhere
        }
        for edge in [0, -1, 1, 253_402_300_799_999_999] {
            assert_eq!(Timestamp::from_micros(edge).to_string(), chrono_text(edge));
        }
        // Past year 9999 the general path answers.
        let far = 253_402_300_800_000_000;
        assert_eq!(Timestamp::from_micros(far).to_string(), chrono_text(far));
    }

    #[test]
    fn rejects_non_rfc3339() {
        assert_eq!(Timestamp::parse("yesterday"), None);
        assert_eq!(Timestamp::parse("2026-11-22 10:15:30"), None);
    }
}
