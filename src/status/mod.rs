//! `reload-injector status` (also `kubectl reload-injector`): "why didn't my pod reload?".
//! [`collect`] fills a [`snapshot::Snapshot`], the pure judges read it, [`render`] writes it.
//! Exit codes: 0 all well, 1 a finding, 2 failed. Never imports `webhook`, `watch` or `certs`.

pub mod collect;
pub mod config_objects;
pub mod config_report;
pub mod findings;
pub mod hash_check;
pub mod install;
pub mod pods;
pub mod read_lines;
pub mod render;
pub mod snapshot;
pub mod summary;
pub mod target_arg;
pub mod workload_report;

use std::process::ExitCode;

use k8s_openapi::jiff::Timestamp;
use kube::config::{KubeConfigOptions, Kubeconfig};
use serde_json::Value;

use crate::cli::{StatusArgs, StatusFormat};
use collect::Reader;
use target_arg::{Kind, Target};

/// Sidecar Pods whose log is read per report, at most.
pub const MAX_LOGS: usize = 3;

/// Why `status` could not do its job (exit 2).
#[derive(Debug, thiserror::Error)]
pub enum StatusError {
    #[error(transparent)]
    BadTarget(#[from] target_arg::TargetError),
    #[error("failed to read the arguments: -A/--all-namespaces takes no TARGET")]
    AllWithTarget,
    #[error("failed to load the kubeconfig: {0}")]
    NoConfig(String),
    #[error(transparent)]
    Collect(#[from] collect::CollectError),
    #[error("{} {:?} not found in namespace {namespace:?}", target.kind.short(), target.name)]
    NotFound { target: Target, namespace: String },
    /// The target's kind could not be read at all (`what`: `deployments in "shop"`).
    #[error("failed to read {what}: {reason}")]
    TargetUnreadable { what: String, reason: String },
    #[error("failed to start the runtime: {0}")]
    Runtime(#[source] std::io::Error),
}

/// Runs `status` and returns its exit code.
pub fn run(args: StatusArgs) -> ExitCode {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build();
    match (runtime.map_err(StatusError::Runtime)).and_then(|rt| rt.block_on(status(&args))) {
        Ok((text, code)) => {
            print!("{text}");
            ExitCode::from(code)
        }
        Err(err) => {
            eprintln!("error: {}", crate::report::one_line(&err));
            ExitCode::from(2)
        }
    }
}

/// The output and exit code of `status`: the summary without a TARGET, else the report on it.
async fn status(args: &StatusArgs) -> Result<(String, u8), StatusError> {
    let target = args.target.as_deref().map(Target::parse).transpose()?;
    if args.all_namespaces && target.is_some() {
        return Err(StatusError::AllWithTarget);
    }
    let (client, default_namespace) = connect(args).await?;
    let namespace = args.namespace.clone().unwrap_or(default_namespace);
    let reader = Reader { client };
    let json = args.output == StatusFormat::Json;
    match target {
        None => {
            let scope = (!args.all_namespaces).then_some(namespace.as_str());
            let snapshot = reader.snapshot(scope, &target_arg::WORKLOADS, true).await?;
            let summary = summary::summary(&snapshot, scope);
            let found = summary.has_findings();
            Ok(output(json, &summary, found, render::summary_text))
        }
        Some(target) if matches!(target.kind, Kind::ConfigMap | Kind::Secret) => {
            let scope = Some(namespace.as_str());
            let snapshot = reader
                .snapshot(scope, &target_arg::WORKLOADS, false)
                .await?;
            target_readable(&snapshot, &target, &namespace)?;
            let report = config_report::config(&snapshot, target.kind, &namespace, &target.name);
            let report = report.ok_or(StatusError::NotFound { target, namespace })?;
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

/// The report on a workload or Pod. Its sidecar Pods are known only once the report is made,
/// so the report is made again after their logs are read (a pure, cheap step).
async fn workload_report(
    reader: &Reader,
    target: Target,
    namespace: String,
) -> Result<workload_report::Report, StatusError> {
    let kinds: &[Kind] = if target.kind == Kind::Pod {
        &[]
    } else {
        std::slice::from_ref(&target.kind)
    };
    let mut snapshot = reader
        .snapshot(Some(&namespace), kinds, target.kind == Kind::CronJob)
        .await?;
    target_readable(&snapshot, &target, &namespace)?;
    let Some(first) = workload_report::workload(&snapshot, target.kind, &namespace, &target.name)
    else {
        return Err(StatusError::NotFound { target, namespace });
    };
    let sidecars = first.pods.items.iter().filter(|p| p.sidecar).take(MAX_LOGS);
    let sidecars = sidecars.map(|p| format!("{namespace}/{}", p.name));
    let sidecar_pods: Vec<String> = sidecars.collect();
    if sidecar_pods.is_empty() {
        return Ok(first);
    }
    reader.logs(&mut snapshot, &sidecar_pods).await?;
    let report = workload_report::workload(&snapshot, target.kind, &namespace, &target.name);
    Ok(report.unwrap_or(first))
}

/// Whether the target's kind could be read at all.
fn target_readable(
    snapshot: &snapshot::Snapshot,
    target: &Target,
    namespace: &str,
) -> Result<(), StatusError> {
    let kind = target.kind;
    let (what, reason) = if snapshot.unserved.contains(&kind) {
        let (group, version, plural) = (kind.group(), kind.version(), kind.plural());
        let reason = format!("the server does not serve {group}/{version} {plural}");
        (format!("{}/{}", kind.short(), target.name), reason)
    } else {
        let failed = match kind {
            Kind::Pod => snapshot.pods.failure(),
            Kind::ConfigMap => snapshot.config_maps.failure(),
            Kind::Secret => snapshot.secrets.failure(),
            _ => snapshot
                .workloads
                .get(&kind)
                .and_then(snapshot::Fetched::failure),
        };
        let Some(reason) = failed else {
            return Ok(());
        };
        (
            format!("{} in {namespace:?}", kind.plural()),
            reason.to_owned(),
        )
    };
    Err(StatusError::TargetUnreadable { what, reason })
}

/// A client from the kubeconfig (else in-cluster) and the context's namespace.
async fn connect(args: &StatusArgs) -> Result<(kube::Client, String), StatusError> {
    let options = KubeConfigOptions {
        context: args.context.clone(),
        ..KubeConfigOptions::default()
    };
    let mut config = match &args.kubeconfig {
        Some(path) => {
            let kubeconfig = Kubeconfig::read_from(path).map_err(no_config)?;
            kube::Config::from_custom_kubeconfig(kubeconfig, &options).await
        }
        None if args.context.is_some() => kube::Config::from_kubeconfig(&options).await,
        None => Ok(kube::Config::infer().await.map_err(no_config)?),
    }
    .map_err(no_config)?;
    config.connect_timeout = Some(std::time::Duration::from_secs(10));
    config.read_timeout = Some(std::time::Duration::from_secs(30));
    let namespace = config.default_namespace.clone();
    let client = kube::Client::try_from(config).map_err(no_config)?;
    Ok((client, namespace))
}

fn no_config(err: impl std::error::Error + 'static) -> StatusError {
    StatusError::NoConfig(crate::report::one_line(&err))
}

/// `metadata.<field>` as a string.
pub fn meta_str<'v>(object: &'v Value, field: &str) -> Option<&'v str> {
    object.get("metadata")?.get(field)?.as_str()
}

/// Whole seconds from `then` to `now` (0 when `then` is later).
pub fn seconds_between(then: Timestamp, now: Timestamp) -> i64 {
    (now.as_second() - then.as_second()).max(0)
}

/// `3s`, `5m`, `2h`, `4d`.
pub fn age(seconds: i64) -> String {
    match seconds {
        s if s < 120 => format!("{s}s"),
        s if s < 2 * 3600 => format!("{}m", s / 60),
        s if s < 48 * 3600 => format!("{}h", s / 3600),
        s => format!("{}d", s / 86400),
    }
}
