//! What the fake server knows of each resource type: its kind and whether writes to the main
//! endpoint leave `status` alone (a status subresource). Kubernetes' own types and
//! karpenter's are built in; a provider's NodeClass is learnt from its CRD
//! ([`install_crd`], as `kubectl apply -f crd.yaml` teaches a real API server). Types it does
//! not know are served too, as kind `Unknown` without a status subresource.

use std::sync::{PoisonError, RwLock};

use serde_json::Value;

/// A resource type the server was asked about.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ResourceType {
    /// API group, empty for the core group.
    pub group: String,
    /// API version within the group.
    pub version: String,
    /// Lower-case plural, as in URLs.
    pub plural: String,
}

const KNOWN: &[(&str, &str, &str, bool)] = &[
    // group, plural, kind, status subresource
    ("", "pods", "Pod", true),
    ("", "nodes", "Node", true),
    ("", "namespaces", "Namespace", true),
    ("", "events", "Event", false),
    ("", "configmaps", "ConfigMap", false),
    ("", "secrets", "Secret", false),
    ("", "services", "Service", true),
    ("", "persistentvolumeclaims", "PersistentVolumeClaim", true),
    ("", "persistentvolumes", "PersistentVolume", true),
    ("apps", "daemonsets", "DaemonSet", true),
    ("apps", "deployments", "Deployment", true),
    ("apps", "replicasets", "ReplicaSet", true),
    ("apps", "statefulsets", "StatefulSet", true),
    (
        "policy",
        "poddisruptionbudgets",
        "PodDisruptionBudget",
        true,
    ),
    ("coordination.k8s.io", "leases", "Lease", false),
    ("events.k8s.io", "events", "Event", false),
    ("storage.k8s.io", "storageclasses", "StorageClass", false),
    ("storage.k8s.io", "csinodes", "CSINode", false),
    (
        "storage.k8s.io",
        "volumeattachments",
        "VolumeAttachment",
        true,
    ),
    ("karpenter.sh", "nodepools", "NodePool", true),
    ("karpenter.sh", "nodeclaims", "NodeClaim", true),
];

type Known = (&'static str, &'static str, &'static str, bool);

/// Types learnt from CRDs. Process-wide: a kind means the same in every server of a test
/// binary, and the few CRDs a test installs are kept for its life.
static INSTALLED: RwLock<Vec<Known>> = RwLock::new(Vec::new());

/// Why a CRD could not be installed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidCrd(pub String);

/// Teaches the server a custom resource type from its CustomResourceDefinition: group,
/// plural, kind, and whether it has a status subresource.
pub fn install_crd(definition: &Value) -> Result<(), InvalidCrd> {
    let field = |pointer: &str| {
        definition
            .pointer(pointer)
            .and_then(Value::as_str)
            .ok_or_else(|| InvalidCrd(format!("the CRD has no {pointer}")))
    };
    let group = field("/spec/group")?;
    let plural = field("/spec/names/plural")?;
    let kind = field("/spec/names/kind")?;
    let status = definition
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .is_some_and(|vs| {
            vs.iter()
                .any(|v| v.pointer("/subresources/status").is_some())
        });
    let mut installed = INSTALLED.write().unwrap_or_else(PoisonError::into_inner);
    if let Some(known) = installed.iter_mut().find(|k| k.0 == group && k.1 == plural) {
        known.3 = status;
        return Ok(());
    }
    let leak = |s: &str| -> &'static str { Box::leak(s.to_string().into_boxed_str()) };
    installed.push((leak(group), leak(plural), leak(kind), status));
    Ok(())
}

impl ResourceType {
    /// `apiVersion` of objects of this type.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    fn known(&self) -> Option<Known> {
        let matches = |(g, p, _, _): &&Known| *g == self.group && *p == self.plural;
        KNOWN.iter().find(matches).copied().or_else(|| {
            INSTALLED
                .read()
                .unwrap_or_else(PoisonError::into_inner)
                .iter()
                .find(matches)
                .copied()
        })
    }

    /// The object kind (`Pod`, `NodeClaim`, …).
    pub fn kind(&self) -> &'static str {
        self.known().map_or("Unknown", |k| k.2)
    }

    /// Whether the main endpoint ignores `status` and `/status` changes only `status`.
    pub fn has_status_subresource(&self) -> bool {
        self.known().is_some_and(|k| k.3)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_crd_teaches_kind_and_status_subresource() {
        let rt = ResourceType {
            group: "example.karpenter.test".into(),
            version: "v1".into(),
            plural: "widgetclasses".into(),
        };
        assert_eq!(rt.kind(), "Unknown");
        assert!(!rt.has_status_subresource());
        let crd = json!({"spec": {
            "group": "example.karpenter.test",
            "names": {"plural": "widgetclasses", "kind": "WidgetClass"},
            "versions": [{"name": "v1", "subresources": {"status": {}}}],
        }});
        install_crd(&crd).unwrap();
        assert_eq!(rt.kind(), "WidgetClass");
        assert!(rt.has_status_subresource());
        assert!(install_crd(&json!({"spec": {}})).is_err());
    }
}
