//! The catalogue's entries. Each cites the program's own documentation, with what it says in our
//! words. A program the documentation does not say reloads is not signalled: its config rolls.

use super::{ImageDefault, Needs, Program, Reloader, Takes};

/// The fields most entries leave empty.
const BASE: Program = Program {
    title: "",
    names: &[],
    process: "",
    takes: Takes::AtStart,
    needs: Needs::Nothing,
    watches: &[],
    polls: &[],
    watch_off: None,
    image: None,
    source: "",
};

/// Exporters and Prometheus servers re-read their `--web.config.file` on every HTTP request
/// (Prometheus docs, "HTTPS and authentication": the file is read at each request, so changes and
/// new certificates apply at once). Shared by the Prometheus-family entries.
const WEB_CONFIG: &[&str] = &["--web.config.file"];

/// Programs, in the order they are looked up: for one name, the first entry whose needs the
/// command line meets applies.
pub const PROGRAMS: [Program; 32] = [
    // nginx.org, "Controlling nginx": HUP makes the master re-read its configuration, start new
    // workers with it and let the old ones finish gracefully.
    Program {
        title: "nginx",
        names: &["nginx", "nginx-unprivileged"],
        process: "nginx",
        takes: Takes::Signal("SIGHUP"),
        source: "https://nginx.org/en/docs/control.html",
        ..BASE
    },
    // HAProxy management guide, "-W" / "master-worker": in master-worker mode the master reloads
    // on SIGUSR2; without it SIGUSR2 is ignored. The official image's docker-entrypoint.sh adds
    // `-W -db` when the arguments run haproxy (none, a flag first, or `haproxy` first); a
    // `command:` replaces that entrypoint and drops it. `master-worker` in the file's global
    // section cannot be seen here: such a Pod chooses `on-change: reload`.
    Program {
        title: "HAProxy",
        names: &["haproxy"],
        process: "haproxy",
        takes: Takes::Signal("SIGUSR2"),
        needs: Needs::Flag(&["-W", "-Ws"]),
        image: Some(ImageDefault {
            cmd: &["-f", "/usr/local/etc/haproxy/haproxy.cfg"],
            adds: &["-W", "-db"],
        }),
        source: "https://docs.haproxy.org/3.0/management.html#4",
        ..BASE
    },
    // Prometheus docs, "Configuration": it reloads its configuration and rule files at runtime on
    // SIGHUP (or POST /-/reload with --web.enable-lifecycle; the signal needs nothing enabled).
    Program {
        title: "Prometheus",
        names: &["prometheus"],
        process: "prometheus",
        takes: Takes::Signal("SIGHUP"),
        watches: WEB_CONFIG,
        source: "https://prometheus.io/docs/prometheus/latest/configuration/configuration/",
        ..BASE
    },
    // Alertmanager docs, "Configuration": it reloads at runtime on SIGHUP (or POST /-/reload).
    Program {
        title: "Alertmanager",
        names: &["alertmanager"],
        process: "alertmanager",
        takes: Takes::Signal("SIGHUP"),
        watches: WEB_CONFIG,
        source: "https://prometheus.io/docs/alerting/latest/configuration/",
        ..BASE
    },
    // Blackbox exporter README, "Configuration": SIGHUP (or POST /-/reload) reloads the
    // configuration file at runtime; a file that does not parse is not applied.
    Program {
        title: "Blackbox exporter",
        names: &["blackbox_exporter", "blackbox-exporter"],
        process: "blackbox_exporter",
        takes: Takes::Signal("SIGHUP"),
        watches: WEB_CONFIG,
        source: "https://github.com/prometheus/blackbox_exporter#configuration",
        ..BASE
    },
    // Thanos docs, "Rule": rule files are not detected by themselves; SIGHUP (or POST /-/reload)
    // re-reads them.
    Program {
        title: "Thanos ruler",
        names: &["thanos"],
        process: "thanos",
        takes: Takes::Signal("SIGHUP"),
        needs: Needs::Subcommand("rule"),
        source: "https://thanos.io/tip/components/rule.md/",
        ..BASE
    },
    // Thanos docs, "Receive": a watcher follows the hashrings file and updates the hashring; a
    // change of the limits file reloads that configuration. The rest is read at start.
    Program {
        title: "Thanos receive",
        names: &["thanos"],
        process: "thanos",
        needs: Needs::Subcommand("receive"),
        watches: &["--receive.hashrings-file", "--receive.limits-config-file"],
        source: "https://thanos.io/tip/components/receive.md/",
        ..BASE
    },
    // Thanos docs, "Service discovery": the querier re-reads its --store.sd-files (watched, and
    // every --store.sd-interval as a fallback). The rest is read at start.
    Program {
        title: "Thanos query",
        names: &["thanos"],
        process: "thanos",
        needs: Needs::Subcommand("query"),
        watches: &["--store.sd-files", "--endpoint.sd-files"],
        source: "https://thanos.io/tip/thanos/service-discovery.md/",
        ..BASE
    },
    // Thanos docs: the other components (sidecar, store, compact, query-frontend, …) take their
    // configuration from flags and files read at start; their docs name no reload.
    Program {
        title: "Thanos (other components)",
        names: &["thanos"],
        process: "thanos",
        source: "https://thanos.io/tip/thanos/getting-started.md/",
        ..BASE
    },
    // OpenTelemetry Collector, docs/internal-architecture.md: a SIGHUP (or a change a config
    // provider reports) reloads the configuration, rebuilding the pipelines.
    Program {
        title: "OpenTelemetry Collector",
        names: &["otelcol", "opentelemetry-collector"],
        process: "otelcol",
        takes: Takes::Signal("SIGHUP"),
        source: "https://github.com/open-telemetry/opentelemetry-collector/blob/main/docs/internal-architecture.md",
        ..BASE
    },
    // The same program under the contrib distribution's binary and image names.
    Program {
        title: "OpenTelemetry Collector Contrib",
        names: &["otelcol-contrib", "opentelemetry-collector-contrib"],
        process: "otelcol-contrib",
        takes: Takes::Signal("SIGHUP"),
        source: "https://github.com/open-telemetry/opentelemetry-collector/blob/main/docs/internal-architecture.md",
        ..BASE
    },
    // The same program under the Kubernetes distribution's binary and image names.
    Program {
        title: "OpenTelemetry Collector (k8s distribution)",
        names: &["otelcol-k8s", "opentelemetry-collector-k8s"],
        process: "otelcol-k8s",
        takes: Takes::Signal("SIGHUP"),
        source: "https://github.com/open-telemetry/opentelemetry-collector/blob/main/docs/internal-architecture.md",
        ..BASE
    },
    // Vector docs, "Management": reload the configuration by sending SIGHUP to the process.
    Program {
        title: "Vector",
        names: &["vector"],
        process: "vector",
        takes: Takes::Signal("SIGHUP"),
        source: "https://vector.dev/docs/administration/management/",
        ..BASE
    },
    // Telegraf's changelog (#539, "Reload config on SIGHUP"): the agent reloads its configuration
    // on SIGHUP (--watch-config does the same on a file change).
    Program {
        title: "Telegraf",
        names: &["telegraf"],
        process: "telegraf",
        takes: Takes::Signal("SIGHUP"),
        source: "https://github.com/influxdata/telegraf/blob/master/CHANGELOG-1.13.md",
        ..BASE
    },
    // Fluent Bit manual, "Hot reload": with -Y/--enable-hot-reload, SIGHUP reloads the
    // configuration. (`hot_reload on` in the file is not visible here: choose on-change: reload.)
    Program {
        title: "Fluent Bit",
        names: &["fluent-bit"],
        process: "fluent-bit",
        takes: Takes::Signal("SIGHUP"),
        needs: Needs::Flag(&["-Y", "--enable-hot-reload"]),
        source: "https://docs.fluentbit.io/manual/administration/hot-reload",
        ..BASE
    },
    // Fluentd docs, "Signals": SIGUSR2 to the supervisor reloads the configuration gracefully
    // (v1.9 on; v1.18 on, a zero-downtime restart).
    Program {
        title: "Fluentd",
        names: &["fluentd", "fluentd-kubernetes-daemonset"],
        process: "fluentd",
        takes: Takes::Signal("SIGUSR2"),
        source: "https://docs.fluentd.org/deployment/signals",
        ..BASE
    },
    // CoreDNS docs, "reload" plugin: SIGUSR1 (or SIGHUP) reloads the Corefile gracefully, which
    // the plugin does by itself when the Corefile has it; the signal works with or without it.
    Program {
        title: "CoreDNS",
        names: &["coredns"],
        process: "coredns",
        takes: Takes::Signal("SIGUSR1"),
        source: "https://coredns.io/plugins/reload/",
        ..BASE
    },
    // PostgreSQL docs, "postgres": SIGHUP to the postmaster reloads the configuration files; it
    // passes the signal on to its children.
    Program {
        title: "PostgreSQL",
        names: &["postgres", "postmaster", "postgresql"],
        process: "postgres",
        takes: Takes::Signal("SIGHUP"),
        source: "https://www.postgresql.org/docs/current/app-postgres.html",
        ..BASE
    },
    // PgBouncer docs, "Usage", Signals: SIGHUP reloads the configuration, like RELOAD on the
    // console.
    Program {
        title: "PgBouncer",
        names: &["pgbouncer"],
        process: "pgbouncer",
        takes: Takes::Signal("SIGHUP"),
        source: "https://www.pgbouncer.org/usage.html",
        ..BASE
    },
    // Apache HTTP Server docs, "Stopping and Restarting": USR1 to the parent is a graceful
    // restart that re-reads the configuration files and lets children finish their requests.
    Program {
        title: "Apache HTTP Server",
        names: &["httpd", "apache", "apache2"],
        process: "httpd",
        takes: Takes::Signal("SIGUSR1"),
        source: "https://httpd.apache.org/docs/2.4/stopping.html",
        ..BASE
    },
    // Mosquitto man page, "Signals": SIGHUP reloads the configuration file, when one was given
    // with -c. The official image's CMD gives `-c /mosquitto/config/mosquitto.conf`.
    Program {
        title: "Mosquitto",
        names: &["mosquitto", "eclipse-mosquitto"],
        process: "mosquitto",
        takes: Takes::Signal("SIGHUP"),
        needs: Needs::Flag(&["-c", "--config-file"]),
        image: Some(ImageDefault {
            cmd: &["-c", "/mosquitto/config/mosquitto.conf"],
            adds: &[],
        }),
        source: "https://mosquitto.org/man/mosquitto-8.html",
        ..BASE
    },
    // Promtail docs, "Reload at runtime": SIGHUP (or POST /reload with
    // --server.enable-runtime-reload) reloads the configuration.
    Program {
        title: "Promtail",
        names: &["promtail"],
        process: "promtail",
        takes: Takes::Signal("SIGHUP"),
        source: "https://grafana.com/docs/loki/latest/send-data/promtail/configuration/",
        ..BASE
    },
    // Grafana Alloy docs, "run": SIGHUP (or POST /-/reload) reloads the configuration from disk.
    Program {
        title: "Grafana Alloy",
        names: &["alloy"],
        process: "alloy",
        takes: Takes::Signal("SIGHUP"),
        source: "https://grafana.com/docs/alloy/latest/reference/cli/run/",
        ..BASE
    },
    // Grafana docs, "Provision Grafana": a file dashboard provider scans its path every
    // updateIntervalSeconds and applies changed dashboards; grafana.ini, data sources and the
    // other provisioning files are read at start. /var/lib/grafana/dashboards is the path the docs
    // use for dashboard files.
    Program {
        title: "Grafana",
        names: &["grafana", "grafana-oss", "grafana-enterprise"],
        process: "grafana",
        polls: &["/var/lib/grafana/dashboards"],
        source: "https://grafana.com/docs/grafana/latest/administration/provisioning/",
        ..BASE
    },
    // Loki docs, "Runtime configuration file": the file named by -runtime-config.file is reloaded
    // while Loki runs (every -runtime-config.reload-period, 10 s by default); the rest at start.
    Program {
        title: "Loki",
        names: &["loki"],
        process: "loki",
        watches: &["-runtime-config.file"],
        source: "https://grafana.com/docs/loki/latest/configure/",
        ..BASE
    },
    // Mimir docs, "About runtime configuration": the runtime configuration files are reloaded
    // every 10 s by default; the rest at start.
    Program {
        title: "Grafana Mimir",
        names: &["mimir"],
        process: "mimir",
        watches: &["-runtime-config.file"],
        source: "https://grafana.com/docs/mimir/latest/configure/about-runtime-configuration/",
        ..BASE
    },
    // Traefik docs, "File provider": with `watch` (on by default in the CLI's file provider) the
    // files of --providers.file.directory/filename are watched and applied; the static
    // configuration is read at start.
    Program {
        title: "Traefik",
        names: &["traefik"],
        process: "traefik",
        watches: &["--providers.file.directory", "--providers.file.filename"],
        watch_off: Some("--providers.file.watch=false"),
        source: "https://doc.traefik.io/traefik/providers/file/",
        ..BASE
    },
    // Caddy docs, "Command line", caddy run: --watch reloads the config file when it changes.
    // Without it a reload goes through the admin API with the new config as the request body,
    // which a sidecar cannot send: the config rolls.
    Program {
        title: "Caddy",
        names: &["caddy"],
        process: "caddy",
        takes: Takes::Itself,
        needs: Needs::Flag(&["--watch"]),
        source: "https://caddyserver.com/docs/command-line#caddy-run",
        ..BASE
    },
    // Envoy docs, "Hot restart": a new bootstrap needs a new Envoy process. (Dynamic resources from
    // the filesystem are watched by Envoy itself; their paths are in the bootstrap, not visible
    // here: such a Pod chooses on-change: none.)
    Program {
        title: "Envoy",
        names: &["envoy"],
        process: "envoy",
        source: "https://www.envoyproxy.io/docs/envoy/latest/intro/arch_overview/operations/hot_restart",
        ..BASE
    },
    // Redis docs, "Redis configuration": redis.conf is read at start; changes at runtime go
    // through CONFIG SET.
    Program {
        title: "Redis",
        names: &["redis", "redis-server", "valkey", "valkey-server"],
        process: "redis-server",
        source: "https://redis.io/docs/latest/operate/oss_and_stack/management/config/",
        ..BASE
    },
    // RabbitMQ docs, "Configuration": the configuration file is read when the node starts.
    Program {
        title: "RabbitMQ",
        names: &["rabbitmq", "rabbitmq-server"],
        process: "rabbitmq-server",
        source: "https://www.rabbitmq.com/docs/configure",
        ..BASE
    },
    // Kafka docs, "Broker Configs": server.properties is read at start; some settings change at
    // runtime only through kafka-configs (dynamic broker configs).
    Program {
        title: "Apache Kafka",
        names: &["kafka", "kafka-server-start.sh"],
        process: "java",
        source: "https://kafka.apache.org/documentation/#brokerconfigs",
        ..BASE
    },
];

