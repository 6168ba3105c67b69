//! The repository's Dockerfile read as a builder reads it: comments dropped, continuation
//! lines joined, one string per instruction. Shared by `tests/packaging/node/dockerfile.rs` and
//! `tests/packaging/node/node_images.rs`, so both check the same reading of it.
#![allow(dead_code)]

use std::path::Path;

/// Every instruction of the Dockerfile, in order.
pub fn instructions() -> Vec<String> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("Dockerfile");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("failed to read {}: {e}", path.display()));
    let mut out = Vec::new();
    let mut current = String::new();
    for line in text.lines().map(str::trim) {
        if line.starts_with('#') || (line.is_empty() && current.is_empty()) {
            continue;
        }
        match line.strip_suffix('\\') {
            Some(head) => current.push_str(head),
            None => {
                current.push_str(line);
                out.push(std::mem::take(&mut current));
            }
        }
    }
    out
}

/// The instructions of the runtime stage: from the last `FROM` on.
pub fn runtime_stage() -> Vec<String> {
    let all = instructions();
    let start = all
        .iter()
        .rposition(|l| l.starts_with("FROM "))
        .unwrap_or(0);
    all[start..].to_vec()
}
