//! What karpenter asks of a pod, in upstream's terms (`pkg/utils/pod`), over any form a caller
//! keeps pods in: a whole `Pod`, or the controller's trimmed copy.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    ObjectReference, Pod, PodResourceClaimStatus, PodSpec, PodStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

use super::BoundPod;
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
    /// The claims generated for it from ResourceClaimTemplates (`status.resourceClaimStatuses`).
    fn resource_claim_statuses(&self) -> &[PodResourceClaimStatus];
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

    fn resource_claim_statuses(&self) -> &[PodResourceClaimStatus] {
        status(self)
            .and_then(|s| s.resource_claim_statuses.as_deref())
            .unwrap_or_default()
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
    fn resource_claim_statuses(&self) -> &[PodResourceClaimStatus] {
        (**self).resource_claim_statuses()
    }
}

fn owned_by(pod: &(impl ObservedPod + ?Sized), kind: &str) -> bool {
    pod.meta()
        .owner_references
        .iter()
        .flatten()
        .any(|o| o.kind == kind)
}

/// Why provisioning leaves a pending pod alone although the kube-scheduler could not place it,
/// as upstream's `Provisioner.Validate`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Rejection {
    /// It requires `karpenter.sh/nodepool DoesNotExist`: it keeps off karpenter's nodes on
    /// purpose, and gets no event.
    AvoidsKarpenter,
    /// Its node selection is one karpenter cannot meet, or its volumes cannot be placed yet:
    /// why, for its `FailedScheduling` event.
    Invalid(String),
}

fn operator(op: &str) -> Option<karpenter_api::Operator> {
    karpenter_api::Operator::ALL
        .into_iter()
        .find(|o| o.as_str() == op)
}

/// What is wrong with a node selector term of the pod's, as upstream's
/// `validateNodeSelectorTerm` judges it.
fn term_problems(term: &k8s_openapi::api::core::v1::NodeSelectorTerm, out: &mut Vec<String>) {
    if term.match_fields.is_some() {
        out.push("node selector term with matchFields is not supported".into());
    }
    for e in term.match_expressions.iter().flatten() {
        expression_problems(
            &e.key,
            &e.operator,
            e.values.as_deref().unwrap_or_default(),
            out,
        );
    }
}

/// What is wrong with one node selection expression, as upstream's `ValidateRequirement`.
fn expression_problems(key: &str, op: &str, values: &[String], out: &mut Vec<String>) {
    let Some(operator) = operator(op) else {
        out.push(format!("key {key} has an unsupported operator {op:?}"));
        return;
    };
    out.extend(karpenter_api::validation::runtime::requirement_problems(
        &karpenter_api::NodeSelectorRequirementWithMinValues {
            key: key.to_string(),
            operator,
            values: values.to_vec(),
            min_values: None,
        },
    ));
}

/// Whether provisioning may place the pod, as upstream's `Validate` decides before it
/// schedules: not when it requires `karpenter.sh/nodepool DoesNotExist` (silently), nor when
/// its node selector or required node affinity uses `matchFields`, an unknown operator, a
/// restricted label (`kubernetes.io/hostname`, `karpenter.sh/…`) or an invalid key or value.
/// Its volumes are judged with the cluster's claims (`super::volumes`).
pub fn rejection(pod: &(impl ObservedPod + ?Sized)) -> Option<Rejection> {
    let spec = pod.pod_spec()?;
    let node_affinity = spec
        .affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref());
    let required = node_affinity
        .and_then(|n| {
            n.required_during_scheduling_ignored_during_execution
                .as_ref()
        })
        .map(|r| r.node_selector_terms.as_slice())
        .unwrap_or_default();
    // Upstream reads the pod's requirements: the first required term and the heaviest
    // preferred one.
    let heaviest_preferred = node_affinity
        .and_then(|n| {
            n.preferred_during_scheduling_ignored_during_execution
                .as_ref()
        })
        .and_then(|p| p.iter().max_by_key(|t| t.weight))
        .map(|t| &t.preference);
    let avoids = required
        .first()
        .into_iter()
        .chain(heaviest_preferred)
        .flat_map(|t| t.match_expressions.iter().flatten())
        .any(|e| e.key == karpenter_api::labels::NODE_POOL_LABEL && e.operator == "DoesNotExist");
    if avoids {
        return Some(Rejection::AvoidsKarpenter);
    }
    let mut problems = Vec::new();
    for (key, value) in spec.node_selector.iter().flatten() {
        expression_problems(key, "In", std::slice::from_ref(value), &mut problems);
    }
    for term in required {
        term_problems(term, &mut problems);
    }
    (!problems.is_empty()).then(|| Rejection::Invalid(problems.join("; ")))
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

