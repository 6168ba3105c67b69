//! Reading the few parts of an object the core needs straight from its raw JSON, in one pass:
//! the object's namespace and owner, and at the pod (template) its annotations, labels, owner
//! and spec. Nothing else of the object is built: `managedFields`, `status` and the rest of
//! `metadata` are scanned and dropped, and the pod spec's fields are kept as raw JSON until
//! [`PodParts::spec`] reads them into the lean [`PodSpec`].
//!
//! A key given twice keeps its last value, as in a full parse of the object.

use std::borrow::Cow;
use std::fmt;

use serde::Deserialize;
use serde::de::value::{MapDeserializer, SeqAccessDeserializer};
use serde::de::{DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use super::pod::PodSpec;

/// A JSON object key, borrowed from the input unless it holds escapes.
#[derive(Debug, Clone)]
pub struct Key<'a>(Cow<'a, str>);

impl Key<'_> {
    /// The key's text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl<'de> Visitor<'de> for KeyVisitor {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Borrowed(v)))
            }
            fn visit_str<E>(self, v: &str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E>(self, v: String) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(v)))
            }
        }
        d.deserialize_str(KeyVisitor)
    }
}

/// What the core reads of an object under review.
#[derive(Debug, Default, Clone)]
pub struct ObjectParts<'a> {
    /// The object is JSON `null`.
    pub is_null: bool,
    /// `metadata.namespace`, when it is a string.
    pub namespace: Option<String>,
    /// Whether `metadata.ownerReferences` names a controller.
    pub controlled: bool,
    /// The pod (template) at the workload's pointer, when it is there and an object.
    pub pod: Option<PodParts<'a>>,
}

/// The pod (template) of an object.
#[derive(Debug, Default, Clone)]
pub struct PodParts<'a> {
    /// Its `metadata`.
    pub meta: Meta,
    /// Its `spec`.
    pub spec: Spec<'a>,
}

/// A `metadata` as the core reads it.
#[derive(Debug, Default, Clone)]
pub enum Meta {
    /// No `metadata`.
    #[default]
    Absent,
    /// A `metadata` object: the fields the core reads, as sent.
    Object {
        /// `namespace`.
        namespace: Option<Value>,
        /// `ownerReferences`.
        owner_references: Option<Value>,
        /// `annotations`.
        annotations: Option<Value>,
        /// `labels`.
        labels: Option<Value>,
    },
    /// A `metadata` that is not an object.
    Other(Value),
}

/// A pod `spec` as sent: its fields as raw JSON, or the value when it is not an object.
#[derive(Debug, Clone)]
pub enum Spec<'a> {
    /// An object's fields in order (a repeated key keeps its last value).
    Fields(Vec<(Key<'a>, &'a RawValue)>),
    /// Anything else (`null` when absent).
    Other(Value),
}

impl Default for Spec<'_> {
    fn default() -> Self {
        Spec::Other(Value::Null)
    }
}

/// Reads `object`, whose pod (template) sits at the JSON pointer `pod_pointer` (`""` for a Pod).
pub fn read<'a>(object: &'a RawValue, pod_pointer: &str) -> serde_json::Result<ObjectParts<'a>> {
    let mut de = serde_json::Deserializer::from_str(object.get());
    let parts = ObjectSeed::new(pod_pointer).deserialize(&mut de)?;
    de.end()?;
    Ok(parts)
}

/// Reads an object in the middle of a larger document (the review's `request.object`) as
/// [`read`] does, so that the document is scanned once.
pub struct ObjectSeed<'p> {
    path: Vec<&'p str>,
}

impl<'p> ObjectSeed<'p> {
    /// A reader of objects whose pod (template) sits at the JSON pointer `pod_pointer`.
    pub fn new(pod_pointer: &'p str) -> Self {
        Self {
            path: pod_pointer.split('/').skip(1).collect(),
        }
    }
}

