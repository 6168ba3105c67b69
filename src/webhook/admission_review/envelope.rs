//! One pass over a request body that keeps only what the webhook reads: the envelope's
//! `apiVersion` and `kind`, the small fields of `request`, and the objects. When `request.kind`
//! comes before `request.object` (kube-apiserver sends it so) and names a kind the core handles
//! (a Rollout aside), the object is read on the way with [`ObjectSeed`]; otherwise it is kept as
//! borrowed raw JSON for the core to read later. `request.oldObject` is always kept raw. A pod
//! spec the lean read refuses is read again kept raw, so that the core can word the error. Every
//! other field is scanned and dropped without recursion (deep nesting cannot overflow the
//! stack). A key given twice keeps its last value, as in a full parse.

use std::fmt;

use serde::de::{IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::Value;
use serde_json::value::RawValue;

use crate::workload::{
    JsonType, Key, MapOrValue, MapReader, ObjectParts, ObjectSeed, Shallow, SpecRead, Workload,
    lean_then_raw,
};

/// The body as read.
#[derive(Debug, Default)]
pub struct Envelope<'a> {
    pub api_version: Option<Value>,
    pub kind: Option<Value>,
    /// `request`, when it is an object.
    pub request: Option<RequestFields<'a>>,
}

/// The fields of `request` the webhook reads.
#[derive(Debug, Default)]
pub struct RequestFields<'a> {
    pub uid: Option<Value>,
    pub kind: Option<Value>,
    pub operation: Option<Value>,
    pub namespace: Option<Value>,
    pub dry_run: Option<Value>,
    pub object: Option<ObjectField<'a>>,
    pub old_object: Option<&'a RawValue>,
}

/// `request.object` as the envelope read it.
#[derive(Debug)]
pub enum ObjectField<'a> {
    Raw(&'a RawValue),
    /// Read for the pod (template) at `pointer`, the pointer of the `kind` before it.
    Read {
        pointer: &'static str,
        /// What was read (boxed: it holds the lean pod spec).
        parts: Box<ObjectParts<'a>>,
    },
}

/// What `request.kind` keeps of its object. Every field of the envelope is kept shallow (a
/// list or an object where a string belongs is kept empty), so no field costs more memory
/// than its text: a 3 MiB list as `request.uid` took 96 MiB read as a value.
const KIND_KEYS: &[&str] = &["group", "version", "kind"];

/// Parses `bytes` into an [`Envelope`]; an error for bytes that are not one JSON object.
pub fn from_slice(bytes: &[u8]) -> serde_json::Result<Envelope<'_>> {
    lean_then_raw(|how| from_slice_with(bytes, Some(how)))
}

/// [`from_slice`], but keeping `request.object` as sent whatever its kind (for a review whose
/// object was too large to read).
pub fn from_slice_unread(bytes: &[u8]) -> serde_json::Result<Envelope<'_>> {
    from_slice_with(bytes, None)
}

/// One read of `bytes`, with `request.object` read `how` when its kind is handled (`None`: kept
/// as sent).
fn from_slice_with(bytes: &[u8], how: Option<SpecRead>) -> serde_json::Result<Envelope<'_>> {
    // Text checked once as UTF-8 need not be checked again string by string. Bytes that are
    // not UTF-8 are read as bytes, so those in the parts that are skipped unread stop nothing.
    match std::str::from_utf8(bytes) {
        Ok(text) => read(serde_json::Deserializer::from_str(text), how),
        Err(_) => read(serde_json::Deserializer::from_slice(bytes), how),
    }
}

fn read<'de, R: serde_json::de::Read<'de>>(
    mut de: serde_json::Deserializer<R>,
    how: Option<SpecRead>,
) -> serde_json::Result<Envelope<'de>> {
    let envelope = serde::Deserializer::deserialize_map(&mut de, TopSeed(how))?;
    de.end()?;
    Ok(envelope)
}

/// Reads the top level, which must be an object (the caller names what it was otherwise).
struct TopSeed(Option<SpecRead>);

