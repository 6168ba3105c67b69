//! Real nginx (Debian's nginx-light) in a pod-like PID namespace, serving one value per port
//! from a config directory the tests update the kubelet's way.

use std::fs;
use std::net::SocketAddr;
use std::path::Path;

use super::pidns::{PidNamespace, Proc};
use super::scratch::Scratch;
use super::{PATIENCE, http_get, wait_for};

/// Where Debian installs nginx.
pub const NGINX: &str = "/usr/sbin/nginx";

/// A server block answering every request on `port` with `value`.
pub fn server_block(port: u16, value: &str) -> String {
    format!(
        "server {{\n  listen 127.0.0.1:{port};\n  location / {{ return 200 \"{value}\\n\"; }}\n}}\n"
    )
}

/// The main config: master and two workers, everything under `prefix`, sites from `conf_dir`.
pub fn main_config(prefix: &Path, conf_dir: &Path) -> String {
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

/// The body nginx serves on `addr`, trimmed, if it answers 200.
pub fn served(addr: SocketAddr) -> Option<String> {
    http_get(addr, "/").and_then(|(status, body)| (status == 200).then(|| body.trim().to_owned()))
}

/// nginx's own logs so far, for failure messages.
pub fn log(scratch: &Scratch) -> String {
    format!(
        "{}{}",
        fs::read_to_string(scratch.join("nginx.stderr")).unwrap_or_default(),
        fs::read_to_string(scratch.join("error.log")).unwrap_or_default()
    )
}

/// Starts nginx as its own container in `ns` with sites from `conf_dir`, and waits until it
/// serves `first` on `addr`.
pub fn start(
    ns: &PidNamespace,
    scratch: &Scratch,
    conf_dir: &Path,
    addr: SocketAddr,
    first: &str,
) -> Proc {
    assert!(
        Path::new(NGINX).exists(),
        "{NGINX} is missing: run scripts/install-test-deps.sh (installs Debian's nginx-light)"
    );
    let main = scratch.join("nginx.conf");
    fs::write(&main, main_config(scratch.path(), conf_dir)).unwrap();
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
    let nginx = Proc(nginx);
    wait_for(
        &format!("nginx to serve {first}; log: {}", log(scratch)),
        PATIENCE,
        || (served(addr)? == first).then_some(()),
    );
    nginx
}
