//! The HTTPS routes: `POST /mutate` (reviews from namespaces that carry the opt-in label) and
//! `POST /mutate/opted-in` (single opted-in objects from the others), with the HTTP-level
//! checks (method, path, content type, size, read time).

use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use http_body_util::BodyExt;

use super::handler::{AppState, HandleError, handle};
use super::limits::{BodyBudget, reservation};

/// The path of the webhooks for namespaces without the opt-in label.
pub const OPTED_IN_PATH: &str = "/mutate/opted-in";

/// Largest body accepted (the API server's own request limit is 3 MiB; objects are smaller).
pub const BODY_LIMIT: usize = 6 * 1024 * 1024;

/// Largest body read to its end before a 413 (see `collect_limited`); longer ones are cut off.
pub const DRAIN_LIMIT: usize = 4 * BODY_LIMIT;

/// Default `--body-read-timeout`.
pub const BODY_TIMEOUT: Duration = Duration::from_secs(10);

/// Longest a refused (503) body is read and dropped before the answer goes out.
const BUSY_DRAIN_TIMEOUT: Duration = Duration::from_secs(2);

/// Default `--max-inflight-body-bytes`: ten bodies of the largest size at once.
pub const DEFAULT_BODY_BUDGET: usize = 10 * BODY_LIMIT;

/// HTTP-level bounds of the routes.
#[derive(Debug, Clone)]
pub struct HttpLimits {
    /// Longest a body may take to arrive, waiting for the budget included.
    pub body_timeout: Duration,
    /// Body bytes held in memory at once, across requests.
    pub budget: BodyBudget,
}

#[derive(Clone)]
struct Routes {
    state: AppState,
    limits: HttpLimits,
}

/// The webhook's routes with the default limits, ready for `oneshot` in tests.
pub fn app(state: AppState) -> Router {
    let budget = BodyBudget::new(DEFAULT_BODY_BUDGET);
    let body_timeout = BODY_TIMEOUT;
    app_with(
        state,
        HttpLimits {
            body_timeout,
            budget,
        },
    )
}

/// The webhook's routes with the given limits, as the server runs them.
pub fn app_with(state: AppState, limits: HttpLimits) -> Router {
    Router::new()
        .route("/mutate", post(mutate::<true>).fallback(wrong_method))
        .route(OPTED_IN_PATH, post(mutate::<false>).fallback(wrong_method))
        .fallback(no_route)
        .with_state(Routes { state, limits })
}

/// Why a request got no AdmissionReview back (a plain-text 4xx/5xx).
#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    #[error("failed to accept the request: Content-Type must be application/json, got {0}")]
    WrongContentType(String),
    #[error("failed to accept the request: the body is larger than {BODY_LIMIT} bytes")]
    TooLarge,
    #[error("failed to read the request body within {}ms", .0.as_millis())]
    TimedOut(Duration),
    #[error("failed to accept the request: the server is busy reading other bodies; retry")]
    Busy,
    #[error("failed to read the request body: {0}")]
    BodyUnreadable(String),
    #[error(transparent)]
    Review(#[from] HandleError),
    #[error("failed to accept the request: no such path; reviews go to POST /mutate")]
    NoRoute,
    #[error("failed to accept the request: reviews take POST, got {0}")]
    WrongMethod(Method),
}

