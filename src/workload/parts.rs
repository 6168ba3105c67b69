//! Reading the few parts of an object the core needs straight from its raw JSON, in one pass:
//! namespace, owner, the `reload-injector.io/` entries of annotations and labels, and the pod
//! spec, read into the lean [`PodSpec`]; everything else is scanned and dropped. A spec the lean
//! read refuses is read again kept raw, for [`PodParts::spec`] to word the error. A key given
//! twice keeps its last value, as in a full parse.

mod object_readers;

use std::borrow::Cow;

use serde::Deserialize;
use serde::de::DeserializeSeed;
use serde::de::value::MapDeserializer;
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use super::key::Key;
use super::meter;
use super::pod::{PodSpec, Sent, SpecShape};
use super::skim::MapOrValue;
use super::skim::Skim;
use object_readers::NodeReader;

/// What the core reads of an object under review.
#[derive(Debug, Default, Clone)]
pub struct ObjectParts<'a> {
    /// The object is JSON `null`.
    pub is_null: bool,
    /// The object's own `metadata` as far as the core reads and edits it: its namespace, owner
    /// and the entries of its `annotations` and `labels` the product reads, as sent (a Pod's
    /// entries are read at its pod).
    pub own: Meta,
    /// The pod (template) at the workload's pointer, when it is there and an object.
    pub pod: Option<PodParts<'a>>,
}

/// The pod (template) of an object.
#[derive(Debug, Clone)]
pub struct PodParts<'a> {
    pub meta: Meta,
    pub spec: Spec<'a>,
}

/// A `metadata` as the core reads it.
#[derive(Debug, Default, Clone)]
pub enum Meta {
    /// No `metadata`.
    #[default]
    Absent,
    /// A `metadata` object: the fields the core reads.
    Object {
        /// `namespace`, when it is a string.
        namespace: Option<String>,
        /// Whether `ownerReferences` names a controller.
        controlled: bool,
        annotations: Entries,
        labels: Entries,
    },
    /// A `metadata` that is not an object.
    Other(Value),
}

/// The `reload-injector.io/` entries of `annotations` or `labels`, as sent. They are the only
/// keys the core reads or writes, so the only ones its editable view needs: a diff never
/// touches a key that is the same on both sides.
#[derive(Debug, Default, Clone)]
pub enum Entries {
    /// Not sent.
    #[default]
    Absent,
    /// An object: its entries under the prefix (a repeated key keeps its last value).
    Object(Map<String, Value>),
    /// Anything else (`null` included), as sent.
    Other(Value),
}

/// A pod `spec` as sent.
#[derive(Debug, Clone)]
pub enum Spec<'a> {
    /// An object read straight into the lean [`PodSpec`] (the usual case).
    Read {
        /// What the core reads of it.
        spec: PodSpec,
        /// How its editable fields were sent.
        shape: SpecShape,
    },
    /// An object's fields as raw JSON, in order (a repeated key keeps its last value): the
    /// read of an object the lean read refused, to be read again and the error worded.
    Fields(Vec<(Key<'a>, &'a RawValue)>),
    /// Anything else (`null` when absent).
    Other(Value),
}

/// Reads `object`, whose pod (template) sits at the JSON pointer `pod_pointer` (`""` for a Pod).
pub fn read<'a>(object: &'a RawValue, pod_pointer: &str) -> serde_json::Result<ObjectParts<'a>> {
    lean_then_raw(|how| read_with(object, ObjectSeed::reading(pod_pointer, how)))
}

/// How a pod spec is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpecRead {
    /// Straight into the lean [`PodSpec`]: a spec that does not have its shape fails the read.
    Lean,
    /// Its fields kept as raw JSON, so that only the JSON itself can fail the read;
    /// `PodParts::spec` then reads the spec and words what is wrong with it.
    KeptRaw,
}

/// Runs `read` with the spec read lean and, when that read refused a value's shape, once more
/// keeping the spec raw, so that the error can be worded.
pub fn lean_then_raw<T>(read: impl Fn(SpecRead) -> serde_json::Result<T>) -> serde_json::Result<T> {
    read(SpecRead::Lean).or_else(|error| {
        if worth_a_raw_read(&error) && !meter::has_refused() {
            read(SpecRead::KeptRaw)
        } else {
            Err(error)
        }
    })
}

/// Whether an object the lean read refused may be read keeping its spec raw: JSON that is not
/// well formed (or nests too deep) fails both reads alike.
fn worth_a_raw_read(error: &serde_json::Error) -> bool {
    error.classify() == serde_json::error::Category::Data
}

fn read_with<'a>(
    object: &'a RawValue,
    seed: ObjectSeed<'_>,
) -> serde_json::Result<ObjectParts<'a>> {
    let mut de = serde_json::Deserializer::from_str(object.get());
    let parts = seed.deserialize(&mut de)?;
    de.end()?;
    Ok(parts)
}

