//! Kubernetes object names (pure): the one check of a name before it becomes part of an API
//! path, the API server's own rule for ConfigMaps, Secrets, workloads and Pods.

/// Whether `name` can name an object: a DNS-1123 subdomain, as the API server requires — at most
/// 253 characters, dot-separated parts of lower-case letters, digits and `-`, each starting and
/// ending with a letter or digit.
pub fn is_object_name(name: &str) -> bool {
    name.len() <= 253 && name.split('.').all(is_part)
}

fn is_part(part: &str) -> bool {
    let alnum = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    let bytes = part.as_bytes();
    bytes.first().is_some_and(alnum)
        && bytes.last().is_some_and(alnum)
        && bytes.iter().all(|b| alnum(b) || *b == b'-')
}

#[cfg(test)]
mod tests {
    use super::is_object_name;

    const ACCEPTED: [&str; 6] = ["cm-a", "web.settings", "a", "0", "a-b.c-d.e", "1.2.3"];
    const REFUSED: [&str; 17] = [
        "",
        ".",
        "..",
        "a..b",
        "a.-b",
        "a-.b",
        "../secrets/db",
        "a/b",
        "a?watch=1",
        "a#b",
        "a%2Fb",
        "UPPER",
        "a b",
        "-a",
        "a-",
        ".a",
        "é",
    ];

    #[test]
    fn only_names_the_api_server_accepts_pass() {
        for good in ACCEPTED.iter().copied().chain([&*"n".repeat(253)]) {
            assert!(is_object_name(good), "{good:?}");
        }
        for bad in REFUSED.iter().copied().chain([&*"n".repeat(254)]) {
            assert!(!is_object_name(bad), "{bad:?}");
        }
    }
}
