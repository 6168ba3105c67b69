//! The pure domain core: a workload's Pod spec ([`pod`]), the config it consumes, how its
//! programs reload ([`catalogue`], [`strategy`]), and [`review`]: an admission request and the
//! fetched config data in, an [`Outcome`] out (a denial, or the diff of an edited copy of the
//! object, so fields a newer Kubernetes adds survive). No I/O: `serve` and `inject` share it.
//!
//! Imports: only the other pure modules (`hash`, `kinds`, `policy`); never an I/O module or `cli`.

mod analysis;
pub mod catalogue;
pub mod consumption;
pub mod explain;
pub mod in_place;
mod insertion;
mod key;
mod messages;
pub mod meter;
mod object;
mod parts;
pub mod pod;
mod review_plan;
mod rollout;
mod rules;
pub mod selected;
mod sidecar;
mod skim;
pub mod strategy;
#[cfg(test)]
mod test_settings;
pub mod values;

use std::collections::BTreeSet;

use serde_json::value::RawValue;

use crate::hash::{ConfigData, ConfigId, SecretKey};

pub use key::Key;
pub use messages::{API_SERVER_WARNING_CHARS, MAX_WARNING_CHARS, WARNING_PREFIX, fit, quoted};
pub use object::{Workload, string_map};
pub use parts::{ObjectParts, ObjectSeed, SpecRead, lean_then_raw};
pub use review_plan::Plan;
pub use rules::describe;
pub use skim::{JsonType, MapOrValue, MapReader, Shallow, Skim};

/// HTTP reload URL (HTTP mode instead of a signal).
pub const RELOAD_URL: &str = "reload-injector.io/reload-url";
/// Signal to send in signal mode.
pub const SIGNAL: &str = "reload-injector.io/signal";
/// Name of the process to signal.
pub const PROCESS: &str = "reload-injector.io/process";
/// What a change of mounted config does: `reload` (tell the running app), `restart` (roll the
/// workload, as for env) or `none`. Without it, the [`catalogue`] decides (see [`strategy`]),
/// or the Pod names a reload with `signal`, `process` or `reload-url`.
pub const ON_CHANGE: &str = "reload-injector.io/on-change";
/// What a change of a ConfigMap read through env or envFrom does: `restart-in-place` (every
/// container of each Pod restarts in place, wave by wave, Kubernetes >= 1.36) or `roll` (the
/// workload rolls). Without it, `serve --env-change` decides. Secrets read through env roll.
pub const ENV_CHANGE: &str = "reload-injector.io/env-change";
/// Written on pod templates (`in-place`) whose Pods restart in place for a change of a
/// ConfigMap read through env: their `config-hash` leaves those ConfigMaps out, and the Pods
/// made from them restart in place. Absent: such changes roll the workload.
pub const ENV_RESTART: &str = "reload-injector.io/env-restart";
/// Written on Pods that restart in place: `sha256:<hex>` over the ConfigMap keys their
/// containers read through env (stamped at creation, rewritten wave by wave by the controller);
/// the sidecar restarts the Pod once its own copy of the keys matches.
pub const ENV_HASH: &str = "reload-injector.io/env-hash";
/// Written on Pods about 2 s after `env-hash` changed: the same hash, a second update that makes
/// the kubelet sync the Pod again (see [`MOUNTED_CONFIG_REFRESHED`]).
pub const ENV_HASH_REFRESHED: &str = "reload-injector.io/env-hash-refreshed";
/// Written on Pods that restarts in place stopped before (a Pod crashed with the new env): the
/// `env-hash` held back, which no leader writes until the config changes again.
pub const ENV_HASH_HELD_BACK: &str = "reload-injector.io/env-hash-held-back";
/// Comma-separated volume names to watch.
pub const WATCH: &str = "reload-injector.io/watch";
/// `"true"` turns the subPath denial into a warning.
pub const ALLOW_SUBPATH: &str = "reload-injector.io/allow-subpath";
/// Written: `sha256:<hex>` over the restart-only config.
pub const CONFIG_HASH: &str = "reload-injector.io/config-hash";
/// Written on Pods: the version that injected the sidecar.
pub const INJECTED: &str = "reload-injector.io/injected";
/// Written on Pods with the sidecar: `sha256:<hex>` over the config volumes it watches; patching
/// it makes the kubelet refresh the mounted files at once.
pub const MOUNTED_CONFIG_HASH: &str = "reload-injector.io/mounted-config-hash";
/// Written on Pods about 2 s after `mounted-config-hash` changed: the same hash, a second update.
/// The first may reach the kubelet before its ConfigMap/Secret watch has the new data (it then
/// remounts the old data); by the second, the watch has it.
pub const MOUNTED_CONFIG_REFRESHED: &str = "reload-injector.io/mounted-config-refreshed";
/// Written on Pods a refresh in waves stopped before: the `mounted-config-hash` held back, which
/// no leader writes until the config changes again.
pub const MOUNTED_CONFIG_HELD_BACK: &str = "reload-injector.io/mounted-config-held-back";
/// Label (`"true"`) on Pods that carry the sidecar, so the controller can watch only those.
pub const SIDECAR_LABEL: &str = "reload-injector.io/sidecar";
/// Label (`"true"`) on the workloads whose template reads config the product manages (hashed or
/// hot-reloaded), so the controller's workload watches select only those.
pub const MANAGED_LABEL: &str = "reload-injector.io/managed";
/// Name of the injected container.
pub const SIDECAR_NAME: &str = "config-reloader";
/// Where the ServiceAccount admission plugin mounts a Pod's API token (where nothing else is).
pub const TOKEN_MOUNT_PATH: &str = "/var/run/secrets/kubernetes.io/serviceaccount";
/// The tiny empty `emptyDir` the sidecar mounts at [`TOKEN_MOUNT_PATH`]: it holds no API token,
/// and the API server's plugins find nothing to add (which would call the webhook again).
pub const NO_TOKEN_VOLUME: &str = "reload-injector-no-token";

