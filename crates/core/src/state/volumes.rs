//! Upstream's volume topology: what a pod's persistent volumes require of the node it runs on.
//! A claim bound to a volume brings the volume's node affinity (a zonal disk: its zone); an
//! unbound claim whose StorageClass binds `WaitForFirstConsumer` brings the class's allowed
//! topologies. Like upstream, these constrain the node only, never the pod's own affinity, so
//! topology spread counts are unaffected. Each claim also attaches a volume through a CSI
//! driver — the volume's, or its class's provisioner — which counts against the node's CSI
//! volume limits.

use std::collections::HashMap;

use k8s_openapi::api::core::v1::{
    NodeSelectorRequirement, NodeSelectorTerm, PersistentVolume, PersistentVolumeClaim,
};
use k8s_openapi::api::storage::v1::StorageClass;

use karpenter_api::labels::HOSTNAME_LABEL;

use super::pods::{self, ObservedPod};
use crate::scheduling::Requirements;
use crate::scheduling::volumeusage::Attachment;

/// What a pod's persistent volumes bring to scheduling.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PodVolumes {
    /// What they require of the node (a bound volume's zone, a class's allowed topologies),
    /// OR-ed terms widened into one.
    pub requirements: Option<Requirements>,
    /// When a volume allows nodes by OR-ed terms: each combination of one term per volume,
    /// tried in turn as upstream tries them (empty otherwise).
    pub alternatives: Vec<Requirements>,
    /// The volumes they attach, by CSI driver, against nodes' volume limits.
    pub attachments: Vec<Attachment>,
}

impl PodVolumes {
    /// Nothing to say: no requirement and no attachment.
    pub fn is_empty(&self) -> bool {
        self.requirements.is_none() && self.attachments.is_empty()
    }
}

/// The CSI drivers that took over Kubernetes' in-tree volume plugins (the CSI translation
/// library's table), so a StorageClass naming an in-tree provisioner counts against the
/// driver's limit.
const IN_TREE_TO_CSI: [(&str, &str); 7] = [
    ("kubernetes.io/aws-ebs", "ebs.csi.aws.com"),
    ("kubernetes.io/gce-pd", "pd.csi.storage.gke.io"),
    ("kubernetes.io/azure-disk", "disk.csi.azure.com"),
    ("kubernetes.io/azure-file", "file.csi.azure.com"),
    ("kubernetes.io/cinder", "cinder.csi.openstack.org"),
    ("kubernetes.io/vsphere-volume", "csi.vsphere.vmware.com"),
    ("kubernetes.io/portworx-volume", "pxd.portworx.com"),
];

fn csi_name(provisioner: &str) -> &str {
    IN_TREE_TO_CSI
        .iter()
        .find(|(in_tree, _)| *in_tree == provisioner)
        .map_or(provisioner, |(_, csi)| csi)
}

/// The annotation that makes a StorageClass the default for claims that name none.
pub const DEFAULT_CLASS_ANNOTATION: &str = "storageclass.kubernetes.io/is-default-class";

/// The annotation the volume binder sets once a claim is bound to its volume.
pub const BIND_COMPLETED_ANNOTATION: &str = "pv.kubernetes.io/bind-completed";

/// The volumes, claims and classes of the cluster, by name.
#[derive(Default)]
pub struct Volumes<'a> {
    claims: HashMap<(&'a str, &'a str), &'a PersistentVolumeClaim>,
    volumes: HashMap<&'a str, &'a PersistentVolume>,
    classes: HashMap<&'a str, &'a StorageClass>,
    default_class: Option<&'a StorageClass>,
}

