//! The serde readers of [`super::read`]'s one pass: each level on the way to the pod, a
//! `metadata` (namespace, owner, the entries the product reads), `ownerReferences` as it
//! streams by, and a pod `spec`, lean or kept raw. Everything else is skimmed and dropped.

use serde::de::{IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use super::{Entries, Meta, PodParts, Spec};
use crate::workload::key::Key;
use crate::workload::meter;
use crate::workload::pod::PodSpec;
use crate::workload::skim::{JsonType, MapOrValue, MapReader, Shallow, Skim};

/// What one raw field of a spec is charged: its slot, and its place in the set that finds
/// repeated keys.
const FIELD_COST: usize = 96;

/// What one prefixed annotation or label is charged: its map entry, and the copies the review
/// makes of it (the string map, the editable view and its edited copy). Measured: 100,000
/// entries raised the peak by 45 MiB, 470 bytes each.
const ENTRY_COST: usize = 512;

/// `fields` with each key once, at its last place and with its last value, as a full parse
/// keeps them (found in one pass: a spec may have 100,000 keys).
fn last_of_each_key<'de>(fields: Vec<(Key<'de>, &'de RawValue)>) -> Vec<(Key<'de>, &'de RawValue)> {
    let mut seen = std::collections::HashSet::new();
    let last: Vec<bool> = fields
        .iter()
        .rev()
        .map(|(key, _)| seen.insert(key.as_str()))
        .collect();
    fields
        .into_iter()
        .zip(last.into_iter().rev())
        .filter_map(|(field, last)| last.then_some(field))
        .collect()
}

/// What one object (or a level of it on the way to the pod) yields.
#[derive(Default)]
pub(super) struct Node<'a> {
    /// The value is JSON `null`.
    pub(super) is_null: bool,
    /// The `metadata` of the top-level object.
    pub(super) top_meta: Option<Meta>,
    /// The pod found below (or at) this level.
    pub(super) pod: Option<PodParts<'a>>,
}

/// Reads one level on the way to the pod: `path` is what is left of the pointer.
pub(super) struct NodeReader<'p> {
    pub(super) path: &'p [&'p str],
    pub(super) top: bool,
    pub(super) lean: bool,
}

impl<'de> MapReader<'de> for NodeReader<'_> {
    type Out = Node<'de>;

    fn map<A: MapAccess<'de>>(self, mut map: A) -> Result<Node<'de>, A::Error> {
        let at_pod = self.path.is_empty();
        let mut node = Node::default();
        let mut meta = None;
        let mut spec = None;
        while let Some(key) = map.next_key::<Key<'de>>()? {
            let key = key.as_str();
            if key == "metadata" && (self.top || at_pod) {
                meta = Some(map.next_value_seed(MapOrValue(MetaReader))?);
            } else if at_pod && key == "spec" {
                spec = Some(map.next_value_seed(MapOrValue(SpecReader { lean: self.lean }))?);
            } else if !at_pod && key == self.path[0] {
                let below = map.next_value_seed(MapOrValue(NodeReader {
                    path: &self.path[1..],
                    top: false,
                    lean: self.lean,
                }))?;
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
                spec: spec.unwrap_or(Spec::Other(Value::Null)),
            });
        } else if self.top {
            node.top_meta = meta;
        }
        Ok(node)
    }

    fn seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Node<'de>, A::Error> {
        IgnoredAny.visit_seq(seq)?;
        Ok(Node::default())
    }

    fn other(value: Value) -> Node<'de> {
        Node {
            is_null: value.is_null(),
            ..Node::default()
        }
    }
}

/// Reads a `metadata`: the fields the core reads, everything else dropped.
struct MetaReader;

impl<'de> MapReader<'de> for MetaReader {
    type Out = Meta;

