//! The external programs of the floor bench: nginx (the TLS floor), wrk (closed loop) and
//! oha (open loop), each found on the machine or reported missing with the command that
//! installs it; and CPU accounting of a process tree from /proc.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Debian's nginx (`nginx-light`).
pub const NGINX: &str = "/usr/sbin/nginx";

/// `name` on PATH, or in the project-local `target/bench-tools/bin` (where
/// `scripts/install-bench-deps.sh` puts crates.io tools).
pub fn find_tool(name: &str, install: &str) -> PathBuf {
    let local = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("target/bench-tools/bin")
        .join(name);
    if local.is_file() {
        return local;
    }
    let on_path = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|p| p.join(name))
            .find(|p| p.is_file())
    });
    on_path.unwrap_or_else(|| panic!("{name} is missing: run `{install}` (as root)"))
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A child process stopped (and reaped) on drop: SIGTERM, then SIGKILL after 5 s. nginx's
/// master stops its worker on SIGTERM; SIGKILL would leave the worker running, still
/// listening, after the bench.
pub struct Proc(pub Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let pid = nix::unistd::Pid::from_raw(self.0.id() as i32);
        if nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).is_ok() {
            let deadline = Instant::now() + Duration::from_secs(5);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = self.0.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// nginx on CPU 0 with one worker, terminating TLS on `port` with the webhook's certificate,
/// answering every POST to `/mutate` with `answer` after reading (and discarding) the body.
pub fn start_nginx(dir: &Path, port: u16, answer: &str) -> Proc {
    assert!(
        Path::new(NGINX).exists(),
        "{NGINX} is missing: run `scripts/install-test-deps.sh` (as root; installs Debian's nginx-light)"
    );
    assert!(!answer.contains('$'), "nginx would read `$` as a variable");
    // Inside nginx's single quotes, `\\` and `\'` are the escapes.
    let answer = answer.replace('\\', "\\\\").replace('\'', "\\'");
    let p = dir.display();
    let conf = format!(
        "daemon off;\nmaster_process on;\nworker_processes 1;\nuser root;\n\
         pid {p}/nginx.pid;\nerror_log {p}/nginx-error.log warn;\n\
         events {{ worker_connections 256; }}\n\
         http {{\n  access_log off;\n  keepalive_requests 100000000;\n  keepalive_timeout 60s;\n\
           client_body_temp_path {p}/body;\n  proxy_temp_path {p}/proxy;\n\
           fastcgi_temp_path {p}/fastcgi;\n  uwsgi_temp_path {p}/uwsgi;\n  scgi_temp_path {p}/scgi;\n\
           server {{\n    listen 127.0.0.1:{port} ssl;\n    ssl_protocols TLSv1.2 TLSv1.3;\n\
             ssl_certificate {p}/tls.crt;\n    ssl_certificate_key {p}/tls.key;\n\
             client_max_body_size 8m;\n    client_body_buffer_size 8m;\n\
             location /mutate {{ default_type application/json; return 200 '{answer}'; }}\n  }}\n}}\n"
    );
    std::fs::write(dir.join("nginx.conf"), conf).unwrap();
    let child = Command::new("taskset")
        .args(["-c", "0", NGINX, "-p"])
        .arg(dir)
        .arg("-c")
        .arg(dir.join("nginx.conf"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.join("nginx.stderr")).unwrap())
        .spawn()
        .expect("failed to run taskset (util-linux) with nginx");
    let nginx = Proc(child);
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            Instant::now() < deadline,
            "nginx did not listen within 10 s: {}",
            std::fs::read_to_string(dir.join("nginx.stderr")).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    nginx
}

/// What wrk reported for one run.
#[derive(Debug, Clone, Copy)]
pub struct WrkRun {
    pub requests: u64,
    pub per_second: f64,
    /// Answers that were not 2xx/3xx, plus socket errors.
    pub failures: u64,
}

/// `wrk -t1 -c<connections>` on CPU 1 for `run_for`, POSTing `body_file` (via `post.lua`).
pub fn wrk(url: &str, body_file: &Path, connections: usize, run_for: Duration) -> WrkRun {
    let wrk = find_tool("wrk", "scripts/install-test-deps.sh");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/tls_floor/post.lua");
    let out = Command::new("taskset")
        .args(["-c", "1"])
        .arg(wrk)
        .args(["-t1", &format!("-c{connections}"), "--timeout", "30s"])
        .arg(format!("-d{}s", run_for.as_secs().max(1)))
        .arg("-s")
        .arg(script)
        .arg(url)
        .env("BODY_FILE", body_file)
        .output()
        .expect("failed to run wrk");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "wrk failed: {text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let requests = text
        .lines()
        .find_map(|l| l.trim().split_once(" requests in "))
        .and_then(|(n, _)| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no request count in wrk's output: {text}"));
    let per_second = text
        .lines()
        .find_map(|l| l.strip_prefix("Requests/sec:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no Requests/sec in wrk's output: {text}"));
    let non_2xx: u64 = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("Non-2xx or 3xx responses:"))
        .map_or(0, |v| v.trim().parse().unwrap());
    let socket_errors: u64 = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("Socket errors:"))
        .map_or(0, |v| {
            v.split(',')
                .filter_map(|part| part.split_whitespace().last()?.parse::<u64>().ok())
                .sum()
        });
    WrkRun {
        requests,
        per_second,
        failures: non_2xx + socket_errors,
    }
}

