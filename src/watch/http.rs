//! HTTP mode: one plain-HTTP request per attempt, with a deadline. The app listens on localhost
//! in the same pod, so plain HTTP/1.1 is all that is needed; `https://` is refused at start-up.

use std::time::Duration;

use bytes::Bytes;
use http::uri::InvalidUri;
use http::{Method, Request, Uri, header};
use http_body_util::Empty;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

/// Errors of HTTP mode.
#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    #[error("failed to parse URL {url:?}: {reason}")]
    UrlInvalid { url: String, reason: String },
    /// The URL is `https://` (or another scheme).
    #[error(
        "failed to use URL {0:?}: only http:// is supported (the app is reached on localhost \
         inside the pod; serve the reload endpoint on plain HTTP, e.g. http://127.0.0.1:PORT/...)"
    )]
    SchemeUnsupported(String),
    #[error("failed to use HTTP method {0:?}")]
    MethodInvalid(String),
    #[error("failed to connect to {authority}")]
    ConnectFailed {
        authority: String,
        #[source]
        source: std::io::Error,
    },
    #[error("failed to get an answer from {url}")]
    ExchangeFailed {
        url: String,
        #[source]
        source: hyper::Error,
    },
    #[error("failed to get an answer from {url} within {timeout:?} (timed out)")]
    TimedOut { url: String, timeout: Duration },
    #[error("failed to reload: {method} {url} answered {status}")]
    StatusNotSuccess {
        method: Method,
        url: String,
        status: http::StatusCode,
    },
}

/// One endpoint to call: method, URL and per-attempt timeout.
#[derive(Debug, Clone)]
pub struct Endpoint {
    method: Method,
    uri: Uri,
    authority: String,
    timeout: Duration,
}

impl Endpoint {
    /// Validates `method` and `url` (plain `http://` only).
    pub fn new(method: &str, url: &str, timeout: Duration) -> Result<Endpoint, HttpError> {
        let method = Method::from_bytes(method.trim().to_ascii_uppercase().as_bytes())
            .map_err(|_| HttpError::MethodInvalid(method.to_owned()))?;
        let invalid = |reason: String| HttpError::UrlInvalid {
            url: url.to_owned(),
            reason,
        };
        let uri: Uri = url
            .parse()
            .map_err(|err: InvalidUri| invalid(err.to_string()))?;
        match uri.scheme_str() {
            Some("http") => {}
            Some(_) => return Err(HttpError::SchemeUnsupported(url.to_owned())),
            None => return Err(invalid("no scheme: write http://HOST:PORT/PATH".to_owned())),
        }
        let authority = uri
            .authority()
            .ok_or_else(|| invalid("no host".to_owned()))?;
        let authority = match authority.port_u16() {
            Some(_) => authority.to_string(),
            None => format!("{}:80", authority.host()),
        };
        Ok(Endpoint {
            method,
            uri,
            authority,
            timeout,
        })
    }

    /// `METHOD URL`, for log lines.
    pub fn describe(&self) -> String {
        format!("{} {}", self.method, self.uri)
    }

    /// Sends one request; `Ok` only for a 2xx answer within the timeout.
    pub async fn call(&self) -> Result<http::StatusCode, HttpError> {
        let answer = tokio::time::timeout(self.timeout, self.exchange()).await;
        answer.unwrap_or_else(|_| {
            let url = self.uri.to_string();
            Err(HttpError::TimedOut {
                url,
                timeout: self.timeout,
            })
        })
    }

    async fn exchange(&self) -> Result<http::StatusCode, HttpError> {
        let stream = TcpStream::connect(self.authority.as_str())
            .await
            .map_err(|source| HttpError::ConnectFailed {
                authority: self.authority.clone(),
                source,
            })?;
        let _ = stream.set_nodelay(true);
        let broke = |source| HttpError::ExchangeFailed {
            url: self.uri.to_string(),
            source,
        };
        let (mut sender, connection) =
            hyper::client::conn::http1::handshake::<_, Empty<Bytes>>(TokioIo::new(stream))
                .await
                .map_err(broke)?;
        let driver = tokio::spawn(connection);
        let request = Request::builder()
            .method(self.method.clone())
            .uri(self.uri.path_and_query().map_or("/", |path| path.as_str()))
            .header(header::HOST, self.authority.as_str())
            .header(
                header::USER_AGENT,
                concat!("reload-injector/", env!("CARGO_PKG_VERSION")),
            )
            .body(Empty::new())
            .expect("a request from validated parts");
        let result = sender.send_request(request).await.map_err(broke);
        drop(sender);
        driver.abort();
        let status = result?.status();
        if status.is_success() {
            Ok(status)
        } else {
            Err(HttpError::StatusNotSuccess {
                method: self.method.clone(),
                url: self.uri.to_string(),
                status,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: Duration = Duration::from_secs(1);

    #[test]
    fn plain_http_urls_are_accepted() {
        let endpoint = Endpoint::new("post", "http://127.0.0.1:9090/-/reload", T).unwrap();
        assert_eq!(endpoint.describe(), "POST http://127.0.0.1:9090/-/reload");
        assert_eq!(endpoint.authority, "127.0.0.1:9090");
        let default_port = Endpoint::new("GET", "http://localhost/x", T).unwrap();
        assert_eq!(default_port.authority, "localhost:80");
    }

    #[test]
    fn https_is_refused_clearly() {
        let err = Endpoint::new("POST", "https://127.0.0.1:9090/-/reload", T).unwrap_err();
        assert!(matches!(err, HttpError::SchemeUnsupported(_)));
        assert!(err.to_string().contains("only http:// is supported"));
    }

    #[test]
    fn bad_urls_and_methods_are_refused() {
        for (method, url) in [("POST", "127.0.0.1:9090/x"), ("POST", "http://exa mple/")] {
            let result = Endpoint::new(method, url, T);
            assert!(matches!(result, Err(HttpError::UrlInvalid { .. })), "{url}");
        }
        let result = Endpoint::new("PO ST", "http://127.0.0.1/", T);
        assert!(matches!(result, Err(HttpError::MethodInvalid(_))));
    }
}
