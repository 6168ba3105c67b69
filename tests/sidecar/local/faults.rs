//! The watcher under faults, with the real binary: the app restarting under a new PID, the
//! config directory deleted and recreated, a thousand swaps in a row, the reload endpoint
//! down for a minute, and the watcher itself killed in the middle of a reload.
//!
//! Scenarios already covered elsewhere: a `--process` target restarting between changes
//! (`watch_signal.rs`), a target missing until it appears (`watch_signal.rs`), a directory
//! that appears late and is recreated with new content (`watch_changes.rs`), a restart by
//! SIGTERM after a finished reload (`watch_changes.rs`).

use crate::watch_support;

use std::fs;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use watch_support::fixture::Counter;
use watch_support::http_server::{Reply, TestServer};
use watch_support::kubelet::AtomicDir;
use watch_support::pidns::{self, Pod, Proc};
use watch_support::scratch::Scratch;
use watch_support::watcher::Watcher;
use watch_support::{PATIENCE, free_port, wait_for};

/// Waits until `counter` saw `n` SIGHUPs as its master.
fn wait_master(counter: &Counter, n: usize) {
    wait_for(&format!("{n} SIGHUP(s) counted"), PATIENCE, || {
        (counter.count("master") >= n).then_some(())
    });
}

/// SIGKILLs the app's process (the child of its `nsenter`) and waits until it is gone.
fn crash(app: &mut Proc) {
    let pid = pidns::child_of(app.id()).expect("the app's PID");
    kill(Pid::from_raw(pid as i32), Signal::SIGKILL).expect("kill the app");
    wait_for("the app to exit", PATIENCE, || {
        (!app.is_running()).then_some(())
    });
}

#[test]
fn an_app_that_exits_and_comes_back_under_a_new_pid_gets_the_next_change() {
    let Pod { scratch, pid1, ns } = Pod::new("fault-new-pid");
    let config = AtomicDir::create(&scratch.join("config"), &[("app.conf", "one")]);
    // No --process: the target is the main process of each other container, found anew.
    let first = Counter::new(scratch.path(), "first", 0);
    let mut first_app = ns.start_counter(&first, "app");
    let watcher = Watcher::of_dir_in(&ns, None, &scratch, config.path(), &["--debounce", "0"]);
    config.update(&[("app.conf", "two")]);
    wait_master(&first, 1);
    watcher.wait_reloads(1);

    // The container restarts: a new process, a new PID, and the next change reaches it.
    crash(&mut first_app);
    let second = Counter::new(scratch.path(), "second", 0);
    let mut second_app = ns.start_counter(&second, "app");
    config.update(&[("app.conf", "three")]);
    wait_master(&second, 1);
    watcher.wait_reloads(2);

    // It crashes again and the change lands while no app runs: held, then delivered once to
    // the process that comes back.
    crash(&mut second_app);
    config.update(&[("app.conf", "four")]);
    wait_for("a no-target attempt", PATIENCE, || {
        (watcher.metric("reloads_total{result=\"no_target\"}") >= 1.0).then_some(())
    });
    let third = Counter::new(scratch.path(), "third", 0);
    let _third_app = ns.start_counter(&third, "app");
    wait_master(&third, 1);
    watcher.wait_reloads(3);
    // Room for a duplicate to arrive, if one were sent.
    std::thread::sleep(Duration::from_millis(500));
    let counts = [&first, &second, &third].map(|app| app.count("master"));
    assert_eq!(counts, [1, 1, 1], "SIGHUPs counted by first, second, third");
    assert_eq!(pid1.count("pid1"), 0, "PID 1 must never be signalled");
    assert_eq!(watcher.reloads(), 3, "{}", watcher.log_text());
    ns.close();
}