impl<'de> Visitor<'de> for TopSeed {
    type Value = Envelope<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an AdmissionReview object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut envelope = Envelope::default();
        while let Some(key) = map.next_key::<Key<'de>>()? {
            match key.as_str() {
                "apiVersion" => envelope.api_version = Some(map.next_value::<Shallow>()?.0),
                "kind" => envelope.kind = Some(map.next_value::<Shallow>()?.0),
                "request" => {
                    envelope.request = map.next_value_seed(MapOrValue(RequestSeed(self.0)))?
                }
                _ => _ = map.next_value::<IgnoredAny>()?,
            }
        }
        Ok(envelope)
    }
}

/// Reads `request`: its fields when it is an object, `None` (after scanning it) otherwise.
struct RequestSeed(Option<SpecRead>);

impl<'de> MapReader<'de> for RequestSeed {
    type Out = Option<RequestFields<'de>>;

    fn map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Out, A::Error> {
        let mut r = RequestFields::default();
        while let Some(key) = map.next_key::<Key<'de>>()? {
            match key.as_str() {
                "uid" => r.uid = Some(map.next_value::<Shallow>()?.0),
                "kind" => r.kind = Some(map.next_value_seed(Shallow::keeping(KIND_KEYS))?.0),
                "operation" => r.operation = Some(map.next_value::<Shallow>()?.0),
                "namespace" => r.namespace = Some(map.next_value::<Shallow>()?.0),
                "dryRun" => r.dry_run = Some(map.next_value::<Shallow>()?.0),
                "object" => {
                    let pointer = r.kind.as_ref().and_then(pod_pointer);
                    r.object = Some(match (self.0, pointer) {
                        (Some(how), Some(pointer)) => ObjectField::Read {
                            pointer,
                            parts: Box::new(
                                map.next_value_seed(ObjectSeed::reading(pointer, how))?,
                            ),
                        },
                        _ => ObjectField::Raw(map.next_value()?),
                    })
                }
                "oldObject" => r.old_object = Some(map.next_value()?),
                _ => _ = map.next_value::<IgnoredAny>()?,
            }
        }
        Ok(Some(r))
    }

    fn other(_: Value) -> Self::Out {
        None
    }

    /// A scalar `request` (a string as long as the body, say) is not copied to be dropped.
    fn scalar(_: JsonType, _: impl FnOnce() -> Value) -> Self::Out {
        None
    }

    /// Not the default (a `Skim`): `IgnoredAny` has no recursion limit, so a deeply nested
    /// list `request` gets "no request object", not a JSON nesting error.
    fn seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Out, A::Error> {
        IgnoredAny.visit_seq(seq)?;
        Ok(None)
    }
}

