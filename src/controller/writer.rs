//! The writer: sends the reconciler's writes while this replica leads. One JSON patch per write
//! (guarded by a `test` of the value the view showed), rate limited, several in flight, retried
//! with backoff until they land, and an Event for each workload rollout.

mod requests;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use rand::Rng;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;
use tokio::time::Instant;

pub use requests::{AnnotationPatch, COMPONENT, Error, REASON, event, write_patch};
use requests::{Sent, record_event, send_patch};

use super::rate::TokenBucket;
use super::write_target::{Target, TargetKind, Write};
use crate::backoff::Backoff;

/// Most writes in flight at once.
pub const MAX_IN_FLIGHT: usize = 8;
/// The delay before a failed write is retried: 200 ms, doubling, at most 30 s (jittered).
pub const BACKOFF: Backoff = Backoff::new(Duration::from_millis(200), Duration::from_secs(30));
/// How many times an Event create is tried before it is given up (it is a courtesy).
pub const EVENT_ATTEMPTS: u32 = 3;
/// How long after a Pod's hash landed its second nudge ([`Write::again`]) is sent: the kubelet's
/// own watch of the ConfigMap or Secret lags the API by milliseconds.
pub const NUDGE_AGAIN_AFTER: Duration = super::waves::SETTLE;

/// One queued write: a target and the annotation written there (a Pod's hash, its second nudge
/// and a held-back record are queued apart, so none replaces another).
type Slot = (Target, &'static str);

fn slot(write: &Write) -> Slot {
    (write.target.clone(), write.annotation)
}

#[derive(Debug, Clone)]
pub struct WriterConfig {
    /// PATCHes and Event creates per second (`--max-writes-per-second`); burst `max(1, rate)`.
    pub max_writes_per_second: f64,
    /// A request that takes longer is retried.
    pub request_timeout: Duration,
}

/// What became of a write, sent back to the reconciler.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The annotation now holds this value.
    Written(Target, String),
    /// The object changed since the view (409, or the `test` failed: 422): re-evaluate after
    /// the next watch event.
    Conflict(Target),
    /// 404.
    Gone(Target),
}

/// Callbacks for metrics, so the writer does not depend on the metrics module.
#[derive(Clone)]
pub struct Counters {
    /// A hash annotation of this kind was written.
    pub written: Arc<dyn Fn(TargetKind) + Send + Sync>,
    /// How many writes the writer holds (queued, in flight or waiting to be retried or sent
    /// again, and Events being recorded); said before any [`Outcome`] is sent, so a write is
    /// counted until the loop has learnt its outcome.
    pub held: Arc<dyn Fn(usize) + Send + Sync>,
}

/// Handle to the writer task. Dropping it stops the task.
#[derive(Debug, Clone)]
pub struct Writer {
    submits: mpsc::UnboundedSender<Job>,
}

impl Writer {
    /// Starts the writer task. `leader`: writes are sent only while it is true; when it turns
    /// false, queued writes are dropped (the next leader recomputes everything from the hashes)
    /// and nothing new is sent. Must be called inside a tokio runtime.
    pub fn spawn(
        client: kube::Client,
        config: WriterConfig,
        leader: watch::Receiver<bool>,
        outcomes: mpsc::UnboundedSender<Outcome>,
        counters: Counters,
    ) -> Writer {
        let (submits, receiver) = mpsc::unbounded_channel();
        let now = Instant::now().into_std();
        let task = Task {
            client,
            timeout: config.request_timeout,
            bucket: Arc::new(Mutex::new(TokenBucket::new(
                config.max_writes_per_second,
                now,
            ))),
            outcomes,
            counters,
            entries: HashMap::new(),
            ready: VecDeque::new(),
            delayed: BTreeMap::new(),
            seq: 0,
            in_flight: JoinSet::new(),
            events: JoinSet::new(),
        };
        tokio::spawn(task.run(receiver, leader));
        Writer { submits }
    }

    /// Queues a write. A queued write for the same Target is replaced (latest desired wins, one
    /// PATCH), keeping its place in the queue; one already in flight is followed by this one.
    pub fn submit(&self, write: Write) {
        // A send fails only once the task has stopped, which only dropping the Writer does.
        let _ = self.submits.send(Job::Write(write));
    }

    /// Records `write.event` as an Event on `write.target` without writing anything else (a
    /// refresh that stopped says so on its workload).
    pub fn note(&self, write: Write) {
        let _ = self.submits.send(Job::Note(write));
    }
}

#[derive(Debug)]
enum Job {
    /// PATCH the annotation (and record the Event, if any, once it landed).
    Write(Write),
    Note(Write),
}

