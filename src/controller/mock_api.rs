//! A kube client over a tower-test mock API, for the tests of the writer and the election.

use http::request::Parts;
use http::{Request, Response};
use http_body_util::BodyExt;
use kube::client::Body;
use serde_json::{Value, json};

/// A client whose requests `answer` gets, with the body parsed (`Null` if not JSON): it returns
/// the status and JSON body sent back, or `None` to leave the request unanswered.
pub fn client(
    mut answer: impl FnMut(Parts, Value) -> Option<(u16, Value)> + Send + 'static,
) -> kube::Client {
    let (service, mut handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    tokio::spawn(async move {
        let mut unanswered = Vec::new();
        while let Some((request, send)) = handle.next_request().await {
            let (parts, body) = request.into_parts();
            let bytes = body.collect().await.unwrap().to_bytes();
            let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
            let Some((code, reply)) = answer(parts, body) else {
                unanswered.push(send);
                continue;
            };
            let response = Response::builder()
                .status(code)
                .header("content-type", "application/json")
                .body(Body::from(serde_json::to_vec(&reply).unwrap()))
                .unwrap();
            send.send_response(response);
        }
    });
    kube::Client::new(service, "default")
}

/// A failure `Status` with `code`, whose reason and message are `reason`.
pub fn status(code: u16, reason: &str) -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
           "message": reason, "reason": reason, "code": code})
}
