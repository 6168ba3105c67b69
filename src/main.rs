//! The `reload-injector` binary: parse the command line and hand over to the library.

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = reload_injector::cli::Cli::parse();
    reload_injector::run(cli)
}

/// mimalloc (transparent huge pages off): with glibc malloc, allocation was ~40% of the
/// webhook's CPU per review (see docs/webhook.md, "Benchmarks").
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;
