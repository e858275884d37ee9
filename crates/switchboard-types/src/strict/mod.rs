//! Strict decoding: what serde alone lets through, refused.
//!
//! serde's derived structs also accept a JSON *array*, matching its items to fields by
//! position (`["name", "id"]` would create a team), and a JSON object with the same key
//! twice keeps the last one silently. Error texts name Rust types (`expected struct
//! CreateTeam`, `expected i64`). [`Strict`] wraps any deserializer so that, at every
//! depth:
//!
//! * a struct is read only from an object;
//! * a key that appears twice in an object is an error (`duplicate key`);
//! * no string, and no key, contains U+0000 (NUL): no engine stores it the same way
//!   (PostgreSQL refuses it in text and JSON, SQLite keeps it), so it is refused where
//!   it comes in, with the field named, the same on both;
//! * what was expected is said in JSON's words ("an object", "an integer"), never a Rust
//!   type name.
//!
//! Every transport decodes client input through it (see [`crate::decode`]).

use std::collections::HashSet;
use std::fmt;

use serde::de::{
    self, DeserializeSeed, Deserializer, EnumAccess, MapAccess, SeqAccess, VariantAccess, Visitor,
};

/// Whether JSON text has a string with a NUL in it (a `\u0000` escape; JSON has no
/// other way to write one), for a decoder that cannot go through [`Strict`] (the A2A
/// SDK's types): the same rule, checked before decoding.
pub fn has_nul(json: &[u8]) -> bool {
    let mut backslashes = 0usize;
    for (at, byte) in json.iter().enumerate() {
        if *byte == b'\\' {
            backslashes += 1;
            continue;
        }
        if backslashes % 2 == 1
            && *byte == b'u'
            && json.get(at + 1..at + 5).is_some_and(|hex| hex == b"0000")
        {
            return true;
        }
        backslashes = 0;
    }
    json.contains(&0)
}

/// The error of a string with a NUL in it (see the module documentation).
fn nul<E: de::Error>() -> E {
    E::custom("a string may not contain U+0000 (NUL)")
}

fn refuse_nul<E: de::Error>(text: &str) -> Result<(), E> {
    if text.contains('\0') {
        return Err(nul());
    }
    Ok(())
}

/// A deserializer that reads structs only from objects and refuses duplicate keys.
pub struct Strict<D>(pub D);

/// A visitor whose expectation is said in JSON's words.
struct Expect<V> {
    inner: V,
    expected: &'static str,
}

fn expect<V>(inner: V, expected: &'static str) -> Expect<V> {
    Expect { inner, expected }
}

macro_rules! forward_primitives {
    ($($method:ident => $expected:literal),* $(,)?) => {$(
        fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
            self.0.$method(expect(visitor, $expected))
        }
    )*};
}

impl<'de, D: Deserializer<'de>> Deserializer<'de> for Strict<D> {
    type Error = D::Error;

    forward_primitives! {
        deserialize_any => "a JSON value",
        deserialize_bool => "a boolean",
        deserialize_i8 => "an integer",
        deserialize_i16 => "an integer",
        deserialize_i32 => "an integer",
        deserialize_i64 => "an integer",
        deserialize_i128 => "an integer",
        deserialize_u8 => "a non-negative integer",
        deserialize_u16 => "a non-negative integer",
        deserialize_u32 => "a non-negative integer",
        deserialize_u64 => "a non-negative integer",
        deserialize_u128 => "a non-negative integer",
        deserialize_f32 => "a number",
        deserialize_f64 => "a number",
        deserialize_char => "a one-character string",
        deserialize_str => "a string",
        deserialize_string => "a string",
        deserialize_bytes => "a string",
        deserialize_byte_buf => "a string",
        deserialize_option => "a value or null",
        deserialize_unit => "null",
        deserialize_seq => "an array",
        deserialize_map => "an object",
        deserialize_identifier => "a field name",
        deserialize_ignored_any => "a JSON value",
    }

    fn deserialize_unit_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        self.0
            .deserialize_unit_struct(name, expect(visitor, "null"))
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        self.0
            .deserialize_newtype_struct(name, expect(visitor, "a JSON value"))
    }

    fn deserialize_tuple<V: Visitor<'de>>(
        self,
        len: usize,
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        self.0.deserialize_tuple(len, expect(visitor, "an array"))
    }

    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        len: usize,
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        self.0
            .deserialize_tuple_struct(name, len, expect(visitor, "an array"))
    }

    /// The point of it all: a struct is read as a map, so an array is refused.
    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        self.0.deserialize_map(expect(visitor, "an object"))
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        self.0
            .deserialize_enum(name, variants, expect(visitor, "one of the allowed values"))
    }

    fn is_human_readable(&self) -> bool {
        self.0.is_human_readable()
    }
}

