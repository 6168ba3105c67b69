//! End to end with real nginx: a kubelet-style update of its config directory reaches the
//! running nginx through the watcher's SIGHUP, without restarting its master process.

mod watch_support;

use std::fs;
use std::net::SocketAddr;
use std::path::Path;

use watch_support::kubelet::AtomicDir;
use watch_support::pidns::{Pod, Proc};
use watch_support::scratch::Scratch;
use watch_support::watcher::Watcher;
use watch_support::{PATIENCE, free_port, http_get, wait_for};

const NGINX: &str = "/usr/sbin/nginx";

fn server_block(port: u16, value: &str) -> String {
    format!(
        "server {{\n  listen 127.0.0.1:{port};\n  location / {{ return 200 \"{value}\\n\"; }}\n}}\n"
    )
}

fn main_config(prefix: &Path, conf_dir: &Path) -> String {
    let p = prefix.display();
    format!(
        "daemon off;\nmaster_process on;\nworker_processes 2;\nuser root;\n\
         pid {p}/nginx.pid;\nerror_log {p}/error.log warn;\n\
         events {{ worker_connections 64; }}\n\
         http {{\n  access_log {p}/access.log;\n\
           client_body_temp_path {p}/body;\n  proxy_temp_path {p}/proxy;\n\
           fastcgi_temp_path {p}/fastcgi;\n  uwsgi_temp_path {p}/uwsgi;\n  scgi_temp_path {p}/scgi;\n\
           include {}/*.conf;\n}}\n",
        conf_dir.display()
    )
}

fn served(addr: SocketAddr) -> Option<String> {
    http_get(addr, "/").and_then(|(status, body)| (status == 200).then(|| body.trim().to_owned()))
}

#[test]
fn nginx_serves_the_new_config_after_a_kubelet_update_without_restarting() {
    assert!(
        Path::new(NGINX).exists(),
        "{NGINX} is missing: run scripts/install-test-deps.sh (installs Debian's nginx-light)"
    );
    let Pod { scratch, pid1, ns } = Pod::new("nginx");
    let port = free_port();
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let config = AtomicDir::create(
        &scratch.join("conf.d"),
        &[("site.conf", &server_block(port, "value-one"))],
    );
    let main = scratch.join("nginx.conf");
    fs::write(&main, main_config(scratch.path(), config.path())).unwrap();
    let nginx = ns
        .command(None)
        .arg(NGINX)
        .arg("-p")
        .arg(scratch.path())
        .arg("-c")
        .arg(&main)
        .stderr(fs::File::create(scratch.join("nginx.stderr")).unwrap())
        .spawn()
        .expect("start nginx");
    let _nginx = Proc(nginx);
    let log = |scratch: &Scratch| {
        format!(
            "{}{}",
            fs::read_to_string(scratch.join("nginx.stderr")).unwrap_or_default(),
            fs::read_to_string(scratch.join("error.log")).unwrap_or_default()
        )
    };
    wait_for(
        &format!("nginx to serve value-one; log: {}", log(&scratch)),
        PATIENCE,
        || (served(addr)? == "value-one").then_some(()),
    );
    let master_pid = fs::read_to_string(scratch.join("nginx.pid")).unwrap();
    let watcher = Watcher::of_dir_in(&ns, None, &scratch, config.path(), &["--process", "nginx"]);
    config.update(&[("site.conf", &server_block(port, "value-two"))]);
    wait_for(
        &format!("nginx to serve value-two; log: {}", log(&scratch)),
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