/// The retry delay after `failures` failures (at least 1), scaled by `jitter` in `[0.5, 1]`.
pub fn backoff(failures: u32, jitter: f64) -> Duration {
    BACKOFF.delay(failures).mul_f64(jitter.clamp(0.5, 1.0))
}

fn jittered(failures: u32) -> Duration {
    backoff(failures, rand::rng().random_range(0.5..=1.0))
}

enum State {
    Ready,
    Delayed,
    /// Sent; `next` is a newer write that follows once this one is done.
    InFlight {
        next: Option<Write>,
    },
}

struct Entry {
    write: Write,
    failures: u32,
    state: State,
}

struct Task {
    client: kube::Client,
    timeout: Duration,
    bucket: Arc<Mutex<TokenBucket>>,
    outcomes: mpsc::UnboundedSender<Outcome>,
    counters: Counters,
    entries: HashMap<Slot, Entry>,
    ready: VecDeque<Slot>,
    delayed: BTreeMap<(Instant, u64), Slot>,
    seq: u64,
    in_flight: JoinSet<(Slot, Sent)>,
    events: JoinSet<()>,
}

impl Task {
    async fn run(
        mut self,
        mut submits: mpsc::UnboundedReceiver<Job>,
        mut leader: watch::Receiver<bool>,
    ) {
        let mut leader_open = true;
        loop {
            (self.counters.held)(self.held());
            let leading = leader_open && *leader.borrow();
            let token_at = if leading { self.dispatch() } else { None };
            let retry_at = self.delayed.keys().next().map(|(at, _)| *at);
            let wake = token_at.into_iter().chain(retry_at).min();
            tokio::select! {
                biased;
                changed = leader.changed(), if leader_open => {
                    if changed.is_err() {
                        leader_open = false;
                    }
                    if !leader_open || !*leader.borrow() {
                        self.drop_everything();
                    }
                }
                job = submits.recv() => match job {
                    Some(Job::Write(write)) if leading => self.queue(write, None),
                    Some(Job::Note(note)) if leading => self.note(&note),
                    Some(Job::Write(write) | Job::Note(write)) => tracing::debug!(object = %write.target, "not the leader: write not queued"),
                    None => return,
                },
                Some(done) = self.in_flight.join_next(), if !self.in_flight.is_empty() => {
                    if let Ok((slot, sent)) = done {
                        self.finish(slot, sent);
                    }
                }
                Some(_) = self.events.join_next(), if !self.events.is_empty() => {}
                () = sleep_until(wake), if wake.is_some() => self.promote(),
            }
        }
    }

    fn note(&mut self, write: &Write) {
        let Some(message) = &write.event else {
            return;
        };
        let event = event(write, message, k8s_openapi::jiff::Timestamp::now());
        let (client, bucket, timeout) = (self.client.clone(), self.bucket.clone(), self.timeout);
        let target = write.target.clone();
        self.events
            .spawn(async move { record_event(client, bucket, timeout, target, event).await });
    }

    /// Queues `write` to be sent now (`after` `None`) or after a delay; a write already queued
    /// for the same slot is replaced, keeping its place and time.
    fn queue(&mut self, write: Write, after: Option<Duration>) {
        let slot = slot(&write);
        let Some(entry) = self.entries.get_mut(&slot) else {
            let state = match after {
                None => {
                    self.ready.push_back(slot.clone());
                    State::Ready
                }
                Some(after) => self.delay(slot.clone(), after),
            };
            self.entries.insert(
                slot,
                Entry {
                    write,
                    failures: 0,
                    state,
                },
            );
            return;
        };
        match &mut entry.state {
            State::InFlight { next } => *next = Some(newer(next.take(), write)),
            State::Ready | State::Delayed => {
                entry.write = newer(Some(entry.write.clone()), write);
            }
        }
    }

    /// Sends ready writes while tokens and in-flight room allow; returns when the next token
    /// is due if one is missing.
    fn dispatch(&mut self) -> Option<Instant> {
        self.promote();
        while self.in_flight.len() < MAX_IN_FLIGHT {
            let target = self.ready.front()?;
            let now = Instant::now();
            if let Err(wait) = take(&self.bucket, now) {
                return Some(now + wait);
            }
            let target = target.clone();
            self.ready.pop_front();
            let Some(entry) = self.entries.get_mut(&target) else {
                continue;
            };
            if !matches!(entry.state, State::Ready) {
                continue;
            }
            entry.state = State::InFlight { next: None };
            let (client, write, timeout) = (self.client.clone(), entry.write.clone(), self.timeout);
            self.in_flight
                .spawn(async move { (slot(&write), send_patch(client, &write, timeout).await) });
        }
        None
    }

