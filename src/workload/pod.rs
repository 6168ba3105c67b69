//! The part of a Kubernetes pod spec the core reads, and nothing else: types that mirror
//! `k8s_openapi::api::core::v1` (same names, Rust types and JSON names) with only the fields the
//! analysis, the rules and the sidecar plan read. Everything else is scanned and dropped while
//! parsing, so a review allocates only what it uses. Like k8s-openapi, a missing or `null`
//! required string (`name`, `key`, `mountPath`) reads as `""`, and a missing or `null` list as
//! empty.

use std::fmt;

use serde::de::{IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer};

use super::key::Key;
use super::meter;

/// `io.k8s.api.core.v1.PodSpec`, the fields the core reads. A key given twice keeps its last
/// value, as in a read of the spec as a JSON value.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PodSpec {
    pub containers: Vec<Container>,
    pub init_containers: Option<Vec<Container>>,
    pub volumes: Option<Vec<Volume>>,
    pub restart_policy: Option<String>,
    pub host_pid: Option<bool>,
    pub share_process_namespace: Option<bool>,
    pub security_context: Option<SecurityContext>,
}

/// How a spec sent the fields the core may edit: what the editable view must show.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SpecShape {
    pub containers: Sent,
    pub init_containers: Sent,
    pub volumes: Sent,
    pub share_process_namespace: Sent,
}

/// Whether a field was sent, and whether as `null`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Sent {
    /// Not in the object.
    #[default]
    Absent,
    Null,
    /// A value.
    Value,
}

impl Sent {
    fn of<T>(value: &Option<T>) -> Self {
        if value.is_some() {
            Sent::Value
        } else {
            Sent::Null
        }
    }
}

impl PodSpec {
    /// Its init containers, then its containers.
    pub fn all_containers(&self) -> impl Iterator<Item = &Container> {
        self.init_containers
            .iter()
            .flatten()
            .chain(&self.containers)
    }

    /// Reads a spec object's fields from `map`, noting how the editable ones were sent.
    pub fn read_map<'de, A: MapAccess<'de>>(mut map: A) -> Result<(Self, SpecShape), A::Error> {
        let mut spec = PodSpec::default();
        let mut shape = SpecShape::default();
        while let Some(key) = map.next_key::<Key<'de>>()? {
            match key.as_str() {
                "containers" => {
                    let containers = map.next_value::<MeteredList<Container>>()?.0;
                    shape.containers = Sent::of(&containers);
                    spec.containers = containers.unwrap_or_default();
                }
                "initContainers" => {
                    spec.init_containers = map.next_value::<MeteredList<Container>>()?.0;
                    shape.init_containers = Sent::of(&spec.init_containers);
                }
                "shareProcessNamespace" => {
                    spec.share_process_namespace = map.next_value()?;
                    shape.share_process_namespace = Sent::of(&spec.share_process_namespace);
                }
                "volumes" => {
                    spec.volumes = map.next_value::<MeteredList<Volume>>()?.0;
                    shape.volumes = Sent::of(&spec.volumes);
                }
                "restartPolicy" => spec.restart_policy = map.next_value()?,
                "hostPID" => spec.host_pid = map.next_value()?,
                "securityContext" => spec.security_context = map.next_value()?,
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok((spec, shape))
    }
}

impl<'de> Deserialize<'de> for PodSpec {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct SpecVisitor;
        impl<'de> Visitor<'de> for SpecVisitor {
            type Value = PodSpec;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("struct PodSpec")
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<PodSpec, A::Error> {
                Ok(PodSpec::read_map(map)?.0)
            }
        }
        d.deserialize_map(SpecVisitor)
    }
}

/// `io.k8s.api.core.v1.Container`, the fields the core reads.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Container {
    #[serde(default, deserialize_with = "null_as_default")]
    pub name: String,
    pub image: Option<String>,
    #[serde(default, deserialize_with = "metered_list")]
    pub command: Option<Vec<String>>,
    #[serde(default, deserialize_with = "metered_list")]
    pub args: Option<Vec<String>>,
    #[serde(default, deserialize_with = "metered_list")]
    pub env: Option<Vec<EnvVar>>,
    #[serde(default, deserialize_with = "metered_list")]
    pub env_from: Option<Vec<EnvFromSource>>,
    #[serde(default, deserialize_with = "metered_list")]
    pub volume_mounts: Option<Vec<VolumeMount>>,
    /// `restartPolicy` (`Always` makes an init container a native sidecar).
    pub restart_policy: Option<String>,
    /// `restartPolicyRules`: only how many there are.
    #[serde(default, deserialize_with = "metered_list")]
    pub restart_policy_rules: Option<Vec<IgnoredAny>>,
    pub security_context: Option<SecurityContext>,
}

/// `io.k8s.api.core.v1.SecurityContext` / `PodSecurityContext`, the fields the core reads (the
/// same in both).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SecurityContext {
    pub run_as_user: Option<i64>,
    pub run_as_group: Option<i64>,
    pub run_as_non_root: Option<bool>,
}

