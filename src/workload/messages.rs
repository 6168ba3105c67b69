//! Warning and denial texts: every warning starts with `reload-injector:`, carries no control
//! characters and never a config value, and at admission fits what the API server passes on
//! whole (256 characters each, 4 Ki in all); offline, nothing is cut.

use std::borrow::Cow;
use std::fmt::{self, Write as _};

/// Every warning starts with this.
pub const WARNING_PREFIX: &str = "reload-injector: ";
/// Longest warning at admission, in characters: once a response's warnings pass
/// [`API_SERVER_WARNING_CHARS`], kube-apiserver cuts each to this many (`truncateItemRunes`).
pub const MAX_WARNING_CHARS: usize = 256;
/// Most characters of warnings kube-apiserver passes on whole to the client of one request
/// (`truncateAtTotalRunes`); past it, it cuts each to [`MAX_WARNING_CHARS`] and drops the rest.
pub const API_SERVER_WARNING_CHARS: usize = 4 * 1024;
/// Longest name a message shows whole: the longest name a Kubernetes object can have. Only a
/// value no object could be named (a long URL) is shortened.
const MAX_NAME_CHARS: usize = 253;

/// Collects warnings in order, without duplicates.
#[derive(Debug, Default)]
pub struct Warnings {
    list: Vec<(String, Weight)>,
}

/// Which warnings stay when not all of them can be shown: problems before notices.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Weight {
    /// Something the user may have to act on.
    Problem,
    /// What will happen, as intended (`pods roll when it changes`).
    Notice,
}

impl Warnings {
    /// Adds `text` (without the prefix), cleaned. `format_args!` writes straight into the line.
    pub fn push(&mut self, text: impl fmt::Display) {
        self.add(text, Weight::Problem);
    }

    /// Adds `text` like [`Warnings::push`], as a notice: the first to be left out when the
    /// warnings do not all fit.
    pub fn notice(&mut self, text: impl fmt::Display) {
        self.add(text, Weight::Notice);
    }

    fn add(&mut self, text: impl fmt::Display, weight: Weight) {
        // Room for a long line in ASCII; a longer text grows it.
        let mut line = String::with_capacity(WARNING_PREFIX.len() + 120);
        line.push_str(WARNING_PREFIX);
        // Writing to a String cannot fail.
        let _ = write!(line, "{text}");
        if let Cow::Owned(cleaned) = clean(&line[WARNING_PREFIX.len()..]) {
            line.truncate(WARNING_PREFIX.len());
            line.push_str(&cleaned);
        }
        self.list.push((line, weight));
    }

    /// The warnings in the order given, each once. With a `budget` (admission), each is cut to
    /// [`MAX_WARNING_CHARS`], and past the budget only those that fit are given (problems first,
    /// then notices, each in order) with a last line counting the rest; offline, all, whole.
    pub fn into_list(self, budget: Option<usize>) -> Vec<String> {
        let mut list = unique(self.list);
        match budget {
            Some(budget) => {
                list.iter_mut().for_each(|(line, _)| fit(line));
                within(list, budget)
            }
            None => list.into_iter().map(|(line, _)| line).collect(),
        }
    }
}

/// Each line only where it was first given. Duplicates are found once, by sorting: a Pod with
/// 20,000 containers gives 20,000 warnings.
fn unique(list: Vec<(String, Weight)>) -> Vec<(String, Weight)> {
    let mut order: Vec<usize> = (0..list.len()).collect();
    order.sort_by(|&a, &b| list[a].0.cmp(&list[b].0).then(a.cmp(&b)));
    let mut keep = vec![true; list.len()];
    for pair in order.windows(2) {
        keep[pair[1]] = list[pair[0]].0 != list[pair[1]].0;
    }
    let kept = list.into_iter().zip(keep);
    kept.filter_map(|(entry, keep)| keep.then_some(entry))
        .collect()
}

