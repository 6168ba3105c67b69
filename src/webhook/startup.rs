//! Start-up decisions: settings from the flags, the Kubernetes client, the sidecar mode, and
//! the termination signal.

use std::path::Path;
use std::time::Duration;

use anyhow::Context;

use crate::cli::{NativeSidecars, ServeArgs};
use crate::hash::SecretKey;
use crate::workload::Settings;
use crate::workload::in_place::{self, InPlaceSettings, Support};

use super::limits::{BodyBudget, ConnectionLimit};
use super::router::HttpLimits;
use super::server::Limits;

/// Longest start-up waits for the API server's version (`--native-sidecars auto`).
const VERSION_TIMEOUT: Duration = Duration::from_secs(5);

/// The first Kubernetes minor version with native sidecars enabled by default (1.29).
const NATIVE_SIDECARS_MINOR: u32 = 29;

/// The core settings for the webhook: templates stay as written, the sidecar goes into Pods.
pub fn settings(
    args: &ServeArgs,
    (native_sidecars, support): (bool, Support),
    secret_key: Option<SecretKey>,
) -> Settings {
    Settings {
        in_place: InPlaceSettings {
            default: args.injection.env_change,
            support,
        },
        sidecar_image: args.injection.sidecar_image.clone(),
        native_sidecars,
        own_namespace: args.namespace.clone(),
        version: crate::VERSION.to_owned(),
        inject_into_templates: false,
        secret_key,
        warning_chars: Some(crate::workload::API_SERVER_WARNING_CHARS),
        reloader_retired: args.injection.reloader_retired,
    }
}

/// The connection and body bounds from the flags.
pub fn limits(args: &ServeArgs) -> (Limits, HttpLimits) {
    let connections = ConnectionLimit::new(args.max_connections as usize);
    let http = HttpLimits {
        body_timeout: args.body_read_timeout,
        budget: BodyBudget::new(args.max_inflight_body_bytes),
    };
    tracing::info!(
        max_connections = connections.max(),
        max_inflight_body_bytes = http.budget.total(),
        "connection limits"
    );
    let limits = Limits {
        connections,
        handshake: args.handshake_timeout,
        header_read: args.header_read_timeout,
        drain: args.drain_timeout,
    };
    (limits, http)
}

/// Reads the HMAC key once; an empty file is an error (a worthless key), no flag is `None`.
pub fn secret_key(path: Option<&Path>) -> anyhow::Result<Option<SecretKey>> {
    let Some(path) = path else {
        tracing::info!("no --secret-hash-key-file: Secrets consumed through env are not hashed");
        return Ok(None);
    };
    let shown = path.display();
    let bytes = std::fs::read(path).with_context(|| {
        format!("failed to read the Secret-hash key {shown} (--secret-hash-key-file)")
    })?;
    let key = SecretKey::new(&bytes)
        .with_context(|| format!("failed to use the Secret-hash key {shown}: the file is empty"))?;
    Ok(Some(key))
}

/// The Kubernetes client (in-cluster or kubeconfig), or none with `--no-kube`.
pub async fn kube_client(no_kube: bool) -> anyhow::Result<Option<kube::Client>> {
    if no_kube {
        tracing::info!(
            "--no-kube: ConfigMaps/Secrets are not looked up; objects are admitted unhashed with a warning"
        );
        return Ok(None);
    }
    let client = kube::Client::try_default().await.context(
        "failed to configure the Kubernetes client (no in-cluster config or kubeconfig); \
         pass --no-kube to run without one",
    )?;
    Ok(Some(client))
}

/// Resolves `--native-sidecars` (`auto` asks the API server; regular containers when it cannot
/// be asked) and whether Pods can restart in place (Kubernetes >= 1.36; not without an answer).
pub async fn cluster_support(
    mode: NativeSidecars,
    client: Option<&kube::Client>,
) -> (bool, Support) {
    let version = match client {
        Some(client) => api_server_version(client).await,
        None => Err("no Kubernetes API (--no-kube)".to_owned()),
    };
    let support = match &version {
        Ok((major, minor)) => in_place::support_of_version(major, minor),
        Err(why) => Support::No(why.clone()),
    };
    let native = match mode {
        NativeSidecars::Always => true,
        NativeSidecars::Never => false,
        NativeSidecars::Auto => match &version {
            Ok((major, minor)) => supports_native_sidecars(major, minor),
            Err(why) => {
                tracing::info!("--native-sidecars auto: {why}; injecting regular containers");
                false
            }
        },
    };
    tracing::info!(native, in_place = ?support, "cluster support");
    (native, support)
}

/// The API server's `major` and `minor` version, or why they are unknown.
async fn api_server_version(client: &kube::Client) -> Result<(String, String), String> {
    match tokio::time::timeout(VERSION_TIMEOUT, client.apiserver_version()).await {
        Ok(Ok(info)) => {
            tracing::info!(
                major = info.major,
                minor = info.minor,
                "Kubernetes API server version"
            );
            Ok((info.major, info.minor))
        }
        Ok(Err(err)) => {
            let why = "failed to ask the API server's version";
            tracing::warn!(error = %crate::report::one_line(&err), "{why}");
            Err(why.to_owned())
        }
        Err(_) => {
            let why = "the API server did not tell its version in time";
            tracing::warn!("{why}");
            Err(why.to_owned())
        }
    }
}

/// Whether `major.minor` (as the version endpoint spells it, e.g. `"1"`, `"29+"`) has native
/// sidecars (unparseable: no).
pub fn supports_native_sidecars(major: &str, minor: &str) -> bool {
    let number = |s: &str| -> Option<u32> {
        let digits: String = s.chars().take_while(char::is_ascii_digit).collect();
        digits.parse().ok()
    };
    match (number(major), number(minor)) {
        (Some(major), _) if major > 1 => true,
        (Some(1), Some(minor)) => minor >= NATIVE_SIDECARS_MINOR,
        _ => false,
    }
}

/// Completes on SIGTERM or SIGINT.
pub async fn termination() {
    use tokio::signal::unix::{SignalKind, signal};
    let term = signal(SignalKind::terminate());
    let int = signal(SignalKind::interrupt());
    match (term, int) {
        (Ok(mut term), Ok(mut int)) => {
            tokio::select! {
                _ = term.recv() => tracing::info!("SIGTERM received"),
                _ = int.recv() => tracing::info!("SIGINT received"),
            }
        }
        _ => {
            tracing::warn!("failed to install signal handlers; stopping only on Ctrl-C");
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scratch::Scratch;

    #[test]
    fn native_sidecars_from_version_strings() {
        assert!(supports_native_sidecars("1", "29"));
        assert!(supports_native_sidecars("1", "33+"));
        assert!(!supports_native_sidecars("1", "28"));
        assert!(!supports_native_sidecars("1", "28+"));
        assert!(supports_native_sidecars("2", "0"));
        assert!(!supports_native_sidecars("", "x"));
    }

    #[test]
    fn secret_key_file_rules() {
        assert!(secret_key(None).unwrap().is_none());
        let scratch = Scratch::new("key");
        let dir = &scratch.0;
        let empty = dir.join("empty");
        std::fs::write(&empty, "\n").unwrap();
        let err = secret_key(Some(&empty)).unwrap_err().to_string();
        assert!(err.contains("empty"), "{err}");
        let good = dir.join("good");
        std::fs::write(&good, "k3y\n").unwrap();
        assert!(secret_key(Some(&good)).unwrap().is_some());
        assert!(secret_key(Some(&dir.join("missing"))).is_err());
    }
}
