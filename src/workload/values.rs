//! The one parser of the annotation values that end up on the sidecar's command line
//! (`signal`, `process`, `reload-url`) and of `on-change`. Admission and `watch` both call it,
//! so a value admission lets through is a value the sidecar accepts: a sidecar that refused its
//! flags would exit, and a native sidecar that never starts keeps its Pod in Init for ever.
//! Pure: no I/O.

use std::fmt;

use super::{ENV_CHANGE, ON_CHANGE, PROCESS, RELOAD_URL, SIGNAL};

/// A value admission and the sidecar refuse alike. Each message says what to write instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ValueError {
    /// Not a signal name or number at all.
    #[error(
        "{SIGNAL}: {0:?} is not a reload signal; use SIGHUP, SIGUSR1 or SIGUSR2 (name or number)"
    )]
    UnknownSignal(String),
    /// A signal that stops or ends a process (`SIGTERM`, `SIGKILL`, `SIGSTOP`, ...), or a
    /// real-time signal (32–64), whose default action also ends the process.
    #[error(
        "{SIGNAL}: {0:?} ends or stops a process; use SIGHUP, SIGUSR1 or SIGUSR2 (or on-change: restart)"
    )]
    NotAReloadSignal(String),
    /// Not one word that names a process.
    #[error(
        "{PROCESS}: {0:?} is not a process name; write the command's name without a path, e.g. nginx"
    )]
    BadProcess(String),
    /// `https://`: the sidecar calls the app on localhost inside the Pod, over plain HTTP.
    #[error(
        "{RELOAD_URL}: {0:?}: only http:// is supported (the app is called in the pod: http://127.0.0.1:PORT/PATH)"
    )]
    HttpsUrl(String),
    /// Not an `http://HOST[:PORT]/PATH` URL.
    #[error("{RELOAD_URL}: {url:?}: {why}; write http://127.0.0.1:PORT/PATH")]
    BadUrl {
        url: String,
        /// What is wrong with it.
        why: &'static str,
    },
    /// `on-change` is not one of its three words.
    #[error("{ON_CHANGE}: {0:?} is not reload, restart or none")]
    BadOnChange(String),
    /// `env-change` is not one of its two words.
    #[error("{ENV_CHANGE}: {0:?} is not restart-in-place or roll")]
    BadEnvChange(String),
}

/// A signal that servers use to reload: its canonical name and its Linux number (the same on
/// x86_64 and aarch64, the two platforms we build for).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReloadSignal {
    /// `SIGHUP`, `SIGUSR1`, ...
    pub name: &'static str,
    /// 1, 10, ...
    pub number: i32,
}

impl fmt::Display for ReloadSignal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name)
    }
}

/// The signals we send. Each has a "terminate" or "ignore" default action and is what some
/// server reloads on; none is a request to stop. Every other signal is refused: SIGTERM,
/// SIGINT and SIGQUIT ask a process to end, SIGKILL and SIGSTOP cannot be caught, SIGTSTP,
/// SIGTTIN and SIGTTOU stop it, the real-time signals (32–64) end it by default.
pub const RELOAD_SIGNALS: [ReloadSignal; 8] = [
    signal("SIGHUP", 1),
    signal("SIGUSR1", 10),
    signal("SIGUSR2", 12),
    signal("SIGALRM", 14),
    signal("SIGCONT", 18),
    signal("SIGURG", 23),
    signal("SIGWINCH", 28),
    signal("SIGIO", 29),
];

const fn signal(name: &'static str, number: i32) -> ReloadSignal {
    ReloadSignal { name, number }
}

/// Names of the signals that stop or end a process, refused with their own message.
const STOPPING: [&str; 22] = [
    "SIGINT",
    "SIGQUIT",
    "SIGILL",
    "SIGTRAP",
    "SIGABRT",
    "SIGBUS",
    "SIGFPE",
    "SIGKILL",
    "SIGSEGV",
    "SIGPIPE",
    "SIGTERM",
    "SIGSTKFLT",
    "SIGCHLD",
    "SIGSTOP",
    "SIGTSTP",
    "SIGTTIN",
    "SIGTTOU",
    "SIGXCPU",
    "SIGXFSZ",
    "SIGVTALRM",
    "SIGPROF",
    "SIGSYS",
];

