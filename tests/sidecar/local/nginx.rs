//! End to end with real nginx: a kubelet-style update of its config directory reaches the
//! running nginx through the watcher's SIGHUP, without restarting its master process.

use crate::watch_support;

use std::fs;
use std::net::SocketAddr;

use watch_support::kubelet::AtomicDir;
use watch_support::nginx::{self, served, server_block};
use watch_support::pidns::Pod;
use watch_support::watcher::Watcher;
use watch_support::{PATIENCE, free_port, wait_for};

#[test]
fn nginx_serves_the_new_config_after_a_kubelet_update_without_restarting() {
    let Pod { scratch, pid1, ns } = Pod::new("nginx");
    let port = free_port();
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let config = AtomicDir::create(
        &scratch.join("conf.d"),
        &[("site.conf", &server_block(port, "value-one"))],
    );
    let _nginx = nginx::start(&ns, &scratch, config.path(), addr, "value-one");
    let master_pid = fs::read_to_string(scratch.join("nginx.pid")).unwrap();
    let watcher = Watcher::of_dir_in(&ns, None, &scratch, config.path(), &["--process", "nginx"]);
    config.update(&[("site.conf", &server_block(port, "value-two"))]);
    wait_for(
        &format!("nginx to serve value-two; log: {}", nginx::log(&scratch)),
        PATIENCE,
        || (served(addr)? == "value-two").then_some(()),
    );
    watcher.wait_reloads(1);
    assert_eq!(
        fs::read_to_string(scratch.join("nginx.pid")).unwrap(),
        master_pid,
        "the master must be reloaded, not restarted"
    );
    let reloaded = &watcher.messages("reloaded")[0];
    assert_eq!(
        reloaded["targets"].as_str().unwrap(),
        format!("nginx[{}]", master_pid.trim()),
        "only the master is signalled"
    );
    assert_eq!(watcher.reloads(), 1);
    assert_eq!(
        pid1.count("pid1"),
        0,
        "PID 1 (the pause process) must not be signalled"
    );
    ns.close();
}