/// Helper containers that already reload the program beside them.
pub const RELOADERS: [Reloader; 4] = [
    // configmap-reload README: watches the mounted ConfigMap directories (--volume-dir) and calls
    // --webhook-url when they change.
    Reloader {
        title: "configmap-reload (jimmidyson)",
        names: &["configmap-reload", "mirrored-jimmidyson-configmap-reload"],
        needs: Needs::Nothing,
        watch_flags: &[],
        source: "https://github.com/jimmidyson/configmap-reload",
    },
    // prometheus-config-reloader (prometheus-operator), its flags: it watches --config-file and
    // --watched-dir and calls the reload endpoint (--reload-url) or signals the process.
    Reloader {
        title: "prometheus-config-reloader (prometheus-operator)",
        names: &[
            "prometheus-config-reloader",
            "mirrored-prometheus-operator-prometheus-config-reloader",
        ],
        needs: Needs::Nothing,
        watch_flags: &[],
        source: "https://github.com/prometheus-operator/prometheus-operator/tree/main/cmd/prometheus-config-reloader",
    },
    // k8s-sidecar README: collects ConfigMaps and Secrets through the API into a shared folder and
    // calls the app's reload URL (REQ_URL), e.g. Grafana's provisioning reload.
    Reloader {
        title: "k8s-sidecar (kiwigrid)",
        names: &["k8s-sidecar"],
        needs: Needs::Nothing,
        watch_flags: &[],
        source: "https://github.com/kiwigrid/k8s-sidecar",
    },
    // Thanos docs, "Sidecar", Reloader configuration: it watches --reloader.config-file and
    // --reloader.rule-dir and reloads Prometheus.
    Reloader {
        title: "Thanos sidecar",
        names: &["thanos"],
        needs: Needs::Subcommand("sidecar"),
        watch_flags: &[
            "--reloader.config-file",
            "--reloader.rule-dir",
            "--reloader.watched-dir",
        ],
        source: "https://thanos.io/tip/components/sidecar.md/",
    },
];