impl HttpError {
    fn status(&self) -> StatusCode {
        match self {
            HttpError::WrongContentType(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            HttpError::TooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            HttpError::TimedOut(_) => StatusCode::REQUEST_TIMEOUT,
            HttpError::Busy => StatusCode::SERVICE_UNAVAILABLE,
            HttpError::BodyUnreadable(_) => StatusCode::BAD_REQUEST,
            HttpError::Review(HandleError::NotAReview(_)) => StatusCode::BAD_REQUEST,
            HttpError::Review(HandleError::Panicked) => StatusCode::INTERNAL_SERVER_ERROR,
            HttpError::Review(HandleError::Busy) => StatusCode::SERVICE_UNAVAILABLE,
            HttpError::NoRoute => StatusCode::NOT_FOUND,
            HttpError::WrongMethod(_) => StatusCode::METHOD_NOT_ALLOWED,
        }
    }
}

impl IntoResponse for HttpError {
    fn into_response(self) -> Response {
        let status = self.status();
        tracing::debug!(status = status.as_u16(), error = %self, "rejected request");
        let text_plain = [(header::CONTENT_TYPE, "text/plain; charset=utf-8")];
        let mut response = (status, text_plain, format!("{self}\n")).into_response();
        if status == StatusCode::METHOD_NOT_ALLOWED {
            response
                .headers_mut()
                .insert(header::ALLOW, HeaderValue::from_static("POST"));
        }
        response
    }
}

/// `/mutate` (`LABELLED`: from namespaces that carry the opt-in label) or [`OPTED_IN_PATH`].
async fn mutate<const LABELLED: bool>(State(routes): State<Routes>, request: Request) -> Response {
    match answer(&routes, request, LABELLED).await {
        Ok(response) => response,
        Err(err) => reject(&routes, err),
    }
}

async fn wrong_method(State(routes): State<Routes>, method: Method) -> Response {
    reject(&routes, HttpError::WrongMethod(method))
}

async fn no_route(State(routes): State<Routes>, request: Request) -> Response {
    tracing::debug!(method = %request.method(), path = request.uri().path(), "no such route");
    reject(&routes, HttpError::NoRoute)
}

/// An HTTP error, counted by its status.
fn reject(routes: &Routes, err: HttpError) -> Response {
    routes.state.metrics().rejected(err.status().as_u16());
    err.into_response()
}

/// The answer to one request, or the HTTP error it gets.
async fn answer(
    routes: &Routes,
    request: Request,
    namespace_labelled: bool,
) -> Result<Response, HttpError> {
    check_content_type(request.headers())?;
    let declared = declared_length(request.headers());
    let HttpLimits {
        body_timeout,
        budget,
    } = &routes.limits;
    if let Some(length) = declared.filter(|&n| n > BODY_LIMIT as u64) {
        // Refused whatever it holds: read to its end keeping nothing (the client then gets
        // the 413 rather than a broken pipe), without a share of the budget. Past
        // DRAIN_LIMIT it is not worth reading; the connection is cut off.
        if length <= DRAIN_LIMIT as u64 {
            let _ = tokio::time::timeout(*body_timeout, discard(request)).await;
        }
        return Err(HttpError::TooLarge);
    }
    let started = tokio::time::Instant::now();
    // Held until the answer is built: the body and the objects parsed from it live that long.
    let body_bytes = reservation(declared, BODY_LIMIT);
    let Ok(mut meter) = budget.reserve_review(body_bytes, *body_timeout).await else {
        // Read and drop the body first, as for a 413: the client then gets the 503 rather
        // than a broken pipe. Nothing is kept, so this costs no budget.
        let _ = tokio::time::timeout(BUSY_DRAIN_TIMEOUT, discard(request)).await;
        return Err(HttpError::Busy);
    };
    let left = body_timeout.saturating_sub(started.elapsed());
    let read = tokio::time::timeout(
        left,
        collect_limited(request.into_body(), declared, BODY_LIMIT),
    )
    .await;
    let body = read.unwrap_or(Err(HttpError::TimedOut(*body_timeout)))?;
    let review = handle(&routes.state, &body, &mut meter, namespace_labelled).await?;
    let json = [(header::CONTENT_TYPE, "application/json")];
    Ok((json, review).into_response())
}

/// Reads a body to its end (at most [`DRAIN_LIMIT`] bytes), keeping nothing.
async fn discard(request: Request) {
    let _ = collect_limited(request.into_body(), None, 0).await;
}

fn check_content_type(headers: &HeaderMap) -> Result<(), HttpError> {
    let value = headers.get(header::CONTENT_TYPE);
    let media_type = value
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .map(str::trim);
    match media_type {
        Some(t) if t.eq_ignore_ascii_case("application/json") => Ok(()),
        _ => Err(HttpError::WrongContentType(match value {
            None => "none".to_owned(),
            Some(v) => format!("{:?}", String::from_utf8_lossy(v.as_bytes())),
        })),
    }
}

fn declared_length(headers: &HeaderMap) -> Option<u64> {
    headers
        .get(header::CONTENT_LENGTH)?
        .to_str()
        .ok()?
        .parse()
        .ok()
}

/// Reads the body, keeping at most `keep` bytes (0: a body refused anyway). A longer one is
/// read to its end (up to [`DRAIN_LIMIT`]) and discarded before the 413 goes out: closing a
/// socket with unread data resets it, and the client would see a broken pipe instead. The
/// pieces are copied as they arrive into one buffer of the declared length (grown as needed),
/// so that the pieces and the joined body are never held at once: the budget counts the body
/// once. A body that arrives in one piece is kept as it came.
async fn collect_limited(
    mut body: Body,
    declared: Option<u64>,
    keep: usize,
) -> Result<bytes::Bytes, HttpError> {
    let mut first: Option<bytes::Bytes> = None;
    let mut joined = bytes::BytesMut::new();
    let mut seen = 0usize;
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|err| HttpError::BodyUnreadable(err.to_string()))?;
        let Ok(data) = frame.into_data() else {
            continue;
        };
        seen = seen.saturating_add(data.len());
        if seen > DRAIN_LIMIT {
            return Err(HttpError::TooLarge);
        }
        if seen > keep {
            (first, joined) = (None, bytes::BytesMut::new());
            continue;
        }
        match first.take() {
            None if joined.is_empty() => first = Some(data),
            None => joined.extend_from_slice(&data),
            Some(head) => {
                let declared = declared.map_or(0, |n| usize::try_from(n).unwrap_or(usize::MAX));
                joined.reserve(declared.min(BODY_LIMIT).max(seen));
                joined.extend_from_slice(&head);
                joined.extend_from_slice(&data);
            }
        }
    }
    if seen > keep {
        return Err(HttpError::TooLarge);
    }
    Ok(first.unwrap_or_else(|| joined.freeze()))
}