impl<'de> DeserializeSeed<'de> for ObjectSeed<'_> {
    type Value = ObjectParts<'de>;

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        let node = NodeSeed {
            path: &self.path,
            top: true,
        }
        .deserialize(d)?;
        let (namespace, controlled) = match &node.top_meta {
            Some(meta) => (meta.namespace(), meta.controlled()),
            None => (None, false),
        };
        Ok(ObjectParts {
            is_null: node.is_null,
            namespace,
            controlled,
            pod: node.pod,
        })
    }
}

impl Meta {
    /// `namespace` when it is a string.
    pub fn namespace(&self) -> Option<String> {
        match self {
            Meta::Object { namespace, .. } => namespace.as_ref()?.as_str().map(str::to_owned),
            _ => None,
        }
    }

    /// Whether `ownerReferences` names a controller (a ReplicaSet, a Job, …).
    pub fn controlled(&self) -> bool {
        let Meta::Object {
            owner_references: Some(refs),
            ..
        } = self
        else {
            return false;
        };
        refs.as_array().is_some_and(|refs| {
            refs.iter()
                .any(|r| r.get("controller").and_then(Value::as_bool) == Some(true))
        })
    }

    /// `annotations` (or `labels`) as a string map; non-string values are skipped.
    pub fn string_map(&self, field: MapField) -> std::collections::BTreeMap<String, String> {
        let value = match (self, field) {
            (Meta::Object { annotations, .. }, MapField::Annotations) => annotations.as_ref(),
            (Meta::Object { labels, .. }, MapField::Labels) => labels.as_ref(),
            _ => None,
        };
        value
            .and_then(Value::as_object)
            .map(|map| {
                map.iter()
                    .filter_map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_owned())))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The editable part of this `metadata`: its annotations and labels, as sent.
    fn editable(&self) -> Option<Value> {
        match self {
            Meta::Absent => None,
            Meta::Other(value) => Some(value.clone()),
            Meta::Object {
                annotations,
                labels,
                ..
            } => {
                let mut out = Map::new();
                if let Some(a) = annotations {
                    out.insert("annotations".to_owned(), a.clone());
                }
                if let Some(l) = labels {
                    out.insert("labels".to_owned(), l.clone());
                }
                Some(Value::Object(out))
            }
        }
    }
}

/// The string maps of `metadata`.
#[derive(Debug, Clone, Copy)]
pub enum MapField {
    /// `annotations`.
    Annotations,
    /// `labels`.
    Labels,
}

impl<'a> PodParts<'a> {
    /// The spec read into the lean [`PodSpec`]. The error of a spec that does not have its
    /// shape is worded as a full k8s-openapi read of it would word it.
    pub fn spec(&self) -> Result<PodSpec, serde_json::Error> {
        match &self.spec {
            Spec::Fields(fields) => {
                let entries = fields.iter().map(|(k, v)| (Cow::Borrowed(k.as_str()), *v));
                PodSpec::deserialize(MapDeserializer::new(entries)).or_else(|_| {
                    // Slow path, for errors and for repeated keys deeper down: read the spec
                    // as a value (last key wins) and word any error as k8s-openapi would.
                    let value = self.spec_value()?;
                    PodSpec::deserialize(&value)
                        .map_err(|lean_error| full_error(&value).unwrap_or(lean_error))
                })
            }
            Spec::Other(value) => Err(full_error(value).unwrap_or_else(|| {
                serde::de::Error::custom("invalid type: the pod spec is not an object")
            })),
        }
    }

    /// The whole spec as a value (only on the error path); too deep a nesting is an error.
    fn spec_value(&self) -> Result<Value, serde_json::Error> {
        match &self.spec {
            Spec::Other(value) => Ok(value.clone()),
            Spec::Fields(fields) => fields
                .iter()
                .map(|(k, v)| Ok((k.as_str().to_owned(), serde_json::from_str(v.get())?)))
                .collect::<Result<Map<_, _>, _>>()
                .map(Value::Object),
        }
    }

