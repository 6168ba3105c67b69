//! Review bodies of a chosen size: the realistic Pod review grown with what makes real Pods
//! big (more containers, long `env` lists, `managedFields` entries), still a Pod the webhook
//! patches.

use serde_json::{Value, json};

/// The realistic Pod review grown to about `target` bytes of compact JSON.
pub fn grown_pod_review(base: &Value, target: usize) -> Vec<u8> {
    let mut review = base.clone();
    let object = &mut review["request"]["object"];
    let app = object["spec"]["containers"][0].clone();
    let mut n = 0;
    while serde_json::to_vec(&review).unwrap().len() < target {
        // Grow in steps of about 1/20 of the target so the result lands close to it.
        let step = (target / 20).max(2_000);
        let mut added = 0;
        while added < step {
            n += 1;
            let object = &mut review["request"]["object"];
            let entry = if n % 3 == 0 {
                let mut c = app.clone();
                c["name"] = json!(format!("worker-{n}"));
                c["env"] = Value::Array(env_list(n, 10));
                object["spec"]["containers"].as_array_mut().unwrap().push(c);
                json!(format!("worker-{n}"))
            } else if n % 3 == 1 {
                object["spec"]["containers"][0]["env"]
                    .as_array_mut()
                    .unwrap()
                    .extend(env_list(n, 5));
                json!(n)
            } else {
                let entry = managed_fields_entry(n);
                object["metadata"]["managedFields"]
                    .as_array_mut()
                    .unwrap()
                    .push(entry.clone());
                entry
            };
            added += serde_json::to_vec(&entry).unwrap().len().max(400);
        }
    }
    serde_json::to_vec(&review).unwrap()
}

fn env_list(n: usize, count: usize) -> Vec<Value> {
    (0..count)
        .map(|i| json!({"name": format!("SETTING_{n}_{i}"), "value": format!("value-{n}-{i}-abcdefghijklmnop")}))
        .collect()
}

fn managed_fields_entry(n: usize) -> Value {
    let fields: serde_json::Map<String, Value> = (0..12)
        .map(|i| (format!("f:label-{n}-{i}"), json!({})))
        .collect();
    json!({
        "manager": format!("controller-{n}"),
        "operation": "Update",
        "apiVersion": "v1",
        "time": "2026-11-20T21:14:03Z",
        "fieldsType": "FieldsV1",
        "fieldsV1": {"f:metadata": {"f:labels": fields}}
    })
}
