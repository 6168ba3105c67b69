//! `reload-injector status` (also the kubectl plugin `kubectl reload-injector`): answers "why
//! didn't my pod reload?" from the live cluster.
//!
//! - [`target`] reads `TARGET` (`deploy/web`, `cm/app`, …);
//! - [`read`] is the thin kube I/O: it fills a [`snapshot::Snapshot`] with one LIST per kind
//!   per namespace, a few GETs of the installation, and a few sidecar logs;
//! - [`report`] (with [`install`], [`reads`], [`config`], [`pods`], [`logs`], [`select`]) is
//!   the pure report on one workload, [`readers`] the one on a ConfigMap or Secret, and
//!   [`summary`] the one-line-per-workload form, problems first; [`findings`] lists what they
//!   can find; [`assemble`] builds a snapshot from a flat list of objects (the goldens' input);
//! - [`render`] writes either as text or JSON.
//!
//! Exit codes: 0 all current and healthy, 1 a finding, 2 the command could not do its job.

pub mod assemble;
pub mod config;
pub mod findings;
pub mod install;
pub mod logs;
pub mod pods;
pub mod read;
pub mod readers;
pub mod reads;
pub mod render;
pub mod report;
pub mod select;
pub mod snapshot;
pub mod summary;
pub mod target;

use std::process::ExitCode;

use kube::config::{KubeConfigOptions, Kubeconfig};

use crate::cli::{StatusArgs, StatusFormat};
use read::Reader;
use target::{Kind, Target};

/// Sidecar Pods whose log is read per report, at most.
pub const MAX_LOGS: usize = 3;

/// Why `status` could not do its job (exit 2).
#[derive(Debug, thiserror::Error)]
pub enum StatusError {
    /// TARGET is malformed or names an unknown kind.
    #[error(transparent)]
    BadTarget(#[from] target::TargetError),
    /// `-A` with a TARGET.
    #[error("failed to read the arguments: -A/--all-namespaces takes no TARGET")]
    AllWithTarget,
    /// No usable kubeconfig.
    #[error("failed to load the kubeconfig: {0}")]
    NoConfig(String),
    /// The API server could not be reached.
    #[error("failed to reach the API server: {0}")]
    Unreachable(String),
    /// The API server refused the credentials.
    #[error("failed to log in to the API server: {0}")]
    Unauthorized(String),
    /// The namespace does not exist.
    #[error("namespace {0:?} not found")]
    NamespaceNotFound(String),
    /// The target does not exist.
    #[error("{kind} {name:?} not found in namespace {namespace:?}")]
    NotFound {
        /// `deploy`, `cm`, …
        kind: &'static str,
        /// Its name.
        name: String,
        /// Where it was looked for.
        namespace: String,
    },
    /// The target's kind could not be read at all.
    #[error("failed to read {what}: {reason}")]
    TargetUnreadable {
        /// `deployments in "shop"`.
        what: String,
        /// Forbidden, not served, …
        reason: String,
    },
    /// The tokio runtime could not start.
    #[error("failed to start the runtime: {0}")]
    Runtime(#[source] std::io::Error),
}

/// Runs `status` and returns its exit code.
pub fn run(args: StatusArgs) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => return fail(&StatusError::Runtime(e)),
    };
    match runtime.block_on(status(&args)) {
        Ok((text, code)) => {
            print!("{text}");
            ExitCode::from(code)
        }
        Err(err) => fail(&err),
    }
}

fn fail(err: &StatusError) -> ExitCode {
    eprintln!("error: {}", crate::report::one_line(err));
    ExitCode::from(2)
}

/// The output and exit code of `status`: the summary without a TARGET, else the report on a
/// ConfigMap or Secret, else on a workload or Pod.
async fn status(args: &StatusArgs) -> Result<(String, u8), StatusError> {
    let target = args.target.as_deref().map(Target::parse).transpose()?;
    if args.all_namespaces && target.is_some() {
        return Err(StatusError::AllWithTarget);
    }
    let (client, default_namespace) = connect(args).await?;
    let namespace = args.namespace.clone().unwrap_or(default_namespace);
    let reader = Reader::new(client);
    let json = args.output == StatusFormat::Json;
    match target {
        None => {
            let scope = (!args.all_namespaces).then_some(namespace.as_str());
            let snapshot = reader.snapshot(scope, &Kind::WORKLOADS, true).await?;
            let summary = summary::summary(&snapshot, scope);
            Ok(output(
                json,
                &summary,
                summary.has_findings(),
                render::summary_text,
            ))
        }
        Some(target) if matches!(target.kind, Kind::ConfigMap | Kind::Secret) => {
            let report = config_report(&reader, target, namespace).await?;
            let found = !report.findings.is_empty();
            Ok(output(json, &report, found, render::config_text))
        }
        Some(target) => {
            let report = workload_report(&reader, target, namespace).await?;
            let found = !report.findings.is_empty();
            Ok(output(json, &report, found, render::text))
        }
    }
}

