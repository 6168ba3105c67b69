use super::*;

/// `/proc/PID/smaps` of an idle watcher (the static build), fields cut to the ones that matter.
const STATIC_WATCHER: &str = include_str!("../../../tests/fixtures/watch/smaps-static.txt");

fn exe() -> MappedFile {
    MappedFile {
        path: "/usr/local/bin/reload-injector".into(),
        inode: 1234567,
    }
}

#[test]
fn code_and_read_only_data_of_the_executable_qualify() {
    let ranges = droppable(STATIC_WATCHER, &exe());
    assert_eq!(
        ranges,
        [
            0x7f6c_8820_0000..0x7f6c_8854_5000, // read-only data
            0x7f6c_8854_6000..0x7f6c_88f5_3000, // code
        ]
    );
}

#[test]
fn relocated_data_writable_data_and_anonymous_memory_never_qualify() {
    let ranges = droppable(STATIC_WATCHER, &exe());
    for kept in [
        0x7f6c_88f5_3000, // read-only after relocation, but holds 512 kB of written pages
        0x7f6c_88fd_5000, // .data
        0x2096_5800_0000, // the allocator's arena
        0x7f6c_8915_3000, // [vdso]
    ] {
        assert!(ranges.iter().all(|r| !r.contains(&kept)), "{kept:#x}");
    }
}

#[test]
fn another_file_or_a_replaced_inode_does_not_qualify() {
    let other_path = MappedFile {
        path: "/usr/local/bin/reload-injector-old".into(),
        ..exe()
    };
    let other_inode = MappedFile { inode: 7, ..exe() };
    assert!(droppable(STATIC_WATCHER, &other_path).is_empty());
    assert!(droppable(STATIC_WATCHER, &other_inode).is_empty());
}

#[test]
fn paths_with_spaces_are_read_whole() {
    let smaps = "1000-2000 r-xp 00000000 fe:00 42      /opt/my tools/reload-injector\n\
                 Anonymous:             0 kB\n";
    let file = MappedFile {
        path: "/opt/my tools/reload-injector".into(),
        inode: 42,
    };
    assert_eq!(droppable(smaps, &file), vec![0x1000..0x2000]);
}

#[test]
fn a_mapping_without_an_anonymous_line_is_left_alone() {
    let smaps = "1000-2000 r-xp 00000000 fe:00 42 /bin/x\n3000-4000 r--p 00000000 fe:00 42 /bin/x\n\
                 Anonymous:             0 kB\n";
    let file = MappedFile {
        path: "/bin/x".into(),
        inode: 42,
    };
    assert_eq!(droppable(smaps, &file), vec![0x3000..0x4000]);
}

#[test]
fn dropping_our_own_code_pages_lowers_rss_and_the_code_still_runs() {
    let rss = || -> u64 {
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        let line = status.lines().find(|l| l.starts_with("RssFile:")).unwrap();
        line.split_ascii_whitespace()
            .nth(1)
            .unwrap()
            .parse()
            .unwrap()
    };
    // Code and constants of the executable (SHA-256's round constants among them) give the
    // same results after their pages were dropped: they are read back from the file.
    let digest = || {
        use sha2::Digest;
        hex::encode(sha2::Sha256::digest(b"reload-injector"))
    };
    let expected = digest();
    let before = rss();
    let code = CodePages::of_this_process().expect("find the executable");
    let advised = code.drop_clean().expect("drop pages");
    let after = rss();
    assert!(advised > 0);
    assert!(after < before, "RssFile {before} kB -> {after} kB");
    assert_eq!(digest(), expected);
}
