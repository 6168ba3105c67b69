//! The HTTP face: routes every request like kube-apiserver's REST handlers (get, list,
//! watch, create, update, patch, delete), applies injected faults, and records it.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::StreamExt;
use http_body_util::{BodyExt, Full, StreamBody, combinators::UnsyncBoxBody};
use hyper::body::{Frame, Incoming};
use hyper::{Request, Response, StatusCode, header};
use serde_json::{Value, json};

use super::faults::RequestFacts;
use super::list;
use super::patch::{self, PatchKind};
use super::record::Recorded;
use super::resources::{self, Resource};
use super::route::{self, Route};
use super::selectors::{FieldSelector, LabelSelector};
use super::state::{State, lock};
use super::status::ApiError;
use super::store::Stored;
use super::watch::{self, Start, WatchSpec};

/// The response body type.
pub type Body = UnsyncBoxBody<Bytes, Infallible>;

pub(super) const METADATA_LIST: &str =
    "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1";
const METADATA: &str = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1";

/// Everything a handler needs from the request.
pub(super) struct Req {
    method: String,
    query: String,
    content_type: String,
    accept: String,
    body: Bytes,
}

impl Req {
    pub(super) fn param(&self, name: &str) -> Option<String> {
        route::query_param(&self.query, name).filter(|v| !v.is_empty())
    }

    pub(super) fn metadata_only(&self) -> bool {
        self.accept.contains("as=PartialObjectMetadata")
    }

    fn json_body(&self) -> Result<Value, ApiError> {
        serde_json::from_slice(&self.body)
            .map_err(|e| ApiError::bad_request(format!("failed to decode the request body: {e}")))
    }
}

