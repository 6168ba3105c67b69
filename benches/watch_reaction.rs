//! Watcher benchmarks: reaction time from the kubelet's `..data` rename to the signal being
//! received (`--debounce 0`), idle memory, and idle wake-ups.
//!
//! `cargo bench --bench watch_reaction` measures the release binary (200 swaps, 10 s idle);
//! without `--bench` (as `cargo test --all-targets` runs it) it does a quick pass with few
//! iterations so the test suite stays fast. Needs root (PID namespace), like the tests.

#[path = "../tests/watch_support/mod.rs"]
mod watch_support;

use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use inotify::{Inotify, WatchMask};
use nix::sys::signal::{SigSet, Signal, kill};
use nix::time::{ClockId, clock_gettime};
use nix::unistd::Pid;

use watch_support::kubelet::AtomicDir;
use watch_support::pidns::{self, PidNamespace, Pod, Proc};
use watch_support::scratch::Scratch;
use watch_support::watcher::{BINARY, Watcher};

const CHILD_ENV: &str = "RI_BENCH_SIGNAL_CHILD";
const TARGET_NAME: &str = "bench-target";

fn main() {
    if std::env::var_os(CHILD_ENV).is_some() {
        return signal_child();
    }
    let full = std::env::args().any(|arg| arg == "--bench");
    let (swaps, quiet_swaps, idle) = if full {
        (200, 20, Duration::from_secs(10))
    } else {
        (5, 2, Duration::from_secs(1))
    };
    println!("watch_reaction: binary {BINARY}");
    step_costs(if full { 2000 } else { 20 });
    reaction(swaps, quiet_swaps);
    idle_cost(idle);
}

/// The signal target: blocks SIGHUP, and for each one received prints the CLOCK_MONOTONIC
/// time it was taken from the kernel.
fn signal_child() {
    let mut set = SigSet::empty();
    set.add(Signal::SIGHUP);
    set.thread_block().expect("block SIGHUP");
    fs::write("/proc/self/comm", TARGET_NAME).expect("rename comm");
    let mut out = std::io::stdout().lock();
    writeln!(out, "ready")
        .and_then(|()| out.flush())
        .expect("stdout");
    loop {
        if set.wait().is_err() {
            continue;
        }
        let now = monotonic_ns();
        if writeln!(out, "{now}").and_then(|()| out.flush()).is_err() {
            return;
        }
    }
}

fn monotonic_ns() -> u64 {
    let now = clock_gettime(ClockId::CLOCK_MONOTONIC).expect("clock_gettime");
    now.tv_sec() as u64 * 1_000_000_000 + now.tv_nsec() as u64
}

