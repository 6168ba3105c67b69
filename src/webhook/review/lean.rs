//! Parsing a request body into a `serde_json::Value` without what the webhook never reads:
//! `metadata.managedFields` anywhere, the `status` of `request.object`/`request.oldObject`, and
//! every field of `request` other than [`REQUEST_FIELDS`] (`userInfo`, `resource`, `options`, …).
//!
//! managedFields is server-side-apply bookkeeping, often the larger half of an object; status
//! can be as large on an UPDATE. The core never reads or edits them, and the patch is a diff, so
//! an object without them yields the same patch — the API server keeps its own copy untouched.
//! Skipping them while parsing saves the allocations of building them, of cloning them and of
//! dropping them. The skipped parts are still scanned as JSON, so a malformed body is rejected
//! exactly as before, and serde_json's recursion limit still applies.

use std::fmt;

use serde::de::{DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

/// The field left out of every `metadata` object.
pub const SKIPPED: &str = "managedFields";

/// The fields of `request` that are kept; the others are scanned and dropped.
pub const REQUEST_FIELDS: [&str; 7] = [
    "uid",
    "kind",
    "operation",
    "namespace",
    "dryRun",
    "object",
    "oldObject",
];

/// Parses `bytes` like `serde_json::from_slice::<Value>`, minus `metadata.managedFields`.
pub fn from_slice(bytes: &[u8]) -> serde_json::Result<Value> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let value = Lean(Place::Top).deserialize(&mut de)?;
    de.end()?;
    Ok(value)
}

/// Where in the document the value being read sits.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Place {
    /// The whole body.
    Top,
    /// `request`.
    Request,
    /// `request.object` or `request.oldObject`.
    Object,
    /// Any `metadata` object.
    Metadata,
    /// Anywhere else.
    Other,
}

impl Place {
    /// Where the value of `key` in a map at `self` sits, or `None` to skip it.
    fn child(self, key: &str) -> Option<Place> {
        match (self, key) {
            (Place::Metadata, SKIPPED) | (Place::Object, "status") => None,
            (Place::Request, _) if !REQUEST_FIELDS.contains(&key) => None,
            (_, "metadata") => Some(Place::Metadata),
            (Place::Top, "request") => Some(Place::Request),
            (Place::Request, "object" | "oldObject") => Some(Place::Object),
            _ => Some(Place::Other),
        }
    }
}

#[derive(Clone, Copy)]
struct Lean(Place);

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
        while let Some(item) = seq.next_element_seed(Lean(Place::Other))? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            match self.0.child(&key) {
                None => {
                    map.next_value::<IgnoredAny>()?;
                }
                Some(place) => {
                    let value = map.next_value_seed(Lean(place))?;
                    out.insert(key, value);
                }
            }
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
    fn drops_status_of_the_objects_and_unread_request_fields() {
        let doc = json!({
            "apiVersion": "admission.k8s.io/v1",
            "request": {
                "uid": "u", "kind": {"kind": "Pod"}, "operation": "UPDATE", "namespace": "n",
                "dryRun": false, "userInfo": {"username": "me"}, "options": {"a": 1},
                "object": {"spec": {"status": 1}, "status": {"phase": "Running"}},
                "oldObject": {"status": {}, "metadata": {"name": "a"}}
            },
            "status": "kept at the top"
        });
        let parsed = from_slice(&serde_json::to_vec(&doc).unwrap()).unwrap();
        let expected = json!({
            "apiVersion": "admission.k8s.io/v1",
            "request": {
                "uid": "u", "kind": {"kind": "Pod"}, "operation": "UPDATE", "namespace": "n",
                "dryRun": false,
                "object": {"spec": {"status": 1}},
                "oldObject": {"metadata": {"name": "a"}}
            },
            "status": "kept at the top"
        });
        assert_eq!(parsed, expected);
        assert!(from_slice(br#"{"request": {"userInfo": [1,}}"#).is_err());
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
