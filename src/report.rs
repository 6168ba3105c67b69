//! How errors reach a person: one line, each cause said once.

use std::error::Error;

/// An error and its causes as one line, `outer: inner: innermost`, leaving out a cause whose
/// text the line already holds (some errors, ours and other crates', repeat their source in
/// their own message).
pub fn one_line(err: &dyn Error) -> String {
    let mut line = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        let text = cause.to_string();
        if !text.is_empty() && !line.contains(&text) {
            line.push_str(": ");
            line.push_str(&text);
        }
        source = cause.source();
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("failed to load the pair")]
    struct Outer(#[source] Repeating);

    /// Says its source in its message and chains it too.
    #[derive(Debug, thiserror::Error)]
    #[error("failed to read /nope: {0}")]
    struct Repeating(#[source] std::io::Error);

    #[test]
    fn each_cause_is_said_once() {
        let io = std::io::Error::new(std::io::ErrorKind::NotFound, "no such file");
        let err = Outer(Repeating(io));
        assert_eq!(
            one_line(&err),
            "failed to load the pair: failed to read /nope: no such file"
        );
    }

    #[test]
    fn distinct_causes_are_all_kept() {
        let io = std::io::Error::other("disk on fire");
        let err = anyhow::Error::new(io).context("failed to write");
        assert_eq!(one_line(err.as_ref()), "failed to write: disk on fire");
    }
}