macro_rules! forward_visits {
    ($($method:ident($ty:ty)),* $(,)?) => {$(
        fn $method<E: de::Error>(self, v: $ty) -> Result<Self::Value, E> {
            self.inner.$method(v).map_err(in_json_words)
        }
    )*};
}

/// What Rust's primitive types are, said in JSON's words with their range.
const PRIMITIVES: &[(&str, &str)] = &[
    ("i8", "an integer from -128 to 127"),
    ("i16", "an integer from -32768 to 32767"),
    ("i32", "an integer from -2147483648 to 2147483647"),
    (
        "i64",
        "an integer from -9223372036854775808 to 9223372036854775807",
    ),
    ("u8", "an integer from 0 to 255"),
    ("u16", "an integer from 0 to 65535"),
    ("u32", "an integer from 0 to 4294967295"),
    ("u64", "an integer from 0 to 18446744073709551615"),
    ("usize", "an integer from 0 to 18446744073709551615"),
    ("f32", "a number"),
    ("f64", "a number"),
    ("a boolean", "true or false"),
];

/// A primitive's own visitor reports a value it cannot take (a float where an integer
/// belongs, an integer out of range) as "expected i64"; that ending is said in JSON's
/// words. Any other message (a type's own) is kept as it is.
fn in_json_words<E: de::Error>(err: E) -> E {
    let message = err.to_string();
    let Some((head, expected)) = message.rsplit_once(", expected ") else {
        return err;
    };
    match PRIMITIVES.iter().find(|(rust, _)| *rust == expected) {
        Some((_, json)) => E::custom(format!("{head}, expected {json}")),
        None => err,
    }
}

impl<'de, V: Visitor<'de>> Visitor<'de> for Expect<V> {
    type Value = V::Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.expected)
    }

    forward_visits! {
        visit_bool(bool), visit_i8(i8), visit_i16(i16), visit_i32(i32), visit_i64(i64),
        visit_i128(i128), visit_u8(u8), visit_u16(u16), visit_u32(u32), visit_u64(u64),
        visit_u128(u128), visit_f32(f32),
        visit_bytes(&[u8]), visit_borrowed_bytes(&'de [u8]), visit_byte_buf(Vec<u8>),
    }

    /// JSON Schema counts `6203.0` as an integer, and the OpenAPI document says
    /// "integer": where one is expected, a number without a fraction (in range) is one.
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
        #[allow(clippy::cast_precision_loss, clippy::cast_possible_truncation)]
        if v.is_finite() && v.fract() == 0.0 {
            match self.expected {
                "an integer" if v >= i64::MIN as f64 && v < i64::MAX as f64 => {
                    return self.inner.visit_i64(v as i64).map_err(in_json_words);
                }
                "a non-negative integer" if v >= 0.0 && v < u64::MAX as f64 => {
                    #[allow(clippy::cast_sign_loss)]
                    return self.inner.visit_u64(v as u64).map_err(in_json_words);
                }
                _ => {}
            }
        }
        self.inner.visit_f64(v).map_err(in_json_words)
    }

    fn visit_char<E: de::Error>(self, v: char) -> Result<Self::Value, E> {
        if v == '\0' {
            return Err(nul());
        }
        self.inner.visit_char(v).map_err(in_json_words)
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        refuse_nul(v)?;
        self.inner.visit_str(v).map_err(in_json_words)
    }

    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
        refuse_nul(v)?;
        self.inner.visit_borrowed_str(v).map_err(in_json_words)
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
        refuse_nul(&v)?;
        self.inner.visit_string(v).map_err(in_json_words)
    }

    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        self.inner.visit_none()
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        self.inner.visit_unit()
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        self.inner.visit_some(Strict(d))
    }

    fn visit_newtype_struct<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        self.inner.visit_newtype_struct(Strict(d))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        self.inner.visit_seq(StrictSeq(seq))
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        self.inner.visit_map(StrictMap {
            inner: map,
            seen: Seen::Few(Vec::new()),
        })
    }

    fn visit_enum<A: EnumAccess<'de>>(self, data: A) -> Result<Self::Value, A::Error> {
        self.inner.visit_enum(StrictEnum(data))
    }
}

