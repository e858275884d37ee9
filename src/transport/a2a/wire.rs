//! How a request is read beyond serde: JSON-RPC's envelope rules (a member named once;
//! a request without `id` is a notification) and ProtoJSON's field names (the original
//! snake_case name is the lowerCamel JSON name's equal).

use a2a::A2AError;
use serde::Deserialize;
use serde_json::Value;

/// The names of the members of the request's top-level object, in order (`None` when
/// the body is not a JSON object: the envelope's reader says why).
pub(super) fn top_level_members(body: &[u8]) -> Option<Vec<String>> {
    struct Members(Vec<String>);
    impl<'de> Deserialize<'de> for Members {
        fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            struct Visit;
            impl<'de> serde::de::Visitor<'de> for Visit {
                type Value = Members;
                fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                    f.write_str("a JSON object")
                }
                fn visit_map<A: serde::de::MapAccess<'de>>(
                    self,
                    mut map: A,
                ) -> Result<Members, A::Error> {
                    let mut names = Vec::new();
                    while let Some(name) = map.next_key::<String>()? {
                        map.next_value::<serde::de::IgnoredAny>()?;
                        names.push(name);
                    }
                    Ok(Members(names))
                }
            }
            d.deserialize_map(Visit)
        }
    }
    serde_json::from_slice::<Members>(body).ok().map(|m| m.0)
}

/// The first member named twice.
pub(super) fn repeated(members: &[String]) -> Option<&str> {
    members
        .iter()
        .enumerate()
        .find(|(at, name)| members[..*at].contains(name))
        .map(|(_, name)| name.as_str())
}

/// A2A 1.0's JSON is protobuf's JSON mapping, whose parsers take a field's original
/// name (`page_size`) as well as its lowerCamel JSON name (`pageSize`); the reference
/// server does. Renames every snake_case key to lowerCamel, except inside the values
/// that are free-form JSON (`metadata`, a data part's `data`), whose keys are the
/// client's own. A field given under both names is `InvalidParams`, as protobuf's
/// parser refuses it. Unknown fields are then ignored, as the reference server does
/// (`ignore_unknown_fields=True`).
pub(super) fn proto_names(value: Value) -> Result<Value, A2AError> {
    match value {
        Value::Object(fields) => {
            let mut renamed = serde_json::Map::with_capacity(fields.len());
            for (key, value) in fields {
                let name = lower_camel(&key);
                let value = match name.as_str() {
                    "metadata" | "data" => value,
                    _ => proto_names(value)?,
                };
                if renamed.contains_key(&name) {
                    return Err(A2AError::invalid_params(format!(
                        "{}: the field is given twice (as its JSON name and as its original name)",
                        switchboard_types::error::cut(&name, 64)
                    )));
                }
                renamed.insert(name, value);
            }
            Ok(Value::Object(renamed))
        }
        Value::Array(items) => items
            .into_iter()
            .map(proto_names)
            .collect::<Result<Vec<_>, _>>()
            .map(Value::Array),
        other => Ok(other),
    }
}

/// `page_size` as `pageSize`; a name without an inner `_` as it is.
fn lower_camel(name: &str) -> String {
    if !name.trim_start_matches('_').contains('_') {
        return name.to_owned();
    }
    let mut out = String::with_capacity(name.len());
    let mut upper = false;
    for (at, c) in name.chars().enumerate() {
        if c == '_' && at > 0 {
            upper = true;
        } else if upper {
            out.extend(c.to_uppercase());
            upper = false;
        } else {
            out.push(c);
        }
    }
    out
}

/// Whether some key of the JSON text has an inner `_` (a protobuf original name that
/// [`proto_names`] would rename): one pass over the bytes, strings skipped with their
/// escapes, so the usual request — whose text may hold `_` in values — is decoded straight
/// from its text, not through a tree. (A key inside `metadata` counts too: the tree then
/// keeps it as it is.)
pub(super) fn has_snake_key(json: &str) -> bool {
    let bytes = json.as_bytes();
    let mut at = 0;
    while at < bytes.len() {
        if bytes[at] != b'"' {
            at += 1;
            continue;
        }
        let start = at + 1;
        at = start;
        let mut inner_underscore = false;
        while at < bytes.len() && bytes[at] != b'"' {
            match bytes[at] {
                b'\\' => at += 1,
                b'_' if at > start => inner_underscore = true,
                _ => {}
            }
            at += 1;
        }
        at += 1;
        let next = bytes
            .get(at..)
            .and_then(|rest| rest.iter().find(|b| !b.is_ascii_whitespace()));
        if inner_underscore && next == Some(&b':') {
            return true;
        }
    }
    false
}

/// The declared Content-Type when it is not JSON (`application/json`, or a `+json` type).
pub fn not_json(headers: &axum::http::HeaderMap) -> Option<String> {
    let declared = headers.get(axum::http::header::CONTENT_TYPE)?;
    let text = String::from_utf8_lossy(declared.as_bytes()).into_owned();
    let media = text
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    let json = media == "application/json" || media.ends_with("+json");
    (!json).then(|| switchboard_types::error::cut(&text, 64).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_keys_with_an_inner_underscore_count() {
        assert!(has_snake_key(r#"{"page_size": 1}"#));
        assert!(has_snake_key(r#"{"message": {"task_id" : "x"}}"#));
        assert!(!has_snake_key(
            r#"{"pageSize": 1, "text": "snake_case in a value"}"#
        ));
        assert!(!has_snake_key(r#"{"_private": 1, "a": "x_y"}"#));
        assert!(!has_snake_key(r#"{"text": "quote \" then a_b\":"}"#));
    }
}
