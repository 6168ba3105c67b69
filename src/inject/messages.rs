//! Warning and denial texts: every warning starts with `reload-injector:`, fits in 120
//! characters, carries no control characters and never a config value.

use std::borrow::Cow;
use std::fmt::Write as _;

/// Every warning starts with this.
pub const WARNING_PREFIX: &str = "reload-injector: ";
/// Longest warning, in characters.
pub const MAX_WARNING_CHARS: usize = 120;
/// Most characters of warnings kube-apiserver passes on to the client of one request. It
/// drops every warning after the one that crosses this, without saying so.
pub const API_SERVER_WARNING_CHARS: usize = 4 * 1024;

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

/// The first of `warnings` that fit in `budget` characters in all, and when some do not fit,
/// a last line saying how many more there were and where to see them. The list a Pod with
/// 20,000 containers gives is cut to what a person at the terminal would be shown anyway.
pub fn warnings_within(mut warnings: Vec<String>, budget: usize) -> Vec<String> {
    let chars: Vec<usize> = warnings.iter().map(|w| w.chars().count()).collect();
    if chars.iter().sum::<usize>() <= budget {
        return warnings;
    }
    // Room for the last line with the most warnings it could count.
    let room = budget.saturating_sub(not_shown(warnings.len()).chars().count());
    let mut used = 0;
    let kept = chars
        .iter()
        .take_while(|&&n| {
            used += n;
            used <= room
        })
        .count();
    let dropped = warnings.len() - kept;
    warnings.truncate(kept);
    warnings.push(not_shown(dropped));
    warnings
}

fn not_shown(count: usize) -> String {
    format!(
        "{WARNING_PREFIX}{count} more warnings not shown (the API server passes on 4 KiB); \
         `reload-injector inject -f` lists all"
    )
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

    fn chars(list: &[String]) -> usize {
        list.iter().map(|w| w.chars().count()).sum()
    }

    #[test]
    fn warnings_that_fit_the_api_server_are_all_kept() {
        let list: Vec<String> = (0..34).map(|i| format!("{i:0>120}")).collect();
        assert_eq!(chars(&list), 4080);
        assert_eq!(
            warnings_within(list.clone(), API_SERVER_WARNING_CHARS),
            list
        );
        assert!(warnings_within(Vec::new(), API_SERVER_WARNING_CHARS).is_empty());
    }

    #[test]
    fn warnings_past_the_api_server_limit_end_in_a_count_of_the_rest() {
        let list: Vec<String> = (0..40_000).map(|i| format!("{i:é>120}")).collect();
        let cut = warnings_within(list.clone(), API_SERVER_WARNING_CHARS);
        assert!(chars(&cut) <= API_SERVER_WARNING_CHARS, "{}", chars(&cut));
        let (last, kept) = cut.split_last().unwrap();
        assert_eq!(kept, &list[..kept.len()], "the first ones, in order");
        assert_eq!(kept.len(), 33, "as many as leave room for the count");
        assert_eq!(
            last,
            &format!(
                "reload-injector: {} more warnings not shown (the API server passes on 4 KiB); \
                 `reload-injector inject -f` lists all",
                40_000 - 33
            )
        );
        assert!(last.chars().count() <= MAX_WARNING_CHARS, "{last}");
        // One character over is enough to be cut.
        let mut over: Vec<String> = (0..34).map(|i| format!("{i:0>120}")).collect();
        over.push("x".repeat(17));
        let cut = warnings_within(over, API_SERVER_WARNING_CHARS);
        assert_eq!(cut.len(), 34);
        assert!(cut[33].starts_with("reload-injector: 2 more warnings not shown"));
    }

    #[test]
    fn a_budget_too_small_for_any_warning_keeps_the_count_alone() {
        let cut = warnings_within(vec!["a".repeat(50), "b".repeat(50)], 60);
        assert_eq!(cut.len(), 1);
        assert!(cut[0].contains(" 2 more warnings"), "{cut:?}");
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
