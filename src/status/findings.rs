//! Findings: what keeps a change from reaching the pods, each with its fix, worded as the
//! README's table of warnings words it. Their `code`s are part of the `-o json` form.

use std::fmt;

use serde::Serialize;

/// What a finding is about. Its text (`stale`, …) is the stable `code` of the `-o json` form.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Code {
    /// The namespace lacks the opt-in label.
    NamespaceNotOptedIn,
    /// A namespace the webhook never mutates.
    NamespaceExcluded,
    /// The pod template opts out.
    OptedOut,
    /// No MutatingWebhookConfiguration.
    WebhookMissing,
    /// A webhook without a CA bundle.
    WebhookNoCaBundle,
    /// No controller holds the Lease.
    NoController,
    /// Reads through env, but no `config-hash`.
    NotStamped,
    /// A `config-hash`, but not the managed label.
    NotWatched,
    /// A subPath mount: never updated in place.
    Subpath,
    /// A Secret read through env, and the webhook has no hash key.
    SecretNotHashed,
    /// A non-optional reference to an object that does not exist.
    MissingConfig,
    /// The stamped `config-hash` is not the live data's.
    Stale,
    /// Pods behind the template.
    PodsNotCurrent,
    /// A Pod lacks the sidecar its template calls for.
    NoSidecar,
    /// A sidecar Pod's `mounted-config-hash` is not the live data's.
    MountedStale,
    /// The `config-reloader` container restarted.
    SidecarRestarts,
    /// The last reload failed.
    ReloadFailed,
    /// A refresh in waves stopped.
    RefreshStopped,
    /// The pod template cannot be read.
    UnreadableSpec,
}

impl Code {
    /// The stable code.
    pub fn as_str(self) -> &'static str {
        match self {
            Code::NamespaceNotOptedIn => "namespace-not-opted-in",
            Code::NamespaceExcluded => "namespace-excluded",
            Code::OptedOut => "opted-out",
            Code::WebhookMissing => "webhook-missing",
            Code::WebhookNoCaBundle => "webhook-no-ca-bundle",
            Code::NoController => "no-controller",
            Code::NotStamped => "not-stamped",
            Code::NotWatched => "not-watched",
            Code::Subpath => "subpath",
            Code::SecretNotHashed => "secret-not-hashed",
            Code::MissingConfig => "missing-config",
            Code::Stale => "stale",
            Code::PodsNotCurrent => "pods-not-current",
            Code::NoSidecar => "no-sidecar",
            Code::MountedStale => "mounted-stale",
            Code::SidecarRestarts => "sidecar-restarts",
            Code::ReloadFailed => "reload-failed",
            Code::RefreshStopped => "refresh-stopped",
            Code::UnreadableSpec => "unreadable-spec",
        }
    }
}

impl fmt::Display for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for Code {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

/// One finding.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// What it is about.
    pub code: Code,
    /// What is wrong, in plain words.
    pub message: String,
    /// What to do.
    pub fix: String,
}

impl Finding {
    /// A finding.
    pub fn new(code: Code, message: impl Into<String>, fix: impl Into<String>) -> Self {
        Finding {
            code,
            message: message.into(),
            fix: fix.into(),
        }
    }
}

/// Every finding code a golden case shows (all but `refresh-stopped`), for the tests.
pub const CODES: &[Code] = &[
    Code::NamespaceNotOptedIn,
    Code::NamespaceExcluded,
    Code::OptedOut,
    Code::WebhookMissing,
    Code::WebhookNoCaBundle,
    Code::NoController,
    Code::NotStamped,
    Code::NotWatched,
    Code::Subpath,
    Code::SecretNotHashed,
    Code::MissingConfig,
    Code::Stale,
    Code::PodsNotCurrent,
    Code::NoSidecar,
    Code::MountedStale,
    Code::SidecarRestarts,
    Code::ReloadFailed,
    Code::UnreadableSpec,
];

/// The README's fix for a subPath mount.
pub const FIX_SUBPATH: &str = "mount the directory to get hot reload";
/// The README's fix for a Secret the webhook cannot hash.
pub const FIX_NO_HASH_KEY: &str = "give the webhook a --secret-hash-key-file (the install does)";
/// The README's fix for a missing object.
pub const FIX_MISSING: &str = "create it, or mark the reference `optional: true`";
/// The README's fix for `EPERM`.
pub const FIX_EPERM: &str = "set `runAsUser` on the pod or container: the sidecar then runs as that UID (or allow CAP_KILL)";
