//! Writing a generated bundle into a directory without losing anything that was there.

use std::fs;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use base64::Engine;

use super::{Bundle, CertsError};

/// The files `reload-injector certs` writes, in order.
pub const FILE_NAMES: [&str; 5] = [
    "ca.crt",
    "tls.crt",
    "tls.key",
    "ca-bundle.b64",
    "secret-hash.key",
];

/// Files readable only by their owner.
const PRIVATE: [&str; 2] = ["tls.key", "secret-hash.key"];

/// A fresh Secret-hash key: 32 random bytes as 64 hex digits and a newline.
pub fn random_hash_key() -> String {
    let bytes: [u8; 32] = rand::random();
    format!("{}\n", hex::encode(bytes))
}

/// Writes the bundle and `hash_key` as [`FILE_NAMES`] into `dir` (created if missing) and
/// returns their paths. Unless `force`, refuses before writing anything if any of them exists.
/// Each file is written to a temporary name first and renamed into place only once all are
/// written, so a failure part-way leaves existing files as they were.
pub fn write_bundle(
    dir: &Path,
    bundle: &Bundle,
    hash_key: &str,
    force: bool,
) -> Result<Vec<PathBuf>, CertsError> {
    fs::create_dir_all(dir).map_err(io("create directory", dir))?;
    let targets: Vec<PathBuf> = FILE_NAMES.iter().map(|name| dir.join(name)).collect();
    if !force {
        let existing: Vec<&str> = FILE_NAMES
            .iter()
            .zip(&targets)
            .filter(|(_, path)| path.symlink_metadata().is_ok())
            .map(|(name, _)| *name)
            .collect();
        if !existing.is_empty() {
            return Err(CertsError::FilesExisted {
                dir: dir.display().to_string(),
                files: existing.join(", "),
            });
        }
    }
    let bundle_b64 = base64::engine::general_purpose::STANDARD.encode(&bundle.ca_cert_pem);
    let contents = [
        bundle.ca_cert_pem.clone(),
        bundle.cert_pem.clone(),
        bundle.key_pem.clone(),
        format!("{bundle_b64}\n"),
        hash_key.to_owned(),
    ];

    let mut staged = Vec::with_capacity(FILE_NAMES.len());
    for (name, content) in FILE_NAMES.iter().zip(&contents) {
        let tmp = dir.join(format!(".{name}.tmp-{}", std::process::id()));
        let mode = if PRIVATE.contains(name) { 0o600 } else { 0o644 };
        if let Err(err) = write_new(&tmp, content, mode) {
            staged
                .iter()
                .for_each(|path: &PathBuf| drop(fs::remove_file(path)));
            return Err(err);
        }
        staged.push(tmp);
    }
    for (tmp, target) in staged.iter().zip(&targets) {
        fs::rename(tmp, target).map_err(io("rename into", target))?;
    }
    Ok(targets)
}

/// Creates `path` (replacing a stale leftover) with `mode` and writes `content` to disk.
fn write_new(path: &Path, content: &str, mode: u32) -> Result<(), CertsError> {
    let _ = fs::remove_file(path);
    let mut file = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(path)
        .map_err(io("create", path))?;
    file.write_all(content.as_bytes())
        .and_then(|()| file.sync_all())
        .map_err(io("write", path))?;
    // The umask may have narrowed the mode; set it exactly.
    fs::set_permissions(path, std::os::unix::fs::PermissionsExt::from_mode(mode))
        .map_err(io("set permissions of", path))
}

fn io(action: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> CertsError {
    let path = path.display().to_string();
    move |source| CertsError::WriteFailed {
        action,
        path,
        source,
    }
}
