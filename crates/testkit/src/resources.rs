//! What the fake server knows of each resource type: its kind, whether writes to the main
//! endpoint leave `status` alone (a status subresource), and for custom resources the versions
//! served (for discovery) and the scale subresource's paths. Kubernetes' own types and
//! karpenter's are built in; a provider's NodeClass (or another project's resources, such as
//! Cluster API's MachineDeployments) is learnt from its CRD ([`install_crd`], as
//! `kubectl apply -f crd.yaml` teaches a real API server). Types it does not know are served
//! too, as kind `Unknown` without a status subresource.

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
    ("", "podtemplates", "PodTemplate", false),
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
    ("resource.k8s.io", "resourceclaims", "ResourceClaim", true),
    ("resource.k8s.io", "deviceclasses", "DeviceClass", false),
    ("resource.k8s.io", "resourceslices", "ResourceSlice", false),
    ("karpenter.sh", "nodepools", "NodePool", true),
    ("karpenter.sh", "nodeclaims", "NodeClaim", true),
];

type Known = (&'static str, &'static str, &'static str, bool);

/// Types learnt from CRDs. Process-wide: a kind means the same in every server of a test
/// binary, and the few CRDs a test installs are kept for its life.
static INSTALLED: RwLock<Vec<Known>> = RwLock::new(Vec::new());

/// Where a scale subresource reads and writes its object: JSON pointers (`/spec/replicas`)
/// made from the CRD's `.spec.replicas`-style paths.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScalePaths {
    /// `specReplicasPath`: the desired replicas, which a scale update writes.
    pub spec_replicas: String,
    /// `statusReplicasPath`: the observed replicas.
    pub status_replicas: String,
    /// `labelSelectorPath`, when the CRD names one: the selector in its string form.
    pub label_selector: Option<String>,
}

/// What a CRD says beyond kind and status: the versions it serves and its scale subresource.
#[derive(Clone, Debug, Default)]
struct Details {
    group: String,
    plural: String,
    versions: Vec<String>,
    scale: Option<ScalePaths>,
}

static DETAILS: RwLock<Vec<Details>> = RwLock::new(Vec::new());

/// `.spec.replicas` as the JSON pointer `/spec/replicas`.
fn pointer(path: &str) -> String {
    path.split('.')
        .filter(|s| !s.is_empty())
        .fold(String::new(), |mut out, s| {
            out.push('/');
            out.push_str(s);
            out
        })
}

fn scale_of(subresources: &Value) -> Option<ScalePaths> {
    let scale = subresources.get("scale")?;
    let path = |key: &str| scale.get(key).and_then(Value::as_str).map(pointer);
    Some(ScalePaths {
        spec_replicas: path("specReplicasPath")?,
        status_replicas: path("statusReplicasPath")?,
        label_selector: path("labelSelectorPath"),
    })
}

/// The versions a custom resource group serves, in the order its CRDs list them (`None` for a
/// group no installed CRD has): what `GET /apis/GROUP` answers.
pub(crate) fn served_versions(group: &str) -> Option<Vec<String>> {
    let details = DETAILS.read().unwrap_or_else(PoisonError::into_inner);
    let mut versions: Vec<String> = Vec::new();
    let mut found = false;
    for d in details.iter().filter(|d| d.group == group) {
        found = true;
        for v in &d.versions {
            if !versions.contains(v) {
                versions.push(v.clone());
            }
        }
    }
    found.then_some(versions)
}

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
    let versions: &[Value] = definition
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice);
    let status = versions
        .iter()
        .any(|v| v.pointer("/subresources/status").is_some());
    let served: Vec<String> = versions
        .iter()
        .filter(|v| v.get("served").and_then(Value::as_bool).unwrap_or(true))
        .filter_map(|v| v.get("name").and_then(Value::as_str).map(str::to_string))
        .collect();
    let scale = versions
        .iter()
        .find_map(|v| v.get("subresources").and_then(scale_of));
    {
        let mut details = DETAILS.write().unwrap_or_else(PoisonError::into_inner);
        details.retain(|d| !(d.group == group && d.plural == plural));
        details.push(Details {
            group: group.to_string(),
            plural: plural.to_string(),
            versions: served,
            scale,
        });
    }
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

    /// The scale subresource's paths, when an installed CRD of this type declares one.
    pub fn scale(&self) -> Option<ScalePaths> {
        DETAILS
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .find(|d| d.group == self.group && d.plural == self.plural)
            .and_then(|d| d.scale.clone())
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

    #[test]
    fn a_crd_teaches_served_versions_and_its_scale_subresource() {
        let rt = ResourceType {
            group: "scaling.karpenter.test".into(),
            version: "v1beta2".into(),
            plural: "widgetsets".into(),
        };
        assert_eq!(rt.scale(), None);
        assert_eq!(served_versions("scaling.karpenter.test"), None);
        let crd = json!({"spec": {
            "group": "scaling.karpenter.test",
            "names": {"plural": "widgetsets", "kind": "WidgetSet"},
            "versions": [
                {"name": "v1beta1", "served": true, "subresources": {"status": {}, "scale": {
                    "specReplicasPath": ".spec.replicas",
                    "statusReplicasPath": ".status.replicas",
                    "labelSelectorPath": ".status.selector",
                }}},
                {"name": "v1beta2", "served": true, "subresources": {"status": {}}},
                {"name": "v1alpha4", "served": false},
            ],
        }});
        install_crd(&crd).unwrap();
        assert_eq!(
            rt.scale(),
            Some(ScalePaths {
                spec_replicas: "/spec/replicas".into(),
                status_replicas: "/status/replicas".into(),
                label_selector: Some("/status/selector".into()),
            })
        );
        assert_eq!(
            served_versions("scaling.karpenter.test").unwrap(),
            ["v1beta1", "v1beta2"],
            "a version that is not served is not listed"
        );
    }
}
