//! RBAC rules read from manifests, held against the permissions recorded requests needed
//! ([`super::Recorded::rbac`]): what is missing, and which granted permission was never used.
//! A ClusterRole bound by a ClusterRoleBinding grants cluster-wide; a Role grants in its
//! namespace; a ClusterRole bound by a RoleBinding grants in the binding's namespace.
//! Wildcards (`*`) are understood; `resourceNames` are not (a named rule counts as the
//! whole resource).

use serde_json::Value;

use super::record::RbacNeed;

/// One granted `(apiGroup, resource, verb)` and where: `None` is every namespace.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Grant {
    /// API group (`""` for core, `*` for any).
    pub api_group: String,
    /// Resource plural (`*` for any).
    pub resource: String,
    /// Verb (`*` for any).
    pub verb: String,
    /// Namespace, or `None` for cluster-wide.
    pub namespace: Option<String>,
}

impl Grant {
    /// Whether this grant permits `need`.
    pub fn allows(&self, need: &RbacNeed) -> bool {
        let (group, resource, verb, namespace) = need;
        let field = |granted: &str, wanted: &str| granted == "*" || granted == wanted;
        field(&self.api_group, group)
            && field(&self.resource, resource)
            && field(&self.verb, verb)
            && (self.namespace.is_none() || self.namespace == *namespace)
    }
}

/// Every permission some manifests grant.
#[derive(Debug, Clone, Default)]
pub struct Rbac {
    /// The grants, one per (group, resource, verb, namespace).
    pub grants: Vec<Grant>,
}

fn strings(value: &Value) -> Vec<String> {
    value
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

fn rules(role: &Value, namespace: Option<String>) -> Vec<Grant> {
    let mut grants = Vec::new();
    for rule in role["rules"].as_array().into_iter().flatten() {
        for group in strings(&rule["apiGroups"]) {
            for resource in strings(&rule["resources"]) {
                for verb in strings(&rule["verbs"]) {
                    grants.push(Grant {
                        api_group: group.clone(),
                        resource: resource.clone(),
                        verb,
                        namespace: namespace.clone(),
                    });
                }
            }
        }
    }
    grants
}

impl Rbac {
    /// Reads the Roles, ClusterRoles and their bindings in `documents` (parsed YAML
    /// documents); objects without a namespace are in `default_namespace` (what kustomize
    /// would set).
    pub fn from_documents(documents: &[Value], default_namespace: &str) -> Rbac {
        let namespace_of = |doc: &Value| {
            doc["metadata"]["namespace"]
                .as_str()
                .unwrap_or(default_namespace)
                .to_owned()
        };
        let cluster_role = |name: &str| {
            documents
                .iter()
                .find(|d| d["kind"] == "ClusterRole" && d["metadata"]["name"] == name)
        };
        let mut grants = Vec::new();
        for doc in documents {
            let role_name = doc["roleRef"]["name"].as_str().unwrap_or_default();
            match doc["kind"].as_str() {
                Some("Role") => grants.extend(rules(doc, Some(namespace_of(doc)))),
                Some("ClusterRoleBinding") => {
                    if let Some(role) = cluster_role(role_name) {
                        grants.extend(rules(role, None));
                    }
                }
                Some("RoleBinding") if doc["roleRef"]["kind"] == "ClusterRole" => {
                    if let Some(role) = cluster_role(role_name) {
                        grants.extend(rules(role, Some(namespace_of(doc))));
                    }
                }
                _ => {}
            }
        }
        grants.sort();
        grants.dedup();
        Rbac { grants }
    }

    /// Reads a multi-document YAML file (see [`Rbac::from_documents`]).
    pub fn from_yaml_file(path: &std::path::Path, default_namespace: &str) -> Rbac {
        let text = std::fs::read_to_string(path)
            .unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
        let documents: Vec<Value> = serde_saphyr::from_multiple(&text)
            .unwrap_or_else(|e| panic!("parse {}: {e}", path.display()));
        Rbac::from_documents(&documents, default_namespace)
    }

    /// Whether some grant permits `need`.
    pub fn allows(&self, need: &RbacNeed) -> bool {
        self.grants.iter().any(|g| g.allows(need))
    }

    /// The needs no grant permits (sorted, without duplicates).
    pub fn missing(&self, needs: &[RbacNeed]) -> Vec<RbacNeed> {
        let mut missing: Vec<RbacNeed> =
            needs.iter().filter(|n| !self.allows(n)).cloned().collect();
        missing.sort();
        missing.dedup();
        missing
    }

    /// The grants no need used.
    pub fn unused(&self, needs: &[RbacNeed]) -> Vec<Grant> {
        self.grants
            .iter()
            .filter(|g| !needs.iter().any(|n| g.allows(n)))
            .cloned()
            .collect()
    }
}
