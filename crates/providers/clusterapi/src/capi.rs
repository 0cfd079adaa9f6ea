//! The Cluster API objects the provider reads — MachineDeployment, MachineSet, Machine — with
//! only the fields it uses, read the same from `cluster.x-k8s.io/v1beta1` and `v1beta2` (the
//! two differ, for these fields, only in how a template reference names its group), and the
//! labels and annotations Cluster API, the Cluster Autoscaler and upstream's provider agree on.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Deserialize;

/// Cluster API's group.
pub const CAPI_GROUP: &str = "cluster.x-k8s.io";

/// On a MachineDeployment: it takes part in Karpenter's provisioning. On a Machine: a
/// NodeClaim claimed it (upstream's `NodePoolMemberLabel`).
pub const MEMBER_LABEL: &str = "node.cluster.x-k8s.io/karpenter-member";
/// On a NodeClaim: its Machine, `namespace/name` (upstream's `MachineAnnotation`).
pub const MACHINE_ANNOTATION: &str = "cluster.x-k8s.io/machine";
/// On a Machine: delete this one first when the replicas go down (Cluster API's).
pub const DELETE_MACHINE_ANNOTATION: &str = "cluster.x-k8s.io/delete-machine";
/// On a Machine: the MachineDeployment it belongs to (Cluster API's).
pub const DEPLOYMENT_NAME_LABEL: &str = "cluster.x-k8s.io/deployment-name";
/// On a Machine: the MachineSet that made it (Cluster API's).
pub const SET_NAME_LABEL: &str = "cluster.x-k8s.io/set-name";
/// On a MachineDeployment: the most replicas the autoscaler may scale it to (the Cluster
/// Autoscaler's).
pub const MAX_SIZE_ANNOTATION: &str = "cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size";
/// On a MachineDeployment: the fewest replicas the Cluster Autoscaler keeps (read by neither
/// upstream's provider nor this one: Karpenter decides how many nodes there are).
pub const MIN_SIZE_ANNOTATION: &str = "cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size";
/// On a Machine: the NodeClaim that claimed it (karpenter-rs's; upstream keeps only the
/// NodeClaim's side). A retried launch, garbage collection and a deletion before launch find
/// the Machine by it.
pub const NODE_CLAIM_ANNOTATION: &str = "karpenter.cluster.x-k8s.io/nodeclaim";
/// On a NodeClaim: the hash of the template its Machine was made from.
pub const TEMPLATE_HASH_ANNOTATION: &str = "karpenter.cluster.x-k8s.io/machinedeployment-hash";
/// On a NodeClaim: the version of [`template_hash`] that made [`TEMPLATE_HASH_ANNOTATION`];
/// hashes of different versions are never compared.
pub const TEMPLATE_HASH_VERSION_ANNOTATION: &str =
    "karpenter.cluster.x-k8s.io/machinedeployment-hash-version";
/// The current version of [`template_hash`].
pub const TEMPLATE_HASH_VERSION: &str = "v1";
/// The drift reason when a NodeClaim's Machine was made from another template than its
/// MachineDeployment's current one.
pub const DRIFT_REASON: &str = "MachineDeploymentDrift";

/// The Cluster API versions the provider speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Version {
    /// `v1beta1`, served by every Cluster API release the provider supports.
    V1beta1,
    /// `v1beta2`, served from Cluster API v1.11; preferred where served.
    V1beta2,
}

impl Version {
    /// `v1beta1` or `v1beta2`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::V1beta1 => "v1beta1",
            Self::V1beta2 => "v1beta2",
        }
    }

    /// The version to speak given the versions the management cluster serves: `v1beta2` if
    /// served, else `v1beta1` if served, else none.
    pub fn choose<S: AsRef<str>>(served: &[S]) -> Option<Self> {
        let serves = |v: &str| served.iter().any(|s| s.as_ref() == v);
        if serves("v1beta2") {
            Some(Self::V1beta2)
        } else if serves("v1beta1") {
            Some(Self::V1beta1)
        } else {
            None
        }
    }
}

/// A reference to a template (an infrastructure machine template, a bootstrap config
/// template): `apiVersion` in v1beta1, `apiGroup` in v1beta2.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TemplateRef {
    /// v1beta1: `group/version`.
    #[serde(default)]
    pub api_version: Option<String>,
    /// v1beta2: the group.
    #[serde(default)]
    pub api_group: Option<String>,
    /// The kind.
    #[serde(default)]
    pub kind: String,
    /// The name.
    #[serde(default)]
    pub name: String,
}