#[test]
fn a_config_dir_deleted_and_recreated_reloads_only_if_the_content_differs() {
    let scratch = Scratch::new("fault-recreate");
    let path = scratch.join("config");
    let config = AtomicDir::create(&path, &[("app.conf", "one")]);
    let server = TestServer::start(path.join("app.conf"), |_| Reply::now(200));
    let url = server.url("/-/reload");
    let watcher = Watcher::of_dir(&scratch, &path, &["--url", &url, "--debounce", "300ms"]);

    // Deleted and put back as it was (a volume re-mounted): nothing for the app to do.
    fs::remove_dir_all(config.path()).unwrap();
    let config = AtomicDir::create(&path, &[("app.conf", "one")]);
    // The events of the re-creation read, debounced and looked at: no reload wanted.
    watcher.wait_idle_after(0.0);
    assert_eq!(watcher.reloads(), 0, "{}", watcher.log_text());
    assert!(server.hits().is_empty(), "{:?}", server.hits());

    // Deleted and recreated with new content: one reload, with that content.
    fs::remove_dir_all(config.path()).unwrap();
    let config = AtomicDir::create(&path, &[("app.conf", "two")]);
    watcher.wait_reloads(1);
    watcher.wait_idle_after(0.0);
    let hits = server.hits();
    assert_eq!(hits.len(), 1, "{hits:?}");
    assert_eq!(hits[0].content.as_deref(), Some("two"));

    // The recreated directory is watched: the next kubelet update arrives.
    config.update(&[("app.conf", "three")]);
    watcher.wait_reloads(2);
    assert_eq!(server.hits()[1].content.as_deref(), Some("three"));
}

#[test]
fn a_thousand_rapid_swaps_reload_a_bounded_number_of_times_and_the_last_content_wins() {
    const SWAPS: usize = 1000;
    let scratch = Scratch::new("fault-thousand");
    let config = AtomicDir::create(&scratch.join("config"), &[("app.conf", "v0")]);
    let server = TestServer::start(config.path().join("app.conf"), |_| Reply::now(200));
    let url = server.url("/-/reload");
    // The default debounce (250ms): a burst is looked at once it goes quiet for that long,
    // and at the latest 10 debounce periods (2.5s) after it began.
    let watcher = Watcher::of_dir(&scratch, config.path(), &["--url", &url]);
    let started = Instant::now();
    for i in 1..=SWAPS {
        config.update(&[("app.conf", &format!("v{i}"))]);
    }
    let burst = started.elapsed();
    let last = format!("v{SWAPS}");
    wait_for("the last content to be loaded", PATIENCE, || {
        let successes = server.successes();
        (successes.last()?.content.as_deref() == Some(last.as_str())).then_some(())
    });
    // A wrongly scheduled extra reload would keep the watcher busy until it was sent.
    watcher.wait_idle_after(0.0);
    let successes = server.successes();
    let bound = (burst.as_secs_f64() / 2.5).floor() as usize + 2;
    eprintln!(
        "{SWAPS} swaps in {burst:?}: {} reloads (bound {bound}), {} events",
        successes.len(),
        watcher.metric("watch_events_total")
    );
    assert!(
        (1..=bound).contains(&successes.len()),
        "{} reloads for a {burst:?} burst (bound {bound}): {successes:?}",
        successes.len()
    );
    assert_eq!(
        successes.last().unwrap().content.as_deref(),
        Some(last.as_str())
    );
    assert_eq!(
        server.hits().len(),
        successes.len(),
        "nothing but successes"
    );
    assert_eq!(watcher.reloads(), successes.len());
}

