//! A distinctive Secret value runs through every fixture that uses Secrets — the webhook (real
//! binary, Secrets served by a fake API server), the offline `inject`, and the watcher on a
//! `--secret-dir` — and all their output is searched: debug logs, metrics, warnings, patches,
//! inject output. Neither the value, its base64, nor a bare SHA-256 of it may appear.

use crate::watch_support;
use crate::webhook_support;

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Stdio};

use axum::Router;
use axum::extract::{Path as UrlPath, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::get;
use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use watch_support::http_server::{Reply, TestServer};
use watch_support::kubelet::AtomicDir;
use watch_support::scratch::Scratch;
use watch_support::watcher::Watcher;
use webhook_support::client::{Conn, Proto};
use webhook_support::process::Server;
use webhook_support::{bundle, review_of_case, scratch};

const VALUE: &str = "zebra-7Q4-secret-value-do-not-leak";
const NEXT_VALUE: &str = "okapi-9K2-rotated-secret-do-not-leak";

/// Every form in which a value must not appear.
fn needles(value: &str) -> Vec<String> {
    let digest = Sha256::digest(value.as_bytes());
    vec![
        value.to_owned(),
        BASE64.encode(value),
        hex::encode(digest),
        hex::encode_upper(digest),
        BASE64.encode(digest),
    ]
}

fn assert_clean(what: &str, text: &str) {
    assert!(!text.is_empty(), "{what}: nothing captured");
    for value in [VALUE, NEXT_VALUE] {
        for needle in needles(value) {
            assert!(
                !text.contains(&needle),
                "{what} contains {needle:?} (a form of the secret {value:?}):\n{text}"
            );
        }
    }
}

/// Secret name → keys, for every Secret an object refers to (env, envFrom, volumes,
/// projected sources).
fn secret_refs(value: &Value, out: &mut BTreeMap<String, BTreeSet<String>>) {
    match value {
        Value::Object(map) => {
            for (key, inner) in map {
                let name = match key.as_str() {
                    "secretKeyRef" | "secretRef" => inner["name"].as_str(),
                    "secret" => inner["secretName"].as_str().or(inner["name"].as_str()),
                    _ => None,
                };
                if let Some(name) = name {
                    let keys = out.entry(name.to_owned()).or_default();
                    if let Some(k) = inner["key"].as_str() {
                        keys.insert(k.to_owned());
                    }
                    for item in inner["items"].as_array().into_iter().flatten() {
                        if let Some(k) = item["key"].as_str() {
                            keys.insert(k.to_owned());
                        }
                    }
                    keys.insert("password".to_owned());
                }
                secret_refs(inner, out);
            }
        }
        Value::Array(items) => items.iter().for_each(|v| secret_refs(v, out)),
        _ => {}
    }
}

/// One fixture with Secrets: its case, namespace, and the Secrets (every key = [`VALUE`]).
struct Fixture {
    name: String,
    case: Value,
    namespace: String,
    secrets: Vec<Value>,
}

fn fixtures() -> Vec<Fixture> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/inject");
    let mut out = Vec::new();
    let mut paths: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let n = p.to_str().unwrap();
            n.ends_with(".yaml") && !n.ends_with(".golden.yaml")
        })
        .collect();
    paths.sort();
    for path in paths {
        let case: Value = serde_saphyr::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let mut refs = BTreeMap::new();
        secret_refs(&case["object"], &mut refs);
        secret_refs(&case["oldObject"], &mut refs);
        for config in case["configs"].as_array().into_iter().flatten() {
            if config["kind"] == "Secret" {
                let name = config["metadata"]["name"].as_str().unwrap().to_owned();
                let keys = refs.entry(name).or_default();
                for key in config["data"].as_object().into_iter().flatten() {
                    keys.insert(key.0.clone());
                }
            }
        }
        if refs.is_empty() {
            continue;
        }
        let namespace = webhook_support::review_of_case(&case)["request"]["namespace"]
            .as_str()
            .unwrap()
            .to_owned();
        let secrets = refs
            .into_iter()
            .map(|(name, keys)| {
                let data: serde_json::Map<String, Value> = keys
                    .into_iter()
                    .map(|k| (k, json!(BASE64.encode(VALUE))))
                    .collect();
                json!({"apiVersion": "v1", "kind": "Secret",
                       "metadata": {"name": name, "namespace": namespace}, "data": data})
            })
            .collect();
        out.push(Fixture {
            name: path.file_stem().unwrap().to_str().unwrap().to_owned(),
            case,
            namespace,
            secrets,
        });
    }
    assert!(out.len() >= 5, "only {} fixtures use Secrets", out.len());
    out
}

