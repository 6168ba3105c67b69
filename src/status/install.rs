//! Opt-in and the installation (webhook configuration, the controller's Lease, whether `serve`
//! was told Reloader is gone). Pure.

use k8s_openapi::api::admissionregistration::v1::MutatingWebhook;
use serde::Serialize;
use serde_json::Value;

use super::findings::{Code, Finding};
use super::snapshot::{Fetched, INSTALL_NAME, Snapshot};
use super::{age, seconds_between};
use crate::policy::{
    self, INJECT, Map, OPT_IN_VALUE, OptedInBy, RETIRED_FLAG, Unmanaged, Verdict, reloader,
};

/// Is the workload opted in?
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OptIn {
    pub namespace_label: Option<String>,
    pub namespace_read: bool,
    /// The product acts on it (an unreadable namespace counts as labelled).
    pub opted_in: bool,
    /// A namespace never mutated whatever its labels say.
    pub excluded: bool,
    /// `label` or `annotation` when the pod template opts out.
    pub opted_out_by: Option<&'static str>,
    pub opted_in_by: Option<&'static str>,
    /// Reloader's annotations on it (`key=value`), its own metadata's then its template's.
    pub reloader: Vec<String>,
    /// Reloader's annotations select it while Reloader may still run: left to Reloader.
    pub left_to_reloader: bool,
}

/// The webhook configuration as read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum WebhookState {
    Present,
    #[default]
    Missing,
    Unreadable,
}

/// The webhook configuration and the controller.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Installation {
    pub webhook: WebhookState,
    /// Whether every webhook in it has a CA bundle (`None` when not read).
    pub ca_bundle: Option<bool>,
    pub namespace: String,
    pub lease_holder: Option<String>,
    pub renewed_seconds_ago: Option<i64>,
    pub lease_duration_seconds: Option<i64>,
    /// A leader holds an unexpired Lease (`false` when the Lease could not be read).
    pub controller_running: bool,
    pub lease_read: bool,
    /// Whether `serve` runs with `--reloader-retired` (`None`: its Deployment could not be read).
    pub reloader_retired: Option<bool>,
}

/// The opt-in part and its findings, from the template's `labels` and `annotations` and the
/// workload's `own` annotations. Reloader is taken to run unless `serve` is known to be told not.
pub fn opt_in(
    snapshot: &Snapshot,
    namespace: &str,
    [labels, annotations, own]: [&Map; 3],
) -> (OptIn, Vec<Finding>) {
    let excluded = policy::excluded(namespace, &snapshot.webhook_namespace);
    let namespaces = snapshot.namespaces.ok();
    let namespace_read = namespaces.is_some();
    let namespace_label = namespaces
        .and_then(|map| map.get(namespace)?.metadata.labels.as_ref()?.get(INJECT))
        .cloned();
    let labelled = namespace_label.as_deref() == Some(OPT_IN_VALUE) || !namespace_read;
    let retired = reloader_retired(snapshot) == Some(true);
    let verdict = policy::verdict(labelled, labels, annotations, retired);
    // Reloader's annotations on its own metadata, then on its template, as `key=value`.
    let reloader: Vec<String> = (own.iter().chain(annotations))
        .filter(|(key, _)| reloader::is_key(key))
        .map(|(key, value)| format!("{key}={value}"))
        .collect();
    let finding = verdict_finding(&verdict, excluded, namespace, &namespace_label, &reloader);
    let (opted_out_by, opted_in_by) = match verdict {
        Verdict::Unmanaged(Unmanaged::OptedOut(by)) => (Some(by.as_str()), None),
        Verdict::Managed { by, .. } if !excluded => (
            None,
            Some(match by {
                OptedInBy::Namespace => "namespace",
                OptedInBy::Annotation => "annotation",
                OptedInBy::Reloader => "reloader",
            }),
        ),
        _ => (None, None),
    };
    let opt_in = OptIn {
        namespace_label,
        namespace_read,
        opted_in: opted_in_by.is_some(),
        excluded,
        opted_out_by,
        opted_in_by,
        reloader,
        left_to_reloader: matches!(verdict, Verdict::LeftToReloader) && !excluded,
    };
    (opt_in, finding.into_iter().collect())
}

