//! What karpenter asks of a pod, in upstream's terms (`pkg/utils/pod`), over any form a caller
//! keeps pods in: a whole `Pod`, or the controller's trimmed copy.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ObjectReference, Pod, PodSpec, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

use crate::provisioning::scheduling::BoundPod;
use crate::resources::{QuantityError, Resources, pod_requests};

/// A pod as observed: the fields the snapshot and the predicates read, and the ways to turn it
/// into what scheduling takes.
pub trait ObservedPod {
    /// Its metadata (labels may be kept elsewhere: see [`ObservedPod::bound`]).
    fn meta(&self) -> &ObjectMeta;
    /// The node it is bound to.
    fn node_name(&self) -> Option<&str>;
    /// `status.phase`.
    fn phase(&self) -> Option<&str>;
    /// kube-scheduler set `PodScheduled=False` with reason `Unschedulable`.
    fn unschedulable(&self) -> bool;
    /// `status.nominatedNodeName`.
    fn nominated_node_name(&self) -> Option<&str>;
    /// Its labels (a trimmed copy may keep them apart from [`ObservedPod::meta`]).
    fn labels(&self) -> Option<&BTreeMap<String, String>> {
        self.meta().labels.as_ref()
    }
    /// Its spec (`nodeName` may be elsewhere: see [`ObservedPod::node_name`]).
    fn pod_spec(&self) -> Option<&PodSpec>;
    /// What it requests, as [`pod_requests`] counts it (a form that shares its spec may have
    /// counted it once for all its pods).
    fn requests(&self) -> Result<Resources, QuantityError> {
        // Requests depend on the spec alone; a spec-only pod avoids cloning the rest.
        pod_requests(&Pod {
            spec: self.pod_spec().cloned(),
            ..Default::default()
        })
    }
    /// `status.startTime`.
    fn start_time(&self) -> Option<&Time>;
    /// As scheduling sees it on its node; `None` once it finished.
    fn bound(&self) -> Option<BoundPod>;
    /// The whole pod, as the scheduler and disruption read it.
    fn to_pod(&self) -> Pod;
    /// The PersistentVolumeClaims its volumes use: named ones, and those of its generic
    /// ephemeral volumes (`<pod>-<volume>`).
    fn claim_names(&self) -> Vec<String> {
        volume_claims(
            self.meta().name.as_deref().unwrap_or_default(),
            self.pod_spec(),
        )
    }
}

/// The PersistentVolumeClaims the volumes of pod `pod` (with `spec`) use: named ones, and those
/// of its generic ephemeral volumes (`<pod>-<volume>`).
pub fn volume_claims(pod: &str, spec: Option<&PodSpec>) -> Vec<String> {
    spec.and_then(|s| s.volumes.as_ref())
        .into_iter()
        .flatten()
        .filter_map(|v| match (&v.persistent_volume_claim, &v.ephemeral) {
            (Some(c), _) => Some(c.claim_name.clone()),
            (None, Some(_)) => Some(format!("{pod}-{}", v.name)),
            (None, None) => None,
        })
        .collect()
}

fn status(pod: &Pod) -> Option<&PodStatus> {
    pod.status.as_ref()
}

impl ObservedPod for Pod {
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn node_name(&self) -> Option<&str> {
        self.spec
            .as_ref()
            .and_then(|s| s.node_name.as_deref())
            .filter(|n| !n.is_empty())
    }

    fn phase(&self) -> Option<&str> {
        status(self).and_then(|s| s.phase.as_deref())
    }

    fn unschedulable(&self) -> bool {
        status(self)
            .and_then(|s| s.conditions.as_ref())
            .into_iter()
            .flatten()
            .any(|c| {
                c.type_ == "PodScheduled"
                    && c.status == "False"
                    && c.reason.as_deref() == Some("Unschedulable")
            })
    }

    fn nominated_node_name(&self) -> Option<&str> {
        status(self).and_then(|s| s.nominated_node_name.as_deref())
    }

    fn pod_spec(&self) -> Option<&PodSpec> {
        self.spec.as_ref()
    }

