//! Reading a request path and query the way the API server routes them. Pure.

use super::resources::{self, Resource};

/// What a path addresses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// `GET /version`.
    Version,
    /// Discovery: `/api/v1` or `/apis/GROUP/VERSION` (the resources of one group version).
    Discovery {
        /// The group, empty for core.
        group: String,
        /// The version.
        version: String,
    },
    /// A collection (`/api/v1/namespaces/ns/configmaps`, or cluster-wide `/api/v1/configmaps`).
    Collection {
        /// The resource.
        resource: &'static Resource,
        /// The namespace, `None` for cluster-wide or cluster-scoped.
        namespace: Option<String>,
    },
    /// One object.
    Object {
        /// The resource.
        resource: &'static Resource,
        /// The namespace, `None` for cluster-scoped objects.
        namespace: Option<String>,
        /// The name.
        name: String,
    },
    /// A Pod's log (`/api/v1/namespaces/ns/pods/name/log`), the one subresource served.
    PodLog {
        /// The `pods` resource.
        resource: &'static Resource,
        /// The namespace.
        namespace: String,
        /// The Pod's name.
        name: String,
    },
}

impl Route {
    /// The resource, if the route names one.
    pub fn resource(&self) -> Option<&'static Resource> {
        match self {
            Route::Version | Route::Discovery { .. } => None,
            Route::Collection { resource, .. }
            | Route::Object { resource, .. }
            | Route::PodLog { resource, .. } => Some(resource),
        }
    }

    /// The namespace from the path.
    pub fn namespace(&self) -> Option<&str> {
        match self {
            Route::Version | Route::Discovery { .. } => None,
            Route::Collection { namespace, .. } | Route::Object { namespace, .. } => {
                namespace.as_deref()
            }
            Route::PodLog { namespace, .. } => Some(namespace),
        }
    }

    /// The object name from the path.
    pub fn name(&self) -> Option<&str> {
        match self {
            Route::Object { name, .. } | Route::PodLog { name, .. } => Some(name),
            _ => None,
        }
    }
}

/// Routes a request path; `None` if the server does not serve it.
pub fn parse(path: &str) -> Option<Route> {
    if path == "/version" || path == "/version/" {
        return Some(Route::Version);
    }
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (group, version, rest) = match segments.as_slice() {
        ["api", version, rest @ ..] => ("", *version, rest),
        ["apis", group, version, rest @ ..] => (*group, *version, rest),
        _ => return None,
    };
    let resource = |plural: &str| resources::by_path(group, version, plural);
    match rest {
        [] => resources::RESOURCES
            .iter()
            .any(|r| r.group == group && r.version == version)
            .then(|| Route::Discovery {
                group: group.to_owned(),
                version: version.to_owned(),
            }),
        [plural] => Some(Route::Collection {
            resource: resource(plural)?,
            namespace: None,
        }),
        ["namespaces", ns, plural] => {
            let resource = resource(plural)?;
            resource.namespaced.then(|| Route::Collection {
                resource,
                namespace: Some((*ns).to_owned()),
            })
        }
        ["namespaces", ns, plural, name] => {
            let resource = resource(plural)?;
            resource.namespaced.then(|| Route::Object {
                resource,
                namespace: Some((*ns).to_owned()),
                name: (*name).to_owned(),
            })
        }
        ["namespaces", ns, "pods", name, "log"] if group.is_empty() => Some(Route::PodLog {
            resource: resource("pods")?,
            namespace: (*ns).to_owned(),
            name: (*name).to_owned(),
        }),
        [plural, name] => {
            let resource = resource(plural)?;
            (!resource.namespaced).then(|| Route::Object {
                resource,
                namespace: None,
                name: (*name).to_owned(),
            })
        }
        _ => None,
    }
}

/// Decodes a query string into `(name, value)` pairs (`+` and `%XX` decoded).
pub fn query_pairs(query: &str) -> Vec<(String, String)> {
    query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            (decode(k), decode(v))
        })
        .collect()
}

/// The first value of `name` in a query string.
pub fn query_param(query: &str, name: &str) -> Option<String> {
    query_pairs(query)
        .into_iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v)
}

/// Whether a query asks for a watch (`watch=true` or `watch=1`).
pub fn is_watch(query: &str) -> bool {
    matches!(query_param(query, "watch").as_deref(), Some("true" | "1"))
}

fn decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                match std::str::from_utf8(&bytes[i + 1..i + 3])
                    .ok()
                    .and_then(|h| u8::from_str_radix(h, 16).ok())
                {
                    Some(b) => {
                        out.push(b);
                        i += 2;
                    }
                    None => out.push(b'%'),
                }
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}