/// The lines of `list` that fit in `budget` characters with a last line counting the others.
fn within(list: Vec<(String, Weight)>, budget: usize) -> Vec<String> {
    let chars: Vec<usize> = list.iter().map(|(line, _)| line.chars().count()).collect();
    // The usual case, a few warnings, needs nothing more.
    if chars.iter().sum::<usize>() <= budget {
        return list.into_iter().map(|(line, _)| line).collect();
    }
    // Room for the last line with the most warnings it could count.
    let room = budget.saturating_sub(not_shown(list.len()).chars().count());
    let mut by_weight: Vec<usize> = (0..list.len()).collect();
    by_weight.sort_by_key(|&i| list[i].1);
    let mut keep = vec![false; list.len()];
    let mut used = 0;
    for i in by_weight {
        used += chars[i];
        if used > room {
            break;
        }
        keep[i] = true;
    }
    let left_out = keep.iter().filter(|&&k| !k).count();
    let mut shown: Vec<String> = list
        .into_iter()
        .zip(keep)
        .filter_map(|((line, _), keep)| keep.then_some(line))
        .collect();
    shown.push(not_shown(left_out));
    shown
}

fn not_shown(count: usize) -> String {
    format!(
        "{WARNING_PREFIX}{count} more warnings not shown (the API server passes on 4 KiB); \
         `reload-injector inject -f` lists all"
    )
}

/// A name quoted for a message: control characters replaced, long names shortened.
pub fn quoted(name: &str) -> Quoted<'_> {
    Quoted(name)
}

/// A name as [`quoted`] shows it, written where it is displayed.
#[derive(Debug, Clone, Copy)]
pub struct Quoted<'a>(&'a str);

