//! The watcher sidecar (`reload-injector watch`): real inotify, processes, signals and nginx.
//! Levels:
//! - `local`: the sidecar on this machine;
//! - `fake_api`: the sidecar and `serve` together, against the fake API server.

#[path = "../rollout_support/mod.rs"]
mod rollout_support;
#[path = "../watch_support/mod.rs"]
mod watch_support;
#[path = "../webhook_support/mod.rs"]
mod webhook_support;
mod local {
    mod changes;
    mod faults;
    mod http;
    mod nginx;
    mod restart;
    mod signal;
}
mod fake_api {
    mod nginx_reload;
}
