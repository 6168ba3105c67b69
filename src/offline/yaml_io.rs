//! YAML in and out: multi-document input read as kubectl reads it, output as YAML or JSON
//! lines.

use std::io::Read;
use std::path::Path;

use serde_json::Value;

use super::OfflineError;
use crate::cli::OutputFormat;

/// Reads YAML as kubectl does (sigs.k8s.io/yaml, YAML 1.1): `0755` is octal, 493. A number
/// that comes out as a whole float (`08`, `1.0`) is written back as the integer that kubectl
/// would send in its JSON, never as `8.0`.
pub(super) fn parse_documents(text: &str, path: &Path) -> Result<Vec<Value>, OfflineError> {
    let options = serde_saphyr::options! { legacy_octal_numbers: true };
    let mut documents: Vec<Value> = serde_saphyr::from_multiple_with_options(text, options)
        .map_err(|err| {
            OfflineError::YamlInvalid {
                path: path.to_owned(),
                message: {
                    let message = err.to_string();
                    // The parser starts its own message with "error: ", which the report adds too.
                    message
                        .strip_prefix("error: ")
                        .map_or(message.clone(), str::to_owned)
                },
            }
        })?;
    documents.retain(|d| !d.is_null());
    documents.iter_mut().for_each(whole_floats_as_integers);
    Ok(documents)
}

/// Turns every float without a fraction (that fits an i64) into that integer, as Go's JSON
/// encoder writes a float64 that kubectl read from YAML.
fn whole_floats_as_integers(value: &mut Value) {
    match value {
        Value::Number(n) if n.is_f64() => {
            let f = n.as_f64().unwrap_or(f64::NAN);
            // i64::MAX as f64 rounds up to 2^63, which does not fit: keep below it.
            if f.fract() == 0.0 && f.abs() < 9.0e15 {
                *value = Value::from(f as i64);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(whole_floats_as_integers),
        Value::Object(map) => map.values_mut().for_each(whole_floats_as_integers),
        _ => {}
    }
}

/// The text of `path`, or of stdin for `-`.
pub(super) fn read_input(path: &Path) -> Result<String, OfflineError> {
    let failed = |source| OfflineError::ReadFailed {
        path: path.to_owned(),
        source,
    };
    if path == Path::new("-") {
        let mut text = String::new();
        std::io::stdin().read_to_string(&mut text).map_err(failed)?;
        Ok(text)
    } else {
        std::fs::read_to_string(path).map_err(failed)
    }
}

/// Renders documents as multi-document YAML or JSON lines.
pub fn render(documents: &[Value], format: OutputFormat) -> Result<String, String> {
    let mut out = String::new();
    for document in documents {
        match format {
            OutputFormat::Yaml => {
                out.push_str("---\n");
                out.push_str(&serde_saphyr::to_string(document).map_err(|e| e.to_string())?);
            }
            OutputFormat::Json => {
                out.push_str(&serde_json::to_string(document).map_err(|e| e.to_string())?);
                out.push('\n');
            }
        }
    }
    Ok(out)
}