/// `io.k8s.api.core.v1.EnvVar`, the fields the core reads (not the name or literal value).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EnvVar {
    pub value_from: Option<EnvVarSource>,
}

/// `io.k8s.api.core.v1.EnvVarSource`, the fields the core reads.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EnvVarSource {
    pub config_map_key_ref: Option<KeySelector>,
    pub secret_key_ref: Option<KeySelector>,
}

/// `ConfigMapKeySelector` / `SecretKeySelector`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KeySelector {
    #[serde(default, deserialize_with = "null_as_default")]
    pub name: String,
    #[serde(default, deserialize_with = "null_as_default")]
    pub key: String,
    pub optional: Option<bool>,
}

/// `io.k8s.api.core.v1.EnvFromSource`, the fields the core reads.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EnvFromSource {
    pub config_map_ref: Option<EnvSource>,
    pub secret_ref: Option<EnvSource>,
}

/// `ConfigMapEnvSource` / `SecretEnvSource`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EnvSource {
    #[serde(default, deserialize_with = "null_as_default")]
    pub name: String,
    pub optional: Option<bool>,
}

/// `io.k8s.api.core.v1.VolumeMount`, the fields the core reads.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VolumeMount {
    #[serde(default, deserialize_with = "null_as_default")]
    pub name: String,
    #[serde(default, deserialize_with = "null_as_default")]
    pub mount_path: String,
    pub sub_path: Option<String>,
    pub sub_path_expr: Option<String>,
}

/// `io.k8s.api.core.v1.Volume`, the sources the core reads.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Volume {
    #[serde(default, deserialize_with = "null_as_default")]
    pub name: String,
    pub config_map: Option<ConfigMapVolumeSource>,
    pub secret: Option<SecretVolumeSource>,
    pub projected: Option<ProjectedVolumeSource>,
}

/// `ConfigMapVolumeSource`, and the `configMap` and `secret` of a projection (the fields the
/// core reads are the same in all three).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConfigMapVolumeSource {
    #[serde(default, deserialize_with = "null_as_default")]
    pub name: String,
    #[serde(default, deserialize_with = "metered_list")]
    pub items: Option<Vec<KeyToPath>>,
    pub optional: Option<bool>,
}

/// `io.k8s.api.core.v1.SecretVolumeSource`, the fields the core reads.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SecretVolumeSource {
    pub secret_name: Option<String>,
    #[serde(default, deserialize_with = "metered_list")]
    pub items: Option<Vec<KeyToPath>>,
    pub optional: Option<bool>,
}

/// `io.k8s.api.core.v1.KeyToPath`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KeyToPath {
    #[serde(default, deserialize_with = "null_as_default")]
    pub key: String,
    #[serde(default, deserialize_with = "null_as_default")]
    pub path: String,
}

/// `io.k8s.api.core.v1.ProjectedVolumeSource`, the fields the core reads.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProjectedVolumeSource {
    #[serde(default, deserialize_with = "metered_list")]
    pub sources: Option<Vec<VolumeProjection>>,
}

/// `io.k8s.api.core.v1.VolumeProjection`, the fields the core reads.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VolumeProjection {
    pub config_map: Option<ConfigMapVolumeSource>,
    pub secret: Option<ConfigMapVolumeSource>,
    /// `serviceAccountToken`: only whether it is there.
    pub service_account_token: Option<Present>,
}

/// A field whose content does not matter, only that it is set to an object.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
pub struct Present {}

/// An optional list whose buffer is charged to the read's meter as it grows (see
/// [`super::meter`]); read as `Option<Vec<T>>` is, with the same errors.
struct MeteredList<T>(Option<Vec<T>>);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for MeteredList<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_option(MeteredListVisitor(std::marker::PhantomData))
    }
}

struct MeteredListVisitor<T>(std::marker::PhantomData<T>);

impl<'de, T: Deserialize<'de>> Visitor<'de> for MeteredListVisitor<T> {
    type Value = MeteredList<T>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a sequence")
    }

    fn visit_none<E>(self) -> Result<Self::Value, E> {
        Ok(MeteredList(None))
    }

    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(MeteredList(None))
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_seq(self)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut items: Vec<T> = Vec::new();
        while let Some(item) = seq.next_element()? {
            if items.len() == items.capacity() {
                // Every buffer the list has had is charged, the new one before it is made: that
                // also covers the moment the old one is copied into it.
                let capacity = (items.capacity() * 2).max(4);
                meter::charge(capacity.saturating_mul(std::mem::size_of::<T>()))
                    .map_err(serde::de::Error::custom)?;
                items.reserve_exact(capacity - items.len());
            }
            items.push(item);
        }
        Ok(MeteredList(Some(items)))
    }
}

/// Reads an optional list through [`MeteredList`].
fn metered_list<'de, D, T>(d: D) -> Result<Option<Vec<T>>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    Ok(MeteredList::deserialize(d)?.0)
}

/// Reads `null` as the default, as k8s-openapi does for required fields.
fn null_as_default<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

#[cfg(test)]
pub(crate) mod tests;
