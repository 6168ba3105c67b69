//! Findings: what keeps a change from reaching the pods, each with its fix, worded as the
//! README's table of warnings words it. Their `code`s are part of the `-o json` form.

use serde::Serialize;

/// One finding.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// A stable identifier (`namespace-not-opted-in`, `stale`, …).
    pub code: &'static str,
    /// What is wrong, in plain words.
    pub message: String,
    /// What to do.
    pub fix: String,
}

impl Finding {
    /// A finding.
    pub fn new(code: &'static str, message: impl Into<String>, fix: impl Into<String>) -> Self {
        Finding {
            code,
            message: message.into(),
            fix: fix.into(),
        }
    }
}

/// Every finding code, for the documentation and the tests.
pub const CODES: &[&str] = &[
    "namespace-not-opted-in",
    "namespace-excluded",
    "opted-out",
    "webhook-missing",
    "webhook-no-ca-bundle",
    "no-controller",
    "not-stamped",
    "not-watched",
    "subpath",
    "secret-not-hashed",
    "missing-config",
    "stale",
    "pods-not-current",
    "no-sidecar",
    "mounted-stale",
    "sidecar-restarts",
    "reload-failed",
    "unreadable-spec",
];

/// The README's fix for a subPath mount.
pub const FIX_SUBPATH: &str = "mount the directory to get hot reload";
/// The README's fix for a Secret the webhook cannot hash.
pub const FIX_NO_HASH_KEY: &str = "give the webhook a --secret-hash-key-file (the install does)";
/// The README's fix for a missing object.
pub const FIX_MISSING: &str = "create it, or mark the reference `optional: true`";
/// The README's fix for `EPERM`.
pub const FIX_EPERM: &str = "set `runAsUser` on the pod or container: the sidecar then runs as that UID (or allow CAP_KILL)";
