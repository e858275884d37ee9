//! Mutations: byte-level ones that find what a tokenizer trips on, and JSON-aware ones
//! that keep an input parseable long enough to reach the validation behind the parser.

use rand::Rng;
use rand::rngs::StdRng;
use rand::seq::IndexedRandom;
use serde_json::{Map, Value, json};

/// Bytes that mean something to JSON, query strings, URLs, cursors or timestamps.
const INTERESTING_BYTES: &[u8] = b"\0\x7f\xff\"\\{}[]:,-+.0123456789eE/?#&=%@:[]_ \t\r\ntfnTZ";

/// Strings that are edges somewhere: empty, blank, odd whitespace, bidi and line
/// separators, lone surrogate escapes, encodings of dots, IPv6 and IPv4 spellings.
const INTERESTING_STRINGS: &[&str] = &[
    "",
    " ",
    "\u{85}",
    "\u{a0}",
    "\u{2028}",
    "\u{202e}",
    "\u{feff}",
    "\\ud800",
    "\\u0000",
    "..",
    "%2e%2e",
    "%00",
    "%",
    "é",
    "🦀",
    "[::1]",
    "[::ffff:127.0.0.1]",
    "[64:ff9b::a00:1]",
    "[2002:7f00:1::]",
    "0x7f.1",
    "017700000001",
    "2130706433",
    "user:pass@",
    "1970-01-01T00:00:00Z",
    "9999-12-31T23:59:59.999999999+14:00",
    "2024-02-30T25:61:61Z",
    "-0",
    "1e999",
    "9223372036854775808",
    "-9223372036854775809",
];

/// Numbers at the edges of every integer type and of JSON's own range.
const INTERESTING_NUMBERS: &[&str] = &[
    "0",
    "-1",
    "1",
    "100",
    "101",
    "255",
    "256",
    "2147483648",
    "9223372036854775807",
    "9223372036854775808",
    "-9223372036854775808",
    "18446744073709551616",
    "1.5",
    "-0.0",
    "1e308",
    "1e-400",
];

/// One mutated copy of `input`; `others` feeds the splices.
pub fn mutate(rng: &mut StdRng, input: &[u8], others: &[Vec<u8>]) -> Vec<u8> {
    let mut out = input.to_vec();
    let rounds = 1 + rng.random_range(0..4);
    for _ in 0..rounds {
        out = match rng.random_range(0..10) {
            0..=3 => json_mutation(rng, &out).unwrap_or_else(|| byte_mutation(rng, out)),
            4 => splice(rng, &out, others),
            _ => byte_mutation(rng, out),
        };
    }
    out.truncate(256 * 1024);
    out
}

fn byte_mutation(rng: &mut StdRng, mut out: Vec<u8>) -> Vec<u8> {
    let len = out.len();
    let at = if len == 0 {
        0
    } else {
        rng.random_range(0..len)
    };
    match rng.random_range(0..8) {
        0 if len > 0 => out[at] ^= 1 << rng.random_range(0..8),
        1 if len > 0 => out[at] = *INTERESTING_BYTES.choose(rng).unwrap_or(&b'0'),
        2 if len > 0 => {
            let end = (at + rng.random_range(1..16)).min(len);
            out.drain(at..end);
        }
        3 if len > 0 => {
            let end = (at + rng.random_range(1..32)).min(len);
            let copy = out[at..end].to_vec();
            let times = rng.random_range(1..64);
            for _ in 0..times {
                out.splice(at..at, copy.iter().copied());
            }
        }
        4 => {
            let text = INTERESTING_STRINGS.choose(rng).copied().unwrap_or("");
            out.splice(at..at, text.bytes());
        }
        5 => {
            let number = INTERESTING_NUMBERS.choose(rng).copied().unwrap_or("0");
            replace_a_number(rng, &mut out, number);
        }
        6 => {
            let byte = rng.random::<u8>();
            out.insert(at.min(out.len()), byte);
        }
        _ => {
            let end = rng.random_range(at..=len);
            out.truncate(end);
        }
    }
    out
}

/// Replaces one run of digits with `number` (or appends it when there is none).
fn replace_a_number(rng: &mut StdRng, out: &mut Vec<u8>, number: &str) {
    let starts: Vec<usize> = (0..out.len())
        .filter(|&i| out[i].is_ascii_digit() && (i == 0 || !out[i - 1].is_ascii_digit()))
        .collect();
    match starts.choose(rng) {
        Some(&start) => {
            let end = (start..out.len())
                .find(|&i| !out[i].is_ascii_digit())
                .unwrap_or(out.len());
            out.splice(start..end, number.bytes());
        }
        None => out.extend_from_slice(number.as_bytes()),
    }
}

