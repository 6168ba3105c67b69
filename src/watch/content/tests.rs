use std::os::unix::fs::symlink;
use std::path::PathBuf;

use super::*;

/// A scratch directory removed on drop (unit tests avoid extra dev-dependencies).
struct Scratch(PathBuf);

impl Scratch {
    fn new(tag: &str) -> Scratch {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        let path =
            std::env::temp_dir().join(format!("ri-content-{tag}-{}-{nanos}", std::process::id()));
        fs::create_dir_all(&path).unwrap();
        Scratch(path)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// Lays out `dir` like the kubelet does, with `..data -> ts` and `key -> ..data/key`.
fn kubelet_layout(dir: &Path, ts: &str, files: &[(&str, &str)]) {
    fs::create_dir_all(dir.join(ts)).unwrap();
    for (key, value) in files {
        fs::write(dir.join(ts).join(key), value).unwrap();
    }
    let _ = fs::remove_file(dir.join("..data"));
    symlink(ts, dir.join("..data")).unwrap();
    for (key, _) in files {
        let _ = fs::remove_file(dir.join(key));
        symlink(format!("..data/{key}"), dir.join(key)).unwrap();
    }
}

#[test]
fn missing_path_hashes_as_absent() {
    let scratch = Scratch::new("missing");
    let hashed = hash_path(&scratch.0.join("nope"));
    assert_eq!(hashed.hash, ContentHash::Absent);
    assert_eq!(hashed.hash.short(), "absent");
}

#[test]
fn same_content_through_different_timestamped_dirs_hashes_equal() {
    let a = Scratch::new("a");
    let b = Scratch::new("b");
    kubelet_layout(&a.0, "..2026_01_01_00_00_00.1", &[("k", "v"), ("x", "y")]);
    kubelet_layout(&b.0, "..2026_02_02_00_00_00.2", &[("x", "y"), ("k", "v")]);
    assert_eq!(hash_path(&a.0).hash, hash_path(&b.0).hash);
}

#[test]
fn a_changed_value_behind_data_changes_the_hash() {
    let scratch = Scratch::new("change");
    kubelet_layout(&scratch.0, "..ts1", &[("k", "one")]);
    let before = hash_path(&scratch.0).hash;
    kubelet_layout(&scratch.0, "..ts2", &[("k", "two")]);
    let after = hash_path(&scratch.0).hash;
    assert_ne!(before, after);
    assert!(matches!(after, ContentHash::Present(_)));
}

#[test]
fn bookkeeping_entries_are_ignored() {
    let scratch = Scratch::new("bookkeeping");
    kubelet_layout(&scratch.0, "..ts1", &[("k", "v")]);
    let before = hash_path(&scratch.0).hash;
    fs::create_dir(scratch.0.join("..ts_new")).unwrap();
    fs::write(scratch.0.join("..ts_new/k"), "other").unwrap();
    symlink("..ts_new", scratch.0.join("..data_tmp")).unwrap();
    assert_eq!(hash_path(&scratch.0).hash, before);
}

#[test]
fn names_and_boundaries_are_part_of_the_digest() {
    let a = Scratch::new("names-a");
    let b = Scratch::new("names-b");
    fs::write(a.0.join("ab"), "c").unwrap();
    fs::write(b.0.join("a"), "bc").unwrap();
    assert_ne!(hash_path(&a.0).hash, hash_path(&b.0).hash);
}

#[test]
fn dangling_symlink_hashes_as_an_absent_entry() {
    let scratch = Scratch::new("dangling");
    symlink("..data/k", scratch.0.join("k")).unwrap();
    let dangling = hash_path(&scratch.0);
    assert!(dangling.unreadable.is_empty());
    kubelet_layout(&scratch.0, "..ts1", &[("k", "")]);
    assert_ne!(hash_path(&scratch.0).hash, dangling.hash);
}

#[test]
fn nested_directories_and_single_files_are_hashed() {
    let scratch = Scratch::new("nested");
    fs::create_dir_all(scratch.0.join("sub")).unwrap();
    fs::write(scratch.0.join("sub/f"), "1").unwrap();
    let before = hash_path(&scratch.0).hash;
    fs::write(scratch.0.join("sub/f"), "2").unwrap();
    assert_ne!(hash_path(&scratch.0).hash, before);
    let file = hash_path(&scratch.0.join("sub/f"));
    assert!(matches!(file.hash, ContentHash::Present(_)));
    assert!(file.hash.to_string().starts_with("sha256:"));
    assert_eq!(file.hash.short().len(), 12);
}

#[test]
fn symlink_loops_terminate() {
    let scratch = Scratch::new("loop");
    symlink(".", scratch.0.join("self")).unwrap();
    let hashed = hash_path(&scratch.0);
    assert!(matches!(hashed.hash, ContentHash::Present(_)));
}
