use std::os::unix::fs::symlink;

use super::*;
use crate::scratch::Scratch;

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
    let scratch = Scratch::new("content-missing");
    let hashed = hash_path(&scratch.0.join("nope"));
    assert_eq!(hashed.hash, ContentHash::Absent);
    assert_eq!(hashed.hash.short(), "absent");
}

#[test]
fn same_content_through_different_timestamped_dirs_hashes_equal() {
    let a = Scratch::new("content-a");
    let b = Scratch::new("content-b");
    kubelet_layout(&a.0, "..2026_01_01_00_00_00.1", &[("k", "v"), ("x", "y")]);
    kubelet_layout(&b.0, "..2026_02_02_00_00_00.2", &[("x", "y"), ("k", "v")]);
    assert_eq!(hash_path(&a.0).hash, hash_path(&b.0).hash);
}

#[test]
fn a_changed_value_behind_data_changes_the_hash() {
    let scratch = Scratch::new("content-change");
    kubelet_layout(&scratch.0, "..ts1", &[("k", "one")]);
    let before = hash_path(&scratch.0).hash;
    kubelet_layout(&scratch.0, "..ts2", &[("k", "two")]);
    let after = hash_path(&scratch.0).hash;
    assert_ne!(before, after);
    assert!(matches!(after, ContentHash::Present(_)));
}

#[test]
fn bookkeeping_entries_are_ignored() {
    let scratch = Scratch::new("content-bookkeeping");
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

#[test]
fn names_kept_from_the_last_listing_hash_a_kubelet_swap_like_a_fresh_listing() {
    let scratch = Scratch::new("listed-swap");
    kubelet_layout(&scratch.0, "..ts1", &[("a.conf", "one"), ("b.conf", "x")]);
    let mut listed = None;
    let first = hash_path_listed(&scratch.0, &mut listed);
    assert_eq!(first.hash, hash_path(&scratch.0).hash);
    assert_eq!(
        listed,
        Some(vec![OsString::from("a.conf"), OsString::from("b.conf")]),
        "the visible names are kept, sorted, without the kubelet's `..` names"
    );
    kubelet_layout(&scratch.0, "..ts2", &[("a.conf", "two"), ("b.conf", "x")]);
    let kept = listed.clone();
    let second = hash_path_listed(&scratch.0, &mut listed);
    assert_ne!(second.hash, first.hash);
    assert_eq!(second.hash, hash_path(&scratch.0).hash);
    assert_eq!(listed, kept, "the names were reused, not listed again");
}

#[test]
fn a_kept_name_that_is_gone_makes_the_hash_list_again() {
    let scratch = Scratch::new("listed-gone");
    fs::write(scratch.0.join("a.conf"), "one").unwrap();
    fs::write(scratch.0.join("b.conf"), "two").unwrap();
    let mut listed = None;
    hash_path_listed(&scratch.0, &mut listed);
    fs::remove_file(scratch.0.join("b.conf")).unwrap();
    let hashed = hash_path_listed(&scratch.0, &mut listed);
    assert_eq!(hashed.hash, hash_path(&scratch.0).hash);
    assert_eq!(listed, Some(vec![OsString::from("a.conf")]));
}

#[test]
fn a_kept_dangling_symlink_is_still_an_entry() {
    let scratch = Scratch::new("listed-dangling");
    fs::write(scratch.0.join("a.conf"), "one").unwrap();
    symlink("nowhere", scratch.0.join("b.conf")).unwrap();
    let mut listed = None;
    let first = hash_path_listed(&scratch.0, &mut listed);
    let kept = listed.clone();
    let second = hash_path_listed(&scratch.0, &mut listed);
    assert_eq!(first.hash, second.hash);
    assert_eq!(second.hash, hash_path(&scratch.0).hash);
    assert_eq!(listed, kept);
}

#[test]
fn a_directory_that_went_away_or_became_a_file_is_hashed_afresh() {
    let scratch = Scratch::new("listed-replaced");
    let dir = scratch.0.join("config");
    fs::create_dir(&dir).unwrap();
    fs::write(dir.join("a.conf"), "one").unwrap();
    let mut listed = None;
    hash_path_listed(&dir, &mut listed);
    fs::remove_dir_all(&dir).unwrap();
    assert_eq!(
        hash_path_listed(&dir, &mut listed).hash,
        ContentHash::Absent
    );
    assert_eq!(listed, None);
    fs::create_dir(&dir).unwrap();
    fs::write(dir.join("a.conf"), "one").unwrap();
    hash_path_listed(&dir, &mut listed);
    fs::remove_dir_all(&dir).unwrap();
    fs::write(&dir, "a file now").unwrap();
    let hashed = hash_path_listed(&dir, &mut listed);
    assert_eq!(hashed.hash, hash_path(&dir).hash);
    assert!(hashed.unreadable.is_empty(), "{:?}", hashed.unreadable);
    assert_eq!(listed, None, "a file has no names to keep");
}
