//! Findings: what keeps a change from reaching the pods, each with its fix, worded as the
//! README's table of warnings words it. Their `code`s are part of the `-o json` form.

use std::fmt;

use serde::Serialize;

/// Declares [`Code`] from one table: each variant with its doc and its stable code.
macro_rules! codes {
    ($($(#[$doc:meta])* $variant:ident = $code:literal,)*) => {
        /// What a finding is about. Its text (`stale`, …) is the stable `code` of the
        /// `-o json` form.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
        pub enum Code { $($(#[$doc])* #[serde(rename = $code)] $variant,)* }

        impl Code {
            /// Every code, in the order of the table.
            pub const ALL: &[Code] = &[$(Code::$variant,)*];

            /// The stable code.
            pub fn as_str(self) -> &'static str {
                match self { $(Code::$variant => $code,)* }
            }
        }
    };
}

codes! {
    /// Neither the namespace (label) nor the object opts in.
    NamespaceNotOptedIn = "namespace-not-opted-in",
    /// A namespace the webhook never mutates.
    NamespaceExcluded = "namespace-excluded",
    OptedOut = "opted-out",
    /// Reloader's annotations select it while Reloader may still run.
    LeftToReloader = "left-to-reloader",
    /// Reloader's annotations select nothing (`auto: "false"` alone).
    ReloaderSelectsNothing = "reloader-selects-nothing",
    WebhookMissing = "webhook-missing",
    WebhookNoCaBundle = "webhook-no-ca-bundle",
    NoController = "no-controller",
    /// Reads through env, but no `config-hash`.
    NotStamped = "not-stamped",
    /// A `config-hash`, but not the managed label.
    NotWatched = "not-watched",
    /// A subPath mount: never updated in place.
    Subpath = "subpath",
    /// A Secret read through env, and the webhook has no hash key.
    SecretNotHashed = "secret-not-hashed",
    /// A non-optional reference to an object that does not exist.
    MissingConfig = "missing-config",
    /// The stamped `config-hash` is not the live data's.
    Stale = "stale",
    /// Pods behind the template.
    PodsNotCurrent = "pods-not-current",
    /// A Pod lacks the sidecar its template calls for.
    NoSidecar = "no-sidecar",
    /// A sidecar Pod's `mounted-config-hash` is not the live data's.
    MountedStale = "mounted-stale",
    /// A Pod that restarts in place runs with env older than the live data.
    EnvStale = "env-stale",
    SidecarRestarts = "sidecar-restarts",
    ReloadFailed = "reload-failed",
    /// A refresh in waves stopped.
    RefreshStopped = "refresh-stopped",
    UnreadableSpec = "unreadable-spec",
}

impl fmt::Display for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One finding.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    pub code: Code,
    pub message: String,
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