    fn requests(&self) -> Result<Resources, QuantityError> {
        pod_requests(self)
    }

    fn start_time(&self) -> Option<&Time> {
        status(self).and_then(|s| s.start_time.as_ref())
    }

    fn bound(&self) -> Option<BoundPod> {
        BoundPod::new(self)
    }

    fn to_pod(&self) -> Pod {
        self.clone()
    }
}

/// Shared pods read as the pods they share.
impl<T: ObservedPod + ?Sized> ObservedPod for std::sync::Arc<T> {
    fn meta(&self) -> &ObjectMeta {
        (**self).meta()
    }
    fn node_name(&self) -> Option<&str> {
        (**self).node_name()
    }
    fn phase(&self) -> Option<&str> {
        (**self).phase()
    }
    fn unschedulable(&self) -> bool {
        (**self).unschedulable()
    }
    fn nominated_node_name(&self) -> Option<&str> {
        (**self).nominated_node_name()
    }
    fn labels(&self) -> Option<&BTreeMap<String, String>> {
        (**self).labels()
    }
    fn pod_spec(&self) -> Option<&PodSpec> {
        (**self).pod_spec()
    }
    fn requests(&self) -> Result<Resources, QuantityError> {
        (**self).requests()
    }
    fn start_time(&self) -> Option<&Time> {
        (**self).start_time()
    }
    fn bound(&self) -> Option<BoundPod> {
        (**self).bound()
    }
    fn to_pod(&self) -> Pod {
        (**self).to_pod()
    }
    fn claim_names(&self) -> Vec<String> {
        (**self).claim_names()
    }
}

fn owned_by(pod: &(impl ObservedPod + ?Sized), kind: &str) -> bool {
    pod.meta()
        .owner_references
        .iter()
        .flatten()
        .any(|o| o.kind == kind)
}

/// Succeeded or Failed.
pub fn is_terminal(pod: &(impl ObservedPod + ?Sized)) -> bool {
    matches!(pod.phase(), Some("Succeeded" | "Failed"))
}

/// Owned by a DaemonSet.
pub fn is_daemonset_pod(pod: &(impl ObservedPod + ?Sized)) -> bool {
    owned_by(pod, "DaemonSet")
}

/// A static pod's mirror (owned by its Node).
pub fn is_mirror_pod(pod: &(impl ObservedPod + ?Sized)) -> bool {
    owned_by(pod, "Node")
        || pod
            .meta()
            .annotations
            .as_ref()
            .is_some_and(|a| a.contains_key("kubernetes.io/config.mirror"))
}

/// Owned by a StatefulSet: its replacement keeps its name, so it must move even while
/// terminating.
pub fn is_stateful_set_pod(pod: &(impl ObservedPod + ?Sized)) -> bool {
    owned_by(pod, "StatefulSet")
}

/// kube-scheduler marked it Unschedulable, it is not bound or nominated for preemption, and
/// it is neither a DaemonSet nor a static pod — upstream's `IsProvisionable`.
pub fn is_provisionable(pod: &(impl ObservedPod + ?Sized)) -> bool {
    pod.unschedulable()
        && pod.node_name().is_none()
        && pod.nominated_node_name().is_none_or(str::is_empty)
        && pod.meta().deletion_timestamp.is_none()
        && !is_terminal(pod)
        && !is_daemonset_pod(pod)
        && !is_mirror_pod(pod)
}

/// A pod that must find a new home when its node goes: active (or a terminating StatefulSet
/// pod), not a DaemonSet or static pod — upstream's `IsReschedulable`.
pub fn is_reschedulable(pod: &(impl ObservedPod + ?Sized)) -> bool {
    let active = pod.meta().deletion_timestamp.is_none() || is_stateful_set_pod(pod);
    active && !is_terminal(pod) && !is_daemonset_pod(pod) && !is_mirror_pod(pod)
}

/// `system-cluster-critical` or `system-node-critical`: drained last.
pub fn is_critical(pod: &(impl ObservedPod + ?Sized)) -> bool {
    matches!(
        pod.pod_spec()
            .and_then(|s| s.priority_class_name.as_deref()),
        Some("system-cluster-critical" | "system-node-critical")
    )
}

