//! Change detection with real inotify: bursts, identical content, restarts, resync,
//! directories that appear late or are recreated, plain files edited in place. The app is an
//! HTTP test server that records what the config held at each reload.

use crate::watch_support;

use std::fs;
use std::time::Duration;

use watch_support::http_server::{Reply, TestServer};
use watch_support::kubelet::AtomicDir;
use watch_support::scratch::Scratch;
use watch_support::watcher::Watcher;
use watch_support::{PATIENCE, wait_for};

fn ok_server(watched: std::path::PathBuf) -> TestServer {
    TestServer::start(watched, |_| Reply::now(200))
}

/// What most tests here start with: a scratch directory, a kubelet-style `config` directory
/// holding `app.conf`, and an app answering 200 at `url` that records `app.conf` at each call.
struct Setup {
    scratch: Scratch,
    config: AtomicDir,
    server: TestServer,
    url: String,
}

fn setup(tag: &str, app_conf: &str) -> Setup {
    let scratch = Scratch::new(tag);
    let config = AtomicDir::create(&scratch.join("config"), &[("app.conf", app_conf)]);
    let server = ok_server(config.path().join("app.conf"));
    let url = server.url("/-/reload");
    Setup {
        scratch,
        config,
        server,
        url,
    }
}

#[test]
fn a_burst_of_20_swaps_in_a_second_is_at_most_2_reloads_and_the_last_content_wins() {
    let Setup {
        scratch,
        config,
        server,
        url,
    } = setup("burst", "v0");
    let watcher = Watcher::of_dir(
        &scratch,
        config.path(),
        &["--url", &url, "--debounce", "500ms"],
    );
    for i in 1..=20 {
        config.update(&[("app.conf", &format!("v{i}"))]);
        std::thread::sleep(Duration::from_millis(50));
    }
    wait_for("the final content to be loaded", PATIENCE, || {
        let successes = server.successes();
        (successes.last()?.content.as_deref() == Some("v20")).then_some(())
    });
    // A wrongly scheduled extra reload would keep the watcher busy until it was sent.
    watcher.wait_idle_after(0.0);
    let successes = server.successes();
    assert!(
        (1..=2).contains(&successes.len()),
        "{} reloads: {successes:?}",
        successes.len()
    );
    assert_eq!(successes.last().unwrap().content.as_deref(), Some("v20"));
    assert_eq!(watcher.reloads(), successes.len());
}

#[test]
fn an_identical_content_swap_does_not_reload() {
    let Setup {
        scratch,
        config,
        server,
        url,
    } = setup("identical", "same");
    let watcher = Watcher::of_dir(&scratch, config.path(), &["--url", &url, "--debounce", "0"]);
    config.update(&[("app.conf", "same")]);
    // The swap is at least: ts dir created, ..data_tmp created, moved from, moved to
    // ..data, old ts dir deleted.
    watcher.wait_events(5.0);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(watcher.reloads(), 0, "{}", watcher.log_text());
    assert!(server.hits().is_empty());
    // A real change afterwards is the first and only reload.
    config.update(&[("app.conf", "different")]);
    watcher.wait_reloads(1);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(server.hits().len(), 1);
    assert_eq!(server.hits()[0].content.as_deref(), Some("different"));
}

#[test]
fn restarting_the_watcher_does_not_reload() {
    let Setup {
        scratch,
        config,
        server,
        url,
    } = setup("restart", "one");
    let args = [
        "--dir",
        config.path().to_str().unwrap(),
        "--url",
        &url,
        "--debounce",
        "0",
    ];
    let first = Watcher::start(&scratch.join("first.log"), &args);
    config.update(&[("app.conf", "two")]);
    first.wait_reloads(1);
    let status = first.terminate();
    assert!(status.success(), "SIGTERM should exit cleanly: {status:?}");
    // Changed while no watcher ran: the new one starts from what it finds.
    config.update(&[("app.conf", "three")]);
    let second = Watcher::start(&scratch.join("second.log"), &args);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(second.reloads(), 0);
    assert_eq!(server.hits().len(), 1);
    config.update(&[("app.conf", "four")]);
    second.wait_reloads(1);
    assert_eq!(server.hits().len(), 2);
    assert_eq!(server.hits()[1].content.as_deref(), Some("four"));
}

#[test]
fn resync_catches_a_change_that_made_no_event() {
    let Setup {
        scratch,
        config,
        server,
        url,
    } = setup("resync", "one");
    let watcher = Watcher::of_dir(
        &scratch,
        config.path(),
        &["--url", &url, "--debounce", "0", "--resync", "1s"],
    );
    // Edit the file inside the timestamped directory: inotify on the volume directory
    // sees nothing, but the app would read the new bytes.
    let target = fs::read_link(config.path().join("..data")).unwrap();
    fs::write(config.path().join(target).join("app.conf"), "edited").unwrap();
    watcher.wait_reloads(1);
    assert_eq!(watcher.metric("watch_events_total"), 0.0);
    assert_eq!(server.hits()[0].content.as_deref(), Some("edited"));
}