fn reaction(swaps: usize, quiet_swaps: usize) {
    let Pod { scratch, ns, .. } = Pod::new("bench-reaction");
    let child = ns
        .command(None)
        .arg(std::env::current_exe().expect("own path"))
        .env(CHILD_ENV, "1")
        .stdout(Stdio::piped())
        .spawn()
        .expect("start the signal target");
    let mut child = Proc(child);
    let (tx, rx) = mpsc::channel();
    let stdout = child.0.stdout.take().expect("piped stdout");
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { return };
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    let recv = || {
        rx.recv_timeout(Duration::from_secs(10))
            .expect("the target answered within 10 s")
    };
    assert_eq!(recv(), "ready");
    let target_pid = pidns::child_of(child.id()).expect("the target's host PID");
    let nginx_like = "server { listen 8080; location / { return 200 'x'; } }\n".repeat(40);

    // The floor: a bare inotify loop that kills on the `..data` rename, same machine, same run.
    let floor_dir = AtomicDir::create(&scratch.join("floor"), &[("site.conf", &nginx_like)]);
    spawn_floor_watcher(floor_dir.path(), target_pid);
    let config = AtomicDir::create(&scratch.join("config"), &[("site.conf", &nginx_like)]);
    let watcher = Watcher::of_dir_in(
        &ns,
        None,
        &scratch,
        config.path(),
        &["--process", TARGET_NAME, "--debounce", "0"],
    );
    let watcher_pid = pidns::child_of(watcher.launcher_pid()).expect("the watcher's host PID");
    // Floor and watcher take turns, so both see the same machine: this VM's timings drift by
    // 2x between minutes, and only numbers from the same moments compare.
    let before = status(watcher_pid);
    let mut floor = Vec::with_capacity(swaps);
    let mut ours = Vec::with_capacity(swaps);
    for i in 0..swaps {
        floor.push(time_swap(&floor_dir, i, &nginx_like, &recv));
        ours.push(time_swap(&config, i, &nginx_like, &recv));
    }
    let after = status(watcher_pid);
    let mut overhead: Vec<f64> = ours.iter().zip(&floor).map(|(o, f)| o - f).collect();
    report("floor (bare inotify -> kill in one thread)", swaps, floor);
    report("reload-injector watch --debounce 0", swaps, ours);
    overhead.sort_by(f64::total_cmp);
    println!(
        "reaction, watcher minus the floor of the turn before: p50 {:.1} us",
        overhead[overhead.len() / 2]
    );
    let per_update = |a: u64, b: u64| (a - b) as f64 / swaps as f64;
    println!(
        "watcher per kubelet update (all its events, hashing, /proc scan, kill, log line): \
         CPU {:.1} us, wake-ups {:.1}, minor page faults {:.1}",
        per_update(after.cpu_ns, before.cpu_ns) / 1000.0,
        per_update(after.voluntary, before.voluntary),
        per_update(after.minor_faults, before.minor_faults)
    );
    drop(watcher);
    after_quiet_resyncs(&ns, &scratch, &floor_dir, quiet_swaps, &nginx_like, &recv);
    ns.close();
}

/// The image's build of the binary when `scripts/build-static.sh` has made it, else the one
/// under test.
fn shipped_or_tested() -> &'static str {
    let shipped = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/target/x86_64-unknown-linux-gnu/release/reload-injector"
    );
    if std::path::Path::new(shipped).exists() {
        shipped
    } else {
        BINARY
    }
}

/// A watcher that sees updates only now and then: each `--resync` that finds nothing to do
/// drops its mapped code pages. Its memory after reloads and after a quiet resync, and its
/// reaction to the first update after such a pause (floor timed in the turn just before).
fn after_quiet_resyncs(
    ns: &PidNamespace,
    scratch: &Scratch,
    floor_dir: &AtomicDir,
    swaps: usize,
    body: &str,
    recv: &dyn Fn() -> String,
) {
    let binary = shipped_or_tested();
    let dir = AtomicDir::create(&scratch.join("quiet"), &[("site.conf", body)]);
    let path = dir.path().to_str().expect("UTF-8 path");
    let watcher = Watcher::start_binary_in(
        binary,
        ns,
        None,
        &scratch.join("quiet.log"),
        &[
            "--dir",
            path,
            "--process",
            TARGET_NAME,
            "--debounce",
            "0",
            "--resync",
            "1s",
        ],
    );
    let pid = pidns::child_of(watcher.launcher_pid()).expect("the watcher's host PID");
    let quiet = Duration::from_millis(1300);
    let mut floor = Vec::with_capacity(swaps);
    let mut ours = Vec::with_capacity(swaps);
    let mut after_reload = Status::default();
    for i in 0..swaps {
        std::thread::sleep(quiet);
        floor.push(time_swap(floor_dir, 1000 + i, body, recv));
        ours.push(time_swap(&dir, i, body, recv));
        after_reload = status(pid);
    }
    std::thread::sleep(quiet);
    let idle = status(pid);
    println!("quiet resyncs: binary {binary}");
    let memory = |s: &Status| {
        format!(
            "VmRSS {} kB (anon {} kB, file {} kB)",
            s.rss_kb, s.anon_kb, s.file_kb
        )
    };
    println!(
        "memory, right after a reload: {}; after the next quiet resync: {}",
        memory(&after_reload),
        memory(&idle)
    );
    let mut overhead: Vec<f64> = ours.iter().zip(&floor).map(|(o, f)| o - f).collect();
    report(
        "floor, turns before a first update after a pause",
        swaps,
        floor,
    );
    report("first update after a quiet resync", swaps, ours);
    overhead.sort_by(f64::total_cmp);
    println!(
        "reaction, first update after a quiet resync minus the floor: p50 {:.1} us",
        overhead[overhead.len() / 2]
    );
}

