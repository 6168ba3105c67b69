//! Reading JSON the way a [`serde_json::Value`] read would, keeping nothing but the value's
//! type ([`Skim`]) or its type and scalar content ([`Shallow`]): the same parser calls (so the
//! same errors, the recursion limit included), in memory that grows with the nesting, not the
//! size. For values that must be checked or described but whose content nobody reads: a 5 MiB
//! array of zeros read as a `Value` took 226 MiB.

use std::fmt;

use serde::de::{Deserialize, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

use super::key::Key;

/// The type of a JSON value read and dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JsonType {
    Null,
    Boolean,
    Number,
    String,
    Array,
    Object,
}

impl JsonType {
    /// The type of `value`.
    pub fn of(value: &Value) -> Self {
        match value {
            Value::Null => JsonType::Null,
            Value::Bool(_) => JsonType::Boolean,
            Value::Number(_) => JsonType::Number,
            Value::String(_) => JsonType::String,
            Value::Array(_) => JsonType::Array,
            Value::Object(_) => JsonType::Object,
        }
    }

    /// The name error messages use: `"array"`, `"object"`, …
    pub fn name(self) -> &'static str {
        match self {
            JsonType::Null => "null",
            JsonType::Boolean => "boolean",
            JsonType::Number => "number",
            JsonType::String => "string",
            JsonType::Array => "array",
            JsonType::Object => "object",
        }
    }
}

/// A JSON value read in full and dropped; only its type is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Skim(pub JsonType);

impl<'de> Deserialize<'de> for Skim {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(MapOrValue(SkimReader))
    }
}

/// The [`MapReader`] of a [`Skim`]: it reads everything and keeps only the type.
struct SkimReader;

impl<'de> MapReader<'de> for SkimReader {
    type Out = Skim;

    fn map<A: MapAccess<'de>>(self, mut map: A) -> Result<Skim, A::Error> {
        while map.next_key::<Skim>()?.is_some() {
            map.next_value::<Skim>()?;
        }
        Ok(Skim(JsonType::Object))
    }

    fn seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Skim, A::Error> {
        while seq.next_element::<Skim>()?.is_some() {}
        Ok(Skim(JsonType::Array))
    }

    fn other(value: Value) -> Skim {
        Skim(JsonType::of(&value))
    }

    fn scalar(json_type: JsonType, _: impl FnOnce() -> Value) -> Skim {
        Skim(json_type)
    }
}

/// A value kept for its type and scalar content only: an array as `[]` and an object as `{}`,
/// their content read as a `Value` read would (same errors) and dropped. Enough where the core
/// only replaces or removes a value, whose diff is the same whatever it held (kept whole, a
/// 3 MiB list of zeros took 156 MiB).
#[derive(Debug, Clone, PartialEq)]
pub struct Shallow(pub Value);

impl<'de> Deserialize<'de> for Shallow {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(ShallowVisitor::default())
    }
}

impl Shallow {
    /// A reader of a [`Shallow`] value whose object, if it is one, keeps the entries named in
    /// `keys`, each itself shallow (a repeated key keeps its last value).
    pub fn keeping(keys: &'static [&'static str]) -> ShallowVisitor {
        MapOrValue(Keeping { keys })
    }
}

/// The visitor of [`Shallow`]: its object keeps the entries [`Shallow::keeping`] names.
pub type ShallowVisitor = MapOrValue<Keeping>;

/// The [`MapReader`] of a [`Shallow`] value: an object keeps the entries named in `keys`.
#[derive(Debug, Default, Clone, Copy)]
pub struct Keeping {
    keys: &'static [&'static str],
}

impl<'de> MapReader<'de> for Keeping {
    type Out = Shallow;

    fn map<A: MapAccess<'de>>(self, mut map: A) -> Result<Shallow, A::Error> {
        let mut kept = serde_json::Map::new();
        if self.keys.is_empty() {
            SkimReader.map(map)?;
        } else {
            while let Some(key) = map.next_key::<Key<'de>>()? {
                match self.keys.iter().find(|k| **k == key.as_str()) {
                    Some(k) => drop(kept.insert((*k).to_owned(), map.next_value::<Shallow>()?.0)),
                    None => drop(map.next_value::<Skim>()?),
                }
            }
        }
        Ok(Shallow(Value::Object(kept)))
    }

    fn other(value: Value) -> Shallow {
        Shallow(value)
    }
}