/// Reads an object in the middle of a larger document (the review's `request.object`) as
/// `read` does, so that the document is scanned once.
pub struct ObjectSeed<'p> {
    path: Vec<&'p str>,
    lean: bool,
}

impl<'p> ObjectSeed<'p> {
    /// A reader of objects whose pod (template) sits at the JSON pointer `pod_pointer`, which
    /// reads the pod spec `how` (see [`lean_then_raw`]).
    pub fn reading(pod_pointer: &'p str, how: SpecRead) -> Self {
        Self {
            path: pod_pointer.split('/').skip(1).collect(),
            lean: how == SpecRead::Lean,
        }
    }
}

impl<'de> DeserializeSeed<'de> for ObjectSeed<'_> {
    type Value = ObjectParts<'de>;

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        let node = MapOrValue(NodeReader {
            path: &self.path,
            top: true,
            lean: self.lean,
        })
        .deserialize(d)?;
        Ok(ObjectParts {
            is_null: node.is_null,
            own: node.top_meta.unwrap_or_default(),
            pod: node.pod,
        })
    }
}

impl Meta {
    /// `namespace` when it is a string.
    pub fn namespace(&self) -> Option<String> {
        match self {
            Meta::Object { namespace, .. } => namespace.clone(),
            _ => None,
        }
    }

    /// Whether `ownerReferences` names a controller (a ReplicaSet, a Job, …).
    pub fn controlled(&self) -> bool {
        matches!(
            self,
            Meta::Object {
                controlled: true,
                ..
            }
        )
    }

    /// The `reload-injector.io/` entries of `annotations` (or `labels`) as a string map;
    /// non-string values are skipped.
    pub fn string_map(&self, field: MapField) -> std::collections::BTreeMap<String, String> {
        let entries = match (self, field) {
            (Meta::Object { annotations, .. }, MapField::Annotations) => annotations,
            (Meta::Object { labels, .. }, MapField::Labels) => labels,
            _ => return Default::default(),
        };
        let Entries::Object(entries) = entries else {
            return Default::default();
        };
        let strings = entries
            .iter()
            .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())));
        strings.collect()
    }

    /// The editable part of this `metadata`: the prefixed entries of its annotations and
    /// labels, as sent.
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
                for (key, entries) in [("annotations", annotations), ("labels", labels)] {
                    if let Some(value) = entries.editable() {
                        out.insert(key.to_owned(), value);
                    }
                }
                Some(Value::Object(out))
            }
        }
    }

    /// Whether its labels can take an entry without replacing anything: `metadata` and its
    /// `labels` are objects or absent.
    pub fn labels_editable(&self) -> bool {
        matches!(
            self,
            Meta::Absent
                | Meta::Object {
                    labels: Entries::Absent | Entries::Object(_),
                    ..
                }
        )
    }

    /// The parts of a Pod's `metadata` that say where it lives and who owns it.
    fn clone_for_top(&self) -> Meta {
        match self {
            Meta::Object {
                namespace,
                controlled,
                ..
            } => Meta::Object {
                namespace: namespace.clone(),
                controlled: *controlled,
                annotations: Entries::Absent,
                labels: Entries::Absent,
            },
            _ => Meta::Absent,
        }
    }
}

impl Entries {
    fn editable(&self) -> Option<Value> {
        match self {
            Entries::Absent => None,
            Entries::Object(entries) => Some(Value::Object(entries.clone())),
            Entries::Other(value) => Some(value.clone()),
        }
    }
}

/// The string maps of `metadata`.
#[derive(Debug, Clone, Copy)]
pub enum MapField {
    Annotations,
    Labels,
}

