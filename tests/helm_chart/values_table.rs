//! The README's table of the chart's values, generated from `values.yaml`: each value is
//! documented by a `# -- ` line right above it, and every value is documented (a map with no
//! line of its own is documented through its keys).

use serde_json::Value;

/// One row: the dotted path, the default (from the parsed values) and the description.
pub struct Row {
    pub path: String,
    pub default: Value,
    pub description: String,
}

/// The rows of `values.yaml` (its text), in file order. Panics naming any value that has no
/// `# --` line, or a `# --` line that documents nothing.
pub fn rows(text: &str) -> Vec<Row> {
    let values: Value = serde_saphyr::from_str(text).expect("values.yaml is not valid YAML");
    let mut documented = Vec::new();
    let mut stack: Vec<(usize, String)> = Vec::new();
    let mut pending: Option<String> = None;
    for (number, line) in text.lines().enumerate() {
        let indent = line.len() - line.trim_start().len();
        let trimmed = line.trim_start();
        if let Some(description) = trimmed.strip_prefix("# -- ") {
            assert!(
                pending.is_none(),
                "values.yaml line {}: two `# --` lines in a row",
                number + 1
            );
            pending = Some(description.trim().to_owned());
            continue;
        }
        if trimmed.is_empty() || trimmed.starts_with('#') || trimmed.starts_with('-') {
            continue;
        }
        let Some((key, _)) = trimmed.split_once(':') else {
            continue;
        };
        while stack.last().is_some_and(|(i, _)| *i >= indent) {
            stack.pop();
        }
        stack.push((indent, key.to_owned()));
        if let Some(description) = pending.take() {
            let path: Vec<&str> = stack.iter().map(|(_, k)| k.as_str()).collect();
            documented.push((path.join("."), description));
        }
    }
    assert!(pending.is_none(), "values.yaml ends with a `# --` line");

    let mut undocumented = Vec::new();
    find_undocumented(&values, "", &documented, &mut undocumented);
    assert!(
        undocumented.is_empty(),
        "values without a `# --` line in values.yaml: {undocumented:?}"
    );
    documented
        .into_iter()
        .map(|(path, description)| {
            let default = path.split('.').fold(&values, |v, k| &v[k]).clone();
            Row {
                path,
                default,
                description,
            }
        })
        .collect()
}

fn find_undocumented(
    value: &Value,
    prefix: &str,
    documented: &[(String, String)],
    out: &mut Vec<String>,
) {
    let Some(map) = value.as_object() else { return };
    for (key, child) in map {
        let path = if prefix.is_empty() {
            key.clone()
        } else {
            format!("{prefix}.{key}")
        };
        if documented.iter().any(|(p, _)| *p == path) {
            continue;
        }
        match child.as_object() {
            Some(inner) if !inner.is_empty() => find_undocumented(child, &path, documented, out),
            _ => out.push(path),
        }
    }
}

/// The Markdown table.
pub fn markdown(rows: &[Row]) -> String {
    let mut out = String::from("| value | default | meaning |\n|---|---|---|\n");
    for row in rows {
        let default = match &row.default {
            Value::String(s) if s.is_empty() => "`\"\"`".to_owned(),
            Value::String(s) => format!("`{s}`"),
            other => {
                let json = other.to_string();
                if json.len() <= 60 {
                    format!("`{json}`")
                } else {
                    "see `values.yaml`".to_owned()
                }
            }
        };
        let description = row.description.replace('|', "\\|");
        out.push_str(&format!("| `{}` | {default} | {description} |\n", row.path));
    }
    out
}