#[test]
fn a_directory_created_later_then_deleted_and_recreated_is_followed() {
    let scratch = Scratch::new("late-dir");
    let path = scratch.join("volumes/config");
    let server = ok_server(path.join("app.conf"));
    let url = server.url("/-/reload");
    let watcher = Watcher::of_dir(&scratch, &path, &["--url", &url, "--debounce", "200ms"]);
    let config = AtomicDir::create(&path, &[("app.conf", "born")]);
    watcher.wait_reloads(1);
    assert_eq!(server.successes()[0].content.as_deref(), Some("born"));
    fs::remove_dir_all(config.path()).unwrap();
    let config = AtomicDir::create(&path, &[("app.conf", "reborn")]);
    wait_for("the recreated content to be loaded", PATIENCE, || {
        let successes = server.successes();
        (successes.last()?.content.as_deref() == Some("reborn")).then_some(())
    });
    config.update(&[("app.conf", "updated")]);
    let deadline = std::time::Instant::now() + PATIENCE;
    while server
        .successes()
        .last()
        .and_then(|hit| hit.content.clone())
        .as_deref()
        != Some("updated")
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the update of the recreated dir was not loaded; hits {:?}; log:\n{}",
            server.hits(),
            watcher.log_text()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(watcher.metric("watch_errors_total"), 0.0);
}

#[test]
fn a_plain_file_rewritten_unchanged_does_not_reload_but_an_edit_does() {
    let scratch = Scratch::new("plain");
    let dir = scratch.join("plain");
    fs::create_dir(&dir).unwrap();
    fs::write(dir.join("app.conf"), "one").unwrap();
    let server = ok_server(dir.join("app.conf"));
    let url = server.url("/-/reload");
    let watcher = Watcher::of_dir(&scratch, &dir, &["--url", &url, "--debounce", "0"]);
    fs::write(dir.join("app.conf"), "one").unwrap();
    watcher.wait_events(1.0);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(watcher.reloads(), 0, "{}", watcher.log_text());
    fs::write(dir.join("app.conf"), "two").unwrap();
    watcher.wait_reloads(1);
    assert_eq!(server.hits()[0].content.as_deref(), Some("two"));
    let reloaded = &watcher.messages("reloaded")[0];
    assert_eq!(reloaded["dir"], dir.to_str().unwrap());
    assert_eq!(reloaded["hash"].as_str().unwrap().len(), 12);
    let page = watcher.metrics_page();
    assert!(
        page.contains(&format!(
            "config_info{{dir=\"{}\",hash=\"sha256:",
            dir.display()
        )),
        "{page}"
    );
}

#[test]
fn with_several_dirs_the_log_and_metrics_name_the_one_that_changed() {
    let scratch = Scratch::new("multi");
    let first = AtomicDir::create(&scratch.join("first"), &[("a.conf", "1")]);
    let second = AtomicDir::create(&scratch.join("second"), &[("b.conf", "1")]);
    let server = ok_server(second.path().join("b.conf"));
    let url = server.url("/-/reload");
    let dirs = format!("{},{}", first.path().display(), second.path().display());
    let watcher = Watcher::start(
        &scratch.join("watch.log"),
        &["--dir", &dirs, "--url", &url, "--debounce", "0"],
    );
    second.update(&[("b.conf", "2")]);
    watcher.wait_reloads(1);
    let reloaded = &watcher.messages("reloaded")[0];
    assert_eq!(reloaded["dir"], second.path().to_str().unwrap());
    assert_eq!(server.hits()[0].content.as_deref(), Some("2"));
    let page = watcher.metrics_page();
    let infos = page
        .lines()
        .filter(|line| line.starts_with("config_info{"))
        .count();
    assert_eq!(infos, 2, "one config_info per directory:\n{page}");
}

#[test]
fn keys_added_to_or_removed_from_a_config_map_reload_and_are_hashed_like_a_fresh_listing() {
    let Setup {
        scratch,
        config,
        server: _server,
        url,
    } = setup("keys", "same");
    let watcher = Watcher::of_dir(&scratch, config.path(), &["--url", &url, "--debounce", "0"]);
    let fresh = || {
        reload_injector::watch::content::hash_path(config.path())
            .hash
            .to_string()
    };
    // The swap itself changes nothing the app reads: the new key shows only once the kubelet
    // adds its symlink, and the watcher must notice that new name.
    config.update(&[("app.conf", "same"), ("extra.conf", "new")]);
    watcher.wait_reloads(1);
    wait_for("the new key in the loaded hash", PATIENCE, || {
        (shown_hash(&watcher.metrics_page(), config.path()) == fresh()).then_some(())
    });
    let reloads = watcher.reloads();
    config.update(&[("app.conf", "same")]);
    wait_for("a reload without the removed key", PATIENCE, || {
        let shown = shown_hash(&watcher.metrics_page(), config.path());
        (watcher.reloads() > reloads && shown == fresh()).then_some(())
    });
    assert_eq!(watcher.metric("watch_errors_total"), 0.0);
}