impl TemplateRef {
    /// The referenced group, whichever version wrote the reference; the version is left out
    /// so a template's identity does not change when Cluster API's API version does.
    pub fn group(&self) -> &str {
        match (&self.api_group, &self.api_version) {
            (Some(g), _) => g,
            (None, Some(v)) => v.rsplit_once('/').map_or("", |(g, _)| g),
            (None, None) => "",
        }
    }

    fn identity(&self) -> String {
        format!("{}/{}/{}", self.group(), self.kind, self.name)
    }
}

/// A Machine's bootstrap.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Bootstrap {
    /// The bootstrap config (template) to render.
    #[serde(default)]
    pub config_ref: Option<TemplateRef>,
    /// A Secret with ready-made bootstrap data.
    #[serde(default)]
    pub data_secret_name: Option<String>,
}

/// The parts of a Machine spec that decide what a Machine is.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MachineTemplateSpec {
    /// The Kubernetes version.
    #[serde(default)]
    pub version: Option<String>,
    /// The infrastructure machine template.
    #[serde(default)]
    pub infrastructure_ref: Option<TemplateRef>,
    /// The bootstrap.
    #[serde(default)]
    pub bootstrap: Bootstrap,
}

/// Labels and annotations a template gives its Machines.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
pub struct TemplateMeta {
    /// Labels; some propagate to the Node (see `instancetype`).
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// Annotations.
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
}

/// A Machine template: metadata and spec.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
pub struct MachineTemplate {
    /// Its metadata.
    #[serde(default)]
    pub metadata: TemplateMeta,
    /// Its spec.
    #[serde(default)]
    pub spec: MachineTemplateSpec,
}

/// A MachineDeployment or MachineSet spec: replicas and the Machine template.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ScalableSpec {
    /// The Cluster the Machines join.
    #[serde(default)]
    pub cluster_name: String,
    /// Desired replicas (Cluster API defaults an unset count to 1 at creation; read as 0).
    #[serde(default)]
    pub replicas: Option<i32>,
    /// The Machine template.
    #[serde(default)]
    pub template: MachineTemplate,
}

/// A MachineDeployment (or, read the same way, a MachineSet).
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
pub struct MachineDeployment {
    /// Metadata: the capacity annotations live here.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// Replicas and template.
    #[serde(default)]
    pub spec: ScalableSpec,
}

/// A MachineSet: what a Machine was actually made from.
pub type MachineSet = MachineDeployment;

/// A Machine's spec, the fields read.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MachineSpec {
    /// Set by the infrastructure provider once the machine exists; the Node registers with it.
    #[serde(default, rename = "providerID")]
    pub provider_id: Option<String>,
}

/// A Machine.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
pub struct Machine {
    /// Metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// Spec.
    #[serde(default)]
    pub spec: MachineSpec,
}

/// `namespace/name` of an object.
pub fn key(meta: &ObjectMeta) -> String {
    format!(
        "{}/{}",
        meta.namespace.as_deref().unwrap_or_default(),
        meta.name.as_deref().unwrap_or_default()
    )
}

fn label<'a>(meta: &'a ObjectMeta, key: &str) -> Option<&'a str> {
    meta.labels.as_ref()?.get(key).map(String::as_str)
}

fn annotation<'a>(meta: &'a ObjectMeta, key: &str) -> Option<&'a str> {
    meta.annotations.as_ref()?.get(key).map(String::as_str)
}

impl MachineDeployment {
    /// `namespace/name`.
    pub fn key(&self) -> String {
        key(&self.metadata)
    }

    /// The name.
    pub fn name(&self) -> &str {
        self.metadata.name.as_deref().unwrap_or_default()
    }

    /// The namespace.
    pub fn namespace(&self) -> &str {
        self.metadata.namespace.as_deref().unwrap_or_default()
    }

    /// An annotation.
    pub fn annotation(&self, key: &str) -> Option<&str> {
        annotation(&self.metadata, key)
    }

    /// Whether it takes part in provisioning.
    pub fn is_member(&self) -> bool {
        label(&self.metadata, MEMBER_LABEL).is_some()
    }

    /// Desired replicas, 0 when unset.
    pub fn replicas(&self) -> i32 {
        self.spec.replicas.unwrap_or(0)
    }

    /// The hash of its Machine template, see [`template_hash`].
    pub fn template_hash(&self) -> String {
        template_hash(&self.spec.template.spec)
    }
}

