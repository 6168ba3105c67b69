//! Command-line interface: one `Args` struct per subcommand.
//!
//! Every flag also reads an environment variable `RELOAD_INJECTOR_<FLAG>`, so the same
//! binary can be configured from a Deployment's `env:` as easily as from the shell.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, Subcommand, ValueEnum};

use crate::workload::values::EnvChange;

/// Make ConfigMap and Secret changes reach running applications safely.
#[derive(Debug, Parser)]
#[command(name = "reload-injector", version, about, long_about = None)]
pub struct Cli {
    /// Log format: `text` for people, `json` for log pipelines.
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text, env = "RELOAD_INJECTOR_LOG_FORMAT")]
    pub log_format: LogFormat,

    /// Log filter in `tracing` syntax (e.g. `info`, `reload_injector=debug`).
    /// `debug` logs one line per admission review.
    #[arg(
        long,
        global = true,
        default_value = "info",
        env = "RELOAD_INJECTOR_LOG_LEVEL"
    )]
    pub log_level: String,

    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands; each is one part of the product, all in one binary and one image.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the mutating admission webhook (HTTPS) and its health/metrics endpoint.
    Serve(ServeArgs),
    /// Run the watcher sidecar: reload the app when its mounted config changes.
    Watch(WatchArgs),
    /// Mutate Kubernetes YAML offline, exactly as the webhook would (also a CI linter).
    Inject(InjectArgs),
    /// Write a CA, a serving certificate and a Secret-hash key for installs without cert-manager.
    Certs(CertsArgs),
    /// Say why a workload's pods did (not) reload, from the live cluster (also `kubectl reload-injector`).
    Status(StatusArgs),
}

/// Log output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

/// Where the watcher is injected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum NativeSidecars {
    /// Ask the API server for its version: native sidecars from Kubernetes 1.29 on.
    Auto,
    /// Always inject as an init container with `restartPolicy: Always`.
    Always,
    /// Always inject as a regular container.
    Never,
}

/// The flags `serve` and `inject` share: what is injected, and how Secrets are hashed.
#[derive(Debug, Clone, clap::Args)]
pub struct InjectionArgs {
    /// File holding the HMAC key for hashing Secret values. Without it Secrets are not
    /// hashed (pods do not roll when a Secret consumed through env changes) and a warning
    /// says so.
    #[arg(long, env = "RELOAD_INJECTOR_SECRET_HASH_KEY_FILE")]
    pub secret_hash_key_file: Option<PathBuf>,

    /// Image of the injected `config-reloader` sidecar.
    #[arg(long, default_value = crate::DEFAULT_SIDECAR_IMAGE, env = "RELOAD_INJECTOR_SIDECAR_IMAGE")]
    pub sidecar_image: String,

    /// Inject the watcher as a native sidecar (`auto`: `serve` asks the API server's version,
    /// `inject` takes `always`, Kubernetes ≥ 1.29).
    #[arg(long, value_enum, default_value_t = NativeSidecars::Auto, env = "RELOAD_INJECTOR_NATIVE_SIDECARS")]
    pub native_sidecars: NativeSidecars,

    /// Reloader (stakater/Reloader) no longer runs beside reload-injector: act on the workloads
    /// its annotations select. Until then they are left to Reloader, so that no change rolls a
    /// workload twice (a warning and `status` say so).
    #[arg(long, default_value_t = false, num_args = 0..=1, default_missing_value = "true", action = clap::ArgAction::Set, value_name = "true|false", env = "RELOAD_INJECTOR_RELOADER_RETIRED")]
    pub reloader_retired: bool,

    /// What a change of a ConfigMap read through env or envFrom does to a pod (template) without
    /// the `reload-injector.io/env-change` annotation: `roll` (the workload rolls to new Pods) or
    /// `restart-in-place` (each Pod restarts every container where it is, wave by wave; needs
    /// Kubernetes >= 1.36 and native sidecars, else the workload rolls with a warning).
    #[arg(long, default_value = "roll", value_name = "roll|restart-in-place", value_parser = parse_env_change, env = "RELOAD_INJECTOR_ENV_CHANGE")]
    pub env_change: EnvChange,
}

/// `--env-change`, read by the annotation's own parser.
fn parse_env_change(text: &str) -> Result<EnvChange, String> {
    crate::workload::values::parse_env_change(text)
        .map_err(|_| format!("{text:?} is not roll or restart-in-place"))
}

