//! The reload catalogue as the docs show it is the catalogue in the code: the table between
//! `<!-- catalogue:start -->` and `<!-- catalogue:end -->` is rendered from it
//! (`reload_injector::inject::catalogue::markdown`). `docs/catalogue.md` must hold it; any other
//! file listed here holds it too when it has the markers (the README, once it embeds the table).
//!
//! Rewrite the blocks on purpose with `UPDATE_DOCS=1 cargo test --test catalogue_docs`, then read
//! the diff.

use std::path::Path;

use reload_injector::inject::catalogue;

const START: &str = "<!-- catalogue:start -->";
const END: &str = "<!-- catalogue:end -->";

/// Files that show the catalogue, and whether each must.
const FILES: [(&str, bool); 2] = [("docs/catalogue.md", true), ("README.md", false)];

/// The text between the markers, and where it lies; `None` without markers.
fn block(text: &str) -> Option<std::ops::Range<usize>> {
    let start = text.find(START)? + START.len();
    let end = start + text[start..].find(END)?;
    Some(start..end)
}

#[test]
fn the_docs_show_the_catalogue_of_the_code() {
    let want = format!("\n{}", catalogue::markdown());
    let update = std::env::var_os("UPDATE_DOCS").is_some();
    let mut failures = Vec::new();
    for (file, required) in FILES {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(file);
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {file}: {e}"));
        let Some(range) = block(&text) else {
            if required {
                failures.push(format!("{file}: no {START} … {END} block"));
            }
            continue;
        };
        if text[range.clone()] == want {
            continue;
        }
        if update {
            let mut rewritten = text.clone();
            rewritten.replace_range(range, &want);
            std::fs::write(&path, rewritten).unwrap_or_else(|e| panic!("write {file}: {e}"));
        } else {
            failures.push(format!(
                "{file}: the catalogue differs from the code's; run UPDATE_DOCS=1 cargo test --test catalogue_docs\n--- want\n{want}--- found\n{}",
                &text[range]
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn the_block_is_found_between_its_markers_only() {
    let text = format!("intro\n{START}\n| a |\n{END}\nafter");
    assert_eq!(&text[block(&text).unwrap()], "\n| a |\n");
    assert_eq!(block("no markers here"), None);
    assert_eq!(block(&format!("{START} but no end")), None);
}
