//! `reload-injector inject`: offline mutation of Kubernetes YAML, like `istioctl kube-inject`.
//!
//! Reads multi-document YAML (and `kind: List`), runs every object through the same core as
//! the webhook — with the sidecar put into workload pod templates, so the output can be
//! applied without the webhook — prints the result on stdout and the warnings on stderr.
//! Exit codes: 0 admitted, 1 the webhook would deny, 2 unreadable input.
//!
//! Imports: the shared domain (`hash`, `workload`, `kinds`, `policy`) and the helpers `cli`,
//! `report`; never `webhook`, `controller`, `watch`, `status` or `certs`.

mod config_files;
mod yaml_io;

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use serde_json::Value;

use crate::cli::{InjectArgs, NativeSidecars, OutputFormat};
use crate::hash::{ConfigData, ConfigId, Lookup, SecretKey};
use crate::kinds::Kind;
use crate::policy;
use crate::workload::{
    Object, Operation, Outcome, Plan, Request, ReviewError, Settings, WARNING_PREFIX, Workload,
    quoted,
};
use config_files::Reduce;
pub use yaml_io::render;
use yaml_io::{parse_documents, read_input};

/// Why `inject` could not do its job.
#[derive(Debug, thiserror::Error)]
pub enum OfflineError {
    /// A file (or stdin) could not be read.
    #[error("failed to read {}", path.display())]
    ReadFailed {
        /// The file, or `-`.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The YAML did not parse.
    #[error("failed to parse {} as YAML: {message}", path.display())]
    YamlInvalid {
        /// The file, or `-`.
        path: PathBuf,
        /// The parser's message, with the location.
        message: String,
    },
    /// A ConfigMap/Secret in `--configs` is malformed.
    #[error("failed to read {what} from {} (--configs)", path.display())]
    ConfigInvalid {
        /// `ConfigMap "x"`.
        what: String,
        path: PathBuf,
        /// What serde said.
        #[source]
        source: serde_json::Error,
    },
    /// An object of a handled kind does not have the shape of its kind.
    #[error("failed to read {object} in {} as a {kind}: {cause}{}", path.display(), yaml_hint(cause))]
    ObjectUnreadable {
        /// `Deployment/web`.
        object: String,
        /// `Deployment`.
        kind: String,
        /// The file, or `-`.
        path: PathBuf,
        /// What serde said (part of the message: the hint follows it).
        cause: serde_json::Error,
    },
    /// The secret hash key file is empty.
    #[error("failed to use {} as the secret hash key: the file is empty", path.display())]
    KeyEmpty { path: PathBuf },
}

/// A hint for the commonest surprise: YAML reads unquoted `y`, `yes`, `on`, `no`… as booleans.
fn yaml_hint(err: &serde_json::Error) -> &'static str {
    if err.to_string().starts_with("invalid type: boolean") {
        " (YAML reads unquoted true/false, yes/no, y/n, on/off as booleans: quote the value)"
    } else {
        ""
    }
}

/// The result of injecting a set of documents.
#[derive(Debug, Default)]
pub struct Injected {
    /// The documents, mutated, in input order.
    pub documents: Vec<Value>,
    /// `Kind/name: reload-injector: …` lines.
    pub warnings: Vec<String>,
    /// `Kind/name: reload-injector: …` denial messages; non-empty means exit 1.
    pub denials: Vec<String>,
}

/// ConfigMaps/Secrets given with `--configs`, by namespace. `None`: none were given.
pub type Configs = Option<BTreeMap<String, ConfigData>>;

/// Runs the command.
pub fn run(args: InjectArgs) -> ExitCode {
    match execute(&args) {
        Ok(injected) => report(&injected, args.output),
        Err(err) => {
            eprintln!("error: {}", crate::report::one_line(&err));
            ExitCode::from(2)
        }
    }
}

fn execute(args: &InjectArgs) -> Result<Injected, OfflineError> {
    let key_file = args.injection.secret_hash_key_file.as_ref();
    let secret_key = key_file
        .map(|path| {
            let bytes = std::fs::read(path).map_err(|source| OfflineError::ReadFailed {
                path: path.clone(),
                source,
            })?;
            SecretKey::new(&bytes).ok_or_else(|| OfflineError::KeyEmpty { path: path.clone() })
        })
        .transpose()?;
    let settings = Settings {
        sidecar_image: args.injection.sidecar_image.clone(),
        native_sidecars: args.injection.native_sidecars != NativeSidecars::Never,
        own_namespace: "reload-injector".to_owned(),
        version: crate::VERSION.to_owned(),
        inject_into_templates: true,
        secret_key,
        // Offline, the cluster the output goes to is taken to be one that can (>= 1.36).
        in_place: crate::workload::in_place::InPlaceSettings {
            default: args.injection.env_change,
            support: crate::workload::in_place::Support::Yes,
        },
        // Offline, every warning is printed.
        warning_chars: None,
        reloader_retired: args.injection.reloader_retired,
    };
    let configs = if args.configs.is_empty() {
        None
    } else {
        let mut by_namespace = BTreeMap::new();
        for path in &args.configs {
            let reduce = Reduce {
                path,
                default_namespace: &args.namespace,
                secret_key: settings.secret_key.as_ref(),
            };
            reduce.load(&read_input(path)?, &mut by_namespace)?;
        }
        Some(by_namespace)
    };
    let place = Place {
        namespace: &args.namespace,
        labelled: !args.unlabelled_namespace,
    };
    inject_text_in(
        &read_input(&args.filename)?,
        &args.filename,
        place,
        &configs,
        &settings,
    )
}