/// The finding of an object the product does not act on (or `excluded`), with its fix.
fn verdict_finding(
    verdict: &Verdict,
    excluded: bool,
    namespace: &str,
    label: &Option<String>,
    reloader: &[String],
) -> Option<Finding> {
    let annotations = reloader.join(", ");
    let label = label
        .as_deref()
        .map_or("absent".to_owned(), |v| format!("{v:?}"));
    Some(match verdict {
        _ if excluded => Finding::new(
            Code::NamespaceExcluded,
            format!("namespace {namespace:?} is never mutated, whatever its labels say"),
            "run the workload in another namespace",
        ),
        Verdict::Managed { .. } => return None,
        Verdict::Unmanaged(Unmanaged::NotOptedIn) => Finding::new(
            Code::NamespaceNotOptedIn,
            format!(
                "neither namespace {namespace:?} (label {INJECT}: {label}) nor the object opts in"
            ),
            format!(
                "kubectl label namespace {namespace} {INJECT}={OPT_IN_VALUE}, or opt this object in \
                 alone: the annotation {INJECT}: {OPT_IN_VALUE} on it"
            ),
        ),
        Verdict::Unmanaged(Unmanaged::OptedOut(by)) => {
            let by = by.as_str();
            Finding::new(
                Code::OptedOut,
                format!("the pod template opts out: {by} {INJECT}: \"false\""),
                format!("remove the {by} {INJECT} from the pod template if it should reload"),
            )
        }
        Verdict::Unmanaged(Unmanaged::ReloaderSelectsNothing) => Finding::new(
            Code::ReloaderSelectsNothing,
            format!("Reloader's annotations ({annotations}) select no ConfigMap or Secret"),
            format!(
                "set {} \"true\", or name what counts in a reload list",
                reloader::AUTO
            ),
        ),
        Verdict::LeftToReloader => Finding::new(
            Code::LeftToReloader,
            format!(
                "left to Reloader: its annotations ({annotations}) select it and serve runs \
                 without {RETIRED_FLAG}, so that no change rolls it twice"
            ),
            format!(
                "once Reloader is gone: serve {RETIRED_FLAG} (chart: --set serve.reloaderRetired=true), \
                 then roll it once (kubectl rollout restart)"
            ),
        ),
    })
}

/// Whether the webhook's Deployment runs `serve` with `--reloader-retired` (flag or env).
pub fn reloader_retired(snapshot: &Snapshot) -> Option<bool> {
    let deployment = snapshot.serve_deployment.ok()?.as_ref()?;
    let containers = deployment
        .pointer("/spec/template/spec/containers")?
        .as_array()?;
    let mut retired = false;
    for container in containers {
        let env = container["env"].as_array().into_iter().flatten();
        for var in env.filter(|v| v["name"] == "RELOAD_INJECTOR_RELOADER_RETIRED") {
            retired = var["value"].as_str() == Some("true");
        }
        let args = container["args"].as_array().into_iter().flatten();
        for arg in args.filter_map(Value::as_str) {
            match arg.strip_prefix(RETIRED_FLAG) {
                Some("" | "=true") => retired = true,
                Some("=false") => retired = false,
                _ => {}
            }
        }
    }
    Some(retired)
}

