//! What the controller asks of a pod, in upstream's terms (`pkg/utils/pod`).

use crate::state::StoredPod;

fn owner_kind(pod: &StoredPod, kind: &str) -> bool {
    pod.metadata
        .owner_references
        .iter()
        .flatten()
        .any(|o| o.kind == kind)
}

/// Succeeded or Failed.
pub fn is_terminal(pod: &StoredPod) -> bool {
    pod.is_terminal()
}

/// Owned by a DaemonSet.
pub fn is_daemonset_pod(pod: &StoredPod) -> bool {
    pod.is_daemonset_pod()
}

/// A static pod's mirror (owned by its Node).
pub fn is_mirror_pod(pod: &StoredPod) -> bool {
    owner_kind(pod, "Node")
        || pod
            .metadata
            .annotations
            .as_ref()
            .is_some_and(|a| a.contains_key("kubernetes.io/config.mirror"))
}

/// kube-scheduler marked it Unschedulable, it is not bound or nominated for preemption, and
/// it is neither a DaemonSet nor a static pod — upstream's `IsProvisionable`.
pub fn is_provisionable(pod: &StoredPod) -> bool {
    pod.unschedulable
        && pod.node_name.is_none()
        && pod.nominated_node_name.as_deref().is_none_or(str::is_empty)
        && pod.metadata.deletion_timestamp.is_none()
        && !is_terminal(pod)
        && !is_daemonset_pod(pod)
        && !is_mirror_pod(pod)
}

/// A pod that must find a new home when its node goes: active (or a terminating StatefulSet
/// pod, whose replacement keeps its name), not a DaemonSet or static pod.
pub fn is_reschedulable(pod: &StoredPod) -> bool {
    let active = pod.metadata.deletion_timestamp.is_none() || owner_kind(pod, "StatefulSet");
    active && !is_terminal(pod) && !is_daemonset_pod(pod) && !is_mirror_pod(pod)
}

/// `system-cluster-critical` or `system-node-critical`: drained last.
pub fn is_critical(pod: &StoredPod) -> bool {
    matches!(
        pod.spec.spec.priority_class_name.as_deref(),
        Some("system-cluster-critical" | "system-node-critical")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::SpecInterner;
    use serde_json::json;

    fn pod(v: serde_json::Value) -> StoredPod {
        StoredPod::new(serde_json::from_value(v).unwrap(), &SpecInterner::default())
    }

    #[test]
    fn provisionable_pods() {
        let unschedulable = json!({"conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]});
        let cases = [
            (
                json!({"metadata": {}, "spec": {"containers": []}, "status": unschedulable}),
                true,
            ),
            (
                json!({"metadata": {}, "spec": {"containers": []}, "status": {}}),
                false,
            ),
            (
                json!({"metadata": {}, "spec": {"containers": [], "nodeName": "n"}, "status": unschedulable}),
                false,
            ),
            (
                json!({"metadata": {}, "spec": {"containers": []}, "status": {"nominatedNodeName": "n", "conditions": unschedulable["conditions"]}}),
                false,
            ),
            (
                json!({"metadata": {"ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "d", "uid": "u"}]}, "spec": {"containers": []}, "status": unschedulable}),
                false,
            ),
            (
                json!({"metadata": {"ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": "n", "uid": "u"}]}, "spec": {"containers": []}, "status": unschedulable}),
                false,
            ),
            (
                json!({"metadata": {"deletionTimestamp": "2024-01-01T00:00:00Z"}, "spec": {"containers": []}, "status": unschedulable}),
                false,
            ),
        ];
        for (i, (p, want)) in cases.into_iter().enumerate() {
            assert_eq!(is_provisionable(&pod(p)), want, "case {i}");
        }
    }
}