/// A seed whose deserializer is made strict.
struct StrictSeed<S>(S);

impl<'de, S: DeserializeSeed<'de>> DeserializeSeed<'de> for StrictSeed<S> {
    type Value = S::Value;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        self.0.deserialize(Strict(d))
    }
}

struct StrictSeq<A>(A);

impl<'de, A: SeqAccess<'de>> SeqAccess<'de> for StrictSeq<A> {
    type Error = A::Error;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, A::Error> {
        self.0.next_element_seed(StrictSeed(seed))
    }

    fn size_hint(&self) -> Option<usize> {
        self.0.size_hint()
    }
}

/// An object's entries; each key is seen as text on its way to the caller and checked
/// against the keys before it.
struct StrictMap<A> {
    inner: A,
    seen: Seen,
}

/// The keys of an object so far: a short list (most objects have a few keys), a set once
/// it grows (so a huge object cannot make the check quadratic).
enum Seen {
    Few(Vec<String>),
    Many(HashSet<String>),
}

impl Seen {
    /// Adds `key`; false if it was there already.
    fn insert(&mut self, key: String) -> bool {
        match self {
            Seen::Few(keys) if keys.contains(&key) => false,
            Seen::Few(keys) if keys.len() < 16 => {
                keys.push(key);
                true
            }
            Seen::Few(keys) => {
                let mut set: HashSet<String> = keys.drain(..).collect();
                set.insert(key);
                *self = Seen::Many(set);
                true
            }
            Seen::Many(set) => set.insert(key),
        }
    }
}

impl<'de, A: MapAccess<'de>> MapAccess<'de> for StrictMap<A> {
    type Error = A::Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, A::Error> {
        let mut key = None;
        let value = self.inner.next_key_seed(KeySeed {
            seed,
            key: &mut key,
        })?;
        if let Some(key) = key
            && !self.seen.insert(key.clone())
        {
            return Err(de::Error::custom(format!("duplicate key `{key}`")));
        }
        Ok(value)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, A::Error> {
        self.inner.next_value_seed(StrictSeed(seed))
    }

    fn size_hint(&self) -> Option<usize> {
        self.inner.size_hint()
    }
}

/// Deserializes a key through the caller's seed, keeping a copy of its text.
struct KeySeed<'k, S> {
    seed: S,
    key: &'k mut Option<String>,
}

impl<'de, S: DeserializeSeed<'de>> DeserializeSeed<'de> for KeySeed<'_, S> {
    type Value = S::Value;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        self.seed.deserialize(KeyDeserializer {
            inner: d,
            key: self.key,
        })
    }
}

/// A key's deserializer: whatever the caller asks for, the text is seen on the way.
struct KeyDeserializer<'k, D> {
    inner: D,
    key: &'k mut Option<String>,
}

/// A visitor that records the string it is given before passing it on.
struct KeyVisitor<'k, V> {
    inner: V,
    key: &'k mut Option<String>,
}

macro_rules! forward_key_methods {
    ($($method:ident),* $(,)?) => {$(
        fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
            self.inner.$method(KeyVisitor { inner: visitor, key: self.key })
        }
    )*};
}