/// Where the pod (template) sits in objects of `kind`, when the core reads them for the pod
/// alone.
fn pod_pointer(kind: &Value) -> Option<&'static str> {
    let group = kind.get("group").map_or(Some(""), Value::as_str)?;
    let kind = kind.get("kind")?.as_str()?;
    Workload::classify(group, kind)
        .filter(|w| w.read_for_pod_alone())
        .map(Workload::pointer)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn keeps_the_read_fields_and_the_objects_as_sent() {
        let doc = json!({
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": "u", "kind": {"kind": "Pod"}, "operation": "UPDATE", "namespace": "n",
                "dryRun": false, "userInfo": {"username": "me"}, "options": {"a": 1},
                "object": {"metadata": {"name": "a"}, "status": {"phase": "Running"}},
                "oldObject": null
            },
            "status": "ignored"
        });
        let bytes = serde_json::to_vec(&doc).unwrap();
        let e = from_slice(&bytes).unwrap();
        assert_eq!(e.api_version, Some(json!("admission.k8s.io/v1")));
        assert_eq!(e.kind, Some(json!("AdmissionReview")));
        let r = e.request.unwrap();
        assert_eq!(r.uid, Some(json!("u")));
        assert_eq!(r.kind, Some(json!({"kind": "Pod"})));
        assert_eq!(r.operation, Some(json!("UPDATE")));
        assert_eq!(r.namespace, Some(json!("n")));
        assert_eq!(r.dry_run, Some(json!(false)));
        // `kind` (a Pod) came before `object` (json! sorts keys): read at once.
        let Some(ObjectField::Read { pointer, parts }) = r.object else {
            panic!("not read: {:?}", r.object);
        };
        assert_eq!(pointer, "");
        assert!(parts.pod.is_some() && !parts.is_null);
        assert_eq!(r.old_object.unwrap().get(), "null");
    }

    #[test]
    fn keeps_the_object_as_sent_when_its_kind_is_unknown_when_it_comes() {
        let object = r#"{"metadata":{"name":"a"},"spec":{"containers":[]}}"#;
        for request in [
            format!(r#"{{"object":{object},"kind":{{"kind":"Pod"}}}}"#),
            format!(r#"{{"kind":{{"group":"apps","kind":"Thing"}},"object":{object}}}"#),
            format!(r#"{{"kind":{{"group":null,"kind":"Pod"}},"object":{object}}}"#),
            format!(r#"{{"object":{object}}}"#),
        ] {
            let body = format!(r#"{{"request":{request}}}"#);
            let e = from_slice(body.as_bytes()).unwrap();
            match e.request.unwrap().object {
                Some(ObjectField::Raw(raw)) => assert_eq!(raw.get(), object, "{request}"),
                other => panic!("{request}: {other:?}"),
            }
        }
    }

    #[test]
    fn reads_a_template_at_its_kinds_pointer_and_a_null_object_as_null() {
        let body = br#"{"request":{"kind":{"group":"batch","kind":"CronJob"},
            "object":{"spec":{"jobTemplate":{"spec":{"template":{"spec":{"containers":[]}}}}}}}}"#;
        let r = from_slice(body).unwrap().request.unwrap();
        let Some(ObjectField::Read { pointer, parts }) = r.object else {
            panic!("not read: {:?}", r.object);
        };
        assert_eq!(pointer, "/spec/jobTemplate/spec/template");
        assert!(parts.pod.is_some());
        let body = br#"{"request":{"kind":{"group":"","kind":"Pod"},"object":null}}"#;
        let r = from_slice(body).unwrap().request.unwrap();
        assert!(matches!(r.object, Some(ObjectField::Read { parts, .. }) if parts.is_null));
    }

    #[test]
    fn unread_keeps_an_object_of_a_handled_kind_as_sent() {
        let object = r#"{"spec":{"containers":[{"name":"a"}]}}"#;
        let body =
            format!(r#"{{"request":{{"uid":"u","kind":{{"kind":"Pod"}},"object":{object}}}}}"#);
        let r = from_slice_unread(body.as_bytes()).unwrap().request.unwrap();
        assert_eq!(r.uid, Some(json!("u")));
        match r.object {
            Some(ObjectField::Raw(raw)) => assert_eq!(raw.get(), object),
            other => panic!("read: {other:?}"),
        }
        // The same body read as usual reads the object.
        let r = from_slice(body.as_bytes()).unwrap().request.unwrap();
        assert!(matches!(r.object, Some(ObjectField::Read { .. })));
    }

    #[test]
    fn a_repeated_key_keeps_its_last_value() {
        let e = from_slice(br#"{"kind": "x", "kind": "AdmissionReview", "request": 1, "request": {"uid": "a", "uid": "b"}}"#).unwrap();
        assert_eq!(e.kind, Some(json!("AdmissionReview")));
        assert_eq!(e.request.unwrap().uid, Some(json!("b")));
    }

    #[test]
    fn a_top_level_that_is_not_an_object_is_an_error_and_a_request_that_is_not_is_none() {
        for text in ["[1, {}]", "\"s\"", "null", "-1.5", "true"] {
            assert!(from_slice(text.as_bytes()).is_err(), "{text}");
        }
        let request_not_an_object = from_slice(br#"{"request": "s"}"#).unwrap();
        assert!(request_not_an_object.request.is_none());
    }

    #[test]
    fn skipped_parts_are_still_checked_and_the_recursion_limit_holds() {
        assert!(from_slice(br#"{"request": {"userInfo": [1,}}"#).is_err());
        assert!(from_slice(br#"{"a": 1} x"#).is_err());
        let deep = format!("{{\"options\": {}}}", "[".repeat(10_000));
        assert!(from_slice(deep.as_bytes()).is_err());
        let deep_object = format!("{{\"request\": {{\"object\": {}}}}}", "[".repeat(10_000));
        assert!(from_slice(deep_object.as_bytes()).is_err());
    }
}
