//! Label and field selectors, parsed the way the API server reads `labelSelector` and
//! `fieldSelector`: `k=v`, `k==v`, `k!=v`, `k`, `!k`, `k in (a,b)`, `k notin (a,b)`, joined
//! by commas (AND). Field selectors know `metadata.name` and `metadata.namespace`.

use std::collections::BTreeSet;

use serde_json::Value;

/// Why a selector was refused (the API server answers 400).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SelectorError {
    /// A requirement could not be parsed.
    #[error("failed to parse selector requirement {0:?}")]
    Malformed(String),
    /// A field selector names a field the server does not index.
    #[error("field label not supported: {0}")]
    UnsupportedField(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Requirement {
    Equals(String, String),
    NotEquals(String, String),
    Exists(String),
    NotExists(String),
    In(String, BTreeSet<String>),
    NotIn(String, BTreeSet<String>),
}

/// A parsed label selector; the empty selector matches everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelSelector(Vec<Requirement>);

/// A parsed field selector over `metadata.name` / `metadata.namespace`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSelector(Vec<Requirement>);

/// Splits on commas that are not inside parentheses.
fn split_requirements(text: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0usize, 0usize);
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                parts.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&text[start..]);
    parts
        .into_iter()
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .collect()
}

fn parse_set(
    key: &str,
    rest: &str,
    raw: &str,
) -> Result<(String, BTreeSet<String>), SelectorError> {
    let inner = rest
        .trim()
        .strip_prefix('(')
        .and_then(|r| r.strip_suffix(')'))
        .ok_or_else(|| SelectorError::Malformed(raw.to_owned()))?;
    let values = inner
        .split(',')
        .map(|v| v.trim().to_owned())
        .filter(|v| !v.is_empty())
        .collect();
    Ok((key.trim().to_owned(), values))
}

fn parse_requirement(raw: &str) -> Result<Requirement, SelectorError> {
    let malformed = || SelectorError::Malformed(raw.to_owned());
    if let Some((key, value)) = raw.split_once("!=") {
        return Ok(Requirement::NotEquals(
            key.trim().into(),
            value.trim().into(),
        ));
    }
    if let Some((key, value)) = raw.split_once("==") {
        return Ok(Requirement::Equals(key.trim().into(), value.trim().into()));
    }
    if let Some((key, value)) = raw.split_once('=') {
        return Ok(Requirement::Equals(key.trim().into(), value.trim().into()));
    }
    if let Some((key, rest)) = raw.split_once(" notin ") {
        let (key, set) = parse_set(key, rest, raw)?;
        return Ok(Requirement::NotIn(key, set));
    }
    if let Some((key, rest)) = raw.split_once(" in ") {
        let (key, set) = parse_set(key, rest, raw)?;
        return Ok(Requirement::In(key, set));
    }
    if let Some(key) = raw.strip_prefix('!') {
        let key = key.trim();
        return if key.is_empty() || key.contains(' ') {
            Err(malformed())
        } else {
            Ok(Requirement::NotExists(key.into()))
        };
    }
    if raw.contains([' ', '(', ')']) {
        return Err(malformed());
    }
    Ok(Requirement::Exists(raw.into()))
}

fn holds(requirement: &Requirement, lookup: &dyn Fn(&str) -> Option<String>) -> bool {
    match requirement {
        Requirement::Equals(k, v) => lookup(k).as_deref() == Some(v.as_str()),
        Requirement::NotEquals(k, v) => lookup(k).as_deref() != Some(v.as_str()),
        Requirement::Exists(k) => lookup(k).is_some(),
        Requirement::NotExists(k) => lookup(k).is_none(),
        Requirement::In(k, set) => lookup(k).is_some_and(|v| set.contains(&v)),
        Requirement::NotIn(k, set) => lookup(k).is_none_or(|v| !set.contains(&v)),
    }
}

impl LabelSelector {
    /// Parses a `labelSelector` query value.
    pub fn parse(text: &str) -> Result<Self, SelectorError> {
        split_requirements(text)
            .into_iter()
            .map(parse_requirement)
            .collect::<Result<_, _>>()
            .map(LabelSelector)
    }

    /// Whether an object with this `metadata` matches.
    pub fn matches(&self, metadata: &Value) -> bool {
        let labels = metadata.get("labels");
        let lookup = |key: &str| {
            labels
                .and_then(|l| l.get(key))
                .and_then(Value::as_str)
                .map(str::to_owned)
        };
        self.0.iter().all(|r| holds(r, &lookup))
    }
}

impl FieldSelector {
    /// Parses a `fieldSelector` query value.
    pub fn parse(text: &str) -> Result<Self, SelectorError> {
        let requirements: Vec<Requirement> = split_requirements(text)
            .into_iter()
            .map(parse_requirement)
            .collect::<Result<_, _>>()?;
        for requirement in &requirements {
            let key = match requirement {
                Requirement::Equals(k, _) | Requirement::NotEquals(k, _) => k,
                _ => {
                    return Err(SelectorError::Malformed(format!("{requirement:?}")));
                }
            };
            if key != "metadata.name" && key != "metadata.namespace" {
                return Err(SelectorError::UnsupportedField(key.clone()));
            }
        }
        Ok(FieldSelector(requirements))
    }

    /// Whether an object with this name and namespace matches.
    pub fn matches(&self, namespace: &str, name: &str) -> bool {
        let lookup = |key: &str| match key {
            "metadata.name" => Some(name.to_owned()),
            "metadata.namespace" => Some(namespace.to_owned()),
            _ => None,
        };
        self.0.iter().all(|r| holds(r, &lookup))
    }
}
