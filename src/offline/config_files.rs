//! `--configs`: the ConfigMaps and Secrets given as files, reduced to per-key digests as they
//! are read (values are never kept).

use std::collections::BTreeMap;
use std::path::Path;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use serde::Deserialize;

use super::yaml_io::parse_documents;
use super::{OfflineError, objects_mut, str_at};
use crate::hash::{ConfigData, ConfigId, ConfigObject, Lookup, SecretKey};

/// Reads `--configs` files into per-key digests (values are never kept).
pub(super) struct Reduce<'a> {
    pub(super) path: &'a Path,
    pub(super) default_namespace: &'a str,
    pub(super) secret_key: Option<&'a SecretKey>,
}

impl Reduce<'_> {
    pub(super) fn load(
        &self,
        text: &str,
        out: &mut BTreeMap<String, ConfigData>,
    ) -> Result<(), OfflineError> {
        let mut documents = parse_documents(text, self.path)?;
        for object in documents.iter_mut().flat_map(objects_mut) {
            let object = &*object;
            let kind = str_at(object, "/kind").unwrap_or_default();
            let name = str_at(object, "/metadata/name")
                .unwrap_or_default()
                .to_owned();
            let namespace = str_at(object, "/metadata/namespace").unwrap_or(self.default_namespace);
            let invalid = |what: String| {
                move |source| OfflineError::ConfigInvalid {
                    what,
                    path: self.path.to_owned(),
                    source,
                }
            };
            let (id, contents) = match kind {
                "ConfigMap" => {
                    let cm = ConfigMap::deserialize(object)
                        .map_err(invalid(format!("ConfigMap {name:?}")))?;
                    (
                        ConfigId::config_map(name),
                        ConfigObject::from_config_map(&cm),
                    )
                }
                "Secret" => {
                    let secret =
                        Secret::deserialize(object).map_err(invalid(format!("Secret {name:?}")))?;
                    // Without a key Secrets are not hashed at all, so nothing is kept.
                    let Some(key) = self.secret_key else { continue };
                    (
                        ConfigId::secret(name),
                        ConfigObject::from_secret(&secret, key),
                    )
                }
                _ => continue,
            };
            out.entry(namespace.to_owned())
                .or_default()
                .insert(id, Lookup::Found(contents));
        }
        Ok(())
    }
}