/// Handles one request.
pub async fn handle(state: Arc<State>, request: Request<Incoming>) -> Response<Body> {
    let received = Instant::now();
    let (parts, body) = request.into_parts();
    let body = body
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    let header = |name: header::HeaderName| {
        parts
            .headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    let incoming = Req {
        method: parts.method.as_str().to_owned(),
        query: parts.uri.query().unwrap_or("").to_owned(),
        content_type: header(header::CONTENT_TYPE).unwrap_or_default(),
        accept: header(header::ACCEPT).unwrap_or_default(),
        body,
    };
    let path = parts.uri.path().to_owned();
    let route = route::parse(&path);
    let watch = route::is_watch(&incoming.query);
    let facts = RequestFacts {
        method: &incoming.method,
        resource: route.as_ref().and_then(Route::resource).map(|r| r.plural),
        namespace: route.as_ref().and_then(Route::namespace),
        name: route.as_ref().and_then(Route::name),
        watch,
    };
    let delay = lock(&state.faults).delay_for(&facts);
    if !delay.is_zero() {
        tokio::time::sleep(delay).await;
    }
    let failure = lock(&state.faults).take_failure(&facts);
    let response = match (failure, route) {
        (Some(code), _) => error(ApiError::with_code(code, format!("injected fault {code}"))),
        (None, None) => error(ApiError::no_route(&path)),
        (None, Some(route)) => dispatch(&state, route, &incoming)
            .await
            .unwrap_or_else(error),
    };
    lock(&state.requests).push(Recorded {
        method: incoming.method,
        path,
        query: incoming.query,
        content_type: Some(incoming.content_type).filter(|c| !c.is_empty()),
        accept: Some(incoming.accept).filter(|a| !a.is_empty()),
        body: incoming.body,
        status: response.status().as_u16(),
        received,
        answered: Instant::now(),
    });
    response
}

async fn dispatch(
    state: &Arc<State>,
    route: Route,
    request: &Req,
) -> Result<Response<Body>, ApiError> {
    let manager = request.param("fieldManager");
    match (route, request.method.as_str()) {
        (Route::Discovery { group, version }, "GET") => {
            Ok(json_response(200, &resources::discovery(&group, &version)))
        }
        (Route::Version, "GET") => Ok(json_response(
            200,
            &json!({
                "major": "1", "minor": "33", "gitVersion": "v1.33.0",
                "gitCommit": "0000000000000000000000000000000000000000",
                "gitTreeState": "clean", "buildDate": "2025-04-23T00:00:00Z",
                "goVersion": "go1.24.2", "compiler": "gc", "platform": "linux/amd64",
            }),
        )),
        (
            Route::Collection {
                resource,
                namespace,
            },
            "GET",
        ) => {
            if route::is_watch(&request.query) {
                start_watch(state, resource, namespace, request)
            } else {
                list::list(state, resource, namespace.as_deref(), request)
            }
        }
        (
            Route::Collection {
                resource,
                namespace,
            },
            "POST",
        ) => {
            if resource.namespaced && namespace.is_none() {
                return Err(ApiError::method_not_allowed());
            }
            let ns = namespace.unwrap_or_default();
            let created = state.create(resource, &ns, request.json_body()?, manager.as_deref())?;
            Ok(object_response(201, &created, request))
        }
        (
            Route::PodLog {
                resource,
                namespace,
                name,
            },
            "GET",
        ) => super::logs::answer(state, resource, &namespace, &name, request),
        (
            Route::Object {
                resource,
                namespace,
                name,
            },
            method,
        ) => {
            let ns = namespace.unwrap_or_default();
            let object = match method {
                "GET" => state
                    .store()
                    .get(resource, &ns, &name)
                    .ok_or_else(|| ApiError::not_found(resource, &name))?,
                "PUT" => {
                    let body = request.json_body()?;
                    state.update_with(resource, &ns, &name, manager.as_deref(), |_| Ok(body))?
                }
                "PATCH" => {
                    let kind = PatchKind::from_content_type(&request.content_type)?;
                    if kind == PatchKind::Apply {
                        if manager.is_none() {
                            return Err(ApiError::with_code(
                                422,
                                "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch",
                            ));
                        }
                        let exists = state.store().get(resource, &ns, &name).is_some();
                        if !exists {
                            let mut config = patch::apply_config(&request.body)?;
                            config["metadata"]["name"] = json!(name);
                            let created =
                                state.create(resource, &ns, config, manager.as_deref())?;
                            return Ok(object_response(201, &created, request));
                        }
                    }
                    state.patch(
                        resource,
                        &ns,
                        &name,
                        kind,
                        &request.body,
                        manager.as_deref(),
                    )?
                }
                "DELETE" => state.delete(resource, &ns, &name)?,
                _ => return Err(ApiError::method_not_allowed()),
            };
            Ok(object_response(200, &object, request))
        }
        _ => Err(ApiError::method_not_allowed()),
    }
}

fn start_watch(
    state: &Arc<State>,
    resource: &'static Resource,
    namespace: Option<String>,
    request: &Req,
) -> Result<Response<Body>, ApiError> {
    let labels = LabelSelector::parse(&request.param("labelSelector").unwrap_or_default())
        .map_err(|e| ApiError::bad_request(e.to_string()))?;
    let fields = FieldSelector::parse(&request.param("fieldSelector").unwrap_or_default())
        .map_err(|e| ApiError::bad_request(e.to_string()))?;
    let start = match request.param("resourceVersion").as_deref() {
        None | Some("0") => Start::CurrentState,
        Some(text) => Start::After(
            text.parse()
                .map_err(|_| ApiError::bad_request("invalid resourceVersion"))?,
        ),
    };
    let spec = WatchSpec {
        resource,
        namespace,
        labels,
        fields,
        metadata_only: request.metadata_only(),
        bookmarks: request.param("allowWatchBookmarks").as_deref() == Some("true"),
        send_initial_events: request.param("sendInitialEvents").as_deref() == Some("true"),
        timeout: request
            .param("timeoutSeconds")
            .and_then(|t| t.parse().ok())
            .map(Duration::from_secs),
        start,
    };
    let (tx, rx) = tokio::sync::mpsc::channel::<Bytes>(16);
    tokio::spawn(watch::run(state.clone(), spec, tx));
    let stream = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv()
            .await
            .map(|chunk| (Ok::<_, Infallible>(Frame::data(chunk)), rx))
    })
    .boxed();
    let body = BodyExt::boxed_unsync(StreamBody::new(stream));
    Ok(Response::builder()
        .status(200)
        .header(header::CONTENT_TYPE, "application/json")
        .body(body)
        .expect("valid response"))
}

pub(super) fn object_response(code: u16, object: &Stored, request: &Req) -> Response<Body> {
    if request.metadata_only() {
        bytes_response(code, METADATA, object.metadata_json())
    } else {
        bytes_response(code, "application/json", object.full_json())
    }
}

fn json_response(code: u16, value: &Value) -> Response<Body> {
    bytes_response(
        code,
        "application/json",
        serde_json::to_vec(value).expect("JSON"),
    )
}

pub(super) fn bytes_response(code: u16, content_type: &str, body: Vec<u8>) -> Response<Body> {
    Response::builder()
        .status(StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR))
        .header(header::CONTENT_TYPE, content_type)
        .body(Full::new(Bytes::from(body)).boxed_unsync())
        .expect("valid response")
}

fn error(error: ApiError) -> Response<Body> {
    let mut response = json_response(error.code, &error.status());
    if error.code == 429 {
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, header::HeaderValue::from_static("1"));
    }
    response
}
