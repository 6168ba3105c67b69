//! A client that talks to the webhook the way kube-apiserver does: TLS trusting only the
//! webhook's CA, SNI = the Service name, ALPN h2 or http/1.1, keep-alive.

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http::{Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::client::conn::{http1, http2};
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls::ClientConfig;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, ServerName};
use serde_json::Value;
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

use super::SERVER_NAME;

/// HTTP version to negotiate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Proto {
    /// ALPN `http/1.1`.
    H1,
    /// ALPN `h2`.
    H2,
}

/// A TLS client configuration trusting only `ca_pem`.
pub fn client_config(ca_pem: &str, proto: Proto) -> Arc<ClientConfig> {
    reload_injector::install_crypto_provider();
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots.add(cert.unwrap()).unwrap();
    }
    let mut config = ClientConfig::builder()
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![match proto {
        Proto::H1 => b"http/1.1".to_vec(),
        Proto::H2 => b"h2".to_vec(),
    }];
    Arc::new(config)
}

/// A TLS connection to the webhook, before any HTTP.
pub async fn tls_stream(
    addr: SocketAddr,
    config: Arc<ClientConfig>,
) -> std::io::Result<TlsStream<TcpStream>> {
    let tcp = TcpStream::connect(addr).await?;
    tcp.set_nodelay(true)?;
    let name = ServerName::try_from(SERVER_NAME).unwrap();
    TlsConnector::from(config).connect(name, tcp).await
}

/// The DER of the certificate the server presented.
pub fn peer_cert(stream: &TlsStream<TcpStream>) -> Vec<u8> {
    stream.get_ref().1.peer_certificates().unwrap()[0].to_vec()
}

enum Sender {
    H1(http1::SendRequest<Full<Bytes>>),
    H2(http2::SendRequest<Full<Bytes>>),
}

/// One keep-alive HTTP connection over TLS.
pub struct Conn {
    sender: Sender,
    /// DER of the server's certificate.
    pub peer_cert: Vec<u8>,
    /// The negotiated ALPN protocol.
    pub alpn: Option<Vec<u8>>,
}

impl Conn {
    /// Connects and negotiates `proto`.
    pub async fn connect(addr: SocketAddr, ca_pem: &str, proto: Proto) -> std::io::Result<Self> {
        let stream = tls_stream(addr, client_config(ca_pem, proto)).await?;
        let peer_cert = peer_cert(&stream);
        let alpn = stream.get_ref().1.alpn_protocol().map(<[u8]>::to_vec);
        let io = TokioIo::new(stream);
        let sender = match proto {
            Proto::H1 => {
                let (sender, conn) = http1::handshake(io).await.map_err(std::io::Error::other)?;
                tokio::spawn(conn);
                Sender::H1(sender)
            }
            Proto::H2 => {
                let (sender, conn) = http2::handshake(TokioExecutor::new(), io)
                    .await
                    .map_err(std::io::Error::other)?;
                tokio::spawn(conn);
                Sender::H2(sender)
            }
        };
        Ok(Self {
            sender,
            peer_cert,
            alpn,
        })
    }

    /// POSTs `body` to `/mutate` with the given content type (none when `None`).
    pub async fn post(
        &mut self,
        content_type: Option<&str>,
        body: Vec<u8>,
    ) -> Result<(StatusCode, Bytes), hyper::Error> {
        let mut req = Request::post(format!("https://{SERVER_NAME}/mutate?timeout=10s"));
        if let Some(ct) = content_type {
            req = req.header(http::header::CONTENT_TYPE, ct);
        }
        req = req.header(http::header::ACCEPT, "application/json, */*");
        let req = req.body(Full::new(Bytes::from(body))).unwrap();
        let resp = match &mut self.sender {
            Sender::H1(s) => {
                s.ready().await?;
                s.send_request(req).await?
            }
            Sender::H2(s) => {
                s.ready().await?;
                s.send_request(req).await?
            }
        };
        let status = resp.status();
        let body = resp.into_body().collect().await?.to_bytes();
        Ok((status, body))
    }

    /// Sends an AdmissionReview; asserts HTTP 200 and returns the parsed answer.
    pub async fn review(&mut self, review: &Value) -> Value {
        let (status, body) = self
            .post(
                Some("application/json"),
                serde_json::to_vec(review).unwrap(),
            )
            .await
            .expect("request failed");
        assert_eq!(status, StatusCode::OK, "{}", String::from_utf8_lossy(&body));
        serde_json::from_slice(&body).expect("answer is JSON")
    }
}