    /// The parts of the pod the core may edit, as sent, given its `spec` as read: the
    /// annotations and labels, `shareProcessNamespace`, and the container lists, whose existing
    /// entries are `null` placeholders (the core only appends, so only their number matters).
    /// Editing this and diffing it against an unedited copy gives the same patch as editing and
    /// diffing the whole object.
    pub fn editable(&self, spec: &PodSpec) -> Value {
        let mut pod = Map::new();
        if let Some(meta) = self.meta.editable() {
            pod.insert("metadata".to_owned(), meta);
        }
        match &self.spec {
            Spec::Other(Value::Null) => {}
            Spec::Other(value) => {
                pod.insert("spec".to_owned(), value.clone());
            }
            Spec::Fields(fields) => {
                let mut out = Map::new();
                for (key, raw) in fields {
                    let key = key.as_str();
                    let is_null = raw.get() == "null";
                    let value = match key {
                        "containers" if !is_null => placeholders(spec.containers.len()),
                        "initContainers" if !is_null => {
                            placeholders(spec.init_containers.as_ref().map_or(0, Vec::len))
                        }
                        "containers" | "initContainers" => Value::Null,
                        "shareProcessNamespace" => {
                            serde_json::from_str(raw.get()).unwrap_or(Value::Null)
                        }
                        _ => continue,
                    };
                    out.insert(key.to_owned(), value);
                }
                pod.insert("spec".to_owned(), Value::Object(out));
            }
        }
        Value::Object(pod)
    }
}

/// Why k8s-openapi would refuse `value` as a PodSpec, if it would.
fn full_error(value: &Value) -> Option<serde_json::Error> {
    k8s_openapi::api::core::v1::PodSpec::deserialize(value).err()
}

fn placeholders(n: usize) -> Value {
    Value::Array(vec![Value::Null; n])
}

/// [`PodParts::editable`] placed at `pod_pointer` inside otherwise empty objects.
pub fn at_pointer(pod: Value, pod_pointer: &str) -> Value {
    let keys: Vec<&str> = pod_pointer.split('/').skip(1).collect();
    keys.into_iter().rev().fold(pod, |inner, key| {
        let mut map = Map::new();
        map.insert(key.to_owned(), inner);
        Value::Object(map)
    })
}

/// What one object (or a level of it on the way to the pod) yields.
#[derive(Default)]
struct Node<'a> {
    /// The value is JSON `null`.
    is_null: bool,
    /// The `metadata` of the top-level object.
    top_meta: Option<Meta>,
    /// The pod found below (or at) this level.
    pod: Option<PodParts<'a>>,
}

/// Reads one level on the way to the pod: `path` is what is left of the pointer.
struct NodeSeed<'p> {
    path: &'p [&'p str],
    top: bool,
}

impl<'de> DeserializeSeed<'de> for NodeSeed<'_> {
    type Value = Node<'de>;

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for NodeSeed<'_> {
    type Value = Node<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let at_pod = self.path.is_empty();
        let mut node = Node::default();
        let mut meta = None;
        let mut spec = None;
        while let Some(key) = map.next_key::<Key<'de>>()? {
            let key = key.as_str();
            if key == "metadata" && (self.top || at_pod) {
                meta = Some(map.next_value_seed(MetaSeed)?);
            } else if at_pod && key == "spec" {
                spec = Some(map.next_value_seed(SpecSeed)?);
            } else if !at_pod && key == self.path[0] {
                let below = map.next_value_seed(NodeSeed {
                    path: &self.path[1..],
                    top: false,
                })?;
                node.pod = below.pod;
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        if at_pod {
            let meta = meta.unwrap_or_default();
            if self.top {
                node.top_meta = Some(meta.clone_for_top());
            }
            node.pod = Some(PodParts {
                meta,
                spec: spec.unwrap_or_default(),
            });
        } else if self.top {
            node.top_meta = meta;
        }
        Ok(node)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        IgnoredAny.visit_seq(seq)?;
        Ok(Node::default())
    }

    fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
        Ok(Node::default())
    }

    fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
        Ok(Node::default())
    }

    fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
        Ok(Node::default())
    }

    fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
        Ok(Node::default())
    }

    fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
        Ok(Node::default())
    }

    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(Node {
            is_null: true,
            ..Node::default()
        })
    }
}