/// Everything the core needs to know about the installation.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Image of the `config-reloader` sidecar.
    pub sidecar_image: String,
    /// Inject as a native sidecar (init container with `restartPolicy: Always`).
    pub native_sidecars: bool,
    /// The webhook's own namespace (never mutated).
    pub own_namespace: String,
    /// Written into `reload-injector.io/injected`.
    pub version: String,
    /// Put the sidecar into workload pod templates too (offline `inject`); the webhook
    /// leaves templates alone and injects at Pod level.
    pub inject_into_templates: bool,
    /// HMAC key for Secret values; without it Secrets are not hashed (with a warning).
    pub secret_key: Option<SecretKey>,
    /// Restart in place for env consumers: the default and whether the cluster can.
    pub in_place: in_place::InPlaceSettings,
    /// Most characters of warnings for one object ([`API_SERVER_WARNING_CHARS`] at admission,
    /// `None` offline); past it the rest are counted in a last line.
    pub warning_chars: Option<usize>,
    /// Reloader no longer runs beside us: objects its annotations select are acted on (until
    /// then they are left to it, so that no change rolls them twice).
    pub reloader_retired: bool,
}

/// The admission operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    Create,
    Update,
    /// `DELETE`, `CONNECT` or anything newer: never mutated.
    Other,
}

impl Operation {
    /// Parses the `request.operation` string.
    pub fn parse(op: &str) -> Self {
        match op {
            "CREATE" => Operation::Create,
            "UPDATE" => Operation::Update,
            _ => Operation::Other,
        }
    }
}

/// `request.object`: as sent, or already read while the review was parsed.
#[derive(Debug, Clone, Copy)]
pub enum Object<'a> {
    /// The raw JSON text.
    Raw(&'a RawValue),
    /// Read by [`ObjectSeed`] for the pod (template) at `pointer` (a [`Workload::pointer`]).
    Read {
        /// The pointer it was read for.
        pointer: &'a str,
        /// What was read.
        parts: &'a ObjectParts<'a>,
    },
}

/// One admission request, as the core sees it.
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    /// API group of `request.kind` (`""` for core, `apps`, `batch`).
    pub group: &'a str,
    /// `request.kind.kind` (`Pod`, `Deployment`, …).
    pub kind: &'a str,
    /// CREATE, UPDATE or other.
    pub operation: Operation,
    /// `request.namespace`.
    pub namespace: &'a str,
    /// Whether the namespace carries the opt-in label (the API server called `/mutate`, not
    /// `/mutate/opted-in`).
    pub namespace_labelled: bool,
    /// `request.object` (`null` when absent).
    pub object: Object<'a>,
    /// `request.oldObject` (UPDATE only), as sent.
    pub old_object: Option<&'a RawValue>,
    /// `request.dryRun`: the answer is the same either way (no side effects).
    pub dry_run: bool,
}

/// The decision on one request.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Admit, applying `patch` (empty: nothing to do).
    Allowed {
        /// RFC 6902 operations turning the object into the mutated one.
        patch: json_patch::Patch,
        /// Lines for `response.warnings`.
        warnings: Vec<String>,
    },
    /// Refuse, with a message for the person at the terminal.
    Denied {
        /// `status.message`: names container, volume, ConfigMap/Secret, mount path and fix.
        message: String,
        /// Warnings that still apply.
        warnings: Vec<String>,
    },
}

impl Outcome {
    /// Admit without a patch or warnings.
    pub fn untouched() -> Self {
        Outcome::Allowed {
            patch: json_patch::Patch(Vec::new()),
            warnings: Vec::new(),
        }
    }

    /// Whether the patch replaces or removes a `config-hash` or `mounted-config-hash`: the
    /// webhook confirms that with freshly read config (the hash may be newer than its cache).
    pub fn replaces_hash(&self) -> bool {
        let Outcome::Allowed { patch, .. } = self else {
            return false;
        };
        patch.0.iter().any(|op| {
            let path = match op {
                json_patch::PatchOperation::Replace(op) => &op.path,
                json_patch::PatchOperation::Remove(op) => &op.path,
                _ => return false,
            };
            path.last().is_some_and(|token| {
                [CONFIG_HASH, MOUNTED_CONFIG_HASH].contains(&&*token.decoded())
            })
        })
    }
}

/// An object the core cannot understand (the webhook answers `allowed: false` with this).
#[derive(Debug, thiserror::Error)]
pub enum ReviewError {
    /// The request carries no `object`.
    #[error("failed to review {kind}: the request has no object")]
    MissingObject {
        /// The kind under review.
        kind: String,
    },
    /// The object does not have the shape of its kind.
    #[error("failed to read the {kind} under review: {source}")]
    UnreadableObject {
        /// The kind under review.
        kind: String,
        /// What serde said.
        #[source]
        source: serde_json::Error,
    },
}

/// The ConfigMaps/Secrets whose contents [`review`] needs, for the I/O layer to fetch first.
/// Empty when the request will not be mutated at all. (Use [`Plan`] to read the object once.)
pub fn config_refs(req: &Request, settings: &Settings) -> Result<BTreeSet<ConfigId>, ReviewError> {
    Ok(Plan::new(req, settings)?.config_refs())
}

/// Decides on one request. `configs` holds the lookups of [`config_refs`].
pub fn review(
    req: &Request,
    settings: &Settings,
    configs: &ConfigData,
) -> Result<Outcome, ReviewError> {
    Ok(Plan::new(req, settings)?.outcome(configs))
}