    fn map<A: MapAccess<'de>>(self, mut map: A) -> Result<Meta, A::Error> {
        let (mut namespace, mut controlled) = (None, false);
        let (mut annotations, mut labels) = (Entries::Absent, Entries::Absent);
        while let Some(key) = map.next_key::<Key<'de>>()? {
            match key.as_str() {
                "namespace" => {
                    namespace = match map.next_value::<Shallow>()?.0 {
                        Value::String(namespace) => Some(namespace),
                        _ => None,
                    }
                }
                "ownerReferences" => {
                    controlled = map.next_value_seed(MapOrValue(OwnerRefs { entry: false }))?
                }
                "annotations" => annotations = map.next_value_seed(MapOrValue(EntriesReader))?,
                "labels" => labels = map.next_value_seed(MapOrValue(EntriesReader))?,
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(Meta::Object {
            namespace,
            controlled,
            annotations,
            labels,
        })
    }

    fn other(value: Value) -> Meta {
        Meta::Other(value)
    }
}

/// Reads `ownerReferences` or, as `entry`, one of its entries: whether it is a list with an entry
/// whose `controller` is `true` (the last `controller` of an entry counts, as in a full parse).
/// Read as it streams by: a list of a million entries costs no memory.
struct OwnerRefs {
    entry: bool,
}

impl<'de> MapReader<'de> for OwnerRefs {
    type Out = bool;

    fn map<A: MapAccess<'de>>(self, mut map: A) -> Result<bool, A::Error> {
        let mut controller = false;
        while let Some(key) = map.next_key::<Key<'de>>()? {
            if self.entry && key.as_str() == "controller" {
                controller = map.next_value::<Shallow>()?.0 == Value::Bool(true);
            } else {
                map.next_value::<Skim>()?;
            }
        }
        Ok(controller)
    }

    fn seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<bool, A::Error> {
        if self.entry {
            // A list inside an entry names no controller: skimmed, not read as entries.
            while seq.next_element::<Skim>()?.is_some() {}
            return Ok(false);
        }
        let mut found = false;
        while let Some(controller) = seq.next_element_seed(MapOrValue(OwnerRefs { entry: true }))? {
            found |= controller;
        }
        Ok(found)
    }

    fn other(_: Value) -> bool {
        false
    }

    fn scalar(_: JsonType, _: impl FnOnce() -> Value) -> bool {
        false
    }
}

/// Reads `annotations` or `labels`: the entries the product reads (its own prefix, Reloader's),
/// the rest dropped.
struct EntriesReader;

impl<'de> MapReader<'de> for EntriesReader {
    type Out = Entries;

    fn map<A: MapAccess<'de>>(self, mut map: A) -> Result<Entries, A::Error> {
        // A map, not a list searched for each key: a body may hold 100,000 prefixed keys.
        let mut entries = Map::new();
        while let Some(key) = map.next_key::<Key<'de>>()? {
            if !crate::policy::reads_key(key.as_str()) {
                map.next_value::<IgnoredAny>()?;
                continue;
            }
            meter::charge(ENTRY_COST).map_err(serde::de::Error::custom)?;
            entries.insert(key.as_str().to_owned(), map.next_value::<Shallow>()?.0);
        }
        Ok(Entries::Object(entries))
    }

    fn other(value: Value) -> Entries {
        Entries::Other(value)
    }
}

/// Reads a pod `spec`: straight into the lean type, or its fields as raw JSON.
struct SpecReader {
    lean: bool,
}

impl<'de> MapReader<'de> for SpecReader {
    type Out = Spec<'de>;

    fn map<A: MapAccess<'de>>(self, mut map: A) -> Result<Spec<'de>, A::Error> {
        if self.lean {
            let (spec, shape) = PodSpec::read_map(map)?;
            return Ok(Spec::Read { spec, shape });
        }
        let mut fields: Vec<(Key<'de>, &'de RawValue)> = Vec::new();
        while let Some(key) = map.next_key::<Key<'de>>()? {
            let value = map.next_value::<&'de RawValue>()?;
            meter::charge(FIELD_COST).map_err(serde::de::Error::custom)?;
            fields.push((key, value));
        }
        Ok(Spec::Fields(last_of_each_key(fields)))
    }

    fn other(value: Value) -> Spec<'de> {
        Spec::Other(value)
    }
}