/// The installation part, its findings, and what could not be read of it.
pub fn installation(snapshot: &Snapshot) -> (Installation, Vec<Finding>, Vec<String>) {
    let (webhook, ca_bundle) = match &snapshot.webhook {
        Fetched::Read(Some(config)) => {
            let hooks = config.webhooks.as_deref().unwrap_or_default();
            let has_bundle = |h: &&MutatingWebhook| {
                (h.client_config.ca_bundle.as_ref()).is_some_and(|b| !b.0.is_empty())
            };
            let all = !hooks.is_empty() && hooks.iter().all(|h| has_bundle(&h));
            (WebhookState::Present, Some(all))
        }
        Fetched::Read(None) => (WebhookState::Missing, None),
        Fetched::Failed(_) => (WebhookState::Unreadable, None),
    };
    let mut out = Installation {
        webhook,
        ca_bundle,
        namespace: snapshot.webhook_namespace.clone(),
        reloader_retired: reloader_retired(snapshot),
        ..Installation::default()
    };
    let mut findings = Vec::new();
    if webhook == WebhookState::Missing {
        findings.push(Finding::new(
            Code::WebhookMissing,
            format!(
                "the MutatingWebhookConfiguration {INSTALL_NAME:?} does not exist: nothing is injected or stamped"
            ),
            "install reload-injector: helm install from its OCI chart, or kubectl apply -k manifests/cert-manager/ (docs/install.md)",
        ));
    } else if ca_bundle == Some(false) {
        findings.push(Finding::new(
            Code::WebhookNoCaBundle,
            format!(
                "the MutatingWebhookConfiguration {INSTALL_NAME:?} has a webhook without a CA bundle: the API server cannot call it"
            ),
            "use the cert-manager overlay, or set caBundle from `reload-injector certs` (ca-bundle.b64)",
        ));
    }
    let mut notes = Vec::new();
    if let Some(reason) = snapshot.webhook.failure() {
        notes.push(format!(
            "could not read mutatingwebhookconfiguration {INSTALL_NAME}: {reason}"
        ));
    }
    let lease = match &snapshot.lease {
        Fetched::Read(lease) => lease.as_ref(),
        Fetched::Failed(reason) => {
            let namespace = &out.namespace;
            notes.push(format!(
                "could not read lease {namespace}/{INSTALL_NAME}: {reason}"
            ));
            return (out, findings, notes);
        }
    };
    out.lease_read = true;
    let spec = lease.and_then(|l| l.spec.as_ref());
    out.lease_holder = spec
        .and_then(|s| s.holder_identity.clone())
        .filter(|h| !h.is_empty());
    let renewed = spec
        .and_then(|s| s.renew_time.as_ref().or(s.acquire_time.as_ref()))
        .map(|t| t.0);
    out.renewed_seconds_ago = renewed.map(|t| seconds_between(t, snapshot.now));
    out.lease_duration_seconds = spec.and_then(|s| s.lease_duration_seconds).map(i64::from);
    let lasts = out.lease_duration_seconds.unwrap_or(15);
    let renewed_in_time = out.renewed_seconds_ago.is_some_and(|ago| ago <= lasts);
    out.controller_running = out.lease_holder.is_some() && renewed_in_time;
    findings.extend(no_controller(&out, lease.is_some()));
    (out, findings, notes)
}

/// `no-controller` when no leader holds the Lease (`exists`: there is one).
fn no_controller(out: &Installation, exists: bool) -> Option<Finding> {
    if out.controller_running {
        return None;
    }
    let lease = format!("{}/{INSTALL_NAME}", out.namespace);
    let why = match (exists, &out.lease_holder, out.renewed_seconds_ago) {
        (false, _, _) => format!("there is no Lease {lease}"),
        (true, None, _) => format!("the Lease {lease} has no holder"),
        (true, Some(holder), Some(ago)) => format!(
            "the Lease {lease} was last renewed {} ago by {holder:?} (it lasts {}s)",
            age(ago),
            out.lease_duration_seconds.unwrap_or(15)
        ),
        (true, Some(holder), None) => {
            format!("the Lease {lease} held by {holder:?} was never renewed")
        }
    };
    Some(Finding::new(
        Code::NoController,
        format!("no controller is running: {why}"),
        format!(
            "check the webhook's pods (kubectl -n {} get pods); the controller runs inside \
             `serve` unless --rollouts false",
            out.namespace
        ),
    ))
}
