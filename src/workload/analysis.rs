//! Reads a pod spec into what the rules need: config volumes, how each container consumes
//! them (directory mount, subPath mount, env), and the containers that run for the pod's life.

use std::collections::{BTreeMap, BTreeSet};

use super::pod::{Container, KeyToPath, PodSpec, Volume};

use super::rules::{How, Use};
use super::{SIDECAR_NAME, TOKEN_MOUNT_PATH};
use crate::hash::{ConfigId, Consumed};

/// One ConfigMap/Secret feeding a config volume.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VolumeSource {
    pub id: ConfigId,
    pub optional: bool,
    /// `items` (key → path), if the volume picks keys.
    pub items: Option<Vec<(String, String)>>,
}

/// A volume made of ConfigMaps/Secrets (`configMap`, `secret`, or `projected` without a
/// service-account token), unless it is mounted where the Pod's API token goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigVolume {
    /// Its sources (one, or several for `projected`).
    pub sources: Vec<VolumeSource>,
}

impl ConfigVolume {
    /// What a subPath mount of this volume reads: the one key behind the file when it can
    /// be told, otherwise every source whole.
    pub fn consumed_by_subpath(&self, sub_path: Option<&str>) -> Vec<Consumed> {
        let every_source = || {
            self.sources
                .iter()
                .map(|s| Consumed::Whole(s.id.clone()))
                .collect()
        };
        let Some(sub_path) = sub_path.filter(|p| !p.is_empty()) else {
            return every_source();
        };
        let mut out = Vec::new();
        for source in &self.sources {
            match &source.items {
                Some(items) => {
                    if let Some((key, _)) = items.iter().find(|(_, path)| path == sub_path) {
                        out.push(Consumed::Key(source.id.clone(), key.clone()));
                    } else if items
                        .iter()
                        .any(|(_, path)| path.starts_with(&format!("{sub_path}/")))
                    {
                        out.push(Consumed::Whole(source.id.clone()));
                    }
                }
                None if !sub_path.contains('/') => {
                    out.push(Consumed::Key(source.id.clone(), sub_path.to_owned()))
                }
                None => out.push(Consumed::Whole(source.id.clone())),
            }
        }
        if out.is_empty() { every_source() } else { out }
    }
}

/// A config volume mounted with `subPath`/`subPathExpr`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubPathMount {
    pub container: String,
    pub volume: String,
    pub mount_path: String,
    /// `subPath` (`None` for `subPathExpr`, which is only known at run time).
    pub sub_path: Option<String>,
    /// Whether the container runs for the pod's whole life (app or native sidecar).
    pub long_running: bool,
}

/// A config volume mounted as a directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirMount {
    pub container: String,
    pub volume: String,
    pub mount_path: String,
}

/// Everything the rules read from a pod spec.
#[derive(Debug, Default)]
pub struct PodAnalysis<'a> {
    /// Config volumes by name (service-account and non-config volumes left out).
    pub config_volumes: BTreeMap<String, ConfigVolume>,
    /// Long-running containers (app containers and native sidecars), without our own sidecar.
    pub apps: Vec<&'a Container>,
    /// Directory mounts of config volumes by long-running containers.
    pub dir_mounts: Vec<DirMount>,
    /// Directory mounts of config volumes by regular init containers (they read it once, at
    /// start, like env).
    pub init_dir_mounts: Vec<DirMount>,
    /// subPath mounts of config volumes by any container.
    pub subpath_mounts: Vec<SubPathMount>,
    /// env/envFrom references by any container ([`How::Env`] or [`How::EnvFrom`]).
    pub env_refs: Vec<Use>,
    /// Our `config-reloader` sidecar is already there.
    pub has_sidecar: bool,
    /// A container of the sidecar's name that is not ours (prometheus-operator names its reloader
    /// so): ours cannot be added beside it.
    pub name_taken: bool,
}

/// Whether `container` is the sidecar we inject: its name, and our `watch` command line (a
/// container of that name running anything else is someone else's, e.g. prometheus-operator's).
pub fn is_ours(container: &Container) -> bool {
    let first = container.args.iter().flatten().next();
    container.name == SIDECAR_NAME
        && container.command.is_none()
        && first.is_some_and(|a| a == "watch")
}

/// Analyses `spec`.
pub fn analyse(spec: &PodSpec) -> PodAnalysis<'_> {
    let tokens = token_volumes(spec);
    let config_volumes: BTreeMap<String, ConfigVolume> = spec
        .volumes
        .iter()
        .flatten()
        .filter(|v| !tokens.contains(&v.name.as_str()))
        .filter_map(|v| config_volume(v).map(|cv| (v.name.clone(), cv)))
        .collect();
    let mut analysis = PodAnalysis {
        config_volumes,
        ..PodAnalysis::default()
    };
    let inits = spec.init_containers.iter().flatten().map(|c| (c, true));
    for (container, is_init) in inits.chain(spec.containers.iter().map(|c| (c, false))) {
        if is_ours(container) {
            analysis.has_sidecar = true;
            continue;
        }
        analysis.name_taken |= container.name == SIDECAR_NAME;
        let native_sidecar = is_init && container.restart_policy.as_deref() == Some("Always");
        let long_running = !is_init || native_sidecar;
        if long_running {
            analysis.apps.push(container);
        }
        analysis.read_mounts(container, long_running);
        analysis.read_env(container);
    }
    analysis
}

