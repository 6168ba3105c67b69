//! Opt-in (the namespace label, the template's opt-out) and the installation (webhook
//! configuration, CA bundle, the controller's Lease). Pure.

use std::collections::BTreeMap;

use k8s_openapi::api::admissionregistration::v1::MutatingWebhook;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::jiff::Timestamp;
use serde::Serialize;

use super::common::{age, seconds_between};
use super::findings::{Code, Finding};
use super::snapshot::{Fetched, INSTALL_NAME, Snapshot};
use crate::policy::{self, INJECT, OPT_IN_VALUE};

/// Is the workload opted in?
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OptIn {
    /// The namespace's `reload-injector.io/inject` label, if any.
    pub namespace_label: Option<String>,
    pub namespace_read: bool,
    /// Labelled `enabled` and not excluded (`true` when the namespace could not be read, as
    /// nothing says otherwise).
    pub opted_in: bool,
    /// A namespace never mutated whatever its labels say.
    pub excluded: bool,
    /// `label` or `annotation` when the pod template opts out.
    pub opted_out_by: Option<&'static str>,
}

/// The webhook configuration as read (`present`, `missing` or `unreadable` in JSON).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum WebhookState {
    Present,
    Missing,
    Unreadable,
}

/// The webhook configuration and the controller.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Installation {
    pub webhook: WebhookState,
    /// Whether every webhook in it has a CA bundle (`None` when not read).
    pub ca_bundle: Option<bool>,
    pub namespace: String,
    /// `Lease` holder, if any.
    pub lease_holder: Option<String>,
    /// Seconds since the Lease was last renewed.
    pub renewed_seconds_ago: Option<i64>,
    pub lease_duration_seconds: Option<i64>,
    /// A leader holds an unexpired Lease (`false` when the Lease could not be read).
    pub controller_running: bool,
    pub lease_read: bool,
}

/// The opt-in part, and its findings.
pub fn opt_in(
    snapshot: &Snapshot,
    namespace: &str,
    annotations: &BTreeMap<String, String>,
    labels: &BTreeMap<String, String>,
) -> (OptIn, Vec<Finding>) {
    let mut findings = Vec::new();
    let opted_out_by = policy::opted_out(labels, annotations).map(policy::OptOut::as_str);
    let excluded = policy::excluded(namespace, &snapshot.webhook_namespace);
    let namespaces = snapshot.namespaces.ok();
    let namespace_read = namespaces.is_some();
    let namespace_label = namespaces
        .and_then(|map| map.get(namespace)?.metadata.labels.as_ref()?.get(INJECT))
        .cloned();
    let labelled = namespace_label.as_deref() == Some(OPT_IN_VALUE);
    let opted_in = !excluded && (labelled || !namespace_read);
    if excluded {
        findings.push(Finding::new(
            Code::NamespaceExcluded,
            format!("namespace {namespace:?} is never mutated, whatever its labels say"),
            "run the workload in another namespace",
        ));
    } else if namespace_read && !labelled {
        findings.push(Finding::new(
            Code::NamespaceNotOptedIn,
            format!(
                "namespace {namespace:?} is not opted in (label {INJECT}: {})",
                namespace_label
                    .as_deref()
                    .map_or("absent".to_owned(), |v| format!("{v:?}"))
            ),
            format!("kubectl label namespace {namespace} {INJECT}={OPT_IN_VALUE}"),
        ));
    }
    if let Some(by) = opted_out_by {
        findings.push(Finding::new(
            Code::OptedOut,
            format!("the pod template opts out: {by} {INJECT}: \"false\""),
            format!("remove the {by} {INJECT} from the pod template if it should reload"),
        ));
    }
    let opt_in = OptIn {
        namespace_label,
        namespace_read,
        opted_in,
        excluded,
        opted_out_by,
    };
    (opt_in, findings)
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
        lease_holder: None,
        renewed_seconds_ago: None,
        lease_duration_seconds: None,
        controller_running: false,
        lease_read: false,
    };
    let mut findings: Vec<Finding> = webhook_finding(webhook, ca_bundle).into_iter().collect();
    let mut notes = Vec::new();
    if let Some(reason) = snapshot.webhook.failure() {
        notes.push(format!(
            "could not read mutatingwebhookconfiguration {INSTALL_NAME}: {reason}"
        ));
    }
    match &snapshot.lease {
        Fetched::Read(lease) => {
            read_lease(&mut out, lease.as_ref(), snapshot.now);
            findings.extend(no_controller(&out, lease.is_some()));
        }
        Fetched::Failed(reason) => notes.push(format!(
            "could not read lease {}/{INSTALL_NAME}: {reason}",
            out.namespace
        )),
    }
    (out, findings, notes)
}

/// `webhook-missing`, or `webhook-no-ca-bundle`.
fn webhook_finding(webhook: WebhookState, ca_bundle: Option<bool>) -> Option<Finding> {
    match (webhook, ca_bundle) {
        (WebhookState::Missing, _) => Some(Finding::new(
            Code::WebhookMissing,
            format!(
                "the MutatingWebhookConfiguration {INSTALL_NAME:?} does not exist: nothing is injected or stamped"
            ),
            "install reload-injector: helm install from its OCI chart, or kubectl apply -k manifests/cert-manager/ (docs/install.md)",
        )),
        (_, Some(false)) => Some(Finding::new(
            Code::WebhookNoCaBundle,
            format!(
                "the MutatingWebhookConfiguration {INSTALL_NAME:?} has a webhook without a CA bundle: the API server cannot call it"
            ),
            "use the cert-manager overlay, or set caBundle from `reload-injector certs` (ca-bundle.b64)",
        )),
        _ => None,
    }
}

/// Fills in the Lease's holder, renewal and duration, and whether a leader holds it now.
fn read_lease(out: &mut Installation, lease: Option<&Lease>, now: Timestamp) {
    out.lease_read = true;
    let spec = lease.and_then(|l| l.spec.as_ref());
    out.lease_holder = spec
        .and_then(|s| s.holder_identity.clone())
        .filter(|h| !h.is_empty());
    let renewed = spec
        .and_then(|s| s.renew_time.as_ref().or(s.acquire_time.as_ref()))
        .map(|t| t.0);
    out.renewed_seconds_ago = renewed.map(|t| seconds_between(t, now));
    out.lease_duration_seconds = spec.and_then(|s| s.lease_duration_seconds).map(i64::from);
    let lasts = out.lease_duration_seconds.unwrap_or(15);
    let renewed_in_time = out.renewed_seconds_ago.is_some_and(|ago| ago <= lasts);
    out.controller_running = out.lease_holder.is_some() && renewed_in_time;
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
