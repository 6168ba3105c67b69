//! What one review may make the server allocate, measured by a counting global allocator
//! around the real handler: a body of a few MiB shaped to expand (huge lists of tiny entries,
//! a huge value where an object belongs) must not cost many times its size. The server runs
//! under a 128Mi memory limit; before these bounds, one 5 MiB `[0,0,…]` body took it to 235 MB.

#[path = "webhook_support/mod.rs"]
mod webhook_support;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use reload_injector::webhook::handler::handle;
use serde_json::{Value, json};
use webhook_support::{pod_review, state};

/// Counts the bytes live now and the most live since the last [`Counting::reset_peak`].
struct Counting {
    live: AtomicUsize,
    peak: AtomicUsize,
}

#[global_allocator]
static ALLOC: Counting = Counting {
    live: AtomicUsize::new(0),
    peak: AtomicUsize::new(0),
};

// SAFETY: every call is forwarded to `System` unchanged; only counters are added.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let ptr = unsafe { System.alloc(layout) };
        if !ptr.is_null() {
            self.grew(layout.size());
        }
        ptr
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        self.live.fetch_sub(layout.size(), Ordering::Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let new = unsafe { System.realloc(ptr, layout, new_size) };
        if !new.is_null() {
            // Counted as if both blocks were live for a moment, as they may be.
            self.grew(new_size);
            self.live.fetch_sub(layout.size(), Ordering::Relaxed);
        }
        new
    }
}

impl Counting {
    fn grew(&self, size: usize) {
        let live = self.live.fetch_add(size, Ordering::Relaxed) + size;
        self.peak.fetch_max(live, Ordering::Relaxed);
    }

    fn reset_peak(&self) -> usize {
        let live = self.live.load(Ordering::Relaxed);
        self.peak.store(live, Ordering::Relaxed);
        live
    }
}

const MIB: usize = 1024 * 1024;

/// The realistic Pod review with `edit` applied to its object.
fn review_with(edit: impl FnOnce(&mut Value)) -> Vec<u8> {
    let mut review = pod_review("7d0c5e1a-9f3b-4c2d-8e6a-1b2c3d4e5f60");
    edit(&mut review["request"]["object"]);
    serde_json::to_vec(&review).unwrap()
}

/// `n` copies of `item`.
fn many(item: Value, n: usize) -> Value {
    Value::Array(vec![item; n])
}

/// Bodies of about 3–5 MiB, each shaped to expand when read.
fn shapes() -> Vec<(&'static str, Vec<u8>)> {
    let zeros = format!("[{}0]", "0,".repeat(5 * MIB / 2));
    vec![
        ("a body that is an array of zeros", zeros.into_bytes()),
        (
            "metadata that is an array",
            review_with(|o| o["metadata"] = many(json!(0), 1_500_000)),
        ),
        (
            "a prefixed annotation holding an array",
            review_with(|o| {
                o["metadata"]["annotations"]["reload-injector.io/signal"] =
                    many(json!(0), 1_500_000)
            }),
        ),
        (
            "ownerReferences of empty objects",
            review_with(|o| o["metadata"]["ownerReferences"] = many(json!({}), 1_000_000)),
        ),
        (
            "a spec that is an array",
            review_with(|o| o["spec"] = many(json!(0), 1_500_000)),
        ),
    ]
}

#[test]
fn a_review_allocates_a_small_multiple_of_its_body() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let state = state();
    let mut failures = Vec::new();
    for (name, body) in shapes() {
        let before = ALLOC.reset_peak();
        let answer = runtime.block_on(handle(&state, &body));
        let peak = ALLOC.peak.load(Ordering::Relaxed) - before;
        let status = match &answer {
            Ok(bytes) => String::from_utf8_lossy(&bytes[..bytes.len().min(160)]).into_owned(),
            Err(err) => err.to_string(),
        };
        drop(answer);
        let ratio = peak as f64 / body.len() as f64;
        println!(
            "{name}: body {:.1} MiB, peak {:.1} MiB ({ratio:.1}x): {status}",
            body.len() as f64 / MIB as f64,
            peak as f64 / MIB as f64,
        );
        if ratio > 2.0 {
            failures.push(format!("{name}: {ratio:.1}x its body"));
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}
