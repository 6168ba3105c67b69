use super::*;

fn process(pid: i32, ppid: i32, comm: &str, argv0: Option<&str>) -> ProcessInfo {
    ProcessInfo {
        pid,
        ppid,
        start_time: 1000 + pid as u64,
        comm: comm.to_owned(),
        argv0: argv0.map(str::to_owned),
        kernel_thread: false,
        zombie: false,
    }
}

fn pids(chosen: &[ProcessInfo]) -> Vec<i32> {
    chosen.iter().map(|p| p.pid).collect()
}

/// A pod: pause (1), nginx master (7) + 2 workers, a sidecar app (20) with a child, and
/// the watcher (30).
fn pod() -> Vec<ProcessInfo> {
    vec![
        process(1, 0, "pause", Some("pause")),
        process(7, 0, "nginx", Some("nginx: master process nginx")),
        process(8, 7, "nginx", Some("nginx: worker process")),
        process(9, 7, "nginx", Some("nginx: worker process")),
        process(20, 0, "python3", Some("python3")),
        process(21, 20, "sh", Some("sh")),
        process(30, 0, "reload-injecto", Some("reload-injector")),
    ]
}

/// One row per former test (named in the row): the processes, the watcher's PID, `--process`
/// and the PIDs chosen.
#[test]
fn the_choice() {
    const WATCHER: &str = "reload-injector";
    const LONG: &str = "a-very-long-process-name";
    let mut pid1_nginx = pod();
    pid1_nginx[0].comm = "nginx".into();
    let argv0 = vec![
        process(5, 0, "bash", Some("my-server")),
        process(6, 5, "bash", Some("my-server")),
    ];
    // The kernel kept only 15 bytes, so any name with the same start matches by comm.
    let long = vec![process(5, 0, "a-very-long-pro", Some("python3"))];
    let two_masters = vec![
        process(1, 0, "pause", None),
        process(5, 0, "postgres", None),
        process(6, 5, "postgres", None),
        process(10, 0, "sh", None),
        process(11, 10, "postgres", None),
    ];
    let mut kthread = process(2, 0, "kthreadd", None);
    kthread.kernel_thread = true;
    let mut zombie = process(40, 0, "app", None);
    zombie.zombie = true;
    let skipped = vec![process(1, 0, "init", None), kthread, zombie];
    let none: &[i32] = &[];
    for (case, processes, own, name, chosen) in [
        ("master, not workers", &pod(), 30, Some("nginx"), &[7][..]),
        ("each container's first", &pod(), 30, None, &[7, 20]),
        ("never PID 1", &pid1_nginx, 30, Some("nginx"), &[7]),
        ("never self", &pid1_nginx, 30, Some(WATCHER), none),
        ("argv0's basename", &argv0, 99, Some("my-server"), &[5]),
        ("truncated comm", &long, 99, Some(LONG), &[5]),
        ("same start", &long, 99, Some("a-very-long-pro-other"), &[5]),
        ("shorter", &long, 99, Some("a-very"), none),
        ("two masters", &two_masters, 99, Some("postgres"), &[5, 11]),
        ("kernel thread, zombie", &skipped, 99, None, none),
        ("zombie by name", &skipped, 99, Some("app"), none),
        ("nothing matching", &pod(), 30, Some("haproxy"), none),
    ] {
        assert_eq!(pids(&choose(processes, own, name)), chosen, "{case}");
    }
}

#[test]
fn truncation_respects_utf8() {
    assert_eq!(truncate_to_boundary("ééééééééé", 15), "ééééééé");
}

#[test]
fn a_chosen_process_with_its_name_unchanged_may_be_signalled_early() {
    let pod = pod();
    for name in [Some("nginx"), None] {
        for chosen in choose(&pod, 30, name) {
            assert!(may_signal_early(&chosen, &chosen.comm), "{chosen:?}");
        }
    }
}

#[test]
fn a_process_that_exec_d_another_program_waits_for_the_scan() {
    let master = process(7, 0, "nginx", Some("nginx: master process nginx"));
    assert!(!may_signal_early(&master, "sh"));
    assert!(!may_signal_early(&master, ""));
    let mut kthread = master.clone();
    kthread.kernel_thread = true;
    assert!(
        !may_signal_early(&kthread, "nginx"),
        "never a kernel thread"
    );
}