/// Flags of `reload-injector serve`.
#[derive(Debug, Clone, clap::Args)]
pub struct ServeArgs {
    /// HTTPS address for AdmissionReviews (path `/mutate`).
    #[arg(long, default_value = "0.0.0.0:8443", env = "RELOAD_INJECTOR_LISTEN")]
    pub listen: SocketAddr,

    /// Plain-HTTP address for `/healthz`, `/readyz` and `/metrics`.
    #[arg(
        long,
        default_value = "0.0.0.0:9090",
        env = "RELOAD_INJECTOR_METRICS_LISTEN"
    )]
    pub metrics_listen: SocketAddr,

    /// PEM certificate chain served to the API server; reloaded when the file changes.
    #[arg(
        long,
        default_value = "/etc/reload-injector/tls/tls.crt",
        env = "RELOAD_INJECTOR_TLS_CERT"
    )]
    pub tls_cert: PathBuf,

    /// PEM private key matching `--tls-cert`; reloaded when the file changes.
    #[arg(
        long,
        default_value = "/etc/reload-injector/tls/tls.key",
        env = "RELOAD_INJECTOR_TLS_KEY"
    )]
    pub tls_key: PathBuf,

    /// What is injected, and how Secrets are hashed.
    #[command(flatten)]
    pub injection: InjectionArgs,

    /// The webhook's own namespace: never mutated.
    #[arg(
        long,
        default_value = "reload-injector",
        env = "RELOAD_INJECTOR_NAMESPACE"
    )]
    pub namespace: String,

    /// Longest a review waits for ConfigMap/Secret lookups before it is admitted
    /// without a hash (and with a warning). Keep it well below the webhook timeout.
    #[arg(long, default_value = "1s", value_parser = humantime::parse_duration, env = "RELOAD_INJECTOR_LOOKUP_TIMEOUT")]
    pub lookup_timeout: Duration,

    /// How long a cached ConfigMap/Secret is served before it is refreshed in the background.
    #[arg(long, default_value = "30s", value_parser = humantime::parse_duration, env = "RELOAD_INJECTOR_CACHE_TTL")]
    pub cache_ttl: Duration,

    /// Longest SIGTERM waits for in-flight requests before the server exits.
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration, env = "RELOAD_INJECTOR_DRAIN_TIMEOUT")]
    pub drain_timeout: Duration,

    /// Most client connections open at once. Further clients wait in the kernel's accept
    /// queue until one closes; this bounds the memory idle or slow clients can pin.
    #[arg(long, default_value_t = 1024, value_parser = clap::value_parser!(u32).range(1..), env = "RELOAD_INJECTOR_MAX_CONNECTIONS")]
    pub max_connections: u32,

    /// Most request-body bytes held in memory at once, across all requests (`Ki`, `Mi`, `Gi`
    /// suffixes allowed). A request reserves its declared length (at most 6Mi) before its
    /// body is read; one that cannot within `--body-read-timeout` gets HTTP 503. A quarter is
    /// kept for bodies up to 1Mi, so large bodies cannot hold up ordinary reviews.
    #[arg(long, default_value = "60Mi", value_parser = parse_bytes, env = "RELOAD_INJECTOR_MAX_INFLIGHT_BODY_BYTES")]
    pub max_inflight_body_bytes: usize,

    /// Longest a client may take to complete the TLS handshake before it is disconnected.
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration, env = "RELOAD_INJECTOR_HANDSHAKE_TIMEOUT")]
    pub handshake_timeout: Duration,

    /// Longest the headers of an HTTP/1.1 request may take to arrive (slow clients are
    /// disconnected).
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration, env = "RELOAD_INJECTOR_HEADER_READ_TIMEOUT")]
    pub header_read_timeout: Duration,

    /// Longest the body of a request may take to arrive, waiting for
    /// `--max-inflight-body-bytes` included (HTTP 408 after that).
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration, env = "RELOAD_INJECTOR_BODY_READ_TIMEOUT")]
    pub body_read_timeout: Duration,

    /// Do not contact the Kubernetes API at all (no hashing of cluster config, no
    /// version detection, no rollout controller). For tests and for running outside a cluster.
    #[arg(long, env = "RELOAD_INJECTOR_NO_KUBE")]
    pub no_kube: bool,

    /// Run the rollout controller: when the data of a consumed ConfigMap/Secret changes,
    /// re-stamp the `config-hash` of the workloads that read it through env (a rolling
    /// update), and patch the sidecar Pods that mount it so the kubelet refreshes the files at
    /// once. Only the replica holding the Lease writes.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, value_name = "true|false", env = "RELOAD_INJECTOR_ROLLOUTS")]
    pub rollouts: bool,

    /// Changes within this long of each other become one rollout per workload.
    #[arg(long, default_value = "1s", value_parser = humantime::parse_duration, env = "RELOAD_INJECTOR_ROLLOUT_DELAY")]
    pub rollout_delay: Duration,

    /// Most writes (patches and Events) the controller sends per second; the rest wait.
    #[arg(long, default_value_t = 20.0, value_parser = positive_rate, env = "RELOAD_INJECTOR_MAX_WRITES_PER_SECOND")]
    pub max_writes_per_second: f64,

    /// How long the Lease of the writing replica lasts without renewal; another replica takes
    /// over after it runs out.
    #[arg(long, default_value = "15s", value_parser = lease_duration, env = "RELOAD_INJECTOR_LEASE_DURATION")]
    pub lease_duration: Duration,
}