/// The `config_info` hash label of `dir` on a metrics page.
fn shown_hash(page: &str, dir: &std::path::Path) -> String {
    let prefix = format!("config_info{{dir=\"{}\",hash=\"", dir.display());
    let line = page
        .lines()
        .find(|l| l.starts_with(&prefix))
        .unwrap_or_else(|| panic!("no {prefix} in:\n{page}"));
    line[prefix.len()..]
        .split('"')
        .next()
        .unwrap_or_default()
        .to_owned()
}

#[test]
fn secret_dirs_show_a_per_process_keyed_hash_that_reveals_nothing() {
    let scratch = Scratch::new("secret-dir");
    let secret = AtomicDir::create(&scratch.join("secret"), &[("password", "hunter2")]);
    let config = AtomicDir::create(&scratch.join("config"), &[("app.conf", "a")]);
    let server = ok_server(config.path().join("app.conf"));
    let url = server.url("/-/reload");
    let (secret_dir, config_dir) = (
        secret.path().to_str().unwrap(),
        config.path().to_str().unwrap(),
    );
    let args = [
        "--secret-dir",
        secret_dir,
        "--dir",
        config_dir,
        "--url",
        &url,
    ];
    let first = Watcher::start(&scratch.join("first.log"), &args);
    let second = Watcher::start(&scratch.join("second.log"), &args);
    let (page1, page2) = (first.metrics_page(), second.metrics_page());
    let (secret1, secret2) = (
        shown_hash(&page1, secret.path()),
        shown_hash(&page2, secret.path()),
    );
    assert!(secret1.starts_with("private:"), "{secret1}");
    assert_ne!(
        secret1, secret2,
        "the same Secret content must not give a comparable hash across processes"
    );
    let (config1, config2) = (
        shown_hash(&page1, config.path()),
        shown_hash(&page2, config.path()),
    );
    assert!(config1.starts_with("sha256:"), "{config1}");
    assert_eq!(
        config1, config2,
        "ConfigMap content stays comparable across pods"
    );
    // A Secret change is still detected and delivered.
    secret.update(&[("password", "correct horse")]);
    first.wait_reloads(1);
    assert!(shown_hash(&first.metrics_page(), secret.path()).starts_with("private:"));
}

#[test]
fn text_logs_written_to_a_pipe_carry_no_colour_codes() {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};

    let scratch = Scratch::new("plain-logs");
    let config = AtomicDir::create(&scratch.join("config"), &[("app.conf", "one")]);
    let mut child = Command::new(watch_support::watcher::BINARY)
        .args([
            "watch",
            "--log-format",
            "text",
            "--process",
            "nobody-here",
            "--dir",
        ])
        .arg(config.path())
        .env_remove("NO_COLOR")
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the watcher");
    let mut first = String::new();
    BufReader::new(child.stderr.take().expect("piped stderr"))
        .read_line(&mut first)
        .expect("read the first log line");
    let _ = child.kill();
    let _ = child.wait();
    assert!(first.contains("watching"), "{first:?}");
    assert!(!first.contains('\u{1b}'), "escape codes in {first:?}");
}

#[test]
fn a_quiet_resync_gives_back_code_pages_and_the_next_change_still_reloads() {
    const DROPPED: &str = "dropped the mapped pages of the executable";
    let Setup {
        scratch,
        config,
        server,
        url,
    } = setup("quiet", "one");
    let watcher = Watcher::of_dir(
        &scratch,
        config.path(),
        &[
            "--url",
            &url,
            "--debounce",
            "0",
            "--resync",
            "1s",
            "--log-level",
            "debug",
        ],
    );
    assert_eq!(watcher.messages(DROPPED).len(), 1, "once after start-up");
    config.update(&[("app.conf", "two")]);
    watcher.wait_reloads(1);
    let dropped = watcher.messages(DROPPED).len();
    let mapped_after_reload = rss_file_kb(watcher.launcher_pid());
    wait_for("a quiet resync", PATIENCE, || {
        (watcher.messages(DROPPED).len() > dropped).then_some(())
    });
    let mapped_after_resync = rss_file_kb(watcher.launcher_pid());
    assert!(
        mapped_after_resync < mapped_after_reload,
        "file-backed RSS {mapped_after_reload} kB after the reload, \
         {mapped_after_resync} kB after the quiet resync"
    );
    assert!(watcher.messages(DROPPED).last().unwrap()["bytes"].as_u64() > Some(0));
    config.update(&[("app.conf", "three")]);
    watcher.wait_reloads(2);
    assert_eq!(server.hits().len(), 2);
    assert_eq!(server.hits()[1].content.as_deref(), Some("three"));
}

/// The file-backed part of a process's resident memory, in kB.
fn rss_file_kb(pid: u32) -> u64 {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).expect("read status");
    status
        .lines()
        .find_map(|line| line.strip_prefix("RssFile:"))
        .and_then(|rest| rest.split_whitespace().next()?.parse().ok())
        .expect("RssFile in status")
}
