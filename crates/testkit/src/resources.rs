//! What the fake server knows of each resource type: its kind and whether writes to the main
//! endpoint leave `status` alone (a status subresource). Types it does not know are served too,
//! as kind `Unknown` without a status subresource.

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
    (
        "karpenter.kwok.sh",
        "kwoknodeclasses",
        "KWOKNodeClass",
        true,
    ),
    ("karpenter.k8s.aws", "ec2nodeclasses", "EC2NodeClass", true),
];

impl ResourceType {
    /// `apiVersion` of objects of this type.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    fn known(&self) -> Option<&'static (&'static str, &'static str, &'static str, bool)> {
        KNOWN
            .iter()
            .find(|(g, p, _, _)| *g == self.group && *p == self.plural)
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