impl<'de, D: Deserializer<'de>> Deserializer<'de> for KeyDeserializer<'_, D> {
    type Error = D::Error;

    forward_key_methods! {
        deserialize_any, deserialize_bool, deserialize_i8, deserialize_i16, deserialize_i32,
        deserialize_i64, deserialize_u8, deserialize_u16, deserialize_u32, deserialize_u64,
        deserialize_f32, deserialize_f64, deserialize_char, deserialize_str,
        deserialize_string, deserialize_bytes, deserialize_byte_buf, deserialize_option,
        deserialize_unit, deserialize_seq, deserialize_map, deserialize_identifier,
        deserialize_ignored_any,
    }

    fn deserialize_unit_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        let visitor = KeyVisitor {
            inner: visitor,
            key: self.key,
        };
        self.inner.deserialize_unit_struct(name, visitor)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        let visitor = KeyVisitor {
            inner: visitor,
            key: self.key,
        };
        self.inner.deserialize_newtype_struct(name, visitor)
    }

    fn deserialize_tuple<V: Visitor<'de>>(
        self,
        len: usize,
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        let visitor = KeyVisitor {
            inner: visitor,
            key: self.key,
        };
        self.inner.deserialize_tuple(len, visitor)
    }

    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        len: usize,
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        let visitor = KeyVisitor {
            inner: visitor,
            key: self.key,
        };
        self.inner.deserialize_tuple_struct(name, len, visitor)
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        let visitor = KeyVisitor {
            inner: visitor,
            key: self.key,
        };
        self.inner.deserialize_struct(name, fields, visitor)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        let visitor = KeyVisitor {
            inner: visitor,
            key: self.key,
        };
        self.inner.deserialize_enum(name, variants, visitor)
    }
}

impl<'de, V: Visitor<'de>> Visitor<'de> for KeyVisitor<'_, V> {
    type Value = V::Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.inner.expecting(f)
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        refuse_nul(v)?;
        *self.key = Some(v.to_owned());
        self.inner.visit_str(v)
    }

    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
        refuse_nul(v)?;
        *self.key = Some(v.to_owned());
        self.inner.visit_borrowed_str(v)
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
        refuse_nul(&v)?;
        *self.key = Some(v.clone());
        self.inner.visit_string(v)
    }

    forward_visits! {
        visit_bool(bool), visit_i64(i64), visit_u64(u64), visit_f64(f64),
        visit_bytes(&[u8]), visit_borrowed_bytes(&'de [u8]),
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        self.inner.visit_unit()
    }
}

struct StrictEnum<A>(A);

impl<'de, A: EnumAccess<'de>> EnumAccess<'de> for StrictEnum<A> {
    type Error = A::Error;
    type Variant = StrictVariant<A::Variant>;

    fn variant_seed<V: DeserializeSeed<'de>>(
        self,
        seed: V,
    ) -> Result<(V::Value, Self::Variant), A::Error> {
        let (value, variant) = self.0.variant_seed(StrictSeed(seed))?;
        Ok((value, StrictVariant(variant)))
    }
}

struct StrictVariant<A>(A);

impl<'de, A: VariantAccess<'de>> VariantAccess<'de> for StrictVariant<A> {
    type Error = A::Error;

    fn unit_variant(self) -> Result<(), A::Error> {
        self.0.unit_variant()
    }

    fn newtype_variant_seed<T: DeserializeSeed<'de>>(self, seed: T) -> Result<T::Value, A::Error> {
        self.0.newtype_variant_seed(StrictSeed(seed))
    }

    fn tuple_variant<V: Visitor<'de>>(self, len: usize, visitor: V) -> Result<V::Value, A::Error> {
        self.0.tuple_variant(len, expect(visitor, "an array"))
    }

    fn struct_variant<V: Visitor<'de>>(
        self,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, A::Error> {
        self.0.struct_variant(fields, expect(visitor, "an object"))
    }
}

#[cfg(test)]
mod tests;
