//! Leader election on a `coordination.k8s.io/v1` Lease, with optimistic concurrency: every
//! write carries the `resourceVersion` last read, so two replicas can never both win.
//!
//! Expiry is judged by the local monotonic clock (how long the Lease record has been seen
//! unchanged), never by comparing the `renewTime` written by another machine with our own
//! clock. A leader stops calling itself leader once a renewal fails, or when no renewal has
//! succeeded for two thirds of the lease duration, so it steps down before any follower could
//! consider the Lease expired. Needs get/create/update on leases in its own namespace only.

use std::future::Future;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::PostParams;
use tokio::sync::watch;
use tokio::time::Instant;

#[cfg(test)]
mod lease_crate_tests;
#[cfg(test)]
mod tests;

/// Lease election settings.
#[derive(Debug, Clone)]
pub struct LeaseConfig {
    pub namespace: String,
    pub name: String,
    /// Written as `holderIdentity` (see [`identity`]).
    pub identity: String,
    /// How long a Lease seen unchanged stays valid (`--lease-duration`, default 15 s).
    pub lease_duration: Duration,
}

/// `POD_NAME` from the environment (downward API), else the hostname, plus `-` and a random
/// 8-hex-digit per-process suffix.
pub fn identity() -> String {
    let pod = std::env::var("POD_NAME").ok();
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok());
    identity_from(pod.as_deref(), host.as_deref(), rand::random())
}

/// The identity built from a pod name, a hostname and a suffix (the first non-blank name wins).
fn identity_from(pod: Option<&str>, host: Option<&str>, suffix: u32) -> String {
    let base = [pod, host]
        .into_iter()
        .flatten()
        .map(str::trim)
        .find(|name| !name.is_empty())
        .unwrap_or("reload-injector");
    format!("{base}-{suffix:08x}")
}

/// Runs the election until `shutdown` completes; publishes `true` on `leader` while this process
/// holds the Lease, `false` otherwise. On shutdown, if leader, it publishes false first and then
/// releases the Lease (holder cleared, `leaseDurationSeconds` 1) so another replica takes over at
/// once. Never panics; API errors are logged (one line per new error) and retried.
pub async fn run(
    client: kube::Client,
    config: LeaseConfig,
    leader: watch::Sender<bool>,
    shutdown: impl Future<Output = ()>,
) {
    let mut elector = Elector::new(client, config, leader);
    tokio::select! {
        biased;
        () = shutdown => {}
        never = elector.elect() => match never {},
    }
    elector.publish(false, "shutting down");
    elector.release().await;
}

/// Intervals, all derived from the lease duration so that replicas agree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Timing {
    /// How long a Lease seen unchanged stays valid, unless it states its own duration.
    lease_duration: Duration,
    /// How long after its last successful write the holder renews (1/3).
    renew_interval: Duration,
    /// How long after its last successful write the holder stops leading (2/3).
    renew_deadline: Duration,
    /// How often a follower re-reads the Lease, and the pause after an error (1/4, jittered).
    retry_interval: Duration,
    /// The bound on one API call (1/3).
    call_timeout: Duration,
}

impl Timing {
    /// The intervals for `lease_duration`, taken as at least 100 ms so nothing spins.
    fn new(lease_duration: Duration) -> Self {
        let lease_duration = lease_duration.max(Duration::from_millis(100));
        Timing {
            lease_duration,
            renew_interval: lease_duration / 3,
            renew_deadline: lease_duration * 2 / 3,
            retry_interval: lease_duration / 4,
            call_timeout: lease_duration / 3,
        }
    }
}

/// What to do next with the Lease, decided from what was last read.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Action {
    /// There is no Lease.
    Create,
    /// This process holds the Lease and the renewal is due.
    Renew,
    /// The Lease is free or has expired.
    TakeOver,
    /// This process holds the Lease: renew it at `until`.
    Wait { until: Instant },
    /// `holder` holds a live Lease, which expires at `expires` unless it is seen to change.
    Follow { holder: String, expires: Instant },
}

