//! `GET …/pods/NAME/log`: a container's log, as the API server proxies it from the kubelet.
//! Like the real server: 404 for a missing Pod; 400 when `container` is missing and the Pod
//! has several containers, or names none of its containers; `tailLines` keeps the last lines.
//! The text is what a test set with [`super::FakeApi::set_log`] (empty otherwise).

use hyper::Response;

use super::http::{Body, Req, bytes_response};
use super::resources::Resource;
use super::state::{State, lock};
use super::status::ApiError;

/// Answers a log read.
pub(super) fn answer(
    state: &State,
    resource: &'static Resource,
    namespace: &str,
    name: &str,
    request: &Req,
) -> Result<Response<Body>, ApiError> {
    let pod = state
        .store()
        .get(resource, namespace, name)
        .ok_or_else(|| ApiError::not_found(resource, name))?
        .value();
    let names = |list: &str| -> Vec<String> {
        pod["spec"][list]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|c| c["name"].as_str().map(str::to_owned))
            .collect()
    };
    let (containers, inits) = (names("containers"), names("initContainers"));
    let container = match request.param("container") {
        Some(container) => container,
        None if containers.len() == 1 => containers[0].clone(),
        None => {
            return Err(ApiError::bad_request(format!(
                "a container name must be specified for pod {name}, choose one of: [{}] or one of the init containers: [{}]",
                containers.join(" "),
                inits.join(" ")
            )));
        }
    };
    if !containers.contains(&container) && !inits.contains(&container) {
        return Err(ApiError::bad_request(format!(
            "container {container} is not valid for pod {name}"
        )));
    }
    let text = lock(&state.logs)
        .get(&(namespace.to_owned(), name.to_owned(), container))
        .cloned()
        .unwrap_or_default();
    let tail = match request.param("tailLines") {
        Some(n) => Some(
            n.parse::<usize>()
                .map_err(|_| ApiError::bad_request(format!("invalid tailLines {n:?}")))?,
        ),
        None => None,
    };
    let text = match tail {
        Some(n) => last_lines(&text, n),
        None => text,
    };
    Ok(bytes_response(200, "text/plain", text.into_bytes()))
}

fn last_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let start = lines.len().saturating_sub(n);
    let mut out = lines[start..].join("\n");
    if !out.is_empty() {
        out.push('\n');
    }
    out
}
