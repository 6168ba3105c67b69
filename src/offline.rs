//! `reload-injector inject`: offline mutation of Kubernetes YAML.

use std::process::ExitCode;

use crate::cli::InjectArgs;

/// Runs the command: 0 mutated, 1 denied, 2 unreadable input.
pub fn run(args: InjectArgs) -> ExitCode {
    let _ = args;
    ExitCode::from(2)
}