impl Meta {
    /// The parts of a Pod's `metadata` that say where it lives and who owns it.
    fn clone_for_top(&self) -> Meta {
        match self {
            Meta::Object {
                namespace,
                owner_references,
                ..
            } => Meta::Object {
                namespace: namespace.clone(),
                owner_references: owner_references.clone(),
                annotations: None,
                labels: None,
            },
            _ => Meta::Absent,
        }
    }
}

/// Reads a `metadata`: the fields the core reads as values, everything else dropped.
struct MetaSeed;

impl<'de> DeserializeSeed<'de> for MetaSeed {
    type Value = Meta;

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for MetaSeed {
    type Value = Meta;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Meta, A::Error> {
        let (mut namespace, mut owner_references, mut annotations, mut labels) =
            (None, None, None, None);
        while let Some(key) = map.next_key::<Key<'de>>()? {
            let slot = match key.as_str() {
                "namespace" => &mut namespace,
                "ownerReferences" => &mut owner_references,
                "annotations" => &mut annotations,
                "labels" => &mut labels,
                _ => {
                    map.next_value::<IgnoredAny>()?;
                    continue;
                }
            };
            *slot = Some(map.next_value::<Value>()?);
        }
        Ok(Meta::Object {
            namespace,
            owner_references,
            annotations,
            labels,
        })
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Meta, A::Error> {
        Ok(Meta::Other(Value::deserialize(
            SeqAccessDeserializer::new(seq),
        )?))
    }

    fn visit_bool<E>(self, v: bool) -> Result<Meta, E> {
        Ok(Meta::Other(Value::Bool(v)))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Meta, E> {
        Ok(Meta::Other(Value::from(v)))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Meta, E> {
        Ok(Meta::Other(Value::from(v)))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Meta, E> {
        Ok(Meta::Other(Value::from(v)))
    }

    fn visit_str<E>(self, v: &str) -> Result<Meta, E> {
        Ok(Meta::Other(Value::String(v.to_owned())))
    }

    fn visit_unit<E>(self) -> Result<Meta, E> {
        Ok(Meta::Other(Value::Null))
    }
}

/// Reads a pod `spec`: an object's fields as raw JSON, anything else as a value.
struct SpecSeed;

impl<'de> DeserializeSeed<'de> for SpecSeed {
    type Value = Spec<'de>;

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for SpecSeed {
    type Value = Spec<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut fields = Vec::with_capacity(map.size_hint().unwrap_or(16));
        while let Some(key) = map.next_key::<Key<'de>>()? {
            let value = map.next_value::<&'de RawValue>()?;
            // A repeated key keeps its last value, as in a full parse.
            fields.retain(|(k, _): &(Key<'de>, &RawValue)| k.as_str() != key.as_str());
            fields.push((key, value));
        }
        Ok(Spec::Fields(fields))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        Ok(Spec::Other(Value::deserialize(
            SeqAccessDeserializer::new(seq),
        )?))
    }

    fn visit_bool<E>(self, v: bool) -> Result<Self::Value, E> {
        Ok(Spec::Other(Value::Bool(v)))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Self::Value, E> {
        Ok(Spec::Other(Value::from(v)))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Self::Value, E> {
        Ok(Spec::Other(Value::from(v)))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Self::Value, E> {
        Ok(Spec::Other(Value::from(v)))
    }

    fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Spec::Other(Value::String(v.to_owned())))
    }

    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(Spec::Other(Value::Null))
    }
}

#[cfg(test)]
mod tests;
