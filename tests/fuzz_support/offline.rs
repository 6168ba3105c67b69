//! The properties of `reload-injector inject` on one YAML text: no panic, a documented error
//! or documents out; a denied object left exactly as it came; output that reads back as
//! itself; and injecting the output again changes nothing.

use std::collections::BTreeMap;
use std::path::Path;

use reload_injector::cli::OutputFormat;
use reload_injector::hash::{ConfigData, ConfigId, ConfigObject, Lookup, SecretKey};
use reload_injector::offline::{Configs, Injected, OfflineError, inject_text, render};
use reload_injector::workload::{Settings, WARNING_PREFIX};
use serde_json::Value;

/// The settings and `--configs` the fuzzer alternates between.
pub struct Offline {
    variants: Vec<(Settings, Configs)>,
    /// How the texts ended: bad YAML, unreadable object, denied, mutated, untouched.
    pub outcomes: super::Tally,
}

impl Offline {
    /// Native sidecars with a Secret key and configs; regular sidecars without either.
    pub fn new() -> Offline {
        let settings = |native: bool, key: Option<SecretKey>| Settings {
            sidecar_image: "example.test/reload-injector:fuzz".into(),
            native_sidecars: native,
            own_namespace: "reload-injector".into(),
            version: reload_injector::VERSION.into(),
            inject_into_templates: true,
            secret_key: key,
            in_place: Default::default(),
            warning_chars: None,
            reloader_retired: true,
        };
        Offline {
            variants: vec![
                (settings(true, SecretKey::new(b"fuzz-key")), Some(configs())),
                (settings(false, None), None),
                (settings(true, None), Some(BTreeMap::new())),
            ],
            outcomes: super::Tally::default(),
        }
    }

    fn inject(&self, which: usize, text: &str) -> Result<Injected, OfflineError> {
        let (settings, configs) = &self.variants[which % self.variants.len()];
        inject_text(text, Path::new("fuzz.yaml"), "shop", configs, settings)
    }

    /// Checks every property on `text` with variant `which`.
    pub fn check(&self, which: usize, text: &str) -> Result<(), String> {
        let injected = match self.inject(which, text) {
            Ok(injected) => injected,
            Err(OfflineError::YamlInvalid { .. }) => {
                self.outcomes.add("bad-yaml");
                return Ok(());
            }
            Err(OfflineError::ObjectUnreadable { .. }) => {
                self.outcomes.add("unreadable");
                return Ok(());
            }
            Err(other) => return Err(format!("undocumented error: {other}")),
        };
        for line in &injected.warnings {
            labelled(line, true)?;
        }
        for line in &injected.denials {
            labelled(line, false)?;
        }
        let input = read_back(text)?;
        self.outcomes.add(if !injected.denials.is_empty() {
            "denied"
        } else if injected.documents != input {
            "mutated"
        } else {
            "untouched"
        });
        if !injected.denials.is_empty() {
            // A denial leaves the denied object untouched; with one object per text (what
            // the generator mostly sends) that is every document.
            if flat_count(&input) == 1 && injected.documents != input {
                return Err(format!(
                    "a denied object was changed: {:?}",
                    injected.denials
                ));
            }
            return Ok(());
        }
        let output = render(&injected.documents, OutputFormat::Yaml)
            .map_err(|e| format!("the output does not render: {e}"))?;
        let reread = read_back(&output)?;
        if reread != injected.documents {
            return Err(format!(
                "the YAML output does not read back as itself:\n{output}"
            ));
        }
        let again = self
            .inject(which, &output)
            .map_err(|e| format!("injecting the output failed: {e}"))?;
        if !again.denials.is_empty() {
            return Err(format!(
                "injecting the output was denied: {:?}",
                again.denials
            ));
        }
        if again.documents != injected.documents {
            return Err(format!(
                "not idempotent: injecting the output changed it:\n{output}"
            ));
        }
        Ok(())
    }
}

/// Checks `Kind/name: reload-injector: …`; a warning also has no control characters (offline,
/// it is never cut: it may be longer than an admission warning). The name is the user's and may
/// itself contain `: `, so every place where the message could start is tried.
fn labelled(line: &str, warning: bool) -> Result<(), String> {
    let fits = |said: &str| {
        said.starts_with(WARNING_PREFIX) && (!warning || !said.chars().any(char::is_control))
    };
    let ok = line.match_indices(": ").any(|(i, _)| fits(&line[i + 2..]));
    if ok {
        Ok(())
    } else {
        Err(format!("not a labelled reload-injector message: {line:?}"))
    }
}

/// Parses YAML documents as `inject` does (null documents dropped).
fn read_back(text: &str) -> Result<Vec<Value>, String> {
    let documents: Vec<Value> = serde_saphyr::from_multiple(text)
        .map_err(|e| format!("text accepted by inject does not parse: {e}"))?;
    Ok(documents.into_iter().filter(|d| !d.is_null()).collect())
}

/// How many objects: documents, with a `kind: List` counting its items.
fn flat_count(documents: &[Value]) -> usize {
    documents
        .iter()
        .map(|d| match d.get("items").and_then(Value::as_array) {
            Some(items) if d["kind"] == "List" => items.len(),
            _ => 1,
        })
        .sum()
}

/// `--configs` for namespace `shop`: `cm-a`, `cm-b` and Secret `sec-a` exist.
fn configs() -> BTreeMap<String, ConfigData> {
    let mut data = ConfigData::new();
    for name in ["cm-a", "cm-b"] {
        let cm: k8s_openapi::api::core::v1::ConfigMap = serde_json::from_value(serde_json::json!({
            "metadata": {"name": name}, "data": {"app.conf": format!("{name} v1"), "url": "http://x"}
        }))
        .expect("a ConfigMap");
        data.insert(
            ConfigId::config_map(name),
            Lookup::Found(ConfigObject::from_config_map(&cm)),
        );
    }
    let secret: k8s_openapi::api::core::v1::Secret = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "sec-a"}, "data": {"k": "aHVudGVyMg=="}
    }))
    .expect("a Secret");
    data.insert(
        ConfigId::secret("sec-a"),
        Lookup::Found(ConfigObject::from_secret(
            &secret,
            &SecretKey::new(b"fuzz-key").expect("a key"),
        )),
    );
    BTreeMap::from([("shop".to_owned(), data)])
}