impl Machine {
    /// `namespace/name`.
    pub fn key(&self) -> String {
        key(&self.metadata)
    }

    /// The name.
    pub fn name(&self) -> &str {
        self.metadata.name.as_deref().unwrap_or_default()
    }

    /// The namespace.
    pub fn namespace(&self) -> &str {
        self.metadata.namespace.as_deref().unwrap_or_default()
    }

    /// The providerID, once set.
    pub fn provider_id(&self) -> Option<&str> {
        self.spec.provider_id.as_deref().filter(|p| !p.is_empty())
    }

    /// Its MachineDeployment's name.
    pub fn machine_deployment(&self) -> Option<&str> {
        label(&self.metadata, DEPLOYMENT_NAME_LABEL)
    }

    /// Its MachineSet's name.
    pub fn machine_set(&self) -> Option<&str> {
        label(&self.metadata, SET_NAME_LABEL)
    }

    /// The NodeClaim that claimed it, when karpenter-rs did.
    pub fn node_claim(&self) -> Option<&str> {
        annotation(&self.metadata, NODE_CLAIM_ANNOTATION)
    }

    /// Whether a NodeClaim claimed it: the member label (upstream's mark) or the NodeClaim
    /// annotation (karpenter-rs's, set with it).
    pub fn is_claimed(&self) -> bool {
        label(&self.metadata, MEMBER_LABEL).is_some() || self.node_claim().is_some()
    }

    /// Whether it is going away: being deleted, or marked to be deleted first on scale-down.
    pub fn is_leaving(&self) -> bool {
        self.metadata.deletion_timestamp.is_some()
            || annotation(&self.metadata, DELETE_MACHINE_ANNOTATION).is_some()
    }
}

/// The hash of what a Machine template makes: the infrastructure template and bootstrap
/// config it references (by group, kind and name, so a change of Cluster API's API version
/// alone is no change), the bootstrap data Secret and the Kubernetes version — what
/// Cluster API itself rolls Machines out for. FNV-1a over a canonical text, hex: stable across
/// releases and platforms, which `std`'s hasher does not promise.
pub fn template_hash(spec: &MachineTemplateSpec) -> String {
    let text = format!(
        "infrastructure={};bootstrap={};dataSecretName={};version={}",
        spec.infrastructure_ref
            .as_ref()
            .map(TemplateRef::identity)
            .unwrap_or_default(),
        spec.bootstrap
            .config_ref
            .as_ref()
            .map(TemplateRef::identity)
            .unwrap_or_default(),
        spec.bootstrap
            .data_secret_name
            .as_deref()
            .unwrap_or_default(),
        spec.version.as_deref().unwrap_or_default(),
    );
    let hash = text.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    });
    format!("{hash:016x}")
}

