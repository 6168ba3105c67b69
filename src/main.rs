//! The `reload-injector` binary: parse the command line and hand over to the library.

use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches};

fn main() -> ExitCode {
    let matches = reload_injector::cli::Cli::command()
        .bin_name(invoked_as())
        .version(version())
        .get_matches();
    let cli = reload_injector::cli::Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    reload_injector::run(cli)
}

/// What `--version` says after the name: the crate's version and the commit it was built from.
/// The commit comes from `RELOAD_INJECTOR_COMMIT` at build time (scripts/build-static.sh sets
/// it from git; a build without it says `unknown`). Read here, in the binary's crate only, so a
/// new commit rebuilds this one file and not the library or the tests.
fn version() -> &'static str {
    let commit = option_env!("RELOAD_INJECTOR_COMMIT").unwrap_or("unknown");
    let line = format!("{} (commit {commit})", env!("CARGO_PKG_VERSION"));
    Box::leak(line.into_boxed_str())
}

/// The name usage lines show: `kubectl reload-injector` when installed as the kubectl plugin
/// `kubectl-reload_injector` (kubectl runs `kubectl-reload_injector status …` for
/// `kubectl reload-injector status …`), else `reload-injector`.
fn invoked_as() -> String {
    let argv0 = std::env::args_os().next().unwrap_or_default();
    let base = std::path::Path::new(&argv0)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    match base.strip_prefix("kubectl-") {
        Some(plugin) => format!("kubectl {}", plugin.replace('_', "-")),
        None => "reload-injector".to_owned(),
    }
}

/// mimalloc (transparent huge pages off): with glibc malloc, allocation was ~40% of the
/// webhook's CPU per review (see docs/webhook.md, "Benchmarks").
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;
