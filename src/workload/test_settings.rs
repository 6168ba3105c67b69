//! The settings the core's unit tests start from.

use super::Settings;

/// Native sidecars, no Secret key, in place as by default, Reloader retired.
pub fn settings() -> Settings {
    Settings {
        sidecar_image: "reload-injector:test".to_owned(),
        native_sidecars: true,
        own_namespace: "reload-injector".to_owned(),
        version: "0.0.0-test".to_owned(),
        inject_into_templates: false,
        secret_key: None,
        in_place: Default::default(),
        warning_chars: None,
        reloader_retired: true,
    }
}
