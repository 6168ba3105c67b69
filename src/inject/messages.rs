//! Warning and denial texts: every warning starts with `reload-injector:`, fits in 120
//! characters, carries no control characters and never a config value.

use std::borrow::Cow;
use std::fmt::Write as _;

/// Every warning starts with this.
pub const WARNING_PREFIX: &str = "reload-injector: ";
/// Longest warning, in characters.
pub const MAX_WARNING_CHARS: usize = 120;

/// Collects warnings in order, without duplicates.
#[derive(Debug, Default)]
pub struct Warnings {
    list: Vec<String>,
}

impl Warnings {
    /// Adds `text` (without the prefix), cleaned and shortened to fit.
    pub fn push(&mut self, text: impl AsRef<str>) {
        let text = text.as_ref();
        let mut line = String::with_capacity(WARNING_PREFIX.len() + text.len());
        line.push_str(WARNING_PREFIX);
        line.push_str(&clean(text));
        fit(&mut line);
        self.list.push(line);
    }

    /// The warnings in the order given, each only the first time it was given. Duplicates
    /// are found once, by sorting: a Pod with 20,000 containers gives 20,000 warnings.
    pub fn into_vec(mut self) -> Vec<String> {
        let list = &self.list;
        let mut order: Vec<usize> = (0..list.len()).collect();
        order.sort_by(|&a, &b| list[a].cmp(&list[b]).then(a.cmp(&b)));
        let mut keep = vec![true; list.len()];
        for pair in order.windows(2) {
            if list[pair[0]] == list[pair[1]] {
                keep[pair[1]] = false;
            }
        }
        let mut index = 0;
        self.list.retain(|_| {
            index += 1;
            keep[index - 1]
        });
        self.list
    }
}

/// A name quoted for a message: control characters replaced, long names shortened.
pub fn quoted(name: &str) -> String {
    const MAX: usize = 48;
    let cleaned = clean(name);
    // Fewer bytes than the limit means fewer characters too.
    if cleaned.len() <= MAX || cleaned.chars().count() <= MAX {
        format!("\"{cleaned}\"")
    } else {
        let head: String = cleaned.chars().take(MAX - 1).collect();
        format!("\"{head}…\"")
    }
}

/// Replaces control characters (newlines, escapes) with `?`.
pub fn clean(text: &str) -> Cow<'_, str> {
    // Printable ASCII, the usual case, is checked byte by byte; anything else char by char.
    let printable_ascii = text.bytes().all(|b| (b' '..=b'~').contains(&b));
    if printable_ascii || !text.chars().any(char::is_control) {
        return Cow::Borrowed(text);
    }
    Cow::Owned(
        text.chars()
            .map(|c| if c.is_control() { '?' } else { c })
            .collect(),
    )
}

/// Shortens a line to [`MAX_WARNING_CHARS`], ending it with `…` when cut.
fn fit(line: &mut String) {
    if line.len() <= MAX_WARNING_CHARS || line.chars().count() <= MAX_WARNING_CHARS {
        return;
    }
    let cut = line
        .char_indices()
        .nth(MAX_WARNING_CHARS - 1)
        .map_or(line.len(), |(at, _)| at);
    line.truncate(cut);
    line.push('…');
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
    fn each_warning_is_kept_once_where_it_was_first_given() {
        let mut w = Warnings::default();
        for text in ["b", "a", "b", "c", "a", "a", "d"] {
            w.push(text);
        }
        let list = w.into_vec();
        let texts: Vec<&str> = list
            .iter()
            .map(|l| l.strip_prefix(WARNING_PREFIX).unwrap())
            .collect();
        assert_eq!(texts, ["b", "a", "c", "d"]);
        assert!(Warnings::default().into_vec().is_empty());
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
