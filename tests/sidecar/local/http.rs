//! HTTP mode against a real server on 127.0.0.1: retries, timeouts, superseded changes.

use crate::watch_support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use watch_support::http_server::{Reply, TestServer};
use watch_support::kubelet::AtomicDir;
use watch_support::scratch::Scratch;
use watch_support::watcher::{BINARY, Watcher};
use watch_support::{PATIENCE, wait_for};

#[test]
fn a_500_is_retried_until_a_200_and_delivered_once() {
    let scratch = Scratch::new("http-500");
    let config = AtomicDir::create(&scratch.join("config"), &[("app.conf", "one")]);
    let server = TestServer::start(config.path().join("app.conf"), |n| {
        Reply::now(if n < 2 { 500 } else { 200 })
    });
    let url = server.url("/-/reload");
    let watcher = Watcher::of_dir(&scratch, config.path(), &["--url", &url, "--debounce", "0"]);
    config.update(&[("app.conf", "two")]);
    watcher.wait_reloads(1);
    let hits = server.hits();
    let statuses: Vec<u16> = hits.iter().map(|hit| hit.status).collect();
    assert_eq!(statuses, [500, 500, 200], "{hits:?}");
    assert!(hits.iter().all(|hit| hit.request == "POST /-/reload"));
    assert_eq!(hits[2].content.as_deref(), Some("two"));
    let reloaded = &watcher.messages("reloaded")[0];
    assert_eq!(reloaded["result"], "success");
    assert!(reloaded["targets"].as_str().unwrap().contains("/-/reload"));
    assert_eq!(watcher.metric("reloads_total{result=\"failure\"}"), 2.0);
    assert_eq!(watcher.metric("reloads_total{result=\"success\"}"), 1.0);
    assert!(watcher.metric("last_reload_success_timestamp_seconds") > 1.0e9);
    // One warning for the first failure; the identical second one is not repeated.
    let warnings = watcher
        .lines()
        .into_iter()
        .filter(|line| line["level"] == "WARN")
        .count();
    assert_eq!(warnings, 1, "{}", watcher.log_text());
    assert_eq!(watcher.reloads(), 1);
}

#[test]
fn a_slow_server_times_out_and_the_reload_is_retried() {
    let scratch = Scratch::new("http-slow");
    let config = AtomicDir::create(&scratch.join("config"), &[("app.conf", "one")]);
    let server = TestServer::start(config.path().join("app.conf"), |n| {
        if n == 0 {
            Reply {
                status: 200,
                delay: Duration::from_secs(3),
            }
        } else {
            Reply::now(200)
        }
    });
    let url = server.url("/reload");
    let watcher = Watcher::of_dir(
        &scratch,
        config.path(),
        &["--url", &url, "--debounce", "0", "--timeout", "500ms"],
    );
    config.update(&[("app.conf", "two")]);
    watcher.wait_reloads(1);
    assert!(
        watcher.log_text().contains("timed out"),
        "{}",
        watcher.log_text()
    );
    assert!(server.hits().len() >= 2);
    assert_eq!(watcher.metric("reloads_total{result=\"success\"}"), 1.0);
    assert!(watcher.metric("reloads_total{result=\"failure\"}") >= 1.0);
}

#[test]
fn a_change_during_retries_is_delivered_once_with_the_last_content() {
    let scratch = Scratch::new("http-supersede");
    let config = AtomicDir::create(&scratch.join("config"), &[("app.conf", "one")]);
    let healthy = Arc::new(AtomicBool::new(false));
    let server = {
        let healthy = Arc::clone(&healthy);
        TestServer::start(config.path().join("app.conf"), move |_| {
            Reply::now(if healthy.load(Ordering::SeqCst) {
                200
            } else {
                503
            })
        })
    };
    let url = server.url("/-/reload");
    let watcher = Watcher::of_dir(
        &scratch,
        config.path(),
        &["--url", &url, "--debounce", "50ms"],
    );
    config.update(&[("app.conf", "two")]);
    wait_for("two failed attempts with content two", PATIENCE, || {
        (server.hits().len() >= 2).then_some(())
    });
    config.update(&[("app.conf", "three")]);
    wait_for("an attempt with content three", PATIENCE, || {
        server
            .hits()
            .iter()
            .any(|hit| hit.content.as_deref() == Some("three"))
            .then_some(())
    });
    healthy.store(true, Ordering::SeqCst);
    watcher.wait_reloads(1);
    let successes = server.successes();
    assert_eq!(successes.len(), 1, "{:?}", server.hits());
    assert_eq!(successes[0].content.as_deref(), Some("three"));
    // Nothing further is sent once the last content is delivered: a later, different
    // change is the next and only other request.
    let before = server.hits().len();
    config.update(&[("app.conf", "four")]);
    watcher.wait_reloads(2);
    assert_eq!(server.hits().len(), before + 1);
    assert_eq!(server.successes().len(), 2);
}

#[test]
fn a_failing_verify_url_counts_as_a_failed_reload() {
    let scratch = Scratch::new("http-verify");
    let config = AtomicDir::create(&scratch.join("config"), &[("app.conf", "one")]);
    let server = TestServer::start(config.path().join("app.conf"), |n| {
        // Requests alternate reload (POST), verify (GET): the first verify fails.
        Reply::now(if n == 1 { 500 } else { 200 })
    });
    let url = server.url("/-/reload");
    let verify = server.url("/-/ready");
    let watcher = Watcher::of_dir(
        &scratch,
        config.path(),
        &["--url", &url, "--verify-url", &verify, "--debounce", "0"],
    );
    config.update(&[("app.conf", "two")]);
    watcher.wait_reloads(1);
    let requests: Vec<String> = server.hits().into_iter().map(|hit| hit.request).collect();
    assert_eq!(
        requests,
        [
            "POST /-/reload",
            "GET /-/ready",
            "POST /-/reload",
            "GET /-/ready"
        ]
    );
    assert_eq!(watcher.metric("reloads_total{result=\"failure\"}"), 1.0);
}

#[test]
fn https_and_bad_signals_are_refused_at_start_with_a_clear_message() {
    let scratch = Scratch::new("http-refused");
    for (args, needle) in [
        (
            vec!["--url", "https://127.0.0.1:1/-/reload"],
            "only http:// is supported",
        ),
        (vec!["--signal", "SIGBOGUS"], "failed to understand signal"),
        (vec!["--resync", "1000years"], "--resync must be"),
        (vec!["--debounce", "2days"], "--debounce must be"),
    ] {
        let output = std::process::Command::new(BINARY)
            .arg("watch")
            .arg("--dir")
            .arg(scratch.path())
            .args(&args)
            .output()
            .expect("run the watcher");
        assert_eq!(output.status.code(), Some(1), "{args:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
    }
}