/// The ConfigMaps of the case and the fixture's Secrets, as the cluster holds them.
fn cluster_objects(fixture: &Fixture) -> Vec<Value> {
    let mut objects: Vec<Value> = fixture.case["configs"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|c| c["kind"] == "ConfigMap")
        .cloned()
        .map(|mut c| {
            c["metadata"]["namespace"] = json!(fixture.namespace);
            c
        })
        .collect();
    objects.extend(fixture.secrets.iter().cloned());
    objects
}

type Objects = BTreeMap<(String, String, String), Value>;

/// Secrets the fake API has served.
static SECRETS_SERVED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

async fn api_get(
    State(objects): State<std::sync::Arc<Objects>>,
    UrlPath((namespace, resource, name)): UrlPath<(String, String, String)>,
) -> axum::response::Response {
    let kind = match resource.as_str() {
        "secrets" => "Secret",
        "configmaps" => "ConfigMap",
        _ => "",
    };
    match objects.get(&(namespace, kind.to_owned(), name.clone())) {
        Some(object) => {
            if kind == "Secret" {
                SECRETS_SERVED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
            json_response(StatusCode::OK, object)
        }
        None => json_response(
            StatusCode::NOT_FOUND,
            &json!({"kind": "Status", "apiVersion": "v1", "metadata": {},
                "status": "Failure", "reason": "NotFound", "code": 404,
                "message": format!("{resource} \"{name}\" not found")}),
        ),
    }
}

fn json_response(status: StatusCode, body: &Value) -> axum::response::Response {
    (
        status,
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

/// A plain-HTTP stand-in for kube-apiserver answering GETs of ConfigMaps and Secrets.
async fn fake_api(fixtures: &[Fixture]) -> SocketAddr {
    let mut objects = Objects::new();
    for fixture in fixtures {
        for object in cluster_objects(fixture) {
            let key = (
                fixture.namespace.clone(),
                object["kind"].as_str().unwrap().to_owned(),
                object["metadata"]["name"].as_str().unwrap().to_owned(),
            );
            objects.insert(key, object);
        }
    }
    let app = Router::new()
        .route(
            "/api/v1/namespaces/{namespace}/{resource}/{name}",
            get(api_get),
        )
        .with_state(std::sync::Arc::new(objects));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    addr
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_webhook_never_shows_a_secret_value() {
    let fixtures = fixtures();
    let api = fake_api(&fixtures).await;
    let dir = scratch("secret-values-serve");
    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters: [{{name: fake, cluster: {{server: \"http://{api}\"}}}}]\n\
             users: [{{name: u, user: {{token: t}}}}]\n\
             contexts: [{{name: c, context: {{cluster: fake, user: u, namespace: default}}}}]\ncurrent-context: c\n"
        ),
    )
    .unwrap();
    std::fs::write(dir.join("hash.key"), "test-hmac-key").unwrap();
    let b = bundle();
    std::fs::write(dir.join("tls.crt"), &b.cert_pem).unwrap();
    std::fs::write(dir.join("tls.key"), &b.key_pem).unwrap();
    let server = Server::start_with_env(
        "debug",
        &dir.join("tls.crt"),
        &dir.join("tls.key"),
        &[
            "--native-sidecars",
            "never",
            "--secret-hash-key-file",
            dir.join("hash.key").to_str().unwrap(),
        ],
        &[("KUBECONFIG", kubeconfig.to_str().unwrap())],
    );
    let mut conn = Conn::connect(server.addr, &b.ca_cert_pem, Proto::H1)
        .await
        .unwrap();
    let mut answers = String::new();
    let mut hashed = 0;
    for fixture in &fixtures {
        let mut review = review_of_case(&fixture.case);
        review["request"]["uid"] = json!(fixture.name);
        let answer = conn.review(&review).await;
        let response = webhook_support::check_answer(&answer, &fixture.name);
        answers.push_str(&answer.to_string());
        if let Some(patch) = response["patch"].as_str() {
            let patch = String::from_utf8(BASE64.decode(patch).unwrap()).unwrap();
            hashed += usize::from(patch.contains("config-hash"));
            answers.push_str(&patch);
        }
    }
    assert!(hashed >= 1, "no fixture got a config hash: {answers}");
    let served = SECRETS_SERVED.load(std::sync::atomic::Ordering::Relaxed);
    assert!(served >= 1, "the webhook fetched no Secret");
    let (_, metrics) = server.side_get("/metrics").unwrap();
    let lookups_ok = server.log().iter().any(|l| l.contains("admission review"));
    assert!(lookups_ok, "no review logged");
    assert_clean("webhook answers and patches", &answers);
    assert_clean("webhook /metrics", &metrics);
    assert_clean("webhook debug log", &server.log().join("\n"));
}

#[test]
fn inject_never_shows_a_secret_value() {
    let dir = scratch("secret-values-inject");
    std::fs::write(dir.join("hash.key"), "test-hmac-key").unwrap();
    let mut checked = 0;
    for fixture in fixtures() {
        let object = dir.join(format!("{}.yaml", fixture.name));
        std::fs::write(
            &object,
            serde_json::to_string(&fixture.case["object"]).unwrap(),
        )
        .unwrap();
        let configs = dir.join(format!("{}.configs.yaml", fixture.name));
        let docs: Vec<String> = cluster_objects(&fixture)
            .iter()
            .map(|o| serde_json::to_string(o).unwrap())
            .collect();
        std::fs::write(&configs, docs.join("\n---\n")).unwrap();
        let key = dir.join("hash.key");
        for with_key in [true, false] {
            for output in ["yaml", "json"] {
                let mut command = Command::new(env!("CARGO_BIN_EXE_reload-injector"));
                command
                    .args(["--log-level", "debug", "inject", "-o", output, "-n"])
                    .arg(&fixture.namespace)
                    .arg("-f")
                    .arg(&object)
                    .arg("--configs")
                    .arg(&configs);
                if with_key {
                    command.arg("--secret-hash-key-file").arg(&key);
                }
                let out = command.stdin(Stdio::null()).output().unwrap();
                let text = format!(
                    "{}{}",
                    String::from_utf8_lossy(&out.stdout),
                    String::from_utf8_lossy(&out.stderr)
                );
                assert!(
                    out.status.code().is_some_and(|c| c <= 1),
                    "{}: {text}",
                    fixture.name
                );
                assert_clean(&format!("inject {} (key: {with_key})", fixture.name), &text);
                checked += 1;
            }
        }
    }
    assert!(checked >= 20, "{checked}");
}

#[test]
fn the_watcher_never_shows_a_secret_value() {
    let scratch = Scratch::new("secret-values-watch");
    let volume = AtomicDir::create(&scratch.join("creds"), &[("password", VALUE)]);
    let app = TestServer::start(volume.path().to_path_buf(), |_| Reply::now(200));
    let url = app.url("/-/reload");
    let watcher = Watcher::start(
        &scratch.join("watch.log"),
        &[
            "--log-level",
            "debug",
            "--secret-dir",
            volume.path().to_str().unwrap(),
            "--url",
            &url,
            "--debounce",
            "50ms",
        ],
    );
    volume.update(&[("password", NEXT_VALUE)]);
    watcher.wait_reloads(1);
    assert_eq!(app.successes().len(), 1);
    assert_clean("watcher debug log", &watcher.log_text());
    assert_clean("watcher /metrics", &watcher.metrics_page());
}
