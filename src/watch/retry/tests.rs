use super::*;

/// A delivery of 1 that has observed 2: a reload is wanted.
fn changed() -> (Instant, Delivery<i32>) {
    let mut delivery = Delivery::new(1);
    delivery.observe(2);
    (Instant::now(), delivery)
}

#[test]
fn the_initial_state_is_never_delivered() {
    let t0 = Instant::now();
    let mut delivery = Delivery::new(1);
    delivery.observe(1);
    assert_eq!(delivery.next_attempt_at(t0), None);
    assert_eq!(delivery.start(t0), None);
}

#[test]
fn a_change_is_delivered_once() {
    let (t0, mut delivery) = changed();
    assert_eq!(delivery.start(t0), Some(2));
    assert_eq!(delivery.start(t0), None, "one attempt at a time");
    assert_eq!(delivery.finish(Outcome::Delivered, t0), None);
    assert_eq!(*delivery.delivered(), 2);
    delivery.observe(2);
    assert_eq!(delivery.start(t0), None);
}

#[test]
fn failures_back_off_and_success_resets() {
    let (t0, mut delivery) = changed();
    delivery.start(t0).unwrap();
    assert_eq!(delivery.finish(Outcome::Retry, t0), Some(BACKOFF.first));
    assert_eq!(delivery.start(t0), None);
    assert_eq!(delivery.next_attempt_at(t0), Some(t0 + BACKOFF.first));
    let t1 = t0 + BACKOFF.first;
    assert_eq!(delivery.start(t1), Some(2));
    assert_eq!(delivery.finish(Outcome::Retry, t1), Some(2 * BACKOFF.first));
    assert_eq!(delivery.failures(), 2);
    let t2 = t1 + 2 * BACKOFF.first;
    assert_eq!(delivery.start(t2), Some(2));
    delivery.finish(Outcome::Delivered, t2);
    assert_eq!(delivery.failures(), 0);
    delivery.observe(3);
    delivery.start(t2).unwrap();
    assert_eq!(delivery.finish(Outcome::Retry, t2), Some(BACKOFF.first));
}

#[test]
fn a_newer_change_supersedes_a_pending_retry_and_is_delivered_once() {
    let (t0, mut delivery) = changed();
    delivery.start(t0).unwrap();
    delivery.finish(Outcome::Retry, t0);
    delivery.observe(3);
    assert_eq!(delivery.start(t0), Some(3), "no wait for the backoff");
    delivery.finish(Outcome::Delivered, t0);
    assert_eq!(*delivery.delivered(), 3);
    assert_eq!(delivery.start(t0 + BACKOFF.cap), None, "2 is never sent");
}

#[test]
fn a_change_during_an_attempt_follows_it() {
    let (t0, mut delivery) = changed();
    delivery.start(t0).unwrap();
    delivery.observe(3);
    assert_eq!(delivery.start(t0), None);
    delivery.finish(Outcome::Delivered, t0);
    assert_eq!(delivery.start(t0), Some(3));
    let (_, mut failing) = changed();
    failing.start(t0).unwrap();
    failing.observe(3);
    assert_eq!(failing.finish(Outcome::Retry, t0), Some(Duration::ZERO));
    assert_eq!(failing.start(t0), Some(3));
}

#[test]
fn reverting_to_the_delivered_content_cancels_the_reload() {
    let (t0, mut delivery) = changed();
    delivery.start(t0).unwrap();
    delivery.finish(Outcome::Retry, t0);
    delivery.observe(1);
    assert_eq!(delivery.next_attempt_at(t0 + BACKOFF.cap), None);
}

#[test]
fn give_up_waits_for_the_next_change() {
    let (t0, mut delivery) = changed();
    delivery.start(t0).unwrap();
    assert_eq!(delivery.finish(Outcome::GiveUp, t0), None);
    delivery.observe(2);
    assert_eq!(
        delivery.start(t0 + BACKOFF.cap),
        None,
        "no retry for the same content"
    );
    delivery.observe(3);
    assert_eq!(delivery.start(t0), Some(3), "the next change is tried");
}

#[test]
fn finishing_without_an_attempt_is_ignored() {
    let mut delivery = Delivery::new(1);
    assert_eq!(delivery.finish(Outcome::Delivered, Instant::now()), None);
    assert_eq!(*delivery.delivered(), 1);
}