/// A positive, finite rate.
fn positive_rate(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(rate) if rate.is_finite() && rate > 0.0 => Ok(rate),
        _ => Err(format!(
            "{text:?} is not a positive number of writes per second"
        )),
    }
}

/// A Lease duration of at least 3 seconds (renewals happen every third of it).
fn lease_duration(text: &str) -> Result<Duration, String> {
    let duration = humantime::parse_duration(text).map_err(|e| e.to_string())?;
    if duration < Duration::from_secs(3) {
        return Err(format!("{text:?} is shorter than 3s"));
    }
    Ok(duration)
}

/// Parses a byte count: `65536`, `64Ki`, `60Mi`, `1Gi` (also `k`/`K`, `M`, `G` as powers of
/// 1024).
pub fn parse_bytes(text: &str) -> Result<usize, String> {
    let text = text.trim();
    let digits = text.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    let unit = &text[digits.len()..];
    let shift = match unit {
        "" => 0,
        "Ki" | "k" | "K" => 10,
        "Mi" | "M" => 20,
        "Gi" | "G" => 30,
        _ => return Err(format!("unknown unit {unit:?}: use Ki, Mi or Gi")),
    };
    let number: usize = digits
        .trim()
        .parse()
        .map_err(|_| format!("{text:?} is not a byte count like 65536, 64Ki or 60Mi"))?;
    number
        .checked_mul(1 << shift)
        .filter(|n| *n > 0)
        .ok_or_else(|| format!("{text:?} must be more than zero and fit in memory"))
}

