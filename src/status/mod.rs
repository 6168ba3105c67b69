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

/// The output and exit code of `status`.
async fn status(args: &StatusArgs) -> Result<(String, u8), StatusError> {
    let target = args.target.as_deref().map(Target::parse).transpose()?;
    if args.all_namespaces && target.is_some() {
        return Err(StatusError::AllWithTarget);
    }
    let (client, default_namespace) = connect(args).await?;
    let namespace = args.namespace.clone().unwrap_or(default_namespace);
    let reader = Reader::new(client);
    let json = args.output == StatusFormat::Json;
    let Some(target) = target else {
        let scope = (!args.all_namespaces).then_some(namespace.as_str());
        let snapshot = reader.snapshot(scope, &Kind::WORKLOADS, true).await?;
        let summary = summary::summary(&snapshot, scope);
        let code = u8::from(summary.has_findings());
        let text = if json {
            render::json(&summary, code)
        } else {
            render::summary_text(&summary)
        };
        return Ok((text, code));
    };
    if matches!(target.kind, Kind::ConfigMap | Kind::Secret) {
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
        let Some(report) = readers::config(&snapshot, target.kind, &namespace, &target.name) else {
            return Err(StatusError::NotFound {
                kind: target.kind.short(),
                name: target.name,
                namespace,
            });
        };
        let code = u8::from(!report.findings.is_empty());
        let text = if json {
            render::json(&report, code)
        } else {
            render::config_text(&report)
        };
        return Ok((text, code));
    }
    let kinds: &[Kind] = if target.kind == Kind::Pod {
        &[]
    } else {
        std::slice::from_ref(&target.kind)
    };
    let mut snapshot = reader
        .snapshot(Some(&namespace), kinds, target.kind == Kind::CronJob)
        .await?;
    if snapshot.unserved.contains(&target.kind) {
        let (group, version, plural) = target.kind.resource();
        return Err(StatusError::TargetUnreadable {
            what: format!("{}/{}", target.kind.short(), target.name),
            reason: format!("the server does not serve {group}/{version} {plural}"),
        });
    }
    let found = match snapshot.workloads.get(&target.kind) {
        Some(snapshot::Fetched::Failed(reason)) => {
            return Err(StatusError::TargetUnreadable {
                what: format!("{} in {namespace:?}", target.kind.resource().2),
                reason: reason.clone(),
            });
        }
        _ => match (target.kind, snapshot.pods.failure()) {
            (Kind::Pod, Some(reason)) => {
                return Err(StatusError::TargetUnreadable {
                    what: format!("pods in {namespace:?}"),
                    reason: reason.to_owned(),
                });
            }
            _ => report::workload(&snapshot, target.kind, &namespace, &target.name),
        },
    };
    let Some(first) = found else {
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
    let report = if sidecar_pods.is_empty() {
        first
    } else {
        reader.logs(&mut snapshot, &sidecar_pods).await?;
        report::workload(&snapshot, target.kind, &namespace, &target.name).unwrap_or(first)
    };
    let code = u8::from(!report.findings.is_empty());
    let text = if json {
        render::json(&report, code)
    } else {
        render::text(&report)
    };
    Ok((text, code))
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
