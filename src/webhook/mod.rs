//! `reload-injector serve`: the HTTPS admission webhook.

use crate::cli::ServeArgs;

/// Runs the webhook until SIGTERM.
pub fn run(args: ServeArgs) -> anyhow::Result<()> {
    let _ = args;
    anyhow::bail!("serve: not built yet")
}
