//! A status `Snapshot` from a flat list of objects, as a golden case holds them (pure): each
//! object goes where `status::collect` would have put it, through the same `Snapshot` setters,
//! and reads named in `failed` count as failed with the reason given.

use std::collections::BTreeMap;

use k8s_openapi::jiff::Timestamp;
use serde::de::DeserializeOwned;
use serde_json::Value;

use reload_injector::status::snapshot::{Fetched, HASH_KEY_SECRET, INSTALL_NAME, Snapshot};
use reload_injector::status::target_arg;

/// Names of reads for `failed`: `namespaces`, `webhook`, `lease`, `serveDeployment`, `hashKey`,
/// `configmaps`, `secrets`, `pods`, `jobs`, `events`, a workload plural (`deployments`), or
/// `log:NS/POD`.
pub fn assemble(
    now: Timestamp,
    objects: &[Value],
    failed: &BTreeMap<String, String>,
    logs: &BTreeMap<String, String>,
) -> Result<Snapshot, String> {
    let mut snapshot = Snapshot::empty(now);
    let of_kind = |kind: &'static str| objects.iter().filter(move |o| o["kind"] == kind);
    let failure = |read: &str| failed.get(read).cloned();
    let webhook = of_kind("MutatingWebhookConfiguration")
        .find(|o| o["metadata"]["name"] == INSTALL_NAME)
        .map(typed)
        .transpose()?;
    snapshot.set_webhook(fetched(failure("webhook"), webhook));
    let webhook_ns = snapshot.webhook_namespace.clone();
    let in_webhook_ns = |o: &&Value, name: &str| {
        o["metadata"]["name"] == name && o["metadata"]["namespace"] == webhook_ns.as_str()
    };
    let lease = of_kind("Lease")
        .find(|o| in_webhook_ns(o, INSTALL_NAME))
        .map(typed)
        .transpose()?;
    snapshot.lease = fetched(failure("lease"), lease);
    let deployment = of_kind("Deployment").find(|o| in_webhook_ns(o, INSTALL_NAME));
    snapshot.serve_deployment = fetched(failure("serveDeployment"), deployment.cloned());
    let key_secret = of_kind("Secret")
        .find(|o| in_webhook_ns(o, HASH_KEY_SECRET))
        .map(typed)
        .transpose()?;
    snapshot.set_hash_key(fetched(failure("hashKey"), key_secret));
    let namespaces = of_kind("Namespace").map(typed).collect::<Result<_, _>>()?;
    snapshot.set_namespaces(fetched(failure("namespaces"), namespaces));
    for kind in target_arg::WORKLOADS {
        let plural = kind.plural();
        let list = of_kind(kind.name()).cloned().collect();
        snapshot
            .workloads
            .insert(kind, fetched(failure(plural), list));
    }
    snapshot.config_maps = fetched(
        failure("configmaps"),
        of_kind("ConfigMap").map(typed).collect::<Result<_, _>>()?,
    );
    let secrets = of_kind("Secret").map(typed).collect::<Result<_, _>>()?;
    snapshot.set_secrets(fetched(failure("secrets"), secrets));
    snapshot.pods = fetched(failure("pods"), of_kind("Pod").cloned().collect());
    snapshot.jobs = fetched(failure("jobs"), of_kind("Job").cloned().collect());
    snapshot.events = fetched(
        failure("events"),
        of_kind("Event").map(typed).collect::<Result<_, _>>()?,
    );
    for (pod, text) in logs {
        snapshot
            .logs
            .insert(pod.clone(), Fetched::Read(text.clone()));
    }
    for (read, reason) in failed {
        if let Some(pod) = read.strip_prefix("log:") {
            snapshot
                .logs
                .insert(pod.to_owned(), Fetched::Failed(reason.clone()));
        }
    }
    Ok(snapshot)
}

fn typed<T: DeserializeOwned>(object: &Value) -> Result<T, String> {
    serde_json::from_value(object.clone()).map_err(|e| {
        format!(
            "failed to read {} {:?}: {e}",
            object["kind"], object["metadata"]["name"]
        )
    })
}

fn fetched<T>(failure: Option<String>, value: T) -> Fetched<T> {
    match failure {
        Some(reason) => Fetched::Failed(reason),
        None => Fetched::Read(value),
    }
}
