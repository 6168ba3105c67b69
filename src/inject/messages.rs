//! Warning and denial texts: every warning starts with `reload-injector:`, fits in 120
//! characters, carries no control characters and never a config value.

use std::collections::BTreeSet;
use std::fmt::Write as _;

/// Every warning starts with this.
pub const WARNING_PREFIX: &str = "reload-injector: ";
/// Longest warning, in characters.
pub const MAX_WARNING_CHARS: usize = 120;

/// Collects warnings in order, without duplicates.
#[derive(Debug, Default)]
pub struct Warnings {
    seen: BTreeSet<String>,
    list: Vec<String>,
}

impl Warnings {
    /// Adds `text` (without the prefix), cleaned and shortened to fit.
    pub fn push(&mut self, text: impl AsRef<str>) {
        let line = fit(&format!("{WARNING_PREFIX}{}", clean(text.as_ref())));
        if self.seen.insert(line.clone()) {
            self.list.push(line);
        }
    }

    /// The warnings, in the order given.
    pub fn into_vec(self) -> Vec<String> {
        self.list
    }
}

/// A name quoted for a message: control characters replaced, long names shortened.
pub fn quoted(name: &str) -> String {
    const MAX: usize = 48;
    let cleaned = clean(name);
    if cleaned.chars().count() <= MAX {
        format!("\"{cleaned}\"")
    } else {
        let head: String = cleaned.chars().take(MAX - 1).collect();
        format!("\"{head}…\"")
    }
}

/// Replaces control characters (newlines, escapes) with `?`.
pub fn clean(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_control() { '?' } else { c })
        .collect()
}

/// Shortens a line to [`MAX_WARNING_CHARS`], ending it with `…` when cut.
fn fit(line: &str) -> String {
    if line.chars().count() <= MAX_WARNING_CHARS {
        return line.to_owned();
    }
    let mut out: String = line.chars().take(MAX_WARNING_CHARS - 1).collect();
    out.push('…');
    out
}

/// Joins names as `"a", "b" and "c"`.
pub fn quoted_list<'a>(names: impl IntoIterator<Item = &'a str>) -> String {
    let names: Vec<String> = names.into_iter().map(quoted).collect();
    let mut out = String::new();
    for (i, name) in names.iter().enumerate() {
        if i > 0 {
            out.push_str(if i + 1 == names.len() { " and " } else { ", " });
        }
        let _ = write!(out, "{name}");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warnings_are_prefixed_cleaned_short_and_unique() {
        let mut w = Warnings::default();
        w.push("container \"a\nb\" reads x");
        w.push("container \"a\nb\" reads x");
        w.push("y".repeat(300));
        let list = w.into_vec();
        assert_eq!(list.len(), 2);
        assert_eq!(list[0], "reload-injector: container \"a?b\" reads x");
        assert!(
            list.iter()
                .all(|l| l.starts_with(WARNING_PREFIX) && l.chars().count() <= MAX_WARNING_CHARS)
        );
        assert!(list[1].ends_with('…'));
    }

    #[test]
    fn long_names_are_shortened_on_char_boundaries() {
        let name = "é".repeat(100);
        let q = quoted(&name);
        assert_eq!(q.chars().count(), 50);
        assert!(q.ends_with("…\""));
    }

    #[test]
    fn lists_read_naturally() {
        assert_eq!(quoted_list(["a"]), "\"a\"");
        assert_eq!(quoted_list(["a", "b"]), "\"a\" and \"b\"");
        assert_eq!(quoted_list(["a", "b", "c"]), "\"a\", \"b\" and \"c\"");
    }
}
