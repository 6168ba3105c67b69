//! The record of every request, and the RBAC permission each one needs.

use std::time::Instant;

use bytes::Bytes;
use serde_json::Value;

use super::route::{self, Route};

/// One request as the server received and answered it.
#[derive(Debug, Clone)]
pub struct Recorded {
    /// HTTP method.
    pub method: String,
    /// Path, without the query.
    pub path: String,
    /// Raw query string (empty if none).
    pub query: String,
    /// `Content-Type` header.
    pub content_type: Option<String>,
    /// `Accept` header.
    pub accept: Option<String>,
    /// Request body.
    pub body: Bytes,
    /// Response status (for a watch: the status of the response head).
    pub status: u16,
    /// When the request arrived.
    pub received: Instant,
    /// When the response head was ready.
    pub answered: Instant,
}

/// The RBAC permission a request needs: `(apiGroup, resource, verb, namespace)`.
pub type RbacNeed = (String, String, String, Option<String>);

impl Recorded {
    /// The first value of a query parameter.
    pub fn query_param(&self, name: &str) -> Option<String> {
        route::query_param(&self.query, name)
    }

    /// Whether this was a watch.
    pub fn is_watch(&self) -> bool {
        route::is_watch(&self.query)
    }

    /// The body as text (lossy).
    pub fn body_text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The body parsed as JSON.
    pub fn body_json(&self) -> Option<Value> {
        serde_json::from_slice(&self.body).ok()
    }

    /// What the path addresses.
    pub fn route(&self) -> Option<Route> {
        route::parse(&self.path)
    }

    /// The resource plural addressed, if any.
    pub fn resource(&self) -> Option<&'static str> {
        self.route()?.resource().map(|r| r.plural)
    }

    /// The RBAC permission this request needs (`None` for non-resource paths like `/version`).
    /// GET on an object is `get`, on a collection `list` or `watch`; POST `create`, PUT
    /// `update`, PATCH `patch`, DELETE `delete` (`deletecollection` on a collection). A Pod's log
    /// is `get` on `pods/log`.
    pub fn rbac(&self) -> Option<RbacNeed> {
        let route = self.route()?;
        let resource = route.resource()?;
        if let Route::PodLog { namespace, .. } = &route {
            let verb = (self.method == "GET").then_some("get")?;
            return Some((
                String::new(),
                "pods/log".to_owned(),
                verb.to_owned(),
                Some(namespace.clone()),
            ));
        }
        let collection = matches!(route, Route::Collection { .. });
        let verb = match (self.method.as_str(), collection) {
            ("GET", true) if self.is_watch() => "watch",
            ("GET", true) => "list",
            ("GET", false) => "get",
            ("POST", _) => "create",
            ("PUT", _) => "update",
            ("PATCH", _) => "patch",
            ("DELETE", true) => "deletecollection",
            ("DELETE", false) => "delete",
            _ => return None,
        };
        let namespace = route.namespace().map(str::to_owned);
        Some((
            resource.group.to_owned(),
            resource.plural.to_owned(),
            verb.to_owned(),
            namespace,
        ))
    }
}