fn splice(rng: &mut StdRng, out: &[u8], others: &[Vec<u8>]) -> Vec<u8> {
    let Some(other) = others.choose(rng) else {
        return out.to_vec();
    };
    let cut = rng.random_range(0..=out.len());
    let from = rng.random_range(0..=other.len());
    let mut spliced = out[..cut].to_vec();
    spliced.extend_from_slice(&other[from..]);
    spliced
}

/// A structural change to a JSON document: a value replaced by one of another type or
/// size, a field dropped, an unknown or duplicated field, deep nesting.
fn json_mutation(rng: &mut StdRng, input: &[u8]) -> Option<Vec<u8>> {
    let mut value: Value = serde_json::from_slice(input).ok()?;
    let mut slots = Vec::new();
    collect_paths(&value, &mut Vec::new(), &mut slots);
    let path = slots.choose(rng)?.clone();
    if rng.random_range(0..8) == 0 {
        // A duplicated key cannot be built as a Value: write it as text.
        let text = serde_json::to_string(&value).ok()?;
        let key = path.last()?.clone();
        let duplicated = text.replacen('{', &format!("{{{key}:null,"), 1);
        return Some(duplicated.into_bytes());
    }
    let slot = pointer_mut(&mut value, &path)?;
    match rng.random_range(0..6) {
        0 => *slot = random_value(rng, 0),
        // Past every length limit now and then; mostly around them.
        1 => {
            let long = if rng.random_range(0..10) == 0 {
                70_000
            } else {
                3_000
            };
            *slot = Value::String("x".repeat(rng.random_range(1..long)));
        }
        2 => *slot = Value::Array(vec![slot.clone(); rng.random_range(0..120)]),
        3 => {
            if let Value::Object(map) = slot
                && let Some(key) = map.keys().next().cloned()
            {
                map.remove(&key);
            }
        }
        4 => {
            if let Value::Object(map) = slot {
                map.insert("unknown_field".into(), json!(1));
            }
        }
        _ => {
            let mut nested = slot.clone();
            for _ in 0..rng.random_range(1..140) {
                nested = json!([nested]);
            }
            *slot = nested;
        }
    }
    serde_json::to_vec(&value).ok()
}

/// Every path in a document (object keys quoted as JSON, array indexes as digits).
fn collect_paths(value: &Value, at: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    out.push(at.clone());
    match value {
        Value::Object(map) => {
            for (key, child) in map {
                at.push(serde_json::to_string(key).unwrap_or_default());
                collect_paths(child, at, out);
                at.pop();
            }
        }
        Value::Array(items) => {
            for (i, child) in items.iter().enumerate().take(8) {
                at.push(i.to_string());
                collect_paths(child, at, out);
                at.pop();
            }
        }
        _ => {}
    }
}

fn pointer_mut<'a>(value: &'a mut Value, path: &[String]) -> Option<&'a mut Value> {
    let mut here = value;
    for step in path {
        here = match here {
            Value::Object(map) => map.get_mut(&serde_json::from_str::<String>(step).ok()?)?,
            Value::Array(items) => items.get_mut(step.parse::<usize>().ok()?)?,
            _ => return None,
        };
    }
    Some(here)
}

fn random_value(rng: &mut StdRng, depth: u32) -> Value {
    match rng.random_range(0..8) {
        0 => Value::Null,
        1 => Value::Bool(rng.random()),
        2 => INTERESTING_NUMBERS
            .choose(rng)
            .and_then(|n| serde_json::from_str(n).ok())
            .unwrap_or(Value::Null),
        3 | 4 => Value::String(
            INTERESTING_STRINGS
                .choose(rng)
                .copied()
                .unwrap_or("")
                .to_owned(),
        ),
        5 if depth < 3 => Value::Array(
            (0..rng.random_range(0..4))
                .map(|_| random_value(rng, depth + 1))
                .collect(),
        ),
        6 if depth < 3 => {
            let mut map = Map::new();
            for i in 0..rng.random_range(0..4) {
                map.insert(format!("k{i}"), random_value(rng, depth + 1));
            }
            Value::Object(map)
        }
        _ => Value::String(String::new()),
    }
}