/// The pure election decision: the Lease last read (`None`: it does not exist), this process's
/// identity, the local time the Lease record was last seen to change, and the local time now.
fn next_action(
    lease: Option<&Lease>,
    me: &str,
    changed_at: Instant,
    now: Instant,
    timing: &Timing,
) -> Action {
    let Some(lease) = lease else {
        return Action::Create;
    };
    let spec = lease.spec.as_ref();
    let holder = spec
        .and_then(|spec| spec.holder_identity.as_deref())
        .unwrap_or("");
    if holder == me {
        let until = changed_at + timing.renew_interval;
        return if now >= until {
            Action::Renew
        } else {
            Action::Wait { until }
        };
    }
    if holder.is_empty() {
        return Action::TakeOver;
    }
    let duration = spec
        .and_then(|spec| spec.lease_duration_seconds)
        .filter(|seconds| *seconds > 0)
        .map_or(timing.lease_duration, |seconds| {
            Duration::from_secs(seconds.unsigned_abs().into())
        });
    let expires = changed_at + duration;
    if now >= expires {
        Action::TakeOver
    } else {
        Action::Follow {
            holder: holder.to_owned(),
            expires,
        }
    }
}

/// The Lease last read, and the local time its record was last seen to change.
#[derive(Debug, Clone)]
struct Observation {
    lease: Lease,
    changed_at: Instant,
}

/// Records a read of `lease` at `now`: the change time moves only when the record changed.
fn observe(previous: Option<&Observation>, lease: Lease, now: Instant) -> Observation {
    let changed_at = match previous {
        Some(seen) if seen.lease.spec == lease.spec => seen.changed_at,
        _ => now,
    };
    Observation { lease, changed_at }
}

/// `lease_duration` in whole seconds, rounded up, at least 1.
fn lease_seconds(lease_duration: Duration) -> i32 {
    let seconds = lease_duration.as_nanos().div_ceil(1_000_000_000);
    i32::try_from(seconds.max(1)).unwrap_or(i32::MAX)
}

/// The record this process writes for `Create`, `Renew` or `TakeOver` over `current`.
fn held_spec(
    current: Option<&LeaseSpec>,
    me: &str,
    lease_duration: Duration,
    now: Timestamp,
) -> LeaseSpec {
    let mut spec = current.cloned().unwrap_or_default();
    let renewing = current.is_some_and(|spec| spec.holder_identity.as_deref() == Some(me));
    if !renewing {
        spec.acquire_time = Some(MicroTime(now));
        spec.lease_transitions = match current {
            Some(old) => Some(old.lease_transitions.unwrap_or(0).saturating_add(1)),
            None => Some(0),
        };
    }
    spec.holder_identity = Some(me.to_owned());
    spec.lease_duration_seconds = Some(lease_seconds(lease_duration));
    spec.renew_time = Some(MicroTime(now));
    spec
}

/// The record that hands the Lease over: no holder, and expired after a second anyway.
fn released_spec(current: &LeaseSpec, now: Timestamp) -> LeaseSpec {
    LeaseSpec {
        holder_identity: None,
        lease_duration_seconds: Some(1),
        renew_time: Some(MicroTime(now)),
        ..current.clone()
    }
}