impl fmt::Display for Quoted<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const MAX: usize = MAX_NAME_CHARS;
        let cleaned = clean(self.0);
        // Fewer bytes than the limit means fewer characters too.
        if cleaned.len() <= MAX || cleaned.chars().count() <= MAX {
            write!(f, "\"{cleaned}\"")
        } else {
            f.write_char('"')?;
            for c in cleaned.chars().take(MAX - 1) {
                f.write_char(c)?;
            }
            f.write_str("…\"")
        }
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
pub fn fit(line: &mut String) {
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
    let names: Vec<String> = names.into_iter().map(|n| quoted(n).to_string()).collect();
    match names.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} and {last}", rest.join(", ")),
        _ => names.concat(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two copies of a short line and one of 300 characters.
    fn with_a_long_one() -> Warnings {
        let mut w = Warnings::default();
        w.push("container \"a\nb\" reads x");
        w.push("container \"a\nb\" reads x");
        w.push("y".repeat(300));
        w
    }

    #[test]
    fn warnings_at_admission_are_prefixed_cleaned_cut_to_256_and_unique() {
        let list = with_a_long_one().into_list(Some(API_SERVER_WARNING_CHARS));
        assert_eq!(list.len(), 2);
        assert_eq!(list[0], "reload-injector: container \"a?b\" reads x");
        assert!(
            list.iter()
                .all(|l| l.starts_with(WARNING_PREFIX) && l.chars().count() <= MAX_WARNING_CHARS)
        );
        assert_eq!(list[1].chars().count(), MAX_WARNING_CHARS);
        assert!(list[1].ends_with('…'));
    }

    #[test]
    fn warnings_offline_are_never_cut() {
        let list = with_a_long_one().into_list(None);
        assert_eq!(list.len(), 2);
        assert_eq!(list[1], format!("{WARNING_PREFIX}{}", "y".repeat(300)));
    }

    #[test]
    fn each_warning_is_kept_once_where_it_was_first_given() {
        let mut w = Warnings::default();
        for text in ["b", "a", "b", "c", "a", "a", "d"] {
            w.push(text);
        }
        let list = w.into_list(None);
        let texts: Vec<&str> = list
            .iter()
            .map(|l| l.strip_prefix(WARNING_PREFIX).unwrap())
            .collect();
        assert_eq!(texts, ["b", "a", "c", "d"]);
        assert!(Warnings::default().into_list(None).is_empty());
    }

    fn chars(list: &[String]) -> usize {
        list.iter().map(|w| w.chars().count()).sum()
    }

    /// `n` warnings of 120 characters, all problems or all notices.
    fn warnings(n: usize, notices: bool) -> Warnings {
        let mut w = Warnings::default();
        for i in 0..n {
            let text = format!("{i:0>103}");
            if notices {
                w.notice(text)
            } else {
                w.push(text)
            }
        }
        w
    }

    #[test]
    fn warnings_that_fit_the_api_server_are_all_given() {
        let all = warnings(34, false).into_list(None);
        assert_eq!(chars(&all), 4080);
        assert_eq!(
            warnings(34, true).into_list(Some(API_SERVER_WARNING_CHARS)),
            all
        );
        assert!(Warnings::default().into_list(Some(0)).is_empty());
        assert_eq!(warnings(40_000, true).into_list(None).len(), 40_000);
    }

    #[test]
    fn warnings_past_the_budget_end_in_a_count_of_the_rest() {
        let all = warnings(40_000, false).into_list(None);
        let cut = warnings(40_000, false).into_list(Some(API_SERVER_WARNING_CHARS));
        assert!(chars(&cut) <= API_SERVER_WARNING_CHARS, "{}", chars(&cut));
        let (last, kept) = cut.split_last().unwrap();
        assert_eq!(
            kept,
            &all[..33],
            "the first ones, as many as leave room for the count"
        );
        assert_eq!(
            last,
            "reload-injector: 39967 more warnings not shown (the API server passes on 4 KiB); \
             `reload-injector inject -f` lists all"
        );
        assert!(last.chars().count() <= MAX_WARNING_CHARS, "{last}");
        // One character over is enough to be cut.
        let mut over = warnings(34, false);
        over.push("x");
        let cut = over.into_list(Some(API_SERVER_WARNING_CHARS));
        assert_eq!(cut.len(), 34);
        assert!(cut[33].starts_with("reload-injector: 2 more warnings not shown"));
    }

    #[test]
    fn problems_are_kept_before_notices_and_the_order_stays() {
        let mut w = warnings(50, true);
        for text in ["needs \"a\"", "needs \"b\""] {
            w.push(text);
        }
        let cut = w.into_list(Some(API_SERVER_WARNING_CHARS));
        let (last, kept) = cut.split_last().unwrap();
        let notices = kept.len() - 2;
        assert_eq!(notices, 32, "{kept:#?}");
        assert_eq!(kept[..notices], warnings(notices, true).into_list(None)[..]);
        assert_eq!(
            kept[notices..],
            [
                "reload-injector: needs \"a\"",
                "reload-injector: needs \"b\""
            ]
        );
        assert!(
            last.starts_with("reload-injector: 18 more warnings not shown"),
            "{last}"
        );
    }

    #[test]
    fn a_budget_too_small_for_any_warning_keeps_the_count_alone() {
        let cut = warnings(2, false).into_list(Some(60));
        assert_eq!(cut.len(), 1);
        assert!(cut[0].contains(" 2 more warnings"), "{cut:?}");
    }

    #[test]
    fn names_are_shown_whole_up_to_the_longest_object_name() {
        let longest = "n".repeat(253);
        assert_eq!(quoted(&longest).to_string(), format!("\"{longest}\""));
        // Longer than any object name (a URL): shortened, on a char boundary.
        let name = "é".repeat(300);
        let q = quoted(&name).to_string();
        assert_eq!(q.chars().count(), 255);
        assert!(q.ends_with("…\""));
    }

    #[test]
    fn lists_read_naturally() {
        assert_eq!(quoted_list(["a"]), "\"a\"");
        assert_eq!(quoted_list(["a", "b"]), "\"a\" and \"b\"");
        assert_eq!(quoted_list(["a", "b", "c"]), "\"a\", \"b\" and \"c\"");
    }
}