/// The table of the version before this catalogue, for one purpose: recognising a `config-hash`
/// it stamped over config that has not changed since, so that upgrading starts no rollout.
pub const LEGACY_PROGRAMS: [Program; 8] = [
    legacy("nginx", &["nginx", "nginx-unprivileged"], "SIGHUP", &[]),
    legacy("haproxy", &["haproxy"], "SIGUSR2", &[]),
    legacy("prometheus", &["prometheus"], "SIGHUP", &[]),
    legacy("alertmanager", &["alertmanager"], "SIGHUP", &[]),
    legacy(
        "postgres",
        &["postgres", "postmaster", "postgresql"],
        "SIGHUP",
        &[],
    ),
    legacy("pgbouncer", &["pgbouncer"], "SIGHUP", &[]),
    legacy(
        "fluent-bit",
        &["fluent-bit"],
        "SIGHUP",
        &["-Y", "--enable-hot-reload"],
    ),
    legacy("fluentd", &["fluentd"], "SIGUSR2", &[]),
];

const fn legacy(
    process: &'static str,
    names: &'static [&'static str],
    signal: &'static str,
    flags: &'static [&'static str],
) -> Program {
    let needs = if flags.is_empty() {
        Needs::Nothing
    } else {
        Needs::Flag(flags)
    };
    Program {
        title: process,
        names,
        process,
        takes: Takes::Signal(signal),
        needs,
        ..BASE
    }
}
