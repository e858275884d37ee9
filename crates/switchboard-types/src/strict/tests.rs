//! The strict decoder's rules, one test each.

use serde::Deserialize;
use serde_json::Value;

use super::*;

#[derive(Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
struct Team {
    name: String,
    id: Option<String>,
    size: Option<i64>,
}

fn strict<T: for<'de> Deserialize<'de>>(text: &str) -> Result<T, String> {
    let mut de = serde_json::Deserializer::from_str(text);
    T::deserialize(Strict(&mut de)).map_err(|e| e.to_string())
}

#[test]
fn objects_decode_as_before() {
    assert_eq!(
        strict::<Team>(r#"{"name": "a", "id": "b"}"#),
        Ok(Team {
            name: "a".into(),
            id: Some("b".into()),
            size: None
        })
    );
    let value: Value = strict(r#"{"a": [1, {"b": null}], "c": "d"}"#).expect("any JSON");
    assert_eq!(value["a"][1]["b"], Value::Null);
}

#[test]
fn an_array_is_not_a_struct() {
    let err = strict::<Team>(r#"["a", "b"]"#).expect_err("positional");
    assert!(err.contains("expected an object"), "{err}");
    assert!(!err.contains("Team"), "{err}");
    let nested = strict::<Vec<Team>>(r#"[["a"]]"#).expect_err("nested");
    assert!(nested.contains("expected an object"), "{nested}");
}

#[test]
fn a_nul_in_any_string_or_key_is_refused() {
    for json in [
        r#"{"name": "a\u0000b", "size": 1}"#,
        r#"{"name": "a", "size": 1, "x\u0000": 1}"#,
    ] {
        let err = strict::<Team>(json).expect_err(json);
        assert!(err.contains("U+0000"), "{err}");
        assert!(super::has_nul(json.as_bytes()), "{json}");
    }
    let nested = strict::<Value>(r#"{"data": {"deep": ["ok", "no\u0000"]}}"#).expect_err("deep");
    assert!(nested.contains("U+0000"), "{nested}");
    // A backslash before `u0000` is a backslash, not a NUL.
    let text = r#"{"name": "a\\u0000", "size": 1}"#;
    assert!(strict::<Team>(text).is_ok());
    assert!(!super::has_nul(text.as_bytes()));
}

#[test]
fn duplicate_keys_are_refused_at_any_depth() {
    let err = strict::<Team>(r#"{"name": "a", "name": "b"}"#).expect_err("dup");
    assert!(err.contains("duplicate"), "{err}");
    let err = strict::<Value>(r#"{"x": {"k": 1, "k": 2}}"#).expect_err("dup");
    assert!(err.contains("duplicate key `k`"), "{err}");
}

#[test]
fn expectations_are_said_in_json_words() {
    let err = strict::<Team>(r#"{"name": "a", "size": "big"}"#).expect_err("type");
    assert!(err.contains("expected an integer"), "{err}");
    assert!(!err.contains("i64"), "{err}");
    // A token the integer's own visitor is handed and refuses (found by the fuzzer).
    for size in [
        "1e308",
        "1.5",
        "-9263372036854775808",
        "9223372036854775808",
    ] {
        let err =
            strict::<Team>(&format!(r#"{{"name": "a", "size": {size}}}"#)).expect_err("not an i64");
        assert!(err.contains("expected an integer"), "{err}");
        assert!(!err.contains("i64"), "{err}");
    }
    // JSON Schema's integer: a number without a fraction (schemathesis sent 6203.0).
    let team = strict::<Team>(r#"{"name": "a", "size": 6203.0}"#).expect("an integer");
    assert_eq!(team.size, Some(6203));
}