/// Flags of `reload-injector watch`.
#[derive(Debug, Clone, clap::Args)]
pub struct WatchArgs {
    /// Directory of a mounted ConfigMap volume to watch (repeatable).
    #[arg(
        long = "dir",
        required_unless_present_any = ["secret_dirs", "env_hash_file"],
        env = "RELOAD_INJECTOR_DIR",
        value_delimiter = ','
    )]
    pub dirs: Vec<PathBuf>,

    /// Directory whose content includes Secret data (repeatable): watched like `--dir`, but the
    /// content hash shown in logs and `config_info` is keyed with a random per-process key, so
    /// it cannot be used to guess short secret values.
    #[arg(
        long = "secret-dir",
        env = "RELOAD_INJECTOR_SECRET_DIR",
        value_delimiter = ','
    )]
    pub secret_dirs: Vec<PathBuf>,

    /// Signal sent in signal mode: `SIGHUP`, `HUP`, `hup` or a number.
    #[arg(long, default_value = "SIGHUP", env = "RELOAD_INJECTOR_SIGNAL")]
    pub signal: String,

    /// Name of the process to signal (its `comm` or `argv[0]` basename). Without it, the main
    /// process of every other container in the shared process namespace is signalled.
    #[arg(long, env = "RELOAD_INJECTOR_PROCESS")]
    pub process: Option<String>,

    /// HTTP mode: call this URL instead of sending a signal.
    #[arg(long, env = "RELOAD_INJECTOR_URL")]
    pub url: Option<String>,

    /// HTTP method for `--url`.
    #[arg(long, default_value = "POST", env = "RELOAD_INJECTOR_METHOD")]
    pub method: String,

    /// Optional URL fetched (GET) after a reload; a non-2xx answer counts as a failed reload.
    #[arg(long, env = "RELOAD_INJECTOR_VERIFY_URL")]
    pub verify_url: Option<String>,

    /// Quiet period that merges a burst of changes into one reload (`0` = immediate).
    #[arg(long, default_value = "250ms", value_parser = humantime::parse_duration, env = "RELOAD_INJECTOR_DEBOUNCE")]
    pub debounce: Duration,

    /// Safety-net re-check of the content, in case an event was missed.
    #[arg(long, default_value = "60s", value_parser = humantime::parse_duration, env = "RELOAD_INJECTOR_RESYNC")]
    pub resync: Duration,

    /// Signal mode: how long a signalled process is watched after the signal. One that exits
    /// within it did not reload (it died of the signal): the reload counts as failed, is
    /// logged as an error and is not retried (the restarted process reads the new config).
    #[arg(long, default_value = "2s", value_parser = humantime::parse_duration, env = "RELOAD_INJECTOR_RELOAD_GRACE")]
    pub reload_grace: Duration,

    /// Longest one HTTP attempt (`--url`, and `--verify-url`) may take before it counts as
    /// failed and is retried with backoff.
    #[arg(long, default_value = "5s", value_parser = humantime::parse_duration, env = "RELOAD_INJECTOR_TIMEOUT")]
    pub timeout: Duration,

    /// Plain-HTTP address for `/healthz` and `/metrics` (off unless set).
    #[arg(long, env = "RELOAD_INJECTOR_METRICS_LISTEN")]
    pub metrics_listen: Option<SocketAddr>,

    /// Restart in place: the file (a downward API volume of the Pod's
    /// `reload-injector.io/env-hash`) holding the env hash the Pod should run with. Once the
    /// ConfigMaps under `--env-root` hash to it, and the containers started with another, the
    /// watcher exits with code 42, which the Pod's restart rule turns into a restart of every
    /// container in place.
    #[arg(
        long,
        env = "RELOAD_INJECTOR_ENV_HASH_FILE",
        requires = "env_state_dir"
    )]
    pub env_hash_file: Option<PathBuf>,

    /// Restart in place: a writable directory that outlives the containers (an `emptyDir`),
    /// where the env hash they started with is kept.
    #[arg(
        long,
        env = "RELOAD_INJECTOR_ENV_STATE_DIR",
        requires = "env_hash_file"
    )]
    pub env_state_dir: Option<PathBuf>,

    /// Restart in place: where each ConfigMap read through env is mounted, as `<root>/<name>`.
    #[arg(long, default_value = crate::workload::in_place::ENV_ROOT, env = "RELOAD_INJECTOR_ENV_ROOT")]
    pub env_root: PathBuf,

    /// Restart in place: a ConfigMap key the Pod's containers read through env, as NAME/KEY
    /// (repeatable).
    #[arg(
        long = "env-key",
        env = "RELOAD_INJECTOR_ENV_KEY",
        value_delimiter = ','
    )]
    pub env_keys: Vec<String>,

    /// Restart in place: a ConfigMap the Pod's containers read whole through envFrom
    /// (repeatable).
    #[arg(
        long = "env-object",
        env = "RELOAD_INJECTOR_ENV_OBJECT",
        value_delimiter = ','
    )]
    pub env_objects: Vec<String>,
}

/// Flags of `reload-injector inject`.
#[derive(Debug, Clone, clap::Args)]
pub struct InjectArgs {
    /// Kubernetes YAML to mutate (multi-document and `kind: List` are fine); `-` reads stdin.
    #[arg(short = 'f', long = "filename", env = "RELOAD_INJECTOR_FILENAME")]
    pub filename: PathBuf,

    /// YAML file(s) with the ConfigMaps/Secrets to hash (instead of a cluster).
    #[arg(long, env = "RELOAD_INJECTOR_CONFIGS", value_delimiter = ',')]
    pub configs: Vec<PathBuf>,

    /// Namespace for objects that have none.
    #[arg(
        short = 'n',
        long,
        default_value = "default",
        env = "RELOAD_INJECTOR_NAMESPACE"
    )]
    pub namespace: String,

    /// What is injected, and how Secrets are hashed (as for `serve`).
    #[command(flatten)]
    pub injection: InjectionArgs,

    /// Output format of the mutated objects.
    #[arg(short = 'o', long, value_enum, default_value_t = OutputFormat::Yaml, env = "RELOAD_INJECTOR_OUTPUT")]
    pub output: OutputFormat,

    /// Review the objects as the webhook does in a namespace without the opt-in label: only
    /// those that opt in themselves (`reload-injector.io/inject: enabled`, or Reloader's
    /// annotations) are changed, the others are listed as not managed.
    #[arg(long, env = "RELOAD_INJECTOR_UNLABELLED_NAMESPACE")]
    pub unlabelled_namespace: bool,
}

/// Output format of `inject`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OutputFormat {
    /// Multi-document YAML.
    Yaml,
    /// One JSON document per object, one per line.
    Json,
}