    fn promote(&mut self) {
        let now = Instant::now();
        while let Some(entry) = self.delayed.first_entry() {
            if entry.key().0 > now {
                break;
            }
            let target = entry.remove();
            if let Some(entry) = self.entries.get_mut(&target) {
                entry.state = State::Ready;
                self.ready.push_back(target);
            }
        }
    }

    fn finish(&mut self, slot: Slot, sent: Sent) {
        let Some(entry) = self.entries.get_mut(&slot) else {
            return;
        };
        let State::InFlight { next } = std::mem::replace(&mut entry.state, State::Ready) else {
            return;
        };
        let write = entry.write.clone();
        let target = slot.0.clone();
        // The end of a write beside the target's own hash, a second nudge ([`Write::again`]) or a
        // held-back record ([`Write::held_back`]): nothing for the reconciler to learn.
        let beside = write.annotation != target.kind.annotation();
        let outcome = match sent {
            Sent::Retry { error, refused } => return self.retry(slot, write, next, error, refused),
            Sent::Gone => {
                self.entries.remove(&slot);
                if !beside {
                    tracing::info!(object = %target, "the object is gone; not written");
                    self.report(Outcome::Gone(target));
                }
                return;
            }
            _ if beside => {
                tracing::info!(object = %target, to = %write.desired, "wrote {}", write.annotation);
                None
            }
            Sent::Written => {
                tracing::info!(
                    object = %target,
                    from = write.expected.as_deref().unwrap_or("none"),
                    to = %write.desired,
                    "wrote {}", target.kind.annotation()
                );
                (self.counters.written)(target.kind);
                self.note(&write);
                if let Some(again) = write.again() {
                    self.queue(again, Some(NUDGE_AGAIN_AFTER));
                }
                Some(Outcome::Written(target, write.desired))
            }
            Sent::Unchanged => {
                tracing::debug!(object = %target, "already holds the value; nothing sent");
                Some(Outcome::Written(target, write.desired))
            }
            Sent::Conflict(code) => {
                tracing::info!(object = %target, status = code, "the object changed since the view; not written");
                Some(Outcome::Conflict(target))
            }
        };
        self.entries.remove(&slot);
        if let Some(next) = next {
            self.queue(next, None);
        }
        if let Some(outcome) = outcome {
            self.report(outcome);
        }
    }

    fn held(&self) -> usize {
        self.entries.len() + self.events.len()
    }

    /// Sends `outcome` to the loop, having said first how many writes are held (so that a write
    /// that follows this one, such as a second nudge, is never out of the count).
    fn report(&self, outcome: Outcome) {
        (self.counters.held)(self.held());
        let _ = self.outcomes.send(outcome);
    }

    fn retry(
        &mut self,
        slot: Slot,
        write: Write,
        next: Option<Write>,
        error: Error,
        refused: bool,
    ) {
        let Some(entry) = self.entries.get_mut(&slot) else {
            return;
        };
        let target = slot.0.clone();
        entry.failures += 1;
        if let Some(next) = next {
            entry.write = newer(Some(write), next);
        }
        let delay = jittered(entry.failures);
        let error = crate::report::one_line(&error);
        if refused {
            tracing::error!(object = %target, retry_in = ?delay, "{error}");
        } else {
            tracing::warn!(object = %target, retry_in = ?delay, "{error}");
        }
        entry.state = State::Delayed;
        self.delay(slot, delay);
    }

    /// Puts `slot` in the delayed queue, due `after` from now.
    fn delay(&mut self, slot: Slot, after: Duration) -> State {
        self.seq += 1;
        self.delayed
            .insert((Instant::now() + after, self.seq), slot);
        State::Delayed
    }

    fn drop_everything(&mut self) {
        if !self.entries.is_empty() {
            tracing::info!(
                dropped = self.entries.len(),
                "no longer the leader: queued writes dropped"
            );
        }
        self.entries.clear();
        self.ready.clear();
        self.delayed.clear();
        self.in_flight.abort_all();
        self.in_flight.detach_all();
        self.events.abort_all();
        self.events.detach_all();
    }
}

/// `new`, keeping `old`'s Event message if `new` has none.
fn newer(old: Option<Write>, mut new: Write) -> Write {
    if new.event.is_none() {
        new.event = old.and_then(|old| old.event);
    }
    new
}

fn take(bucket: &Mutex<TokenBucket>, now: Instant) -> Result<(), Duration> {
    bucket.lock().take(now.into_std())
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
