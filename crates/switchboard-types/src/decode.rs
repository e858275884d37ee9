//! Decoding client input with errors that name the field.
//!
//! A client of Switchboard gets the contract's error body for every failure, with the
//! offending field in `details.field` (`content.text`, `recipient_agent_ids[2]`), whether
//! the input came as a REST body, a WebSocket frame or a tool call: every transport
//! decodes through these functions.

use std::fmt;
use std::marker::PhantomData;

use serde::de::{DeserializeOwned, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize};

use crate::error::ErrorBody;
use crate::strict::Strict;

/// Reads `null` like an absent field: many clients send `None` for "not given".
pub fn null_as_default<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

/// A list given as `a,b,c` (query strings) or `["a", "b", "c"]` (JSON).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct CommaList<T>(pub Vec<T>);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for CommaList<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ListVisitor<T>(PhantomData<T>);

        impl<'de, T: Deserialize<'de>> Visitor<'de> for ListVisitor<T> {
            type Value = CommaList<T>;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a comma-separated string or an array")
            }

            fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<Self::Value, E> {
                text.split(',')
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(|item| {
                        T::deserialize(
                            serde::de::value::StrDeserializer::<serde::de::value::Error>::new(item),
                        )
                        .map_err(|e| E::custom(format!("'{item}': {e}")))
                    })
                    .collect::<Result<Vec<T>, E>>()
                    .map(CommaList)
            }

            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(256));
                while let Some(item) = seq.next_element()? {
                    items.push(item);
                }
                Ok(CommaList(items))
            }
        }

        deserializer.deserialize_any(ListVisitor(PhantomData))
    }
}

/// For a field of a body that must change something (a PATCH): absent is `None` (with
/// `#[serde(default)]`), `null` is refused. Taking `null` for "absent" let a body of
/// nulls only pass the document's `minProperties` and then fail the "at least one
/// field" rule; now the document says what is accepted (the field is not nullable).
pub fn no_null<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: serde::Deserialize<'de>,
{
    T::deserialize(deserializer).map(Some)
}

/// Decodes an already parsed JSON value into `T`, naming the field on failure (strict,
/// as [`decode_json`]).
pub fn decode_value<T: DeserializeOwned>(value: serde_json::Value) -> Result<T, ErrorBody> {
    serde_path_to_error::deserialize(Strict(value)).map_err(|err| {
        let path = err.path().to_string();
        field_error(&path, &err.into_inner().to_string())
    })
}

/// Decodes JSON text into `T`, naming the field on failure. Strict (see
/// [`crate::strict`]): structs only from objects, no duplicate keys.
pub fn decode_json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ErrorBody> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(ErrorBody::validation(
            "body",
            "the request needs a JSON body",
        ));
    }
    // Tracking the path costs on every field; a good body (the usual case) does not
    // need it, so the path is worked out only by a second pass over a bad one.
    let mut de = serde_json::Deserializer::from_slice(bytes);
    if let Ok(value) = T::deserialize(Strict(&mut de))
        && de.end().is_ok()
    {
        return Ok(value);
    }
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let value: T = serde_path_to_error::deserialize(Strict(&mut de)).map_err(|err| {
        let path = err.path().to_string();
        let inner = err.into_inner();
        if inner.is_syntax() || inner.is_eof() {
            ErrorBody::validation("body", format!("the body is not valid JSON: {inner}"))
        } else {
            field_error(&path, &inner.to_string())
        }
    })?;
    de.end().map_err(|e| {
        ErrorBody::validation("body", format!("unexpected data after the JSON value: {e}"))
    })?;
    Ok(value)
}

/// Builds a `VALIDATION_ERROR` for a serde message at `path`. serde reports a missing
/// field on the containing object, so its name is taken from the message to point at
/// the field itself.
pub fn field_error(path: &str, message: &str) -> ErrorBody {
    let message = message.split(" at line ").next().unwrap_or(message);
    let missing = message
        .strip_prefix("missing field `")
        .and_then(|rest| rest.split('`').next());
    let field = match (path, missing) {
        (".", Some(name)) => name.to_owned(),
        (p, Some(name)) => format!("{p}.{name}"),
        (".", None) => "body".to_owned(),
        (p, None) => p.to_owned(),
    };
    let field = visible_field(&field);
    ErrorBody::validation(&field, format!("{field}: {message}"))
}

