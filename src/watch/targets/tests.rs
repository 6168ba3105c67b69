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

#[test]
fn a_named_process_means_the_master_not_the_workers() {
    assert_eq!(pids(&choose(&pod(), 30, Some("nginx"))), [7]);
}

#[test]
fn without_a_name_each_other_containers_first_process() {
    assert_eq!(pids(&choose(&pod(), 30, None)), [7, 20]);
}

#[test]
fn never_pid_1_nor_self() {
    let mut pod = pod();
    pod[0].comm = "nginx".into();
    assert_eq!(pids(&choose(&pod, 30, Some("nginx"))), [7]);
    assert_eq!(
        pids(&choose(&pod, 30, Some("reload-injector"))),
        Vec::<i32>::new()
    );
}

#[test]
fn argv0_basename_matches_too() {
    let processes = vec![
        process(5, 0, "bash", Some("my-server")),
        process(6, 5, "bash", Some("my-server")),
    ];
    assert_eq!(pids(&choose(&processes, 99, Some("my-server"))), [5]);
}

#[test]
fn long_names_match_the_truncated_comm() {
    let processes = vec![process(5, 0, "a-very-long-pro", Some("python3"))];
    assert_eq!(
        pids(&choose(&processes, 99, Some("a-very-long-process-name"))),
        [5]
    );
    // The kernel kept only 15 bytes, so any name with the same start matches by comm.
    assert!(!choose(&processes, 99, Some("a-very-long-pro-other")).is_empty());
    assert!(choose(&processes, 99, Some("a-very")).is_empty());
}

#[test]
fn truncation_respects_utf8() {
    assert_eq!(truncate_to_boundary("ééééééééé", 15), "ééééééé");
}

#[test]
fn two_independent_masters_are_both_chosen() {
    let processes = vec![
        process(1, 0, "pause", None),
        process(5, 0, "postgres", None),
        process(6, 5, "postgres", None),
        process(10, 0, "sh", None),
        process(11, 10, "postgres", None),
    ];
    assert_eq!(pids(&choose(&processes, 99, Some("postgres"))), [5, 11]);
}

#[test]
fn kernel_threads_and_zombies_are_skipped() {
    let mut kthread = process(2, 0, "kthreadd", None);
    kthread.kernel_thread = true;
    let mut zombie = process(40, 0, "app", None);
    zombie.zombie = true;
    let processes = vec![process(1, 0, "init", None), kthread, zombie];
    assert!(choose(&processes, 99, None).is_empty());
    assert!(choose(&processes, 99, Some("app")).is_empty());
}

#[test]
fn nothing_matching_is_an_empty_choice() {
    assert!(choose(&pod(), 30, Some("haproxy")).is_empty());
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
