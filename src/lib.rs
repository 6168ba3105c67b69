//! reload-injector: a Kubernetes mutating admission webhook that makes ConfigMap and Secret
//! changes reach running applications safely.
//!
//! - [`workload`] is the pure domain core: a workload's Pod spec, the config it consumes and
//!   how its programs reload (the catalogue); given an admission request and that config, it
//!   decides what to deny, what to warn about and how to mutate (a JSON patch). It does no I/O.
//! - [`hash`] is the pure canonical config hash (HMAC for Secret values); [`policy`] the pure
//!   opt-in rules every part asks.
//! - [`controller`] is the rollout controller inside `serve`: it keeps the hashes current and
//!   nudges the kubelet to refresh mounted config.
//! - [`webhook`] is the HTTPS server (`serve`), [`offline`] the `inject` command, [`watch`]
//!   the sidecar, [`certs`] the certificate generator, [`status`] the `status` report (and
//!   kubectl plugin).

#![deny(unsafe_code)]

pub mod backoff;
pub mod certs;
pub mod cli;
pub mod controller;
pub mod hash;
pub mod kinds;
pub mod object_names;
pub mod offline;
pub mod policy;
pub mod report;
#[cfg(test)]
mod scratch;
pub mod status;
pub mod telemetry;
pub mod watch;
pub mod webhook;
pub mod workload;

use std::process::ExitCode;

use cli::{Cli, Command};

/// Version stamped into `reload-injector.io/injected`.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// Image of the sidecar unless `--sidecar-image` says otherwise.
pub const DEFAULT_SIDECAR_IMAGE: &str = concat!(
    "ghcr.io/reload-injector/reload-injector:",
    env!("CARGO_PKG_VERSION")
);

/// Runs one subcommand and turns its outcome into the process exit code.
pub fn run(cli: Cli) -> ExitCode {
    install_crypto_provider();
    // The kube client logs a failed connection as an ERROR of its own; `status` says it once.
    let log_level = match &cli.command {
        Command::Status(_) => format!("{},kube_client=off", cli.log_level),
        _ => cli.log_level.clone(),
    };
    telemetry::init(cli.log_format, &log_level);
    let result = match cli.command {
        Command::Serve(args) => webhook::run(args),
        Command::Watch(args) => match watch::run(args) {
            Ok(watch::Ended::RestartPod) => {
                return ExitCode::from(workload::in_place::RESTART_CODE);
            }
            ended => ended.map(drop),
        },
        Command::Inject(args) => return offline::run(args),
        Command::Certs(args) => certs::run(args),
        Command::Status(args) => return status::run(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {}", report::one_line(err.as_ref()));
            ExitCode::FAILURE
        }
    }
}

/// Installs ring as the process-wide rustls crypto provider (once; later calls are no-ops).
pub fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}