/// Flags of `reload-injector certs`.
#[derive(Debug, Clone, clap::Args)]
pub struct CertsArgs {
    /// Directory to write `ca.crt`, `tls.crt`, `tls.key`, `ca-bundle.b64` and `secret-hash.key` into.
    #[arg(long, env = "RELOAD_INJECTOR_OUT")]
    pub out: PathBuf,

    /// Name of the webhook's Service.
    #[arg(
        long,
        default_value = "reload-injector",
        env = "RELOAD_INJECTOR_SERVICE"
    )]
    pub service: String,

    /// Namespace of the webhook's Service.
    #[arg(
        long,
        default_value = "reload-injector",
        env = "RELOAD_INJECTOR_NAMESPACE"
    )]
    pub namespace: String,

    /// Extra DNS name for the serving certificate (repeatable).
    #[arg(long = "dns", env = "RELOAD_INJECTOR_DNS", value_delimiter = ',')]
    pub dns: Vec<String>,

    /// Extra IP address for the serving certificate (repeatable).
    #[arg(long = "ip", env = "RELOAD_INJECTOR_IP", value_delimiter = ',')]
    pub ip: Vec<std::net::IpAddr>,

    /// Validity of the serving certificate.
    #[arg(long, default_value = "365days", value_parser = humantime::parse_duration, env = "RELOAD_INJECTOR_VALIDITY")]
    pub validity: Duration,

    /// Overwrite existing files.
    #[arg(long, env = "RELOAD_INJECTOR_FORCE")]
    pub force: bool,
}

/// Flags of `reload-injector status`, as kubectl has them.
#[derive(Debug, Clone, clap::Args)]
#[command(after_help = "Exit codes: 0 all current and healthy, 1 a finding, 2 could not check.")]
pub struct StatusArgs {
    /// What to report on: deploy/NAME, sts/NAME, ds/NAME, cronjob/NAME, job/NAME,
    /// rollout/NAME, pod/NAME, cm/NAME or secret/NAME (kubectl's spellings). Without it: one
    /// line per workload of the namespace, problems first.
    pub target: Option<String>,

    /// Namespace (default: the current context's).
    #[arg(short = 'n', long, env = "RELOAD_INJECTOR_NAMESPACE")]
    pub namespace: Option<String>,

    /// Every namespace: one line per workload, problems first.
    #[arg(short = 'A', long, env = "RELOAD_INJECTOR_ALL_NAMESPACES")]
    pub all_namespaces: bool,

    /// The kubeconfig context to use (default: the current one).
    #[arg(long, env = "RELOAD_INJECTOR_CONTEXT")]
    pub context: Option<String>,

    /// Path to the kubeconfig (default: `KUBECONFIG`, then `~/.kube/config`, then in-cluster).
    #[arg(long, env = "RELOAD_INJECTOR_KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,

    /// Output: `text` for people, `json` for scripts (a stable form, see docs/status.md).
    #[arg(short = 'o', long, value_enum, default_value_t = StatusFormat::Text, env = "RELOAD_INJECTOR_OUTPUT")]
    pub output: StatusFormat,
}

/// Output format of `status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum StatusFormat {
    /// For people.
    Text,
    /// For scripts.
    Json,
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::{Cli, parse_bytes};

    #[test]
    fn byte_counts_parse_with_binary_units() {
        assert_eq!(parse_bytes("65536"), Ok(65536));
        assert_eq!(parse_bytes("64Ki"), Ok(64 << 10));
        assert_eq!(parse_bytes("60Mi"), Ok(60 << 20));
        assert_eq!(parse_bytes("1G"), Ok(1 << 30));
        assert!(parse_bytes("0").is_err());
        assert!(parse_bytes("12Xi").unwrap_err().contains("unit"));
        assert!(parse_bytes("Mi").is_err());
        assert!(parse_bytes("-5").is_err());
    }

    /// DESIGN.md: every flag also reads `RELOAD_INJECTOR_<FLAG>`.
    #[test]
    fn every_flag_has_its_environment_variable() {
        let cli = Cli::command();
        let mut checked = 0;
        let commands = std::iter::once(&cli).chain(cli.get_subcommands());
        for command in commands {
            for arg in command.get_arguments() {
                let Some(long) = arg.get_long() else { continue };
                if matches!(long, "help" | "version") {
                    continue;
                }
                let want = format!("RELOAD_INJECTOR_{}", long.to_uppercase().replace('-', "_"));
                let got = arg.get_env().map(|e| e.to_string_lossy().into_owned());
                assert_eq!(
                    got.as_deref(),
                    Some(want.as_str()),
                    "{} --{long}",
                    command.get_name()
                );
                checked += 1;
            }
        }
        assert!(checked > 30, "only {checked} flags found");
    }
}