/// Where the objects are reviewed: the namespace of those that name none, and whether the
/// namespaces carry the opt-in label (else only objects that opt in themselves are changed).
#[derive(Debug, Clone, Copy)]
pub struct Place<'a> {
    /// For objects that have none.
    pub namespace: &'a str,
    /// Whether the namespaces carry `reload-injector.io/inject=enabled`.
    pub labelled: bool,
}

/// Injects every object of a YAML text, as in labelled namespaces (the testable heart of the
/// command).
pub fn inject_text(
    text: &str,
    path: &Path,
    namespace: &str,
    configs: &Configs,
    settings: &Settings,
) -> Result<Injected, OfflineError> {
    let place = Place {
        namespace,
        labelled: true,
    };
    inject_text_in(text, path, place, configs, settings)
}

/// Injects every object of a YAML text, reviewed at `place`.
pub fn inject_text_in(
    text: &str,
    path: &Path,
    place: Place<'_>,
    configs: &Configs,
    settings: &Settings,
) -> Result<Injected, OfflineError> {
    let mut injected = Injected::default();
    for mut document in parse_documents(text, path)? {
        for object in objects_mut(&mut document) {
            inject_object(object, path, place, configs, settings, &mut injected)?;
        }
        injected.documents.push(document);
    }
    Ok(injected)
}

/// The objects of a document: the `items` of a list (`kind: List`, or a typed list such as
/// `DaemonSetList` or `ConfigMapList` with a list of `items`; none when a `List` has no list of
/// them), or the document itself. An item of a typed list that names no `kind`/`apiVersion` (the
/// API server's lists leave them out) gets the list's: an item is read as what the list holds.
fn objects_mut(document: &mut Value) -> Vec<&mut Value> {
    let kind = str_at(document, "/kind").unwrap_or_default().to_owned();
    let Some(of) = kind.strip_suffix("List") else {
        return vec![document];
    };
    let api_version = document.get("apiVersion").cloned();
    let is_list = document.get("items").is_some_and(Value::is_array);
    if !is_list {
        return if of.is_empty() {
            Vec::new()
        } else {
            vec![document]
        };
    }
    let items = document.get_mut("items").and_then(Value::as_array_mut);
    let mut items: Vec<&mut Value> = items.into_iter().flatten().collect();
    let typed = items.iter_mut().filter(|_| !of.is_empty());
    for map in typed.filter_map(|item| item.as_object_mut()) {
        map.entry("kind")
            .or_insert_with(|| Value::String(of.to_owned()));
        if let Some(api_version) = &api_version {
            map.entry("apiVersion")
                .or_insert_with(|| api_version.clone());
        }
    }
    items
}

fn inject_object(
    object: &mut Value,
    path: &Path,
    place: Place<'_>,
    configs: &Configs,
    settings: &Settings,
    out: &mut Injected,
) -> Result<(), OfflineError> {
    let api_version = str_at(object, "/apiVersion").unwrap_or_default();
    let kind = str_at(object, "/kind").unwrap_or_default().to_owned();
    let name = str_at(object, "/metadata/name")
        .or_else(|| str_at(object, "/metadata/generateName"))
        .unwrap_or("<unnamed>");
    let label = format!("{kind}/{name}");
    // Only the versions the webhook is registered for; anything else passes through untouched.
    let group = Kind::ALL
        .into_iter()
        .find(|k| k.api_version() == api_version)
        .map(Kind::group);
    let Some(group) = group.filter(|g| Workload::classify(g, &kind).is_some()) else {
        unchecked_kind(object, &label, out);
        return Ok(());
    };
    let namespace = str_at(object, "/metadata/namespace")
        .unwrap_or(place.namespace)
        .to_owned();
    if policy::excluded(&namespace, &settings.own_namespace) {
        out.warnings.push(format!(
            "{label}: {WARNING_PREFIX}namespace {} is excluded, so nothing was checked: the webhook never \
             acts on {} or its own namespace ({})",
            quoted(&namespace),
            policy::EXCLUDED_NAMESPACES.join(", "),
            settings.own_namespace
        ));
        return Ok(());
    }
    let unreadable = |kind, cause| OfflineError::ObjectUnreadable {
        object: label.clone(),
        kind,
        path: path.to_owned(),
        cause,
    };
    // The core reads objects as the webhook receives them: raw JSON.
    let raw = serde_json::value::to_raw_value(&*object).map_err(|e| unreadable(kind.clone(), e))?;
    let req = Request {
        group,
        kind: &kind,
        operation: Operation::Create,
        namespace: &namespace,
        namespace_labelled: place.labelled,
        object: Object::Raw(&raw),
        old_object: None,
        dry_run: false,
    };
    let plan = match Plan::new(&req, settings) {
        Ok(plan) => plan,
        Err(ReviewError::UnreadableObject { kind, source }) => {
            return Err(unreadable(kind, source));
        }
        // Offline, every object is there; nothing to review otherwise.
        Err(ReviewError::MissingObject { .. }) => return Ok(()),
    };
    let data = lookups(&plan, configs.as_ref().map(|c| c.get(&namespace)));
    apply(plan.outcome(&data), object, &label, out);
    Ok(())
}

