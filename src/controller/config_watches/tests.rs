//! The per-namespace watches as an owner: a namespace's two watches start once however often it
//! is opted in, stop when it opts out, and all stop with the owner.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::task::AbortHandle;

use super::*;
use crate::controller::mock_api;

/// A client that answers nothing and records each path asked for.
fn recording_client() -> (Client, Arc<Mutex<Vec<String>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    let client = mock_api::client(move |parts, _| {
        log.lock().unwrap().push(parts.uri.path().to_owned());
        None
    });
    (client, seen)
}

/// Waits (up to 5 s) until both kinds of `namespace` have been asked for.
async fn asked_for(seen: &Mutex<Vec<String>>, namespace: &str) {
    let wanted = ["configmaps", "secrets"].map(|k| format!("/api/v1/namespaces/{namespace}/{k}"));
    for _ in 0..500 {
        if wanted.iter().all(|w| seen.lock().unwrap().contains(w)) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("{namespace} was not watched: {:?}", seen.lock().unwrap());
}

/// The abort handles of `namespace`'s watches.
fn handles(watches: &ConfigWatches, namespace: &str) -> Vec<AbortHandle> {
    watches.tasks[namespace]
        .iter()
        .map(JoinHandle::abort_handle)
        .collect()
}

/// Lets aborted tasks finish.
async fn settle() {
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
}

#[tokio::test]
async fn a_namespace_is_watched_once_and_stops_being_watched_when_it_opts_out() {
    let (client, seen) = recording_client();
    let (out, _events) = tokio::sync::mpsc::channel(8);
    let mut watches = ConfigWatches::new(client, out, None);
    let app: Arc<str> = "app".into();
    watches.start(&app);
    watches.start(&app);
    assert_eq!(watches.tasks.len(), 1);
    assert_eq!(
        watches.tasks["app"].len(),
        2,
        "a ConfigMap and a Secret watch"
    );
    asked_for(&seen, "app").await;
    let app_tasks = handles(&watches, "app");

    watches.start(&"other".into());
    asked_for(&seen, "other").await;
    watches.stop("app");
    watches.stop("never-started");
    settle().await;
    assert!(app_tasks.iter().all(AbortHandle::is_finished));
    assert_eq!(
        watches.tasks.keys().collect::<Vec<_>>(),
        [&Arc::from("other")]
    );
    let other_tasks = handles(&watches, "other");
    assert!(!other_tasks.iter().any(AbortHandle::is_finished));

    drop(watches);
    settle().await;
    assert!(other_tasks.iter().all(AbortHandle::is_finished));
}
