//! Claims the docs once made that the code, the manifests or the scripts contradicted. Each
//! row is a phrase that must not come back, where, and why it was wrong.

/// `(files it applies to, phrase (lowercase), why it is wrong)`; an empty file list means every
/// doc.
const WRONG: &[(&[&str], &str, &str)] = &[
    (
        &[],
        "apply -k manifests/`",
        "the base alone has no serving certificate, hash key or caBundle: apply \
         manifests/cert-manager/ or the overlay certs/generate.sh writes",
    ),
    (
        &[],
        "apply -k manifests/\n",
        "the base alone has no serving certificate, hash key or caBundle",
    ),
    (
        &[],
        "metadata-only plus a get",
        "ConfigMaps (and Secrets with a hash key) are watched whole per opted-in namespace and \
         reduced to digests on arrival: no GET per object",
    ),
    (
        &[],
        "get of the data of the ones something consumes",
        "ConfigMaps and Secrets are watched whole per namespace and reduced on arrival: a GET \
         only for an object no watch knows",
    ),
    (
        &[],
        "kube-apiserver 1.28",
        "the suite runs the current release and the floor; measure there",
    ),
    (
        &[],
        "no kube-apiserver on",
        "the test suite builds and runs a real kube-apiserver on every machine",
    ),
    (
        &[],
        "200 once the certificate",
        "/readyz also waits for the controller's first sync",
    ),
    (
        &[],
        "object for object",
        "the chart renders every object of the overlay but the Namespace, which Helm needs \
         before it installs",
    ),
    (
        &["docs/install.md", "README.md"],
        "five minutes",
        "nobody measured an install; say what to do, not how long it takes",
    ),
    (
        &[],
        "haproxy | `haproxy` | `sighup`",
        "haproxy reloads on SIGUSR2 in master-worker mode (the catalogue)",
    ),
];

/// One line per wrong claim found in `file`.
pub fn contradictions(file: &str) -> Vec<String> {
    let text = std::fs::read_to_string(super::repo().join(file))
        .unwrap_or_default()
        .to_lowercase();
    let text = format!("{text}\n");
    WRONG
        .iter()
        .filter(|(files, _, _)| files.is_empty() || files.contains(&file))
        .filter(|(_, phrase, _)| text.contains(phrase))
        .map(|(_, phrase, why)| format!("{file}: says {:?}, but {why}", phrase.trim()))
        .collect()
}
