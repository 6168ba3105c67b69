//! The DNS names a webhook's serving certificate must carry, and their validation.

use super::CertsError;

/// The four names the API server may use for `<service>.<namespace>` (the API server itself
/// uses `<service>.<namespace>.svc`), followed by the validated `extra` names, without
/// duplicates, in that order.
pub fn service_dns_names(
    service: &str,
    namespace: &str,
    extra: &[String],
) -> Result<Vec<String>, CertsError> {
    validate_label(service)?;
    validate_label(namespace)?;
    let mut names = vec![
        service.to_owned(),
        format!("{service}.{namespace}"),
        format!("{service}.{namespace}.svc"),
        format!("{service}.{namespace}.svc.cluster.local"),
    ];
    for name in extra {
        validate_dns_name(name)?;
        if !names.contains(name) {
            names.push(name.clone());
        }
    }
    Ok(names)
}

/// Checks that `name` is a DNS name a certificate can carry: lowercase RFC 1123 labels of
/// 1–63 characters separated by dots, at most 253 characters, optionally starting with `*.`.
pub fn validate_dns_name(name: &str) -> Result<(), CertsError> {
    let reject = |reason| CertsError::DnsNameRejected {
        name: name.to_owned(),
        reason,
    };
    if name.is_empty() {
        return Err(reject("it is empty"));
    }
    if name.len() > 253 {
        return Err(reject("it is longer than 253 characters"));
    }
    let rest = name.strip_prefix("*.").unwrap_or(name);
    rest.split('.')
        .try_for_each(|label| label_problem(label).map_or(Ok(()), |reason| Err(reject(reason))))
}

fn validate_label(label: &str) -> Result<(), CertsError> {
    label_problem(label).map_or(Ok(()), |reason| {
        let name = label.to_owned();
        Err(CertsError::DnsNameRejected { name, reason })
    })
}

/// Why `label` is not an RFC 1123 label, or `None` if it is one.
fn label_problem(label: &str) -> Option<&'static str> {
    if label.is_empty() {
        Some("it has an empty label")
    } else if label.len() > 63 {
        Some("a label is longer than 63 characters")
    } else if !label
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    {
        Some("only lowercase letters, digits, '-' and '.' are allowed")
    } else if label.starts_with('-') || label.ends_with('-') {
        Some("a label starts or ends with '-'")
    } else {
        None
    }
}