/// The PersistentVolumeClaims the pod's volumes use.
pub fn claim_names(pod: &(impl ObservedPod + ?Sized)) -> Vec<String> {
    pod.claim_names()
}

/// A reference to the pod, for events about it.
pub fn reference(pod: &(impl ObservedPod + ?Sized)) -> ObjectReference {
    let meta = pod.meta();
    ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Pod".into()),
        name: meta.name.clone(),
        namespace: meta.namespace.clone(),
        uid: meta.uid.clone(),
        ..Default::default()
    }
}

/// `namespace/name`.
pub fn key(pod: &(impl ObservedPod + ?Sized)) -> String {
    let meta = pod.meta();
    format!(
        "{}/{}",
        meta.namespace.as_deref().unwrap_or("default"),
        meta.name.as_deref().unwrap_or_default()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(v: serde_json::Value) -> Pod {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn provisionable_pods() {
        let unschedulable = json!({"conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]});
        let cases = [
            (
                "unschedulable",
                json!({"metadata": {}, "spec": {"containers": []}, "status": unschedulable}),
                true,
            ),
            (
                "not seen by kube-scheduler",
                json!({"metadata": {}, "spec": {"containers": []}, "status": {}}),
                false,
            ),
            (
                "bound",
                json!({"metadata": {}, "spec": {"containers": [], "nodeName": "n"}, "status": unschedulable}),
                false,
            ),
            (
                "nominated for preemption",
                json!({"metadata": {}, "spec": {"containers": []}, "status": {"nominatedNodeName": "n", "conditions": unschedulable["conditions"]}}),
                false,
            ),
            (
                "daemonset",
                json!({"metadata": {"ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "d", "uid": "u"}]}, "spec": {"containers": []}, "status": unschedulable}),
                false,
            ),
            (
                "mirror",
                json!({"metadata": {"ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": "n", "uid": "u"}]}, "spec": {"containers": []}, "status": unschedulable}),
                false,
            ),
            (
                "deleting",
                json!({"metadata": {"deletionTimestamp": "2024-01-01T00:00:00Z"}, "spec": {"containers": []}, "status": unschedulable}),
                false,
            ),
            (
                "failed",
                json!({"metadata": {}, "spec": {"containers": []}, "status": {"phase": "Failed", "conditions": unschedulable["conditions"]}}),
                false,
            ),
        ];
        for (name, p, want) in cases {
            assert_eq!(is_provisionable(&pod(p)), want, "{name}");
        }
    }

    #[test]
    fn reschedulable_pods() {
        let deleting = json!("2024-01-01T00:00:00Z");
        let owner =
            |kind: &str| json!([{"apiVersion": "apps/v1", "kind": kind, "name": "o", "uid": "u"}]);
        let cases = [
            (
                "running",
                json!({"metadata": {}, "spec": {"containers": []}, "status": {"phase": "Running"}}),
                true,
            ),
            (
                "succeeded",
                json!({"metadata": {}, "spec": {"containers": []}, "status": {"phase": "Succeeded"}}),
                false,
            ),
            (
                "terminating",
                json!({"metadata": {"deletionTimestamp": deleting, "ownerReferences": owner("ReplicaSet")}, "spec": {"containers": []}}),
                false,
            ),
            (
                "terminating statefulset pod",
                json!({"metadata": {"deletionTimestamp": deleting, "ownerReferences": owner("StatefulSet")}, "spec": {"containers": []}}),
                true,
            ),
            (
                "daemonset",
                json!({"metadata": {"ownerReferences": owner("DaemonSet")}, "spec": {"containers": []}}),
                false,
            ),
            (
                "mirror",
                json!({"metadata": {"annotations": {"kubernetes.io/config.mirror": "x"}}, "spec": {"containers": []}}),
                false,
            ),
        ];
        for (name, p, want) in cases {
            assert_eq!(is_reschedulable(&pod(p)), want, "{name}");
        }
    }
}
