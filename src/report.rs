//! How errors reach a person: one line, each cause said once.

use std::error::Error;

/// An error and its causes as one line, `outer: inner: innermost`, leaving out a cause whose
/// text the line already holds (some errors, ours and other crates', repeat their source in
/// their own message). An error answered by the API server is said as the API server says it,
/// with its code: `… cannot patch resource "deployments" … (HTTP 403 Forbidden)`.
pub fn one_line(err: &(dyn Error + 'static)) -> String {
    let (mut line, mut source) = said(err);
    while let Some(cause) = source {
        let (text, next) = said(cause);
        if !text.is_empty() && !line.contains(&text) {
            line.push_str(": ");
            line.push_str(&text);
        }
        source = next;
    }
    line
}

/// What one error says, and the cause to say next.
fn said<'a>(err: &'a (dyn Error + 'static)) -> (String, Option<&'a (dyn Error + 'static)>) {
    match err.downcast_ref::<kube::Error>() {
        // kube's own text repeats the whole Status in debug form; its message is the answer.
        Some(kube::Error::Api(status)) => {
            let text = format!(
                "{} (HTTP {} {})",
                status.message, status.code, status.reason
            );
            (text, None)
        }
        _ => (err.to_string(), err.source()),
    }
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

    #[derive(Debug, thiserror::Error)]
    #[error("failed to patch Deployment shop/web")]
    struct Patch(#[source] kube::Error);

    #[test]
    fn an_api_answer_is_said_once_with_its_code() {
        let status = kube::core::Status::failure(
            "deployments.apps \"web\" is forbidden: User \"u\" cannot patch resource",
            "Forbidden",
        )
        .with_code(403);
        let err = Patch(kube::Error::Api(Box::new(status)));
        assert_eq!(
            one_line(&err),
            "failed to patch Deployment shop/web: deployments.apps \"web\" is forbidden: \
             User \"u\" cannot patch resource (HTTP 403 Forbidden)"
        );
    }

    #[test]
    fn distinct_causes_are_all_kept() {
        let io = std::io::Error::other("disk on fire");
        let err = anyhow::Error::new(io).context("failed to write");
        assert_eq!(one_line(err.as_ref()), "failed to write: disk on fire");
    }
}