/// Times one kubelet update of `dir`: from the rename to the SIGHUP received, in µs.
fn time_swap(dir: &AtomicDir, i: usize, body: &str, recv: &dyn Fn() -> String) -> f64 {
    let pending = dir.prepare(&[("site.conf", &format!("{body}# {i}\n"))]);
    // Let the watcher finish with the preparation events, so only the rename is timed.
    std::thread::sleep(Duration::from_millis(20));
    let start = monotonic_ns();
    pending.rename();
    let received: u64 = recv().parse().expect("a timestamp");
    pending.finish();
    std::thread::sleep(Duration::from_millis(10));
    received.saturating_sub(start) as f64 / 1000.0
}

fn report(label: &str, swaps: usize, mut micros: Vec<f64>) {
    micros.sort_by(f64::total_cmp);
    let pct = |p: f64| micros[((micros.len() - 1) as f64 * p).round() as usize];
    println!(
        "reaction, {label} ({swaps} swaps, rename -> SIGHUP received): \
         p50 {:.1} us, p90 {:.1} us, p99 {:.1} us, max {:.1} us",
        pct(0.5),
        pct(0.9),
        pct(0.99),
        pct(1.0)
    );
}

fn spawn_floor_watcher(dir: &std::path::Path, target: u32) {
    let inotify = Inotify::init().expect("inotify");
    inotify
        .watches()
        .add(dir, WatchMask::MOVED_TO)
        .expect("watch the floor dir");
    std::thread::spawn(move || {
        let mut inotify = inotify;
        let mut buffer = [0u8; 4096];
        let pid = Pid::from_raw(target as i32);
        loop {
            let Ok(events) = inotify.read_events_blocking(&mut buffer) else {
                return;
            };
            for event in events {
                if event.name.is_some_and(|name| name == "..data") {
                    let _ = kill(pid, Signal::SIGHUP);
                }
            }
        }
    });
}

/// In-process cost of the two steps on the reload path, called directly through the library.
fn step_costs(rounds: u32) {
    use reload_injector::watch::{content, procfs};
    let scratch = Scratch::new("bench-steps");
    let nginx_like = "server { listen 8080; location / { return 200 'x'; } }\n".repeat(40);
    let config = AtomicDir::create(&scratch.join("config"), &[("site.conf", &nginx_like)]);
    let time = |f: &dyn Fn()| {
        let start = std::time::Instant::now();
        for _ in 0..rounds {
            f();
        }
        start.elapsed().as_secs_f64() * 1e6 / f64::from(rounds)
    };
    let hash = time(&|| {
        content::hash_path(config.path());
    });
    let proc_root = std::path::Path::new("/proc");
    let count = procfs::list_processes(proc_root, Some("no-such-name"), -1)
        .map(|p| p.len())
        .unwrap_or(0);
    let scan = time(&|| {
        let _ = procfs::list_processes(proc_root, Some("no-such-name"), -1);
    });
    let syscall = time(&|| {
        for _ in 0..100 {
            std::hint::black_box(nix::unistd::getppid());
        }
    }) / 100.0;
    println!("steps: one null system call (getppid) {syscall:.2} us");
    println!(
        "steps: content hash of a 2.4 KB kubelet volume {hash:.1} us; /proc scan of {count} \
         processes (host) {scan:.1} us ({:.2} us per process)",
        scan / count.max(1) as f64
    );
}