/// The report as JSON or text, and its exit code (1 with findings).
fn output<R: serde::Serialize>(
    json: bool,
    report: &R,
    findings: bool,
    text: fn(&R) -> String,
) -> (String, u8) {
    let code = u8::from(findings);
    let rendered = if json {
        render::json(report, code)
    } else {
        text(report)
    };
    (rendered, code)
}

/// Who reads a ConfigMap or Secret, how, and what a change of each key does.
async fn config_report(
    reader: &Reader,
    target: Target,
    namespace: String,
) -> Result<readers::ConfigReport, StatusError> {
    let snapshot = reader
        .snapshot(Some(&namespace), &Kind::WORKLOADS, false)
        .await?;
    let failed = match target.kind {
        Kind::Secret => snapshot.secrets.failure(),
        _ => snapshot.config_maps.failure(),
    };
    if let Some(reason) = failed {
        return Err(StatusError::TargetUnreadable {
            what: format!("{} in {namespace:?}", target.kind.resource().2),
            reason: reason.to_owned(),
        });
    }
    readers::config(&snapshot, target.kind, &namespace, &target.name).ok_or(StatusError::NotFound {
        kind: target.kind.short(),
        name: target.name,
        namespace,
    })
}

/// The report on a workload or Pod. Its sidecar Pods are known only once the report is made,
/// so the report is made again after their logs are read (a pure, cheap step).
async fn workload_report(
    reader: &Reader,
    target: Target,
    namespace: String,
) -> Result<report::Report, StatusError> {
    let kinds: &[Kind] = if target.kind == Kind::Pod {
        &[]
    } else {
        std::slice::from_ref(&target.kind)
    };
    let mut snapshot = reader
        .snapshot(Some(&namespace), kinds, target.kind == Kind::CronJob)
        .await?;
    target_readable(&snapshot, &target, &namespace)?;
    let Some(first) = report::workload(&snapshot, target.kind, &namespace, &target.name) else {
        return Err(StatusError::NotFound {
            kind: target.kind.short(),
            name: target.name,
            namespace,
        });
    };
    let sidecar_pods: Vec<String> = first
        .pods
        .items
        .iter()
        .filter(|p| p.sidecar)
        .take(MAX_LOGS)
        .map(|p| format!("{namespace}/{}", p.name))
        .collect();
    if sidecar_pods.is_empty() {
        return Ok(first);
    }
    reader.logs(&mut snapshot, &sidecar_pods).await?;
    Ok(report::workload(&snapshot, target.kind, &namespace, &target.name).unwrap_or(first))
}

/// Whether the target's kind (and, for a Pod, the Pods) could be read at all.
fn target_readable(
    snapshot: &snapshot::Snapshot,
    target: &Target,
    namespace: &str,
) -> Result<(), StatusError> {
    if snapshot.unserved.contains(&target.kind) {
        let (group, version, plural) = target.kind.resource();
        return Err(StatusError::TargetUnreadable {
            what: format!("{}/{}", target.kind.short(), target.name),
            reason: format!("the server does not serve {group}/{version} {plural}"),
        });
    }
    if let Some(snapshot::Fetched::Failed(reason)) = snapshot.workloads.get(&target.kind) {
        return Err(StatusError::TargetUnreadable {
            what: format!("{} in {namespace:?}", target.kind.resource().2),
            reason: reason.clone(),
        });
    }
    if let (Kind::Pod, Some(reason)) = (target.kind, snapshot.pods.failure()) {
        return Err(StatusError::TargetUnreadable {
            what: format!("pods in {namespace:?}"),
            reason: reason.to_owned(),
        });
    }
    Ok(())
}

/// A client from the kubeconfig (`--kubeconfig`, else `KUBECONFIG` or `~/.kube/config`, else
/// in-cluster) and the context's namespace.
async fn connect(args: &StatusArgs) -> Result<(kube::Client, String), StatusError> {
    let options = KubeConfigOptions {
        context: args.context.clone(),
        ..KubeConfigOptions::default()
    };
    let config = match &args.kubeconfig {
        Some(path) => {
            let kubeconfig = Kubeconfig::read_from(path)
                .map_err(|e| StatusError::NoConfig(crate::report::one_line(&e)))?;
            kube::Config::from_custom_kubeconfig(kubeconfig, &options).await
        }
        None if args.context.is_some() => kube::Config::from_kubeconfig(&options).await,
        None => {
            return kube::Config::infer()
                .await
                .map_err(|e| StatusError::NoConfig(crate::report::one_line(&e)))
                .and_then(client);
        }
    };
    config
        .map_err(|e| StatusError::NoConfig(crate::report::one_line(&e)))
        .and_then(client)
}

fn client(mut config: kube::Config) -> Result<(kube::Client, String), StatusError> {
    config.connect_timeout = Some(std::time::Duration::from_secs(10));
    config.read_timeout = Some(std::time::Duration::from_secs(30));
    let namespace = config.default_namespace.clone();
    let client = kube::Client::try_from(config)
        .map_err(|e| StatusError::NoConfig(crate::report::one_line(&e)))?;
    Ok((client, namespace))
}