/// A typo (`kind: Deploymnet`, `apps/v2`) would pass unchecked: says so when the object carries
/// pods, as the kinds the webhook checks do.
fn unchecked_kind(object: &Value, label: &str, out: &mut Injected) {
    if !carries_pods(object) {
        return;
    }
    let api_version = str_at(object, "/apiVersion").unwrap_or_default();
    let kind = str_at(object, "/kind").unwrap_or_default();
    out.warnings.push(format!(
        "{label}: {WARNING_PREFIX}{} {} is not a kind reload-injector checks; left as it is",
        quoted(api_version),
        quoted(kind)
    ));
    out.warnings.push(format!(
        "{label}: {WARNING_PREFIX}kinds it checks: {}",
        Workload::known().join(", ")
    ));
}

/// Records an outcome: its warnings, and its denial or its patch applied to `object`.
fn apply(outcome: Outcome, object: &mut Value, label: &str, out: &mut Injected) {
    let (Outcome::Allowed { warnings, .. } | Outcome::Denied { warnings, .. }) = &outcome;
    out.warnings
        .extend(warnings.iter().map(|w| format!("{label}: {w}")));
    let patch = match outcome {
        Outcome::Allowed { patch, .. } => patch,
        Outcome::Denied { message, .. } => {
            out.denials.push(format!("{label}: {message}"));
            return;
        }
    };
    let mut mutated = object.clone();
    match json_patch::patch(&mut mutated, &patch) {
        Ok(()) => *object = mutated,
        Err(err) => out.denials.push(format!(
            "{label}: internal error: the patch does not apply: {err}"
        )),
    }
}

/// Whether an object has a pod spec or pod template where workloads keep theirs.
fn carries_pods(object: &Value) -> bool {
    let templates = Kind::ALL.iter().filter_map(|k| k.pod_pointer());
    object.pointer("/spec/containers").is_some()
        || templates
            .filter(|pointer| !pointer.is_empty())
            .any(|pointer| object.pointer(pointer).is_some())
}

/// What `--configs` says about each object the plan needs.
fn lookups(plan: &Plan, given: Option<Option<&ConfigData>>) -> ConfigData {
    let lookup = |id: ConfigId| {
        let lookup = match given {
            None => Lookup::Failed("no --configs given".to_owned()),
            Some(None) => Lookup::NotFound,
            Some(Some(configs)) => configs.get(&id).cloned().unwrap_or(Lookup::NotFound),
        };
        (id, lookup)
    };
    plan.config_refs().into_iter().map(lookup).collect()
}

fn report(injected: &Injected, format: OutputFormat) -> ExitCode {
    for warning in &injected.warnings {
        eprintln!("Warning: {warning}");
    }
    if !injected.denials.is_empty() {
        for denial in &injected.denials {
            eprintln!("Error: denied: {denial}");
        }
        return ExitCode::from(1);
    }
    match render(&injected.documents, format) {
        Ok(text) => {
            let mut stdout = std::io::stdout().lock();
            if let Err(err) = stdout
                .write_all(text.as_bytes())
                .and_then(|()| stdout.flush())
            {
                eprintln!("error: failed to write the output: {err}");
                return ExitCode::from(2);
            }
            ExitCode::SUCCESS
        }
        Err(message) => {
            eprintln!("error: failed to render the output: {message}");
            ExitCode::from(2)
        }
    }
}

/// The string at `pointer` in `value`, if there is one.
fn str_at<'v>(value: &'v Value, pointer: &str) -> Option<&'v str> {
    value.pointer(pointer).and_then(Value::as_str)
}