fn name(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> &str {
    meta.name.as_deref().unwrap_or_default()
}

impl<'a> Volumes<'a> {
    /// Indexes the cluster's claims, volumes and classes.
    pub fn new(
        claims: &[&'a PersistentVolumeClaim],
        volumes: &[&'a PersistentVolume],
        classes: &[&'a StorageClass],
    ) -> Self {
        let default_class = classes
            .iter()
            .copied()
            .filter(|c| {
                c.metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get(DEFAULT_CLASS_ANNOTATION))
                    .is_some_and(|v| v == "true")
            })
            // Several defaults: the API server picks the newest.
            .max_by_key(|c| c.metadata.creation_timestamp.as_ref().map(|t| t.0));
        Self {
            claims: claims
                .iter()
                .map(|c| {
                    let ns = c.metadata.namespace.as_deref().unwrap_or("default");
                    ((ns, name(&c.metadata)), *c)
                })
                .collect(),
            volumes: volumes.iter().map(|v| (name(&v.metadata), *v)).collect(),
            classes: classes.iter().map(|c| (name(&c.metadata), *c)).collect(),
            default_class,
        }
    }

    /// What the pod's volumes bring to scheduling, or why it cannot be placed yet (see
    /// [`Volumes::requirements`]).
    pub fn of_pod(&self, pod: &(impl ObservedPod + ?Sized)) -> Result<PodVolumes, String> {
        Ok(PodVolumes {
            requirements: self.requirements(pod)?,
            alternatives: self.alternatives(pod),
            attachments: self.attachments(pod),
        })
    }

    /// The volumes the pod's claims attach, by CSI driver, as upstream's `GetVolumes`: a bound
    /// claim counts under its volume's CSI driver (in-tree EBS under EBS's), an unbound one
    /// under its class's provisioner. Claims that cannot be resolved, and volumes no CSI driver
    /// attaches, are not counted.
    pub fn attachments(&self, pod: &(impl ObservedPod + ?Sized)) -> Vec<Attachment> {
        let namespace = pod.meta().namespace.as_deref().unwrap_or("default");
        pods::claim_names(pod)
            .into_iter()
            .filter_map(|claim_name| {
                let claim = self.claims.get(&(namespace, claim_name.as_str()))?;
                let spec = claim.spec.as_ref()?;
                let driver = match spec.volume_name.as_deref() {
                    Some(volume) if !volume.is_empty() => {
                        let pv = self.volumes.get(volume)?.spec.as_ref()?;
                        match (&pv.csi, &pv.aws_elastic_block_store) {
                            (Some(csi), _) => csi.driver.clone(),
                            (None, Some(_)) => csi_name("kubernetes.io/aws-ebs").to_string(),
                            (None, None) => return None,
                        }
                    }
                    _ => {
                        let class = match spec.storage_class_name.as_deref() {
                            Some("") => return None,
                            Some(class) => *self.classes.get(class)?,
                            None => self.default_class?,
                        };
                        csi_name(&class.provisioner).to_string()
                    }
                };
                Some(Attachment {
                    driver,
                    claim: format!("{namespace}/{claim_name}"),
                })
            })
            .collect()
    }

    /// What the pod's volumes require of its node (`None`: nothing), or why the pod cannot be
    /// placed yet, as upstream's `ValidatePersistentVolumeClaims` says: a claim, volume or
    /// class it names does not exist, a claim is being deleted or lost its volume, or an
    /// unbound claim names no class or one that binds immediately (the volume would be made
    /// before the node, anywhere).
    pub fn requirements(
        &self,
        pod: &(impl ObservedPod + ?Sized),
    ) -> Result<Option<Requirements>, String> {
        let mut out: Option<Requirements> = None;
        for terms in self.terms(pod)? {
            if let Some(requirements) = one_term(&terms) {
                out.get_or_insert_with(Requirements::new)
                    .add_all(&requirements);
            }
        }
        Ok(out)
    }

    /// The combinations of one node selector term per volume that the pod's volumes allow,
    /// when one of them has OR-ed terms (upstream's volume requirement alternatives): those
    /// that agree, or every combination when none does. Empty when there is nothing to choose.
    pub fn alternatives(&self, pod: &(impl ObservedPod + ?Sized)) -> Vec<Requirements> {
        let Ok(per_volume) = self.terms(pod) else {
            return Vec::new();
        };
        if per_volume.iter().all(|terms| terms.len() <= 1) {
            return Vec::new();
        }
        let mut combinations = vec![Requirements::new()];
        for terms in per_volume.iter().filter(|t| !t.is_empty()) {
            let options: Vec<Requirements> = terms
                .iter()
                .map(|t| {
                    Requirements::from_node_selector(
                        t.match_expressions.as_deref().unwrap_or_default(),
                    )
                })
                .collect();
            let merge = |agreeing: bool| -> Vec<Requirements> {
                let mut out = Vec::new();
                for existing in &combinations {
                    for option in &options {
                        if agreeing && existing.intersects(option).is_err() {
                            continue;
                        }
                        let mut merged = existing.clone();
                        merged.add_all(option);
                        out.push(merged);
                    }
                }
                out
            };
            let agreeing = merge(true);
            combinations = if agreeing.is_empty() {
                merge(false)
            } else {
                agreeing
            };
        }
        combinations
    }

    /// Each of the pod's volumes' node selector terms (OR-ed), in claim order; an empty list
    /// for a volume that allows any node.
    fn terms(
        &self,
        pod: &(impl ObservedPod + ?Sized),
    ) -> Result<Vec<Vec<NodeSelectorTerm>>, String> {
        let claims = pods::claim_names(pod);
        let namespace = pod.meta().namespace.as_deref().unwrap_or("default");
        let mut out = Vec::new();
        for claim_name in &claims {
            let claim = self
                .claims
                .get(&(namespace, claim_name.as_str()))
                .ok_or_else(|| {
                    format!("persistentvolumeclaim \"{namespace}/{claim_name}\" not found")
                })?;
            let spec = claim.spec.as_ref();
            let of_claim = format!("persistentvolumeclaim \"{namespace}/{claim_name}\"");
            if claim.metadata.deletion_timestamp.is_some() {
                return Err(format!("{of_claim} is being deleted"));
            }
            if claim.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Lost") {
                return Err(format!(
                    "{of_claim} is bound to a persistentvolume that does not exist"
                ));
            }
            let terms = match spec.and_then(|s| s.volume_name.as_deref()) {
                Some(volume) if !volume.is_empty() => {
                    let pv = self.volumes.get(volume).ok_or_else(|| {
                        format!("persistentvolume \"{volume}\" of claim \"{namespace}/{claim_name}\" not found")
                    })?;
                    if pv.metadata.deletion_timestamp.is_some() {
                        return Err(format!(
                            "persistentvolume \"{volume}\" of claim \"{namespace}/{claim_name}\" is being deleted"
                        ));
                    }
                    // As kube-scheduler: a claim naming a volume is bound only once the binder
                    // has said so.
                    let bound = claim
                        .metadata
                        .annotations
                        .as_ref()
                        .is_some_and(|a| a.contains_key(BIND_COMPLETED_ANNOTATION));
                    if !bound {
                        return Err(format!(
                            "{of_claim} is considered unbound because it does not contain annotation \"{BIND_COMPLETED_ANNOTATION}\""
                        ));
                    }
                    let spec = pv.spec.as_ref();
                    let terms = spec
                        .and_then(|s| s.node_affinity.as_ref())
                        .and_then(|a| a.required.as_ref())
                        .map(|r| r.node_selector_terms.clone())
                        .unwrap_or_default();
                    if spec.is_some_and(|s| s.local.is_some() || s.host_path.is_some()) {
                        // A local or hostPath volume pins its node by hostname; a pod that
                        // moves to a new node cannot keep that, so the hostname is dropped.
                        let without_hostname: Vec<NodeSelectorTerm> = terms
                            .into_iter()
                            .map(|mut t| {
                                if let Some(e) = t.match_expressions.as_mut() {
                                    e.retain(|r| r.key != HOSTNAME_LABEL);
                                }
                                t
                            })
                            .collect();
                        if without_hostname
                            .iter()
                            .any(|t| t.match_expressions.as_ref().is_none_or(Vec::is_empty))
                        {
                            // A term left empty allows any node.
                            Vec::new()
                        } else {
                            without_hostname
                        }
                    } else {
                        terms
                    }
                }
                _ => {
                    let no_class =
                        || format!("{of_claim} is unbound and must name a storage class");
                    let class = match spec.and_then(|s| s.storage_class_name.as_deref()) {
                        Some("") => return Err(no_class()),
                        Some(class) => *self.classes.get(class).ok_or_else(|| {
                            format!("storageclass \"{class}\" of claim \"{namespace}/{claim_name}\" not found")
                        })?,
                        // The default class, which the API server gives a claim naming none.
                        None => self.default_class.ok_or_else(no_class)?,
                    };
                    if class.volume_binding_mode.as_deref() != Some("WaitForFirstConsumer") {
                        return Err(format!(
                            "{of_claim} with immediate volume binding mode must be bound"
                        ));
                    }
                    class
                        .allowed_topologies
                        .iter()
                        .flatten()
                        .map(|t| NodeSelectorTerm {
                            match_expressions: Some(
                                t.match_label_expressions
                                    .iter()
                                    .flatten()
                                    .map(|e| NodeSelectorRequirement {
                                        key: e.key.clone(),
                                        operator: "In".into(),
                                        values: Some(e.values.clone()),
                                    })
                                    .collect(),
                            ),
                            match_fields: None,
                        })
                        .collect()
                }
            };
            out.push(terms);
        }
        Ok(out)
    }
}

/// The requirements of OR-ed terms as one: the first term, widened by the others where every
/// term constrains the same single key (the usual `zone In [...]`, one term per zone).
fn one_term(terms: &[NodeSelectorTerm]) -> Option<Requirements> {
    let expressions = |t: &NodeSelectorTerm| t.match_expressions.clone().unwrap_or_default();
    let first = expressions(terms.first()?);
    let single_key = |e: &[NodeSelectorRequirement]| {
        (e.len() == 1 && e[0].operator == "In").then(|| e[0].key.clone())
    };
    if terms.len() > 1
        && let Some(key) = single_key(&first)
        && terms
            .iter()
            .all(|t| single_key(&expressions(t)).as_ref() == Some(&key))
    {
        let mut values: Vec<String> = terms
            .iter()
            .flat_map(|t| expressions(t)[0].values.clone().unwrap_or_default())
            .collect();
        values.sort();
        values.dedup();
        return Some(Requirements::from_node_selector(&[
            NodeSelectorRequirement {
                key,
                operator: "In".into(),
                values: Some(values),
            },
        ]));
    }
    Some(Requirements::from_node_selector(&first))
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Pod;
    use karpenter_api::labels::ZONE_LABEL;
    use serde_json::json;

    fn from<T: k8s_openapi::serde::de::DeserializeOwned>(v: serde_json::Value) -> T {
        serde_json::from_value(v).unwrap()
    }

    fn pod(claims: &[&str]) -> Pod {
        let volumes: Vec<_> = claims
            .iter()
            .map(|c| json!({"name": c, "persistentVolumeClaim": {"claimName": c}}))
            .collect();
        from(
            json!({"metadata": {"name": "p", "namespace": "db"}, "spec": {"containers": [], "volumes": volumes}}),
        )
    }

    fn zone_of(r: &Requirements) -> Vec<String> {
        let mut v: Vec<String> = r
            .get(ZONE_LABEL)
            .unwrap()
            .values()
            .map(str::to_string)
            .collect();
        v.sort();
        v
    }

    #[test]
    fn volumes_require_their_topology_of_the_node() {
        let bound: PersistentVolumeClaim = from(
            json!({"metadata": {"name": "bound", "namespace": "db", "annotations": {BIND_COMPLETED_ANNOTATION: "yes"}},
                "spec": {"volumeName": "pv-a"}}),
        );
        let waiting: PersistentVolumeClaim = from(
            json!({"metadata": {"name": "waiting", "namespace": "db"}, "spec": {"storageClassName": "zonal"}}),
        );
        let defaulted: PersistentVolumeClaim =
            from(json!({"metadata": {"name": "defaulted", "namespace": "db"}, "spec": {}}));
        let immediate: PersistentVolumeClaim = from(
            json!({"metadata": {"name": "immediate", "namespace": "db"}, "spec": {"storageClassName": "now"}}),
        );
        let pv: PersistentVolume = from(
            json!({"metadata": {"name": "pv-a"}, "spec": {"nodeAffinity": {"required": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": ZONE_LABEL, "operator": "In", "values": ["zone-a"]}]}]}}}}),
        );
        let zonal: StorageClass = from(
            json!({"metadata": {"name": "zonal", "annotations": {DEFAULT_CLASS_ANNOTATION: "true"}}, "provisioner": "ebs.csi.aws.com",
            "volumeBindingMode": "WaitForFirstConsumer", "allowedTopologies": [
                {"matchLabelExpressions": [{"key": ZONE_LABEL, "values": ["zone-b"]}]},
                {"matchLabelExpressions": [{"key": ZONE_LABEL, "values": ["zone-c"]}]}]}),
        );
        let now: StorageClass = from(
            json!({"metadata": {"name": "now"}, "provisioner": "x", "volumeBindingMode": "Immediate"}),
        );
        let volumes = Volumes::new(
            &[&bound, &waiting, &defaulted, &immediate],
            &[&pv],
            &[&zonal, &now],
        );
        let r = |claims: &[&str]| volumes.requirements(&pod(claims));
        assert_eq!(r(&[]), Ok(None));
        assert_eq!(
            zone_of(&r(&["bound"]).unwrap().unwrap()),
            ["zone-a"],
            "a bound volume's zone"
        );
        assert_eq!(
            zone_of(&r(&["waiting"]).unwrap().unwrap()),
            ["zone-b", "zone-c"],
            "a WaitForFirstConsumer class's topologies, one term per zone"
        );
        assert_eq!(
            zone_of(&r(&["defaulted"]).unwrap().unwrap()),
            ["zone-b", "zone-c"],
            "the default class"
        );
        assert_eq!(
            r(&["immediate"]),
            Err(
                "persistentvolumeclaim \"db/immediate\" with immediate volume binding mode must be bound"
                    .into()
            ),
            "upstream leaves it to the volume binder: the pod waits"
        );
        let both = r(&["bound", "waiting"]).unwrap().unwrap();
        assert!(
            zone_of(&both).is_empty(),
            "volumes in zone a and in b or c leave no zone: {both:?}"
        );
        assert_eq!(
            r(&["missing"]),
            Err("persistentvolumeclaim \"db/missing\" not found".into())
        );
    }

    #[test]
    fn claims_count_under_the_driver_that_attaches_them() {
        let claims: Vec<PersistentVolumeClaim> = [
            json!({"metadata": {"name": "csi", "namespace": "db"}, "spec": {"volumeName": "pv-csi"}}),
            json!({"metadata": {"name": "in-tree", "namespace": "db"}, "spec": {"volumeName": "pv-ebs"}}),
            json!({"metadata": {"name": "nfs", "namespace": "db"}, "spec": {"volumeName": "pv-nfs"}}),
            json!({"metadata": {"name": "unbound", "namespace": "db"}, "spec": {"storageClassName": "gp2"}}),
            json!({"metadata": {"name": "defaulted", "namespace": "db"}, "spec": {}}),
            json!({"metadata": {"name": "static", "namespace": "db"}, "spec": {"storageClassName": ""}}),
        ]
        .into_iter()
        .map(from)
        .collect();
        let pvs: Vec<PersistentVolume> = [
            json!({"metadata": {"name": "pv-csi"}, "spec": {"csi": {"driver": "disk.csi.azure.com", "volumeHandle": "h"}}}),
            json!({"metadata": {"name": "pv-ebs"}, "spec": {"awsElasticBlockStore": {"volumeID": "vol-1"}}}),
            json!({"metadata": {"name": "pv-nfs"}, "spec": {"nfs": {"server": "s", "path": "/"}}}),
        ]
        .into_iter()
        .map(from)
        .collect();
        let classes: Vec<StorageClass> = [
            json!({"metadata": {"name": "gp2"}, "provisioner": "kubernetes.io/aws-ebs"}),
            json!({"metadata": {"name": "std", "annotations": {DEFAULT_CLASS_ANNOTATION: "true"}}, "provisioner": "pd.csi.storage.gke.io"}),
        ]
        .into_iter()
        .map(from)
        .collect();
        let volumes = Volumes::new(
            &claims.iter().collect::<Vec<_>>(),
            &pvs.iter().collect::<Vec<_>>(),
            &classes.iter().collect::<Vec<_>>(),
        );
        let drivers = |claims: &[&str]| -> Vec<(String, String)> {
            volumes
                .attachments(&pod(claims))
                .into_iter()
                .map(|a| (a.claim, a.driver))
                .collect()
        };
        let cases = [
            ("csi", Some("disk.csi.azure.com")),
            ("in-tree", Some("ebs.csi.aws.com")),
            ("nfs", None),
            ("unbound", Some("ebs.csi.aws.com")),
            ("defaulted", Some("pd.csi.storage.gke.io")),
            ("static", None),
            ("missing", None),
        ];
        for (claim, driver) in cases {
            let expected: Vec<(String, String)> = driver
                .map(|d| (format!("db/{claim}"), d.to_string()))
                .into_iter()
                .collect();
            assert_eq!(drivers(&[claim]), expected, "{claim}");
        }
    }

    /// A local or hostPath volume's hostname is dropped: the pod cannot follow it to a new node.
    #[test]
    fn local_volumes_keep_their_zone_and_lose_their_hostname() {
        let claim = |name: &str, pv: &str| -> PersistentVolumeClaim {
            from(json!({"metadata": {"name": name, "namespace": "db",
                "annotations": {BIND_COMPLETED_ANNOTATION: "yes"}}, "spec": {"volumeName": pv}}))
        };
        let local = |name: &str, expressions: serde_json::Value| -> PersistentVolume {
            from(
                json!({"metadata": {"name": name}, "spec": {"local": {"path": "/mnt/disk"},
                "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": expressions}]}}}}),
            )
        };
        let claims = [claim("zoned", "pv-zoned"), claim("pinned", "pv-pinned")];
        let pvs = [
            local(
                "pv-zoned",
                json!([{"key": ZONE_LABEL, "operator": "In", "values": ["zone-a"]},
                    {"key": HOSTNAME_LABEL, "operator": "In", "values": ["old-node"]}]),
            ),
            local(
                "pv-pinned",
                json!([{"key": HOSTNAME_LABEL, "operator": "In", "values": ["old-node"]}]),
            ),
        ];
        let volumes = Volumes::new(
            &claims.iter().collect::<Vec<_>>(),
            &pvs.iter().collect::<Vec<_>>(),
            &[],
        );
        let zoned = volumes.requirements(&pod(&["zoned"])).unwrap().unwrap();
        assert_eq!(zone_of(&zoned), ["zone-a"]);
        assert!(zoned.get(HOSTNAME_LABEL).is_none(), "{zoned:?}");
        assert_eq!(volumes.requirements(&pod(&["pinned"])), Ok(None));
    }

    /// Upstream's `ValidatePersistentVolumeClaims` cases: the pod is ignored, with the reason.
    #[test]
    fn claims_a_pod_cannot_be_placed_with_say_why() {
        let claim = |name: &str, spec: serde_json::Value, status: serde_json::Value| {
            from::<PersistentVolumeClaim>(json!({
                "metadata": {"name": name, "namespace": "db"}, "spec": spec, "status": status,
            }))
        };
        let mut deleting = claim("deleting", json!({"volumeName": "pv"}), json!({}));
        deleting.metadata.deletion_timestamp = Some(from(json!("2024-01-01T00:00:00Z")));
        let claims = [
            deleting,
            claim(
                "lost",
                json!({"volumeName": "gone"}),
                json!({"phase": "Lost"}),
            ),
            claim("static", json!({"storageClassName": ""}), json!({})),
            claim("classless", json!({}), json!({})),
            claim(
                "unknown-class",
                json!({"storageClassName": "gold"}),
                json!({}),
            ),
            claim("unknown-volume", json!({"volumeName": "pv-x"}), json!({})),
            claim("not-yet-bound", json!({"volumeName": "pv-ok"}), json!({})),
            claim(
                "on-deleted-volume",
                json!({"volumeName": "pv-deleting"}),
                json!({}),
            ),
        ];
        let mut claims = claims;
        for c in claims.iter_mut().filter(|c| {
            matches!(
                c.metadata.name.as_deref(),
                Some("unknown-volume" | "on-deleted-volume")
            )
        }) {
            c.metadata.annotations =
                Some([(BIND_COMPLETED_ANNOTATION.to_string(), "yes".to_string())].into());
        }
        let pv_ok: PersistentVolume = from(json!({"metadata": {"name": "pv-ok"}}));
        let pv_deleting: PersistentVolume = from(
            json!({"metadata": {"name": "pv-deleting", "deletionTimestamp": "2024-01-01T00:00:00Z"}}),
        );
        let volumes = Volumes::new(
            &claims.iter().collect::<Vec<_>>(),
            &[&pv_ok, &pv_deleting],
            &[],
        );
        let cases = [
            (
                "deleting",
                "persistentvolumeclaim \"db/deleting\" is being deleted",
            ),
            (
                "lost",
                "persistentvolumeclaim \"db/lost\" is bound to a persistentvolume that does not exist",
            ),
            (
                "static",
                "persistentvolumeclaim \"db/static\" is unbound and must name a storage class",
            ),
            (
                "classless",
                "persistentvolumeclaim \"db/classless\" is unbound and must name a storage class",
            ),
            (
                "unknown-class",
                "storageclass \"gold\" of claim \"db/unknown-class\" not found",
            ),
            (
                "unknown-volume",
                "persistentvolume \"pv-x\" of claim \"db/unknown-volume\" not found",
            ),
            (
                "not-yet-bound",
                "persistentvolumeclaim \"db/not-yet-bound\" is considered unbound because it does not contain annotation \"pv.kubernetes.io/bind-completed\"",
            ),
            (
                "on-deleted-volume",
                "persistentvolume \"pv-deleting\" of claim \"db/on-deleted-volume\" is being deleted",
            ),
        ];
        for (name, why) in cases {
            assert_eq!(
                volumes.requirements(&pod(&[name])),
                Err(why.to_string()),
                "{name}"
            );
        }
    }
}
