//! Which Pods a workload owns: its label selector (`matchLabels`, `matchExpressions`) or, for a
//! CronJob, the owner references through its Jobs. Pure.
use serde_json::Value;

/// Whether an object's `metadata.labels` (JSON, `Null` when absent) match the
/// `LabelSelector` JSON `selector`. An empty or absent selector matches nothing (as a
/// workload's selector must not select every Pod).
pub fn matches(selector: &Value, labels: &Value) -> bool {
    let match_labels = selector.get("matchLabels").and_then(Value::as_object);
    let expressions = selector.get("matchExpressions").and_then(Value::as_array);
    let empty =
        match_labels.is_none_or(|m| m.is_empty()) && expressions.is_none_or(|e| e.is_empty());
    if empty {
        return false;
    }
    let labels_ok = match_labels.into_iter().flatten().all(|(key, want)| {
        want.as_str()
            .is_some_and(|want| label(labels, key) == Some(want))
    });
    labels_ok
        && expressions
            .into_iter()
            .flatten()
            .all(|expression| expression_matches(expression, labels))
}

fn label<'v>(labels: &'v Value, key: &str) -> Option<&'v str> {
    labels.get(key).and_then(Value::as_str)
}

fn expression_matches(expression: &Value, labels: &Value) -> bool {
    let Some(key) = expression.get("key").and_then(Value::as_str) else {
        return false;
    };
    let values: Vec<&str> = expression
        .get("values")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let got = label(labels, key);
    match expression.get("operator").and_then(Value::as_str) {
        Some("In") => got.is_some_and(|g| values.contains(&g)),
        Some("NotIn") => got.is_none_or(|g| !values.contains(&g)),
        Some("Exists") => got.is_some(),
        Some("DoesNotExist") => got.is_none(),
        _ => false,
    }
}

/// Whether `object` has an owner reference to `uid`.
pub fn owned_by(object: &Value, uid: &str) -> bool {
    object
        .pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .any(|owner| owner.get("uid").and_then(Value::as_str) == Some(uid))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> Value {
        Value::Object(pairs.iter().map(|(k, v)| ((*k).into(), json!(v))).collect())
    }

    #[test]
    fn selectors_match_as_the_api_server_does() {
        let selector = json!({"matchLabels": {"app": "web"},
            "matchExpressions": [{"key": "tier", "operator": "In", "values": ["a", "b"]},
                                 {"key": "canary", "operator": "DoesNotExist"}]});
        for (pod, expected) in [
            (&[("app", "web"), ("tier", "a")][..], true),
            (&[("app", "web"), ("tier", "c")], false),
            (&[("app", "web"), ("tier", "a"), ("canary", "1")], false),
        ] {
            assert_eq!(matches(&selector, &labels(pod)), expected, "{pod:?}");
        }
        assert!(!matches(&json!({}), &labels(&[("app", "web")])));
        assert!(!matches(
            &json!({"matchExpressions": [{"operator": "Exists"}]}),
            &labels(&[])
        ));
    }
}