#[test]
fn a_reload_url_down_for_a_minute_is_retried_with_backoff_and_delivered_once_it_is_up() {
    const DOWN: Duration = Duration::from_secs(60);
    let scratch = Scratch::new("fault-down");
    let config = AtomicDir::create(&scratch.join("config"), &[("app.conf", "one")]);
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}/-/reload");
    let mut watcher = Watcher::of_dir(
        &scratch,
        config.path(),
        &["--url", &url, "--debounce", "0", "--log-level", "debug"],
    );
    config.update(&[("app.conf", "two")]);
    let changed = Instant::now();
    let failures = |w: &Watcher| w.metric("reloads_total{result=\"failure\"}");
    wait_for("a first failed attempt", PATIENCE, || {
        (failures(&watcher) >= 1.0).then_some(())
    });
    // The outage is the fault itself: the attempts made in a minute are what is counted.
    std::thread::sleep(DOWN.saturating_sub(changed.elapsed()));
    assert!(watcher.is_running());
    let failed = failures(&watcher);
    // Backoff from 200ms doubling to a 10s cap: about 11 attempts in a minute (a fixed 200ms
    // would be 300).
    assert!(
        (6.0..=15.0).contains(&failed),
        "{failed} failed attempts in {DOWN:?}"
    );
    assert_eq!(watcher.reloads(), 0);

    let up = Instant::now();
    let server = TestServer::start_on(port, config.path().join("app.conf"), |_| Reply::now(200));
    watcher.wait_reloads(1);
    let delivered_after = up.elapsed();
    watcher.wait_idle_after(0.0);
    let hits = server.hits();
    assert_eq!(hits.len(), 1, "one request once up: {hits:?}");
    assert_eq!(hits[0].status, 200);
    assert_eq!(hits[0].content.as_deref(), Some("two"));
    assert!(
        delivered_after <= Duration::from_secs(12),
        "delivered {delivered_after:?} after the app came up (cap 10s)"
    );

    // The waits between attempts grew from the first delay to the cap; the same error was
    // warned about once, then logged at debug level.
    let retries: Vec<String> = watcher
        .lines()
        .into_iter()
        .filter_map(|line| line["retry_in"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(
        retries.first().map(String::as_str),
        Some("200ms"),
        "{retries:?}"
    );
    assert_eq!(
        retries.last().map(String::as_str),
        Some("10s"),
        "{retries:?}"
    );
    let warned = watcher
        .lines()
        .into_iter()
        .filter(|line| line["level"] == "WARN")
        .count();
    assert_eq!(warned, 1, "{}", watcher.log_text());
    eprintln!(
        "down {DOWN:?}: {failed} failed attempts, delivered {delivered_after:?} after it came up"
    );
}

#[test]
fn a_watcher_killed_mid_reload_restarts_without_reloading_the_unchanged_state() {
    let scratch = Scratch::new("fault-killed");
    let config = AtomicDir::create(&scratch.join("config"), &[("app.conf", "one")]);
    // The first reload takes 5s to answer: the watcher is killed while it waits.
    let server = TestServer::start(config.path().join("app.conf"), |n| Reply {
        status: 200,
        delay: if n == 0 {
            Duration::from_secs(5)
        } else {
            Duration::ZERO
        },
    });
    let url = server.url("/-/reload");
    let dir = config.path().to_str().unwrap().to_owned();
    let args = [
        "--dir",
        &dir,
        "--url",
        &url,
        "--debounce",
        "0",
        "--resync",
        "1s",
    ];
    let mut first = Watcher::start(&scratch.join("first.log"), &args);
    config.update(&[("app.conf", "two")]);
    wait_for("the reload request to arrive", PATIENCE, || {
        (!server.hits().is_empty()).then_some(())
    });
    kill(Pid::from_raw(first.launcher_pid() as i32), Signal::SIGKILL).expect("SIGKILL");
    wait_for("the watcher to die", PATIENCE, || {
        (!first.is_running()).then_some(())
    });
    assert_eq!(first.reloads(), 0, "killed before the answer");

    // Restarted (as the kubelet restarts the container): the state it finds is its baseline.
    let second = Watcher::start(&scratch.join("second.log"), &args);
    // Kept: three resyncs (--resync 1s) get the chance to look again; no metric counts them.
    std::thread::sleep(Duration::from_millis(3500));
    assert_eq!(second.reloads(), 0, "{}", second.log_text());
    assert_eq!(server.hits().len(), 1, "{:?}", server.hits());
    config.update(&[("app.conf", "three")]);
    second.wait_reloads(1);
    std::thread::sleep(Duration::from_millis(300));
    let hits = server.hits();
    assert_eq!(hits.len(), 2, "{hits:?}");
    assert_eq!(hits[1].content.as_deref(), Some("three"));
}