/// A field path a person can read: a key that is the empty string (legal JSON, and
/// an unknown field like any other) is written `""`, so the error still names it; a
/// control character in a key is written escaped (`\u{0}`), so an error never carries
/// a NUL — which no answer may hold — or a line break into a log.
pub fn visible_field(path: &str) -> String {
    let path: std::borrow::Cow<'_, str> = if path.chars().any(char::is_control) {
        path.chars()
            .map(|c| {
                if c.is_control() {
                    c.escape_unicode().to_string()
                } else {
                    c.to_string()
                }
            })
            .collect::<String>()
            .into()
    } else {
        path.into()
    };
    if path.is_empty() {
        return "\"\"".to_owned();
    }
    match path.strip_suffix('.') {
        Some(parent) => format!("{parent}.\"\""),
        None => path.into_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A patch body as the types write it is one the server reads: a field that refuses
    /// `null` ([`no_null`]) is left out when unset, not written as `null` (found by
    /// `switchboard apply`, whose settings `PATCH` the server refused field by field).
    #[test]
    fn a_patch_the_types_write_is_one_they_read() {
        fn round_trip<T: serde::Serialize + DeserializeOwned>(body: &T) -> Result<T, ErrorBody> {
            decode_value(serde_json::to_value(body).expect("serializes"))
        }
        let team = crate::teams::UpdateTeam {
            max_attempts: Some(5),
            ..Default::default()
        };
        assert!(round_trip(&team).is_ok());
        let agent = crate::agents::UpdateAgent {
            role: Some("Reviewer".into()),
            ..Default::default()
        };
        assert!(round_trip(&agent).is_ok());
        let watch = crate::publish::SetWatch {
            watch: Some(vec!["WriteDesign".into()]),
            ..Default::default()
        };
        assert!(round_trip(&watch).is_ok());
    }

    /// Found by schemathesis: a query parameter named with a NUL was echoed, NUL and
    /// all, into the error message, which the error's own schema refuses.
    #[test]
    fn a_control_character_in_a_key_is_escaped() {
        assert_eq!(visible_field("a\0b"), "a\\u{0}b");
        assert_eq!(visible_field("x\ny."), "x\\u{a}y.\"\"");
        assert_eq!(visible_field("plain"), "plain");
    }

    /// Found by the fuzzer: an unknown field named "" was reported with an empty
    /// field name, so the error named nothing.
    #[test]
    fn an_empty_key_is_named_visibly() {
        #[derive(Debug, serde::Deserialize)]
        #[serde(deny_unknown_fields)]
        #[allow(dead_code)]
        struct Body {
            name: Option<String>,
        }
        let err = decode_json::<Body>(br#"{"": 1}"#).expect_err("unknown");
        assert_eq!(err.details["field"], "\"\"");
        assert_eq!(visible_field("content."), "content.\"\"");
        assert_eq!(visible_field("content.text"), "content.text");
    }
    use crate::error::ErrorCode;

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Outer {
        name: String,
        inner: Inner,
    }

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Inner {
        count: u32,
    }

    fn field_of(json: &str) -> String {
        let err = decode_json::<Outer>(json.as_bytes()).expect_err(json);
        assert_eq!(err.error_code, ErrorCode::ValidationError);
        err.details["field"].as_str().unwrap_or_default().to_owned()
    }

    #[test]
    fn names_the_offending_field() {
        assert_eq!(field_of(r#"{"inner": {"count": 1}}"#), "name");
        assert_eq!(field_of(r#"{"name": 5, "inner": {"count": 1}}"#), "name");
        assert_eq!(
            field_of(r#"{"name": "x", "inner": {"count": "many"}}"#),
            "inner.count"
        );
        assert_eq!(field_of(r#"{"name": "x", "inner": {}}"#), "inner.count");
        assert_eq!(
            field_of(r#"{"name": "x", "inner": {"count": 1}, "extra": 1}"#),
            "extra"
        );
        assert_eq!(field_of(r#"{"name": "#), "body");
        assert_eq!(field_of(""), "body");
    }

    #[test]
    fn comma_lists_read_strings_and_arrays() {
        #[derive(Debug, PartialEq, Deserialize)]
        #[serde(rename_all = "lowercase")]
        enum Kind {
            Request,
            Information,
        }
        let from_text: CommaList<Kind> =
            serde_json::from_value(serde_json::json!("request, information")).expect("text");
        assert_eq!(from_text.0, vec![Kind::Request, Kind::Information]);
        let from_list: CommaList<Kind> =
            serde_json::from_value(serde_json::json!(["request"])).expect("list");
        assert_eq!(from_list.0, vec![Kind::Request]);
        assert!(serde_json::from_value::<CommaList<Kind>>(serde_json::json!("nope")).is_err());
    }
}
