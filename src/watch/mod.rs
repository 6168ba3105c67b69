//! `reload-injector watch`: the sidecar that reloads the app when its config changes.

use crate::cli::WatchArgs;

/// Runs the watcher until SIGTERM.
pub fn run(args: WatchArgs) -> anyhow::Result<()> {
    let _ = args;
    anyhow::bail!("watch: not built yet")
}