/// Reads a map one way and anything else through `other`: a list skimmed (unless `seq` says
/// otherwise), a scalar as its `Value` (unless `scalar` says otherwise).
pub trait MapReader<'de>: Sized {
    type Out;
    fn map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Out, A::Error>;
    fn other(value: Value) -> Self::Out;
    fn seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Out, A::Error> {
        SkimReader.seq(seq)?;
        Ok(Self::other(Value::Array(Vec::new())))
    }
    /// A value of the given type that is neither a map nor a list; `value` builds it.
    fn scalar(_: JsonType, value: impl FnOnce() -> Value) -> Self::Out {
        Self::other(value())
    }
}

/// The seed and visitor of a [`MapReader`].
#[derive(Debug, Default, Clone, Copy)]
pub struct MapOrValue<R>(pub R);

impl<'de, R: MapReader<'de>> DeserializeSeed<'de> for MapOrValue<R> {
    type Value = R::Out;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de, R: MapReader<'de>> Visitor<'de> for MapOrValue<R> {
    type Value = R::Out;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any valid JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        self.0.map(map)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        self.0.seq(seq)
    }

    fn visit_bool<E>(self, v: bool) -> Result<Self::Value, E> {
        Ok(R::scalar(JsonType::Boolean, || Value::Bool(v)))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Self::Value, E> {
        Ok(R::scalar(JsonType::Number, || Value::from(v)))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Self::Value, E> {
        Ok(R::scalar(JsonType::Number, || Value::from(v)))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Self::Value, E> {
        Ok(R::scalar(JsonType::Number, || Value::from(v)))
    }

    fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
        Ok(R::scalar(JsonType::String, || Value::String(v.to_owned())))
    }

    fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
        Ok(R::scalar(JsonType::String, || Value::String(v)))
    }

    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(R::scalar(JsonType::Null, || Value::Null))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// What a `Value` read says of `text`: its type, or the error's text.
    fn as_value(text: &str) -> Result<&'static str, String> {
        serde_json::from_str::<Value>(text)
            .map(|v| JsonType::of(&v).name())
            .map_err(|e| e.to_string())
    }

    fn skimmed(text: &str) -> Result<&'static str, String> {
        serde_json::from_str::<Skim>(text)
            .map(|s| s.0.name())
            .map_err(|e| e.to_string())
    }

    #[test]
    fn shallow_keeps_scalars_and_empties_lists_and_objects() {
        for (text, kept) in [
            ("\"s\"", json!("s")),
            ("-7", json!(-7)),
            ("1.5", json!(1.5)),
            ("false", json!(false)),
            ("null", json!(null)),
            ("[1, [2], {\"a\": 3}]", json!([])),
            ("{\"a\": [1], \"b\": {}}", json!({})),
        ] {
            let shallow: Shallow = serde_json::from_str(text).unwrap();
            assert_eq!(shallow.0, kept, "{text}");
        }
        let kind = r#"{"kind": "Pod", "group": [1], "x": 1, "kind": "Job", "version": {"a": 1}}"#;
        let mut de = serde_json::Deserializer::from_str(kind);
        let kept = Shallow::keeping(&["group", "version", "kind"])
            .deserialize(&mut de)
            .unwrap();
        assert_eq!(kept.0, json!({"kind": "Job", "group": [], "version": {}}));
        let deep = format!("{{\"a\": {}{}}}", "[".repeat(200), "]".repeat(200));
        let err = serde_json::from_str::<Shallow>(&deep).unwrap_err();
        assert!(err.to_string().contains("recursion limit"), "{err}");
    }

    #[test]
    fn says_what_a_value_read_says() {
        let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
        let cases = [
            "null",
            "true",
            "-1",
            "18446744073709551615",
            "1.5e300",
            "1e400",
            "\"s\"",
            "\"\\ud800\"",
            "[1, [2, {\"a\": [null]}]]",
            "{\"a\": 1, \"a\": 2}",
            "{\"a\": }",
            "[1, 2",
            "{1: 2}",
            "[] []",
            "",
            deep.as_str(),
        ];
        for text in cases {
            assert_eq!(skimmed(text), as_value(text), "{text:?}");
        }
    }
}