/// `SIGHUP`, `HUP`, `hup`, ` 1 ` → SIGHUP. See [`RELOAD_SIGNALS`] for what is accepted.
pub fn parse_signal(text: &str) -> Result<ReloadSignal, ValueError> {
    let raw = text.trim();
    if !raw.is_empty() && raw.bytes().all(|b| b.is_ascii_digit()) {
        let number: Option<i32> = raw.parse().ok();
        return match RELOAD_SIGNALS.iter().find(|s| Some(s.number) == number) {
            Some(signal) => Ok(*signal),
            None if number.is_some_and(|n| (1..=64).contains(&n)) => {
                Err(ValueError::NotAReloadSignal(text.to_owned()))
            }
            None => Err(ValueError::UnknownSignal(text.to_owned())),
        };
    }
    let upper = raw.to_ascii_uppercase();
    let name = format!("SIG{}", upper.strip_prefix("SIG").unwrap_or(&upper));
    if let Some(signal) = RELOAD_SIGNALS.iter().find(|s| s.name == name) {
        return Ok(*signal);
    }
    let realtime = name.starts_with("SIGRTMIN") || name.starts_with("SIGRTMAX");
    if STOPPING.contains(&name.as_str()) || realtime || name == "SIGIOT" || name == "SIGPWR" {
        return Err(ValueError::NotAReloadSignal(text.to_owned()));
    }
    Err(ValueError::UnknownSignal(text.to_owned()))
}

/// A process name: one word, no `/`, no whitespace or control characters, at most 255 bytes,
/// not starting with `-` (the sidecar's command line would read it as a flag). Returned trimmed.
pub fn parse_process(text: &str) -> Result<&str, ValueError> {
    let name = text.trim();
    let good = !name.is_empty()
        && !name.starts_with('-')
        && name.len() <= 255
        && !name.contains('/')
        && !name.chars().any(|c| c.is_whitespace() || c.is_control());
    good.then_some(name)
        .ok_or_else(|| ValueError::BadProcess(text.to_owned()))
}

/// A reload URL: `http://HOST[:PORT][/PATH]`, as `http::Uri` reads it (the sidecar calls it with
/// the same type). `https://` is refused with the fix. Returned without surrounding spaces (any
/// other whitespace or control character refuses it).
pub fn parse_reload_url(text: &str) -> Result<&str, ValueError> {
    let url = text.trim_matches(' ');
    let bad = |why| ValueError::BadUrl {
        url: text.to_owned(),
        why,
    };
    if url.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(bad("it contains spaces or control characters"));
    }
    let uri: http::Uri = url.parse().map_err(|_| bad("it does not parse"))?;
    match uri.scheme_str() {
        Some("http") => {}
        Some(s) if s.eq_ignore_ascii_case("https") => {
            return Err(ValueError::HttpsUrl(text.to_owned()));
        }
        Some(_) => return Err(bad("only http:// is supported")),
        None => return Err(bad("it has no http:// scheme")),
    }
    match uri.authority() {
        Some(authority) if !authority.host().is_empty() && !authority.as_str().contains('@') => {
            Ok(url)
        }
        Some(_) => Err(bad("its host is empty or carries a user")),
        None => Err(bad("it has no host")),
    }
}

/// What a change of mounted config does, as `reload-injector.io/on-change` chooses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnChange {
    /// Tell the running app (signal or HTTP): the Pod vouches that it reloads.
    Reload,
    /// Roll the workload, as for env: the mounted config counts in `config-hash`.
    Restart,
    /// Do nothing: the files change (the kubelet updates them), nobody is told.
    Nothing,
}

/// `reload`, `restart` or `none` (any case, surrounding spaces ignored).
pub fn parse_on_change(text: &str) -> Result<OnChange, ValueError> {
    match text.trim().to_ascii_lowercase().as_str() {
        "reload" => Ok(OnChange::Reload),
        "restart" => Ok(OnChange::Restart),
        "none" => Ok(OnChange::Nothing),
        _ => Err(ValueError::BadOnChange(text.to_owned())),
    }
}