/// Memory and wake-ups of an idle watcher (signal mode, default flags).
fn idle_cost(idle: Duration) {
    let scratch = Scratch::new("bench-idle");
    let config = AtomicDir::create(&scratch.join("config"), &[("app.conf", "x")]);
    // The image ships the static build of scripts/build-static.sh; measured too when present.
    let shipped = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/target/x86_64-unknown-linux-gnu/release/reload-injector"
    );
    let mut runs = vec![
        ("signal mode", BINARY, vec![]),
        (
            "http mode + metrics",
            BINARY,
            vec![
                "--url",
                "http://127.0.0.1:1/-/reload",
                "--metrics-listen",
                "127.0.0.1:0",
            ],
        ),
    ];
    if std::path::Path::new(shipped).exists() {
        runs.push(("signal mode, static build as shipped", shipped, vec![]));
    }
    for (label, binary, extra) in runs {
        let mut command = Command::new(binary);
        command
            .args([
                "watch",
                "--dir",
                config.path().to_str().unwrap(),
                "--process",
                "none",
            ])
            .args(&extra)
            .stderr(Stdio::null());
        let child = Proc(command.spawn().expect("start the watcher"));
        std::thread::sleep(Duration::from_secs(1));
        let before = status(child.id());
        std::thread::sleep(idle);
        let after = status(child.id());
        let switches = |s: &Status| s.voluntary + s.nonvoluntary;
        println!(
            "idle ({label}): VmRSS {} kB (anon {} kB, file {} kB; PSS {} kB, private {} kB), \
             threads {}, context switches in {:?} idle: {}, CPU time: {} ns",
            after.rss_kb,
            after.anon_kb,
            after.file_kb,
            after.pss_kb,
            after.private_kb,
            after.threads,
            idle,
            switches(&after) - switches(&before),
            after.cpu_ns - before.cpu_ns
        );
    }
}

#[derive(Debug, Default)]
struct Status {
    rss_kb: u64,
    anon_kb: u64,
    file_kb: u64,
    pss_kb: u64,
    private_kb: u64,
    threads: u64,
    voluntary: u64,
    nonvoluntary: u64,
    cpu_ns: u64,
    minor_faults: u64,
}

fn status(pid: u32) -> Status {
    let text = fs::read_to_string(format!("/proc/{pid}/status")).expect("read status");
    let field = |name: &str| {
        text.lines()
            .find_map(|line| line.strip_prefix(name))
            .and_then(|rest| rest.split_whitespace().next()?.parse().ok())
            .unwrap_or(0)
    };
    let schedstat = fs::read_to_string(format!("/proc/{pid}/schedstat")).unwrap_or_default();
    let rollup = fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).unwrap_or_default();
    let rolled = |name: &str| -> u64 {
        rollup
            .lines()
            .find_map(|line| line.strip_prefix(name))
            .and_then(|rest| rest.split_whitespace().next()?.parse().ok())
            .unwrap_or(0)
    };
    Status {
        rss_kb: field("VmRSS:"),
        anon_kb: field("RssAnon:"),
        file_kb: field("RssFile:"),
        pss_kb: rolled("Pss:"),
        private_kb: rolled("Private_Clean:") + rolled("Private_Dirty:"),
        threads: field("Threads:"),
        voluntary: field("voluntary_ctxt_switches:"),
        nonvoluntary: field("nonvoluntary_ctxt_switches:"),
        minor_faults: fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|stat| {
                let after = stat.rsplit_once(')')?.1.to_owned();
                after.split_whitespace().nth(7)?.parse().ok()
            })
            .unwrap_or(0),
        cpu_ns: schedstat
            .split_whitespace()
            .next()
            .and_then(|v| v.parse().ok())
            .unwrap_or(0),
    }
}