/// Latency percentiles (ms) of an open-loop run.
#[derive(Debug, Clone, Copy)]
pub struct OpenLoop {
    pub requests: u64,
    pub p50: f64,
    pub p99: f64,
    pub max: f64,
    pub failures: u64,
}

/// oha at a fixed `rate` per second (`-q`, latency corrected: measured from the scheduled
/// send) over `connections` keep-alive connections, on CPU 1.
pub fn oha(
    url: &str,
    body_file: &Path,
    rate: u32,
    connections: usize,
    run_for: Duration,
) -> OpenLoop {
    let oha = find_tool("oha", "scripts/install-bench-deps.sh");
    let out = Command::new("taskset")
        .args(["-c", "1"])
        .arg(oha)
        .args([
            "--no-tui",
            "--output-format",
            "json",
            "--insecure",
            "--latency-correction",
        ])
        .args(["-m", "POST", "-T", "application/json", "-D"])
        .arg(body_file)
        .args(["-q", &rate.to_string(), "-c", &connections.to_string()])
        .args(["-z", &format!("{}ms", run_for.as_millis())])
        .arg(url)
        .output()
        .expect("failed to run oha");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "oha failed: {text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: serde_json::Value = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("oha's JSON output did not parse ({e}): {text}"));
    let pct = |p: &str| json["latencyPercentiles"][p].as_f64().unwrap_or(f64::NAN) * 1e3;
    let codes = json["statusCodeDistribution"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    let ok = codes.get("200").and_then(|v| v.as_u64()).unwrap_or(0);
    let all: u64 = codes.values().filter_map(|v| v.as_u64()).sum();
    // Requests still in flight when the run ends are "aborted due to deadline", not failures.
    let errors: u64 = json["errorDistribution"].as_object().map_or(0, |m| {
        m.iter()
            .filter(|(k, _)| !k.contains("deadline"))
            .filter_map(|(_, v)| v.as_u64())
            .sum()
    });
    OpenLoop {
        requests: all,
        p50: pct("p50"),
        p99: pct("p99"),
        max: json["summary"]["slowest"].as_f64().unwrap_or(f64::NAN) * 1e3,
        failures: all - ok + errors,
    }
}

/// User + system CPU seconds of `pid` and its children (nginx's master and worker).
pub fn tree_cpu_seconds(pid: u32) -> f64 {
    let mut total = cpu_seconds(pid);
    let children =
        std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).unwrap_or_default();
    for child in children.split_whitespace().filter_map(|c| c.parse().ok()) {
        total += tree_cpu_seconds(child);
    }
    total
}

fn cpu_seconds(pid: u32) -> f64 {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return 0.0;
    };
    // Fields after the parenthesised command name; utime and stime are fields 14 and 15.
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = fields[11].parse::<f64>().unwrap() + fields[12].parse::<f64>().unwrap();
    let hz = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
        .ok()
        .flatten()
        .unwrap_or(100) as f64;
    ticks / hz
}

/// How this machine's idle CPUs wait, which the ratio depends on: a server slower than wrk
/// wakes wrk's idle CPU for every answer, and where an idle CPU halts at once (a VM with
/// `haltpoll.guest_halt_poll_ns=0`) that wake-up is an inter-processor interrupt the server pays.
pub fn idle_policy() -> String {
    let read = |path: &str| {
        std::fs::read_to_string(path)
            .map(|s| s.trim().to_owned())
            .unwrap_or_else(|_| "unknown".to_owned())
    };
    let driver = read("/sys/devices/system/cpu/cpuidle/current_driver");
    let poll = Path::new("/sys/module/haltpoll/parameters/guest_halt_poll_ns");
    if poll.exists() {
        let ns = read(&poll.to_string_lossy());
        format!("cpuidle driver {driver}, guest_halt_poll_ns {ns}")
    } else {
        format!("cpuidle driver {driver}")
    }
}
