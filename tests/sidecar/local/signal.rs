//! Signal mode with real processes receiving real SIGHUPs, inside a PID namespace laid out
//! like a pod with `shareProcessNamespace: true` (needs root, as CI has).

use crate::watch_support;

use std::fs::{self, Permissions};
use std::io::ErrorKind;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use serde_json::Value;

use watch_support::copies::{copy_program, run_copy};
use watch_support::fixture::Counter;
use watch_support::kubelet::AtomicDir;
use watch_support::pidns::{self, PidNamespace, Pod};
use watch_support::scratch::{Scratch, runnable_by_others};
use watch_support::watcher::{BINARY, Watcher};
use watch_support::{PATIENCE, wait_for};

/// Waits until `counter` saw `n` SIGHUPs as `who`.
fn wait_count(counter: &Counter, who: &str, n: usize) {
    wait_for(&format!("{n} SIGHUP(s) counted by {who}"), PATIENCE, || {
        (counter.count(who) >= n).then_some(())
    });
}

/// A kubelet-style `config` directory holding `app.conf = "one"`, and a watcher on it inside
/// the pod's namespace (as `uid`, root if `None`) reacting at once (`--debounce 0`), plus `args`.
fn watched_config(
    ns: &PidNamespace,
    scratch: &Scratch,
    uid: Option<u32>,
    args: &[&str],
) -> (AtomicDir, Watcher) {
    let config = AtomicDir::create(&scratch.join("config"), &[("app.conf", "one")]);
    let args: Vec<&str> = args.iter().copied().chain(["--debounce", "0"]).collect();
    let watcher = Watcher::of_dir_in(ns, uid, scratch, config.path(), &args);
    (config, watcher)
}

#[test]
fn a_process_name_signals_the_master_not_its_workers_nor_pid_1() {
    let Pod { scratch, pid1, ns } = Pod::new("sig-name");
    let app = Counter::new(scratch.path(), "app", 2);
    let _app = ns.start_counter(&app, "fake-nginx");
    let (config, mut watcher) = watched_config(&ns, &scratch, None, &["--process", "fake-nginx"]);
    config.update(&[("app.conf", "two")]);
    wait_count(&app, "master", 1);
    config.update(&[("app.conf", "three")]);
    wait_count(&app, "master", 2);
    watcher.wait_reloads(2);
    assert_eq!(app.count("master"), 2);
    assert_eq!(app.count("worker"), 0, "workers must not be signalled");
    assert_eq!(pid1.count("pid1"), 0, "PID 1 must not be signalled");
    assert!(watcher.is_running(), "the watcher must not signal itself");
    let reloaded = &watcher.messages("reloaded")[0];
    assert!(
        reloaded["targets"]
            .as_str()
            .unwrap()
            .starts_with("fake-nginx[")
    );
    assert_eq!(reloaded["result"], "success");
    ns.close();
}

#[test]
fn without_a_name_each_other_containers_first_process_is_signalled() {
    let Pod { scratch, pid1, ns } = Pod::new("sig-main");
    let web = Counter::new(scratch.path(), "web", 2);
    let _web = ns.start_counter(&web, "web");
    let cache = Counter::new(scratch.path(), "cache", 1);
    let _cache = ns.start_counter(&cache, "cache");
    let (config, mut watcher) = watched_config(&ns, &scratch, None, &[]);
    config.update(&[("app.conf", "two")]);
    wait_count(&web, "master", 1);
    wait_count(&cache, "master", 1);
    watcher.wait_reloads(1);
    assert_eq!(web.count("worker") + cache.count("worker"), 0);
    assert_eq!(pid1.count("pid1"), 0);
    assert!(watcher.is_running());
    let targets = watcher.messages("reloaded")[0]["targets"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        targets.contains("web[") && targets.contains("cache["),
        "{targets}"
    );
    ns.close();
}