/// Whether the pod's `karpenter.sh/do-not-disrupt` holds at `now`: `"true"`, or a duration not
/// yet passed since the pod started (an unknown start holds; an unreadable value does not).
pub fn do_not_disrupt(
    pod: &(impl ObservedPod + ?Sized),
    now: k8s_openapi::jiff::Timestamp,
) -> bool {
    let Some(value) = pod
        .meta()
        .annotations
        .as_ref()
        .and_then(|a| a.get(karpenter_api::labels::DO_NOT_DISRUPT_ANNOTATION))
    else {
        return false;
    };
    if value == "true" {
        return true;
    }
    match karpenter_api::duration::parse_go_duration(value) {
        Ok(d) => pod
            .start_time()
            .is_none_or(|t| now.as_second() < t.0.as_second() + d.as_secs() as i64),
        Err(_) => false,
    }
}

/// Upstream's eviction cost of a pod: 1, raised by its deletion cost and priority, within ±10.
pub fn eviction_cost(pod: &Pod) -> f64 {
    let deletion_cost = pod
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(karpenter_api::labels::POD_DELETION_COST_ANNOTATION))
        .and_then(|v| v.parse::<f64>().ok())
        .unwrap_or(0.0);
    let priority = pod.spec.as_ref().and_then(|s| s.priority).unwrap_or(0) as f64;
    (1.0 + deletion_cost / 2f64.powi(27) + priority / 2f64.powi(25)).clamp(-10.0, 10.0)
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

    /// Upstream's `Validate` cases (provisioner suite): what provisioning ignores, and why.
    #[test]
    fn pods_provisioning_ignores() {
        let with = |spec: serde_json::Value| {
            let mut full = json!({"containers": []});
            full.as_object_mut()
                .unwrap()
                .extend(spec.as_object().unwrap().clone());
            pod(json!({"metadata": {"name": "p"}, "spec": full}))
        };
        let required = |expressions: serde_json::Value| {
            json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": expressions}]}}}})
        };
        let invalid = |why: &str| Some(Rejection::Invalid(why.to_string()));
        let cases: [(&str, Pod, Option<Rejection>); 8] = [
            ("no node selection", with(json!({})), None),
            (
                "well-known and custom labels",
                with(
                    json!({"nodeSelector": {"topology.kubernetes.io/zone": "a", "karpenter.sh/capacity-type": "spot", "team": "x"}}),
                ),
                None,
            ),
            (
                "keeps off karpenter's nodes",
                with(required(
                    json!([{"key": "karpenter.sh/nodepool", "operator": "DoesNotExist"}]),
                )),
                Some(Rejection::AvoidsKarpenter),
            ),
            (
                "prefers to keep off karpenter's nodes",
                with(
                    json!({"affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 10, "preference": {"matchExpressions": [{"key": "karpenter.sh/nodepool", "operator": "DoesNotExist"}]}}]}}}),
                ),
                Some(Rejection::AvoidsKarpenter),
            ),
            (
                "pinned to a hostname",
                with(json!({"nodeSelector": {"kubernetes.io/hostname": "node-1"}})),
                invalid(
                    &karpenter_api::labels::restricted_label_reason("kubernetes.io/hostname")
                        .unwrap(),
                ),
            ),
            (
                "matchFields",
                with(
                    json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n"]}]}]}}}}),
                ),
                invalid("node selector term with matchFields is not supported"),
            ),
            (
                "an unknown operator",
                with(required(
                    json!([{"key": "team", "operator": "Near", "values": ["x"]}]),
                )),
                invalid("key team has an unsupported operator \"Near\""),
            ),
            (
                "a karpenter.sh label",
                with(required(
                    json!([{"key": "karpenter.sh/anything", "operator": "Exists"}]),
                )),
                invalid(
                    &karpenter_api::labels::restricted_label_reason("karpenter.sh/anything")
                        .unwrap(),
                ),
            ),
        ];
        for (case, p, expected) in cases {
            assert_eq!(rejection(&p), expected, "{case}");
        }
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
