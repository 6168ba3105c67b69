//! Parsing a request body into a `serde_json::Value` without `metadata.managedFields`.
//!
//! managedFields is server-side-apply bookkeeping, often the larger half of an object. The
//! core never reads or edits it, and the patch is a diff, so an object without it yields the
//! same patch — the API server keeps its own copy untouched. Skipping it while parsing saves
//! the allocations of building it, of cloning it and of diffing it. serde_json's recursion
//! limit still applies (the skipped part is scanned, not trusted).

use std::fmt;

use serde::de::{DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

/// The field left out of every `metadata` object.
pub const SKIPPED: &str = "managedFields";

/// Parses `bytes` like `serde_json::from_slice::<Value>`, minus `metadata.managedFields`.
pub fn from_slice(bytes: &[u8]) -> serde_json::Result<Value> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let value = Lean { in_metadata: false }.deserialize(&mut de)?;
    de.end()?;
    Ok(value)
}

#[derive(Clone, Copy)]
struct Lean {
    /// The map being read is a `metadata` object.
    in_metadata: bool,
}

impl<'de> DeserializeSeed<'de> for Lean {
    type Value = Value;

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Lean {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0));
        while let Some(item) = seq.next_element_seed(Lean { in_metadata: false })? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if self.in_metadata && key == SKIPPED {
                map.next_value::<IgnoredAny>()?;
                continue;
            }
            let in_metadata = key == "metadata";
            let value = map.next_value_seed(Lean { in_metadata })?;
            out.insert(key, value);
        }
        Ok(Value::Object(out))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn drops_managed_fields_under_metadata_only() {
        let doc = json!({
            "metadata": {"name": "a", "managedFields": [{"manager": "kubectl"}]},
            "spec": {"managedFields": 1, "template": {"metadata": {"managedFields": [], "labels": {"x": "y"}}}},
            "n": [1, -2, 2.5, null, true, "s"]
        });
        let parsed = from_slice(&serde_json::to_vec(&doc).unwrap()).unwrap();
        let mut expected = doc.clone();
        expected["metadata"]
            .as_object_mut()
            .unwrap()
            .remove("managedFields");
        expected["spec"]["template"]["metadata"]
            .as_object_mut()
            .unwrap()
            .remove("managedFields");
        assert_eq!(parsed, expected);
    }

    #[test]
    fn keeps_the_recursion_limit_and_rejects_trailing_garbage() {
        let deep = "[".repeat(10_000);
        assert!(from_slice(deep.as_bytes()).is_err());
        let deep_skipped = format!(
            "{{\"metadata\":{{\"managedFields\":{}}}}}",
            "[".repeat(10_000)
        );
        assert!(from_slice(deep_skipped.as_bytes()).is_err());
        assert!(from_slice(b"{} x").is_err());
        assert!(from_slice(b"").is_err());
    }
}