/// `namespace/name` split, as upstream's `ParseMachineAnnotation`: exactly one `/`, neither
/// part empty (after trimming spaces).
pub fn parse_machine_annotation(value: &str) -> Result<(&str, &str), String> {
    let parts: Vec<&str> = value.split('/').collect();
    let [ns, name] = parts.as_slice() else {
        return Err(format!(
            "invalid machine annotation {value:?}: expected 'namespace/name'"
        ));
    };
    let (ns, name) = (ns.trim(), name.trim());
    if ns.is_empty() || name.is_empty() {
        return Err(format!(
            "invalid machine annotation {value:?}: namespace and name cannot be empty"
        ));
    }
    Ok((ns, name))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_version_spoken_is_the_newest_served() {
        let cases: [(&[&str], Option<Version>); 5] = [
            (&["v1beta1", "v1beta2"], Some(Version::V1beta2)),
            (&["v1beta2"], Some(Version::V1beta2)),
            (&["v1alpha4", "v1beta1"], Some(Version::V1beta1)),
            (&["v1alpha4"], None),
            (&[], None),
        ];
        for (served, want) in cases {
            assert_eq!(Version::choose(served), want, "{served:?}");
        }
    }

    /// Upstream's `ParseMachineAnnotation` cases.
    #[test]
    fn machine_annotations() {
        let cases = [
            ("default/m-1", Ok(("default", "m-1"))),
            (" ns / name ", Ok(("ns", "name"))),
            ("no-slash", Err("expected 'namespace/name'")),
            ("a/b/c", Err("expected 'namespace/name'")),
            ("/name", Err("cannot be empty")),
            ("ns/", Err("cannot be empty")),
            ("", Err("expected 'namespace/name'")),
        ];
        for (value, want) in cases {
            match (parse_machine_annotation(value), want) {
                (Ok(got), Ok(want)) => assert_eq!(got, want, "{value:?}"),
                (Err(e), Err(part)) => assert!(e.contains(part), "{value:?}: {e}"),
                (got, want) => panic!("{value:?}: {got:?}, want {want:?}"),
            }
        }
    }

    fn md(template: serde_json::Value) -> MachineDeployment {
        serde_json::from_value(json!({
            "metadata": {"name": "md-0", "namespace": "default"},
            "spec": {"clusterName": "c", "replicas": 2, "template": template},
        }))
        .unwrap()
    }

    #[test]
    fn the_template_hash_follows_what_cluster_api_rolls_out_for() {
        let v1beta1 = md(json!({"spec": {
            "version": "v1.32.8",
            "infrastructureRef": {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2", "kind": "AWSMachineTemplate", "name": "md-0-a"},
            "bootstrap": {"configRef": {"apiVersion": "bootstrap.cluster.x-k8s.io/v1beta1", "kind": "KubeadmConfigTemplate", "name": "md-0"}},
        }}));
        let v1beta2 = md(json!({
            "metadata": {"labels": {"team": "a"}},
            "spec": {
                "version": "v1.32.8",
                "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "AWSMachineTemplate", "name": "md-0-a"},
                "bootstrap": {"configRef": {"apiGroup": "bootstrap.cluster.x-k8s.io", "kind": "KubeadmConfigTemplate", "name": "md-0"}},
                "failureDomain": "us-east-1a",
            },
        }));
        let base = v1beta1.template_hash();
        assert_eq!(base.len(), 16);
        assert_eq!(
            v1beta2.template_hash(),
            base,
            "the same template read through v1beta2, labels and other fields aside"
        );
        let changed = [
            json!({"spec": {"version": "v1.33.0",
                "infrastructureRef": {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2", "kind": "AWSMachineTemplate", "name": "md-0-a"},
                "bootstrap": {"configRef": {"apiVersion": "bootstrap.cluster.x-k8s.io/v1beta1", "kind": "KubeadmConfigTemplate", "name": "md-0"}}}}),
            json!({"spec": {"version": "v1.32.8",
                "infrastructureRef": {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2", "kind": "AWSMachineTemplate", "name": "md-0-b"},
                "bootstrap": {"configRef": {"apiVersion": "bootstrap.cluster.x-k8s.io/v1beta1", "kind": "KubeadmConfigTemplate", "name": "md-0"}}}}),
            json!({"spec": {"version": "v1.32.8",
                "infrastructureRef": {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2", "kind": "AWSMachineTemplate", "name": "md-0-a"},
                "bootstrap": {"dataSecretName": "join"}}}),
        ];
        for template in changed {
            assert_ne!(md(template.clone()).template_hash(), base, "{template}");
        }
    }

    #[test]
    fn machines_say_who_claimed_them_and_whether_they_are_leaving() {
        let m: Machine = serde_json::from_value(json!({
            "metadata": {"name": "m-1", "namespace": "ns", "labels": {
                "cluster.x-k8s.io/deployment-name": "md-0", "cluster.x-k8s.io/set-name": "md-0-abc"}},
            "spec": {"providerID": ""},
        }))
        .unwrap();
        assert_eq!(m.key(), "ns/m-1");
        assert_eq!(m.provider_id(), None, "an empty providerID is none");
        assert_eq!(m.machine_deployment(), Some("md-0"));
        assert_eq!(m.machine_set(), Some("md-0-abc"));
        assert!(!m.is_claimed() && !m.is_leaving());
        let mut upstream = m.clone();
        upstream
            .metadata
            .labels
            .as_mut()
            .unwrap()
            .insert(MEMBER_LABEL.into(), String::new());
        assert!(upstream.is_claimed(), "upstream's mark");
        let mut ours = m.clone();
        ours.metadata.annotations =
            Some([(NODE_CLAIM_ANNOTATION.to_string(), "default-x".to_string())].into());
        assert!(ours.is_claimed());
        assert_eq!(ours.node_claim(), Some("default-x"));
        let mut marked = m.clone();
        marked.metadata.annotations =
            Some([(DELETE_MACHINE_ANNOTATION.to_string(), "now".to_string())].into());
        assert!(marked.is_leaving());
    }
}
