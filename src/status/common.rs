//! Small helpers every part of the report shares (pure, a leaf: it imports no other part).

use k8s_openapi::jiff::Timestamp;
use serde_json::Value;

/// `metadata.<field>` as a string.
pub fn meta_str<'v>(object: &'v Value, field: &str) -> Option<&'v str> {
    object.get("metadata")?.get(field)?.as_str()
}

/// Whole seconds from `then` to `now` (0 when `then` is later).
pub fn seconds_between(then: Timestamp, now: Timestamp) -> i64 {
    (now.as_second() - then.as_second()).max(0)
}

/// `3s`, `5m`, `2h`, `4d`.
pub fn age(seconds: i64) -> String {
    match seconds {
        s if s < 120 => format!("{s}s"),
        s if s < 2 * 3600 => format!("{}m", s / 60),
        s if s < 48 * 3600 => format!("{}h", s / 3600),
        s => format!("{}d", s / 86400),
    }
}