#[test]
fn targets_that_join_or_restart_between_changes_hear_each_change_once() {
    let Pod { scratch, pid1, ns } = Pod::new("sig-churn");
    let first = Counter::new(scratch.path(), "first", 0);
    let mut first_app = ns.start_counter(&first, "fake-app");
    let (config, watcher) = watched_config(&ns, &scratch, None, &["--process", "fake-app"]);
    config.update(&[("app.conf", "two")]);
    watcher.wait_reloads(1);

    // A second container running the same program joins: the remembered target is told
    // first, the newcomer by the scan that follows.
    let second = Counter::new(scratch.path(), "second", 0);
    let _second_app = ns.start_counter(&second, "fake-app");
    config.update(&[("app.conf", "three")]);
    watcher.wait_reloads(2);

    // The first container restarts: the remembered process is gone, a new one has its name.
    let first_pid = pidns::child_of(first_app.id()).expect("the first app's PID");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(first_pid as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .expect("kill the first app");
    wait_for("the first app to exit", PATIENCE, || {
        (!first_app.is_running()).then_some(())
    });
    let third = Counter::new(scratch.path(), "third", 0);
    let _third_app = ns.start_counter(&third, "fake-app");
    config.update(&[("app.conf", "four")]);
    watcher.wait_reloads(3);

    wait_count(&second, "master", 2);
    wait_count(&third, "master", 1);
    // Room for a duplicate to arrive, if one were sent.
    std::thread::sleep(Duration::from_millis(300));
    let counts = [&first, &second, &third].map(|app| app.count("master"));
    assert_eq!(counts, [2, 2, 1], "SIGHUPs counted by first, second, third");
    assert_eq!(pid1.count("pid1"), 0);
    let targets = watcher.messages("reloaded")[2]["targets"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(targets.matches("fake-app[").count(), 2, "{targets}");
    ns.close();
}

#[test]
fn a_missing_target_keeps_the_reload_pending_until_it_appears() {
    let Pod { scratch, pid1, ns } = Pod::new("sig-late");
    let (config, watcher) = watched_config(&ns, &scratch, None, &["--process", "late-app"]);
    config.update(&[("app.conf", "two")]);
    wait_for("a no-target attempt", PATIENCE, || {
        (watcher.metric("reloads_total{result=\"no_target\"}") >= 1.0).then_some(())
    });
    let app = Counter::new(scratch.path(), "late", 1);
    let _app = ns.start_counter(&app, "late-app");
    wait_count(&app, "master", 1);
    watcher.wait_reloads(1);
    // Delivered once: no further signals for the same content.
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(app.count("master"), 1);
    assert_eq!(app.count("worker"), 0);
    let warned = watcher
        .lines()
        .into_iter()
        .filter(|line| line["level"] == "WARN")
        .count();
    assert_eq!(
        warned,
        1,
        "one warning while waiting:\n{}",
        watcher.log_text()
    );
    assert!(watcher.log_text().contains("late-app"));
    assert_eq!(
        pid1.count("pid1"),
        0,
        "waiting must never fall back to PID 1"
    );
    ns.close();
}

#[test]
fn permission_denied_is_one_clear_line_and_the_watcher_keeps_running() {
    let Pod { scratch, ns, .. } = Pod::new("sig-eperm");
    let app = Counter::new(scratch.path(), "root-app", 0);
    let _app = ns.start_counter(&app, "root-app");
    let (config, mut watcher) =
        watched_config(&ns, &scratch, Some(65534), &["--process", "root-app"]);
    config.update(&[("app.conf", "two")]);
    let denied = |watcher: &Watcher| {
        watcher
            .lines()
            .into_iter()
            .filter(|line| line["result"] == "permission_denied")
            .collect::<Vec<_>>()
    };
    wait_for("the permission-denied line", PATIENCE, || {
        (!denied(&watcher).is_empty()).then_some(())
    });
    let line = &denied(&watcher)[0];
    assert_eq!(line["level"], "ERROR");
    let text = line["message"].as_str().unwrap();
    for needle in [
        "permission denied",
        "uid 65534",
        "uid 0",
        "runAsUser",
        "CAP_KILL",
        "root-app[",
    ] {
        assert!(text.contains(needle), "{needle:?} missing: {text}");
    }
    // Not retried for the same content (one line; a retry would keep the watcher busy),
    // still running, tried again on the next change.
    watcher.wait_idle_after(0.0);
    assert_eq!(denied(&watcher).len(), 1, "{}", watcher.log_text());
    assert!(watcher.is_running());
    config.update(&[("app.conf", "three")]);
    wait_for("a second permission-denied line", PATIENCE, || {
        (denied(&watcher).len() == 2).then_some(())
    });
    assert!(watcher.is_running());
    assert_eq!(app.count("master"), 0);
    assert_eq!(
        watcher.metric("reloads_total{result=\"permission_denied\"}"),
        2.0
    );
    ns.close();
}

/// A checkout may sit below directories only their owner can enter (`mktemp -d`, a 0700 home):
/// another user cannot run a binary there, and the copy the test helpers make for such a user
/// (as the permission-denied test above does) runs.
#[test]
fn a_binary_below_an_owner_only_directory_is_run_as_another_user_from_a_copy() {
    watch_support::require_root();
    let private = Scratch::new("owner-only");
    fs::set_permissions(private.path(), Permissions::from_mode(0o700)).unwrap();
    let inside = private.join("reload-injector");
    copy_program(Path::new(BINARY), &inside);
    let as_nobody = |program: &Path| {
        run_copy(|| {
            Command::new(program)
                .arg("--version")
                .uid(65534)
                .gid(65534)
                .output()
        })
    };
    let denied = as_nobody(&inside);
    assert!(
        matches!(&denied, Err(e) if e.kind() == ErrorKind::PermissionDenied),
        "precondition: uid 65534 cannot run a binary below a 0700 directory: {denied:?}"
    );
    let reachable = Scratch::new("for-others");
    let copy = runnable_by_others(&inside, reachable.path());
    let out = as_nobody(&copy).expect("uid 65534 runs the copy");
    assert!(out.status.success(), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains(env!("CARGO_PKG_VERSION")),
        "{out:?}"
    );
}

#[test]
fn a_target_that_dies_of_the_signal_is_a_failed_reload_and_the_next_change_reaches_its_restart() {
    let Pod { scratch, pid1, ns } = Pod::new("sig-dies");
    // The stand-in for a JVM: a program that does not handle SIGHUP, so it dies of it.
    let mut doomed = pidns::Proc(
        ns.command(None)
            .args(["bash", "-c", "exec -a fake-java sleep 1000"])
            .spawn()
            .expect("nsenter the doomed app"),
    );
    let (config, mut watcher) = watched_config(
        &ns,
        &scratch,
        None,
        &["--process", "fake-java", "--reload-grace", "1s"],
    );
    // Let the doomed app exec before the change, so the watcher finds it.
    std::thread::sleep(Duration::from_millis(300));
    config.update(&[("app.conf", "two")]);
    wait_for("the doomed app to die of SIGHUP", PATIENCE, || {
        (!doomed.is_running()).then_some(())
    });
    wait_for("the failed reload to be counted", PATIENCE, || {
        (watcher.metric("reload_failures_total") >= 1.0).then_some(())
    });
    assert_eq!(
        watcher.metric("reloads_total{result=\"target_exited\"}"),
        1.0
    );
    assert_eq!(watcher.metric("reloads_total{result=\"success\"}"), 0.0);
    assert!(
        watcher.messages("reloaded").is_empty(),
        "never logged as success"
    );
    let errors: Vec<Value> = watcher
        .lines()
        .into_iter()
        .filter(|line| line["level"] == "ERROR")
        .collect();
    assert_eq!(errors.len(), 1, "one error line: {errors:?}");
    let message = errors[0]["message"].as_str().unwrap_or_default();
    println!("the error line: {message}");
    for part in ["reload failed", "sleep[", "SIGHUP", "on-change: restart"] {
        assert!(message.contains(part), "{part} not in {message}");
    }
    assert!(
        message.contains("was killed by SIGHUP") || message.contains(" exited "),
        "{message}"
    );

    // The container restarts (the kubelet would): the next change reaches the new process.
    let restarted = Counter::new(scratch.path(), "restarted", 0);
    let _restarted = ns.start_counter(&restarted, "fake-java");
    config.update(&[("app.conf", "three")]);
    wait_count(&restarted, "master", 1);
    watcher.wait_reloads(1);
    assert_eq!(watcher.metric("reload_failures_total"), 1.0);
    assert_eq!(pid1.count("pid1"), 0);
    assert!(watcher.is_running());
    ns.close();
}
