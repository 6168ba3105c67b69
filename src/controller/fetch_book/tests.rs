use super::*;
use crate::hash::ConfigId;

fn key(name: &str) -> ConfigKey {
    ConfigKey {
        namespace: "shop".into(),
        id: ConfigId::config_map(name),
    }
}

#[test]
fn one_get_at_a_time_and_a_newer_want_is_followed_by_another() {
    let mut book = FetchBook::default();
    assert!(book.want(&key("a"), 0), "nothing under way: send");
    book.sent(&key("a"), 5);
    assert!(!book.want(&key("a"), 3), "sent at 5 serves a want after 3");
    assert!(!book.answered(&key("a")), "no second GET needed");
    assert!(book.is_empty());

    book.sent(&key("a"), 5);
    assert!(!book.want(&key("a"), 7), "one GET at a time");
    assert!(
        book.answered(&key("a")),
        "the want after 7 needs a GET sent later"
    );
    assert!(book.is_empty());
    assert!(
        !book.answered(&key("a")),
        "an unknown answer asks for nothing"
    );
}

#[tokio::test(start_paused = true)]
async fn a_failed_get_waits_a_doubling_backoff_then_is_sent_again() {
    let mut book = FetchBook::default();
    book.sent(&key("a"), 1);
    let start = Instant::now();
    let waits: Vec<Duration> = (0..9)
        .map(|_| {
            let wait = book.failed(&key("a"), start);
            book.sent(&key("a"), 2);
            wait
        })
        .collect();
    let ms = |n| Duration::from_millis(n);
    assert_eq!(
        waits,
        [200, 400, 800, 1600, 3200, 6400, 12800, 25600, 30000].map(ms)
    );
    let mut book = FetchBook::default();
    book.sent(&key("a"), 1);
    assert_eq!(book.failed(&key("a"), start), ms(200));
    assert_eq!(book.next_retry(), Some(start + ms(200)));
    assert!(
        !book.want(&key("a"), 9),
        "the retry will be sent later anyway"
    );
    tokio::time::advance(ms(199)).await;
    assert_eq!(book.pop_retry(Instant::now()), None);
    tokio::time::advance(ms(1)).await;
    assert_eq!(book.pop_retry(Instant::now()), Some(key("a")));
    assert_eq!(book.next_retry(), None);
    book.sent(&key("a"), 10);
    assert!(
        !book.answered(&key("a")),
        "the retry was sent after the want at 9"
    );
    assert!(book.is_empty(), "an answer forgets the failures");
    book.sent(&key("a"), 11);
    assert_eq!(book.failed(&key("a"), start), ms(200), "counted afresh");
}

#[tokio::test(start_paused = true)]
async fn retries_come_due_in_time_order_and_an_answer_cancels_one() {
    let mut book = FetchBook::default();
    let now = Instant::now();
    for (name, failures) in [("slow", 3), ("fast", 1), ("gone", 1)] {
        book.sent(&key(name), 1);
        for _ in 0..failures {
            book.failed(&key(name), now);
        }
    }
    // A late answer of a GET now waiting to be retried: no retry follows.
    assert!(!book.answered(&key("gone")));
    tokio::time::advance(Duration::from_secs(1)).await;
    let later = Instant::now();
    assert_eq!(book.pop_retry(later), Some(key("fast")));
    assert_eq!(book.pop_retry(later), Some(key("slow")), "800 ms");
    assert_eq!(book.pop_retry(later), None);
}