impl<'a> PodParts<'a> {
    /// The spec read into the lean [`PodSpec`]. The error of a spec that does not have its
    /// shape is worded as a full k8s-openapi read of it would word it.
    pub fn spec(&self) -> Result<Cow<'_, PodSpec>, serde_json::Error> {
        match &self.spec {
            Spec::Read { spec, .. } => Ok(Cow::Borrowed(spec)),
            Spec::Fields(fields) => {
                let entries = fields.iter().map(|(k, v)| (Cow::Borrowed(k.as_str()), *v));
                let read = PodSpec::deserialize(MapDeserializer::new(entries)).or_else(|lean| {
                    let size: usize = fields
                        .iter()
                        .map(|(k, v)| k.as_str().len() + v.get().len())
                        .sum();
                    if size > WORDED_IN_FULL {
                        // What a read as a value would refuse (too deep a nesting), found
                        // without building it; otherwise the lean read's words.
                        for (_, raw) in fields {
                            serde_json::from_str::<Skim>(raw.get())?;
                        }
                        return Err(lean);
                    }
                    // Slow path, for errors and for repeated keys deeper down: read the spec
                    // as a value (last key wins) and word any error as k8s-openapi would.
                    let value = fields_value(fields)?;
                    PodSpec::deserialize(&value)
                        .map_err(|lean_error| full_error(&value).unwrap_or(lean_error))
                });
                read.map(Cow::Owned)
            }
            Spec::Other(value) => Err(full_error(value).unwrap_or_else(|| {
                serde::de::Error::custom("invalid type: the pod spec is not an object")
            })),
        }
    }

    /// The parts of the pod the core may edit, as sent: the prefixed annotations and labels,
    /// `shareProcessNamespace`, and the container and volume lists with `null` placeholders (the
    /// core only appends). Diffing an edited copy gives the patch a whole object would.
    pub fn editable(&self, spec: &PodSpec) -> Value {
        let mut pod = Map::new();
        if let Some(meta) = self.meta.editable() {
            pod.insert("metadata".to_owned(), meta);
        }
        let spec_view = match &self.spec {
            Spec::Other(Value::Null) => None,
            Spec::Other(value) => Some(value.clone()),
            Spec::Read { shape, .. } => Some(editable_spec(*shape, spec)),
            Spec::Fields(fields) => Some(editable_spec(shape_of(fields), spec)),
        };
        if let Some(view) = spec_view {
            pod.insert("spec".to_owned(), view);
        }
        Value::Object(pod)
    }
}

/// A spec's raw fields as one value (only on the error path); too deep a nesting is an error.
fn fields_value(fields: &[(Key<'_>, &RawValue)]) -> Result<Value, serde_json::Error> {
    fields
        .iter()
        .map(|(k, v)| Ok((k.as_str().to_owned(), serde_json::from_str(v.get())?)))
        .collect::<Result<Map<_, _>, _>>()
        .map(Value::Object)
}

/// Why k8s-openapi would refuse `value` as a PodSpec, if it would.
fn full_error(value: &Value) -> Option<serde_json::Error> {
    k8s_openapi::api::core::v1::PodSpec::deserialize(value).err()
}

/// The editable fields of a spec that sent them as `shape` says, read as `spec`.
fn editable_spec(shape: SpecShape, spec: &PodSpec) -> Value {
    let mut out = Map::new();
    let inits = spec.init_containers.iter().flatten().count();
    let volumes = spec.volumes.iter().flatten().count();
    let lists = [
        ("containers", shape.containers, spec.containers.len()),
        ("initContainers", shape.init_containers, inits),
        ("volumes", shape.volumes, volumes),
    ];
    for (key, sent, len) in lists {
        match sent {
            Sent::Absent => {}
            Sent::Null => drop(out.insert(key.to_owned(), Value::Null)),
            Sent::Value => drop(out.insert(key.to_owned(), Value::Array(vec![Value::Null; len]))),
        }
    }
    if shape.share_process_namespace != Sent::Absent {
        let value = spec
            .share_process_namespace
            .map_or(Value::Null, Value::Bool);
        out.insert("shareProcessNamespace".to_owned(), value);
    }
    Value::Object(out)
}

/// How raw spec fields sent the editable ones (a repeated key keeps its last value).
fn shape_of(fields: &[(Key<'_>, &RawValue)]) -> SpecShape {
    let mut shape = SpecShape::default();
    for (key, raw) in fields {
        let sent = if raw.get() == "null" {
            Sent::Null
        } else {
            Sent::Value
        };
        match key.as_str() {
            "containers" => shape.containers = sent,
            "initContainers" => shape.init_containers = sent,
            "volumes" => shape.volumes = sent,
            "shareProcessNamespace" => shape.share_process_namespace = sent,
            _ => {}
        }
    }
    shape
}

/// Largest spec whose error is worded by reading it whole as a value (and as k8s-openapi's
/// PodSpec); a larger one gets the lean read's words, so that an error costs no more memory
/// than a good spec.
const WORDED_IN_FULL: usize = 64 * 1024;

/// [`PodParts::editable`] placed at `pod_pointer` inside otherwise empty objects.
pub fn at_pointer(pod: Value, pod_pointer: &str) -> Value {
    let keys: Vec<&str> = pod_pointer.split('/').skip(1).collect();
    keys.into_iter().rev().fold(pod, |inner, key| {
        let mut map = Map::new();
        map.insert(key.to_owned(), inner);
        Value::Object(map)
    })
}

/// `view` (an object's editable view, see [`at_pointer`]) with the object's own editable
/// `metadata` (`own`, see [`ObjectParts::own`]) at its top.
pub fn with_own_meta(mut view: Value, own: &Meta) -> Value {
    if let (Value::Object(map), Some(meta)) = (&mut view, own.editable()) {
        map.insert("metadata".to_owned(), meta);
    }
    view
}

#[cfg(test)]
mod tests;