#[derive(Debug, thiserror::Error)]
enum Error {
    #[error("failed to read Lease {0}")]
    Read(String, #[source] kube::Error),
    #[error("failed to create Lease {0}")]
    Create(String, #[source] kube::Error),
    #[error("failed to update Lease {0}")]
    Update(String, #[source] kube::Error),
    #[error("failed to get an answer about Lease {0} within {1:?}")]
    TimedOut(String, Duration),
}

impl Error {
    /// Another writer got there first (409): re-read at once.
    fn lost_race(&self) -> bool {
        match self {
            Error::Read(_, kube::Error::Api(status))
            | Error::Create(_, kube::Error::Api(status))
            | Error::Update(_, kube::Error::Api(status)) => {
                status.is_conflict() || status.is_already_exists()
            }
            _ => false,
        }
    }
}

/// The I/O around [`next_action`].
struct Elector {
    api: Api<Lease>,
    config: LeaseConfig,
    timing: Timing,
    /// The Lease last read or written (`None`: never read, or absent); kept across re-reads,
    /// so an unchanged record keeps its change time.
    seen: Option<Observation>,
    /// Whether the Lease must be read before the next decision.
    stale: bool,
    /// When this process stops leading unless it renews (`Some` while leading).
    deadline: Option<Instant>,
    leader: watch::Sender<bool>,
    /// The last error logged, so a repeated one is not logged again.
    last_error: Option<String>,
}

impl Elector {
    fn new(client: kube::Client, config: LeaseConfig, leader: watch::Sender<bool>) -> Self {
        Elector {
            api: Api::namespaced(client, &config.namespace),
            timing: Timing::new(config.lease_duration),
            config,
            seen: None,
            stale: true,
            deadline: None,
            leader,
            last_error: None,
        }
    }

    fn lease_name(&self) -> String {
        format!("{}/{}", self.config.namespace, self.config.name)
    }

    /// Returns only by being cancelled.
    async fn elect(&mut self) -> std::convert::Infallible {
        loop {
            // A process that was stalled past its deadline is no longer leader, whatever next.
            if self
                .deadline
                .is_some_and(|deadline| Instant::now() >= deadline)
            {
                self.publish(false, "no renewal within the renew deadline");
            }
            if self.stale
                && let Err(error) = self.read().await
            {
                self.failed(error).await;
                continue;
            }
            let (lease, changed_at) = match &self.seen {
                Some(seen) => (Some(&seen.lease), seen.changed_at),
                None => (None, Instant::now()),
            };
            let action = next_action(
                lease,
                &self.config.identity,
                changed_at,
                Instant::now(),
                &self.timing,
            );
            match action {
                Action::Wait { until } => tokio::time::sleep_until(until).await,
                Action::Follow { holder, expires } => {
                    self.publish(false, &format!("the Lease is held by {holder}"));
                    let poll = Instant::now() + jittered(self.timing.retry_interval);
                    tokio::time::sleep_until(poll.min(expires)).await;
                    self.stale = true;
                }
                Action::Create | Action::Renew | Action::TakeOver => {
                    if let Err(error) = self.write(&action).await {
                        self.publish(false, &error.to_string());
                        self.stale = true;
                        if !error.lost_race() {
                            self.failed(error).await;
                        }
                    }
                }
            }
        }
    }

    async fn read(&mut self) -> Result<(), Error> {
        let call = self.api.get_opt(&self.config.name);
        let found = self.call(call, None, Error::Read).await?;
        self.recovered();
        self.stale = false;
        let now = Instant::now();
        self.seen = found.map(|lease| observe(self.seen.as_ref(), lease, now));
        Ok(())
    }

    /// Creates, renews or takes over the Lease; leads from the moment the call was sent.
    async fn write(&mut self, action: &Action) -> Result<(), Error> {
        let start = Instant::now();
        let current = self.seen.as_ref().map(|seen| &seen.lease);
        let spec = held_spec(
            current.and_then(|lease| lease.spec.as_ref()),
            &self.config.identity,
            self.config.lease_duration,
            Timestamp::now(),
        );
        let lease = Lease {
            metadata: match current {
                Some(lease) => lease.metadata.clone(),
                None => ObjectMeta {
                    name: Some(self.config.name.clone()),
                    namespace: Some(self.config.namespace.clone()),
                    ..ObjectMeta::default()
                },
            },
            spec: Some(spec),
        };
        let params = PostParams::default();
        let written = if let Action::Create = action {
            let call = self.api.create(&params, &lease);
            self.call(call, self.deadline, Error::Create).await?
        } else {
            let call = self.api.replace(&self.config.name, &params, &lease);
            self.call(call, self.deadline, Error::Update).await?
        };
        self.recovered();
        self.seen = Some(Observation {
            lease: written,
            changed_at: start,
        });
        self.stale = false;
        self.deadline = Some(start + self.timing.renew_deadline);
        self.publish(true, "");
        Ok(())
    }

    /// Runs an API call for at most the call timeout, and not past `deadline`; its failure
    /// named by `failed` (or [`Error::TimedOut`]).
    async fn call<T>(
        &self,
        call: impl Future<Output = Result<T, kube::Error>>,
        deadline: Option<Instant>,
        failed: fn(String, kube::Error) -> Error,
    ) -> Result<T, Error> {
        let name = self.lease_name();
        let until = Instant::now() + self.timing.call_timeout;
        tokio::time::timeout_at(deadline.map_or(until, |d| until.min(d)), call)
            .await
            .map_err(|_| Error::TimedOut(name.clone(), self.timing.call_timeout))?
            .map_err(|error| failed(name, error))
    }

    /// Hands the Lease over if the last record read or written names this process.
    async fn release(&mut self) {
        // A renewal cut short by the shutdown may still have landed: after a conflict, read
        // once more and release again if the record still names this process.
        for attempt in 0..2 {
            let Some(seen) = &self.seen else {
                return;
            };
            let Some(spec) = &seen.lease.spec else {
                return;
            };
            if spec.holder_identity.as_deref() != Some(self.config.identity.as_str()) {
                return;
            }
            let lease = Lease {
                metadata: seen.lease.metadata.clone(),
                spec: Some(released_spec(spec, Timestamp::now())),
            };
            let params = PostParams::default();
            let call = self.api.replace(&self.config.name, &params, &lease);
            let error = match tokio::time::timeout(self.timing.call_timeout, call).await {
                Ok(Ok(_)) => {
                    tracing::info!(lease = %self.lease_name(), "released the Lease");
                    return;
                }
                Ok(Err(kube::Error::Api(status))) if status.is_conflict() && attempt == 0 => {
                    match self.read().await {
                        Ok(()) => continue,
                        Err(error) => crate::report::one_line(&error),
                    }
                }
                Ok(Err(error)) => crate::report::one_line(&error),
                Err(_) => "no answer in time".to_owned(),
            };
            tracing::warn!(
                lease = %self.lease_name(), error = %error,
                "failed to release the Lease; it expires on its own"
            );
            return;
        }
    }

    /// Publishes leadership; logs changes only.
    fn publish(&mut self, leading: bool, why: &str) {
        if !leading {
            self.deadline = None;
        }
        let changed = self.leader.send_if_modified(|current| {
            let changed = *current != leading;
            *current = leading;
            changed
        });
        if changed && leading {
            tracing::info!(lease = %self.lease_name(), identity = %self.config.identity, "leading");
        } else if changed {
            tracing::warn!(lease = %self.lease_name(), reason = %why, "stopped leading");
        }
    }

    /// Logs `error` unless it repeats the last one, then pauses before the next try.
    async fn failed(&mut self, error: Error) {
        let message = crate::report::one_line(&error);
        if self.last_error.as_deref() != Some(message.as_str()) {
            tracing::warn!(error = %message, "Lease election: retrying");
            self.last_error = Some(message);
        }
        tokio::time::sleep(jittered(self.timing.retry_interval)).await;
    }

    /// Logs that the API answers again after an error.
    fn recovered(&mut self) {
        if self.last_error.take().is_some() {
            tracing::info!(lease = %self.lease_name(), "Lease API answering again");
        }
    }
}

/// `interval` shortened by up to a quarter, so replicas do not poll in step.
fn jittered(interval: Duration) -> Duration {
    interval.mul_f64(1.0 - rand::random::<f64>() / 4.0)
}