/// What a change of config read through env does, as `reload-injector.io/env-change` (or
/// `serve --env-change` for Pods without it) chooses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum EnvChange {
    /// Roll the workload (the `config-hash` changes): new Pods.
    #[default]
    Roll,
    /// Restart every container of each Pod in place, wave by wave (Kubernetes >= 1.36).
    RestartInPlace,
}

/// `restart-in-place` or `roll` (any case, surrounding spaces ignored).
pub fn parse_env_change(text: &str) -> Result<EnvChange, ValueError> {
    match text.trim().to_ascii_lowercase().as_str() {
        "restart-in-place" => Ok(EnvChange::RestartInPlace),
        "roll" => Ok(EnvChange::Roll),
        _ => Err(ValueError::BadEnvChange(text.to_owned())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reload_signals_are_read_by_name_and_number() {
        for (text, want) in [
            ("SIGHUP", "SIGHUP"),
            ("HUP", "SIGHUP"),
            ("hup", "SIGHUP"),
            (" usr1 ", "SIGUSR1"),
            ("1", "SIGHUP"),
            ("12", "SIGUSR2"),
            ("SigWinch", "SIGWINCH"),
        ] {
            assert_eq!(parse_signal(text).map(|s| s.name), Ok(want), "{text}");
        }
    }

    #[test]
    fn signals_that_end_a_process_are_refused_with_the_fix() {
        for text in [
            "SIGTERM",
            "term",
            "9",
            "KILL",
            "stop",
            "15",
            "34",
            "64",
            "SIGRTMIN+1",
        ] {
            let err = parse_signal(text).unwrap_err();
            assert!(
                matches!(err, ValueError::NotAReloadSignal(_)),
                "{text}: {err}"
            );
            assert!(err.to_string().contains("use SIGHUP"), "{err}");
        }
        for text in [
            "",
            "SIG",
            "RELOAD",
            "0",
            "65",
            "-1",
            "SIGHUP; rm -rf",
            "1.0",
        ] {
            assert!(
                matches!(parse_signal(text), Err(ValueError::UnknownSignal(_))),
                "{text}"
            );
        }
    }

    #[test]
    fn reload_urls_are_plain_http_with_a_host() {
        assert_eq!(
            parse_reload_url(" http://127.0.0.1:9090/-/reload "),
            Ok("http://127.0.0.1:9090/-/reload")
        );
        assert!(matches!(
            parse_reload_url("https://localhost/reload"),
            Err(ValueError::HttpsUrl(_))
        ));
        for bad in [
            "ftp://x",
            "http://",
            "http:///path",
            "127.0.0.1/reload",
            "http://a b",
            "http://a\n",
            "http://user@host/",
        ] {
            assert!(
                matches!(parse_reload_url(bad), Err(ValueError::BadUrl { .. })),
                "{bad}"
            );
        }
    }

    #[test]
    fn process_names_are_single_words() {
        assert_eq!(parse_process(" nginx "), Ok("nginx"));
        assert_eq!(parse_process("fluent-bit"), Ok("fluent-bit"));
        for bad in ["", " ", "/usr/sbin/nginx", "a b", "x\u{1b}", "-0", "--help"] {
            assert!(parse_process(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn on_change_has_three_words() {
        assert_eq!(parse_on_change(" Reload"), Ok(OnChange::Reload));
        assert_eq!(parse_on_change("restart"), Ok(OnChange::Restart));
        assert_eq!(parse_on_change("NONE"), Ok(OnChange::Nothing));
        assert!(parse_on_change("hot").is_err());
    }

    #[test]
    fn env_change_has_two_words() {
        assert_eq!(
            parse_env_change(" Restart-In-Place "),
            Ok(EnvChange::RestartInPlace)
        );
        assert_eq!(parse_env_change("roll"), Ok(EnvChange::Roll));
        let err = parse_env_change("in-place").unwrap_err();
        assert!(
            err.to_string().contains("restart-in-place or roll"),
            "{err}"
        );
    }
}
