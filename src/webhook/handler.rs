//! One admission review from body to answer: parse, ask the core what to fetch, fetch it,
//! decide, encode.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::time::Instant;

use crate::workload::meter::{Meter, Refusal, metered};
use crate::workload::{Outcome, Plan, Request, Settings};

use super::admission_review::{self, EnvelopeError, Review};
use super::lookup::Lookups;
use super::webhook_metrics::Metrics;

/// Everything a review needs; cheap to clone (one `Arc`).
#[derive(Clone)]
pub struct AppState(Arc<Inner>);

struct Inner {
    settings: Settings,
    lookups: Lookups,
    metrics: Metrics,
}

impl AppState {
    /// Bundles the settings, the lookups and the metrics.
    pub fn new(settings: Settings, lookups: Lookups, metrics: Metrics) -> Self {
        Self(Arc::new(Inner {
            settings,
            lookups,
            metrics,
        }))
    }

    /// The metrics the reviews are counted in.
    pub fn metrics(&self) -> &Metrics {
        &self.0.metrics
    }
}

/// Why a body got no AdmissionReview answer.
#[derive(Debug, thiserror::Error)]
pub enum HandleError {
    #[error(transparent)]
    NotAReview(#[from] EnvelopeError),
    /// The core panicked: a bug. HTTP 500 lets the webhook's failurePolicy decide.
    #[error("failed to review the object: internal error (a bug; please report it)")]
    Panicked,
    #[error("failed to review the object: {}; retry", Refusal::Busy)]
    Busy,
}

/// Answers one AdmissionReview body with the AdmissionReview to send back (HTTP 200). What is
/// read from the body is counted by `meter`, kept by the caller until the answer is sent.
/// `namespace_labelled`: sent by the webhooks of namespaces that carry the opt-in label.
pub async fn handle(
    state: &AppState,
    body: &[u8],
    meter: &mut Meter,
    namespace_labelled: bool,
) -> Result<Vec<u8>, HandleError> {
    let started = Instant::now();
    let parsed = metered(meter, || Review::parse(body));
    let (review, refused) = match meter.refused() {
        None => (parsed?, None),
        Some(Refusal::Busy) => return Err(HandleError::Busy),
        // The read stopped says nothing about the body: read it again for the uid alone.
        Some(refusal) => {
            drop(parsed);
            (Review::parse_unread(body)?, Some(refusal))
        }
    };
    let state = &*state.0;
    let (answer, outcome, warnings) = match refused {
        Some(refusal) => unaffordable(review.uid(), refusal)?,
        None => answer_review(&review, state, meter, namespace_labelled).await?,
    };
    let took = started.elapsed();
    state
        .metrics
        .review(review.kind(), review.operation(), outcome, took);
    state.metrics.warnings(warnings);
    tracing::debug!(
        uid = review.uid(),
        kind = review.kind(),
        operation = review.operation(),
        namespace = review.request().map(|r| r.namespace).unwrap_or_default(),
        outcome,
        duration_us = took.as_micros() as u64,
        warnings,
        "admission review"
    );
    Ok(answer)
}

/// The encoded answer, the outcome label and the number of warnings.
type Answer = (Vec<u8>, &'static str, usize);

async fn answer_review(
    review: &Review<'_>,
    state: &Inner,
    meter: &mut Meter,
    namespace_labelled: bool,
) -> Result<Answer, HandleError> {
    let uid = review.uid();
    let request = match review.request() {
        Ok(request) => Request {
            namespace_labelled,
            ..request
        },
        Err(err) => return Ok(error_answer(uid, 400, &err.to_string())),
    };
    // One plan serves both steps, so the object is read once.
    let plan = guard(|| metered(meter, || Plan::new(&request, &state.settings)))?;
    if let Some(refusal) = meter.refused() {
        return unaffordable(uid, refusal);
    }
    let plan = match plan {
        Ok(plan) => plan,
        Err(err) => return Ok(error_answer(uid, 400, &err.to_string())),
    };
    let refs = plan.config_refs();
    let configs = state.lookups.fetch(request.namespace, &refs).await;
    let mut outcome = guard(|| plan.outcome(&configs))?;
    if outcome.replaces_hash() {
        // The hash on the object may come from newer data than the view or cache holds (the
        // rollout controller's own UPDATE reviewed by a replica that lags): read the config
        // again before replacing it.
        let fresh = state.lookups.fetch_fresh(request.namespace, &refs).await;
        outcome = guard(|| plan.outcome(&fresh))?;
    }
    Ok(match outcome {
        Outcome::Allowed { patch, warnings } => {
            let label = if patch.0.is_empty() {
                "allowed"
            } else {
                "patched"
            };
            (
                admission_review::allowed(uid, &patch, &warnings),
                label,
                warnings.len(),
            )
        }
        Outcome::Denied { message, warnings } => (
            admission_review::denied(uid, 403, &message, &warnings),
            "denied",
            warnings.len(),
        ),
    })
}

/// The answer once the meter refused: an object too large to read ever is denied (HTTP 200,
/// `status.code` 413), one that can be read later gets [`HandleError::Busy`].
fn unaffordable(uid: &str, refusal: Refusal) -> Result<Answer, HandleError> {
    match refusal {
        Refusal::TooLarge { .. } => {
            let message = format!("failed to review the object: {refusal}");
            Ok(error_answer(uid, 413, &message))
        }
        Refusal::Busy => Err(HandleError::Busy),
    }
}

fn error_answer(uid: &str, code: u16, message: &str) -> Answer {
    (
        admission_review::denied(uid, code, message, &[]),
        "error",
        0,
    )
}

/// Runs a core function, turning a panic into [`HandleError::Panicked`] so that one bad object
/// cannot take a connection down.
fn guard<T>(f: impl FnOnce() -> T) -> Result<T, HandleError> {
    catch_unwind(AssertUnwindSafe(f)).map_err(|_| HandleError::Panicked)
}