impl<'a> PodAnalysis<'a> {
    /// The long-running containers named in `names`.
    pub fn apps_named(&self, names: &BTreeSet<&str>) -> Vec<&'a Container> {
        let named = self.apps.iter().filter(|c| names.contains(c.name.as_str()));
        named.copied().collect()
    }

    fn read_mounts(&mut self, container: &Container, long_running: bool) {
        for mount in container.volume_mounts.iter().flatten() {
            if !self.config_volumes.contains_key(&mount.name) {
                continue;
            }
            let sub_path = mount.sub_path.as_deref().filter(|p| !p.is_empty());
            let expr = mount
                .sub_path_expr
                .as_deref()
                .is_some_and(|p| !p.is_empty());
            if sub_path.is_some() || expr {
                self.subpath_mounts.push(SubPathMount {
                    container: container.name.clone(),
                    volume: mount.name.clone(),
                    mount_path: mount.mount_path.clone(),
                    sub_path: sub_path.map(str::to_owned),
                    long_running,
                });
            } else {
                let mounts = if long_running {
                    &mut self.dir_mounts
                } else {
                    &mut self.init_dir_mounts
                };
                mounts.push(DirMount {
                    container: container.name.clone(),
                    volume: mount.name.clone(),
                    mount_path: mount.mount_path.clone(),
                });
            }
        }
    }

    fn read_env(&mut self, container: &Container) {
        let env = container
            .env
            .iter()
            .flatten()
            .filter_map(|v| v.value_from.as_ref());
        let keys = env
            .flat_map(|from| both(&from.config_map_key_ref, &from.secret_key_ref, |r| &r.name))
            .map(|(id, r)| (Consumed::Key(id, r.key.clone()), r.optional, How::Env));
        let wholes = container
            .env_from
            .iter()
            .flatten()
            .flat_map(|from| both(&from.config_map_ref, &from.secret_ref, |r| &r.name))
            .map(|(id, r)| (Consumed::Whole(id), r.optional, How::EnvFrom));
        let refs = keys.chain(wholes).map(|(consumed, optional, how)| Use {
            container: container.name.clone(),
            consumed,
            optional: optional.unwrap_or(false),
            how,
        });
        self.env_refs.extend(refs);
    }
}

/// The ConfigMap and the Secret an env source names (either may be absent), with their refs.
fn both<'a, R>(
    config_map: &'a Option<R>,
    secret: &'a Option<R>,
    name: fn(&R) -> &String,
) -> impl Iterator<Item = (ConfigId, &'a R)> {
    let config_map = config_map
        .iter()
        .map(move |r| (ConfigId::config_map(name(r)), r));
    let secret = secret.iter().map(move |r| (ConfigId::secret(name(r)), r));
    config_map.chain(secret)
}

/// The volumes some container mounts at the service-account token path (a `projected` volume
/// from 1.21 on, before that a `default-token-*` Secret): a token is not application config.
fn token_volumes(spec: &PodSpec) -> Vec<&str> {
    spec.all_containers()
        .flat_map(|c| c.volume_mounts.iter().flatten())
        .filter(|m| m.mount_path.trim_end_matches('/') == TOKEN_MOUNT_PATH)
        .map(|m| m.name.as_str())
        .collect()
}

/// The config sources of a volume, or `None` when it is not application config.
fn config_volume(volume: &Volume) -> Option<ConfigVolume> {
    let mut sources = Vec::new();
    if let Some(cm) = &volume.config_map {
        sources.push(VolumeSource::new(
            ConfigId::config_map(&cm.name),
            cm.optional,
            &cm.items,
        ));
    } else if let Some(secret) = &volume.secret {
        let name = secret.secret_name.as_deref().unwrap_or_default();
        sources.push(VolumeSource::new(
            ConfigId::secret(name),
            secret.optional,
            &secret.items,
        ));
    } else if let Some(projected) = &volume.projected {
        let projections = projected.sources.as_deref().unwrap_or_default();
        // The kubelet's service-account volume (kube-api-access-*) is not application config.
        if projections
            .iter()
            .any(|p| p.service_account_token.is_some())
        {
            return None;
        }
        for p in projections {
            let cm = p
                .config_map
                .iter()
                .map(|cm| (ConfigId::config_map(&cm.name), cm));
            let secret = p.secret.iter().map(|s| (ConfigId::secret(&s.name), s));
            let projected = cm.chain(secret);
            sources.extend(projected.map(|(id, s)| VolumeSource::new(id, s.optional, &s.items)));
        }
    }
    (!sources.is_empty()).then_some(ConfigVolume { sources })
}

impl VolumeSource {
    /// What a directory mount of this source shows: the keys `items` picks, or the whole object.
    pub fn shown(&self) -> Vec<Consumed> {
        match &self.items {
            Some(items) => items
                .iter()
                .map(|(key, _)| Consumed::Key(self.id.clone(), key.clone()))
                .collect(),
            None => vec![Consumed::Whole(self.id.clone())],
        }
    }

    fn new(id: ConfigId, optional: Option<bool>, items: &Option<Vec<KeyToPath>>) -> Self {
        let items = items.as_ref().map(|items| {
            items
                .iter()
                .map(|i| (i.key.clone(), i.path.clone()))
                .collect()
        });
        Self {
            id,
            optional: optional.unwrap_or(false),
            items,
        }
    }
}
