//! Termination decisions shared by the controller's drain and the simulator's: which pods a
//! drain waits for, in what order it evicts them, which it may never evict, and when the
//! NodeClaim's `terminationGracePeriod` forces the rest out, and which volume attachments the
//! instance waits for.

use k8s_openapi::jiff::Timestamp;
use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::Taint;
use k8s_openapi::api::storage::v1::VolumeAttachment;
use karpenter_api::labels::{DISRUPTED_TAINT_KEY, DO_NOT_DISRUPT_ANNOTATION};

use crate::scheduling::taints;
use crate::state::pods::{self, ObservedPod};

/// A pod deleted more than this long ago is stuck (its kubelet is gone) and not waited for.
pub const STUCK_TERMINATING_SECONDS: i64 = 60;

/// What one pass over a draining node does.
#[derive(Debug)]
pub struct DrainStep<'a, P> {
    /// Pods to delete now: the termination deadline leaves no time for an eviction.
    pub delete: Vec<&'a P>,
    /// Pods to evict now (PodDisruptionBudgets may still refuse): the first group in
    /// upstream's order, not already terminating.
    pub evict: Vec<&'a P>,
    /// Pods the drain still waits for; the node is drained at zero.
    pub waiting: usize,
}

/// The `karpenter.sh/disrupted:NoSchedule` taint a draining node carries.
pub fn disrupted_taint() -> Taint {
    Taint {
        key: DISRUPTED_TAINT_KEY.into(),
        effect: "NoSchedule".into(),
        ..Default::default()
    }
}

/// Whether the drain waits for a pod: not finished, not a static pod, not tolerating the
/// disrupted taint (it would come straight back), not stuck terminating.
pub fn drainable(pod: &(impl ObservedPod + ?Sized), now: Timestamp) -> bool {
    let tolerations = pod
        .pod_spec()
        .and_then(|s| s.tolerations.as_deref())
        .unwrap_or_default();
    let stuck = pod
        .meta()
        .deletion_timestamp
        .as_ref()
        .is_some_and(|t| now.as_second() - t.0.as_second() >= STUCK_TERMINATING_SECONDS);
    !pods::is_terminal(pod)
        && !pods::is_mirror_pod(pod)
        && taints::first_untolerated(&[disrupted_taint()], tolerations).is_some()
        && !stuck
}

/// Upstream's drain order: non-critical pods, then non-critical DaemonSet pods, then critical
/// pods, then critical DaemonSet pods; a group goes only once the one before is gone.
fn tier(pod: &(impl ObservedPod + ?Sized)) -> u8 {
    (pods::is_critical(pod) as u8) * 2 + pods::is_daemonset_pod(pod) as u8
}

/// One pass of a drain over the pods bound to a node, at `now`, with the node's
/// termination `deadline` if its NodeClaim has a `terminationGracePeriod`.
pub fn drain_step<'a, P: ObservedPod>(
    on_node: &[&'a P],
    deadline: Option<Timestamp>,
    now: Timestamp,
) -> DrainStep<'a, P> {
    let waiting: Vec<&'a P> = on_node
        .iter()
        .copied()
        .filter(|p| drainable(*p, now))
        .collect();
    let grace = |p: &P| {
        p.pod_spec()
            .and_then(|s| s.termination_grace_period_seconds)
            .unwrap_or(30)
    };
    // Past the grace period every pod goes, whatever its tier, budget or annotation.
    let (delete, rest): (Vec<&'a P>, Vec<&'a P>) = waiting
        .iter()
        .copied()
        .partition(|p| forced(deadline, grace(p), now));
    // A do-not-disrupt pod is waited for, never evicted: only the deadline removes it.
    let evictable: Vec<&'a P> = rest
        .into_iter()
        .filter(|p| evictable(p.meta().annotations.as_ref()))
        .collect();
    let first = evictable.iter().map(|p| tier(*p)).min();
    let evict = evictable
        .into_iter()
        .filter(|p| Some(tier(*p)) == first && p.meta().deletion_timestamp.is_none())
        .collect();
    DrainStep {
        delete,
        evict,
        waiting: waiting.len(),
    }
}

/// Whether a drain may evict a pod with these annotations. A pod annotated
/// `karpenter.sh/do-not-disrupt: "true"` is never evicted: the drain waits for it, and only
/// the NodeClaim's `terminationGracePeriod` (when set) deletes it, at its deadline — upstream's
/// `IsEvictable`.
pub fn evictable(annotations: Option<&BTreeMap<String, String>>) -> bool {
    annotations
        .and_then(|a| a.get(DO_NOT_DISRUPT_ANNOTATION))
        .is_none_or(|v| v != "true")
}

/// Whether a pod still on a draining node must be deleted now: its node's termination
/// `deadline` is so close that the pod's own grace period would run past it.
pub fn forced(deadline: Option<Timestamp>, pod_grace_seconds: i64, now: Timestamp) -> bool {
    deadline.is_some_and(|d| now.as_second() >= d.as_second() - pod_grace_seconds)
}

/// The node's VolumeAttachments its termination waits for (upstream's
/// `awaitVolumeDetachment`): all but those of volumes that pods staying on the node use —
/// pods the drain does not wait for, such as ones tolerating the disrupted taint, whose
/// volumes never detach before the node goes. `volume_of(namespace, claim)` gives a claim's
/// bound volume.
pub fn blocking_attachments<'a, P: ObservedPod>(
    attachments: impl IntoIterator<Item = &'a VolumeAttachment>,
    pods_on_node: &[&P],
    volume_of: impl Fn(&str, &str) -> Option<String>,
    now: Timestamp,
) -> Vec<&'a VolumeAttachment> {
    let staying: BTreeSet<String> = pods_on_node
        .iter()
        .filter(|p| !drainable(**p, now))
        .flat_map(|p| {
            let namespace = p.meta().namespace.as_deref().unwrap_or_default();
            pods::claim_names(*p)
                .into_iter()
                .filter_map(|claim| volume_of(namespace, &claim))
                .collect::<Vec<_>>()
        })
        .collect();
    attachments
        .into_iter()
        .filter(|a| {
            a.spec
                .source
                .persistent_volume_name
                .as_ref()
                .is_none_or(|pv| !staying.contains(pv))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(second: i64) -> Timestamp {
        Timestamp::from_second(second).unwrap()
    }
    use k8s_openapi::api::core::v1::Pod;
    use serde_json::json;

    fn pod(name: &str, extra: serde_json::Value) -> Pod {
        let mut v = json!({"metadata": {"name": name}, "spec": {"containers": []}, "status": {"phase": "Running"}});
        for (k, x) in extra.as_object().unwrap() {
            for (k2, x2) in x.as_object().unwrap() {
                v[k][k2] = x2.clone();
            }
        }
        serde_json::from_value(v).unwrap()
    }

    fn names<P: ObservedPod>(pods: &[&P]) -> Vec<String> {
        pods.iter().map(|p| pods::key(*p)).collect()
    }

    #[test]
    fn a_drain_evicts_in_upstreams_order_and_waits_for_what_it_may_not_evict() {
        let ds = json!({"metadata": {"ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "d", "uid": "d"}]}});
        let critical = json!({"spec": {"priorityClassName": "system-node-critical"}});
        let all = [
            pod("app", json!({})),
            pod(
                "pinned",
                json!({"metadata": {"annotations": {"karpenter.sh/do-not-disrupt": "true"}}}),
            ),
            pod("ds", ds.clone()),
            pod("critical", critical),
            pod("done", json!({"status": {"phase": "Succeeded"}})),
            pod(
                "tolerant",
                json!({"spec": {"tolerations": [{"key": "karpenter.sh/disrupted", "operator": "Exists"}]}}),
            ),
            pod(
                "mirror",
                json!({"metadata": {"annotations": {"kubernetes.io/config.mirror": "x"}}}),
            ),
            pod(
                "stuck",
                json!({"metadata": {"deletionTimestamp": "1970-01-01T00:00:00Z"}}),
            ),
        ];
        let refs: Vec<&Pod> = all.iter().collect();
        let step = drain_step(&refs, None, t(120));
        assert_eq!(
            names(&step.evict),
            ["default/app"],
            "non-critical first; pinned waits"
        );
        assert!(step.delete.is_empty());
        assert_eq!(step.waiting, 4, "app, pinned, ds, critical");
        // Once the first group is gone, DaemonSet pods go, then critical ones.
        let step = drain_step(&[&all[1], &all[2], &all[3]], None, t(120));
        assert_eq!(names(&step.evict), ["default/ds"]);
        let step = drain_step(&[&all[1], &all[3]], None, t(120));
        assert_eq!(names(&step.evict), ["default/critical"]);
        // At the deadline everything left is deleted, do-not-disrupt included.
        let step = drain_step(&[&all[1], &all[3]], Some(t(150)), t(120));
        assert_eq!(names(&step.delete), ["default/pinned", "default/critical"]);
        assert!(step.evict.is_empty());
    }

    /// Upstream's termination suite on which pods a drain evicts and waits for.
    #[test]
    fn which_pods_a_drain_evicts() {
        let tolerating = |toleration: serde_json::Value| {
            pod("p", json!({"spec": {"tolerations": [toleration]}}))
        };
        let cases = [
            (
                "tolerates the disrupted taint (Equal): it would come straight back",
                tolerating(
                    json!({"key": "karpenter.sh/disrupted", "operator": "Equal", "effect": "NoSchedule"}),
                ),
                false,
            ),
            (
                "tolerates the disrupted taint (Exists)",
                tolerating(json!({"key": "karpenter.sh/disrupted", "operator": "Exists"})),
                false,
            ),
            (
                "tolerates only node.kubernetes.io/unschedulable",
                tolerating(
                    json!({"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}),
                ),
                true,
            ),
            ("no owner", pod("p", json!({})), true),
            (
                "a static pod (owned by its node)",
                pod(
                    "p",
                    json!({"metadata": {"ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": "n", "uid": "n"}]}}),
                ),
                false,
            ),
            (
                "failed",
                pod("p", json!({"status": {"phase": "Failed"}})),
                false,
            ),
        ];
        for (case, p, drained) in cases {
            assert_eq!(drainable(&p, t(0)), drained, "{case}");
        }
        // A pod of the first group still terminating holds the next group back.
        let leaving = pod(
            "leaving",
            json!({"metadata": {"deletionTimestamp": "1970-01-01T00:01:00Z"}}),
        );
        let ds = pod(
            "ds",
            json!({"metadata": {"ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "d", "uid": "d"}]}}),
        );
        let step = drain_step(&[&leaving, &ds], None, t(90));
        assert!(step.evict.is_empty(), "{:?}", names(&step.evict));
        assert_eq!(step.waiting, 2);
    }

    #[test]
    fn only_a_true_do_not_disrupt_protects_from_eviction() {
        let with = |v: &str| BTreeMap::from([(DO_NOT_DISRUPT_ANNOTATION.to_string(), v.into())]);
        assert!(evictable(None));
        assert!(evictable(Some(&BTreeMap::new())));
        assert!(!evictable(Some(&with("true"))));
        assert!(evictable(Some(&with("false"))));
        // A duration guards a candidate from disruption, not a pod from a drain underway.
        assert!(evictable(Some(&with("1h"))));
    }

    #[test]
    fn the_grace_period_deadline_forces_pods_out_in_time() {
        assert!(
            !forced(None, 30, t(1_000_000)),
            "no terminationGracePeriod: wait"
        );
        assert!(!forced(Some(t(1000)), 30, t(969)));
        assert!(
            forced(Some(t(1000)), 30, t(970)),
            "its own 30 s would end at the deadline"
        );
        assert!(forced(Some(t(1000)), 0, t(1000)));
    }

    #[test]
    fn volumes_of_pods_that_stay_do_not_hold_the_node() {
        let attachment = |name: &str, pv: Option<&str>| -> VolumeAttachment {
            serde_json::from_value(json!({
                "metadata": {"name": name},
                "spec": {"attacher": "csi", "nodeName": "n", "source": {"persistentVolumeName": pv}},
            }))
            .unwrap()
        };
        let with_claim = |name: &str, claim: &str, tolerations: serde_json::Value| {
            let mut p = pod(
                name,
                json!({"metadata": {"namespace": "ns"}, "spec": {"tolerations": tolerations}}),
            );
            p.spec.as_mut().unwrap().volumes = Some(vec![
                serde_json::from_value(
                    json!({"name": "v", "persistentVolumeClaim": {"claimName": claim}}),
                )
                .unwrap(),
            ]);
            p
        };
        let attachments = [
            attachment("of-app", Some("pv-app")),
            attachment("of-agent", Some("pv-agent")),
            attachment("of-nobody", Some("pv-orphan")),
            attachment("inline", None),
        ];
        let app = with_claim("app", "data-app", json!([]));
        let agent = with_claim("agent", "data-agent", json!([{"operator": "Exists"}]));
        let volume_of = |ns: &str, claim: &str| (ns == "ns").then(|| claim.replace("data-", "pv-"));
        let blocking: Vec<&str> =
            blocking_attachments(&attachments, &[&app, &agent], volume_of, t(0))
                .iter()
                .map(|a| a.metadata.name.as_deref().unwrap())
                .collect();
        assert_eq!(
            blocking,
            ["of-app", "of-nobody", "inline"],
            "only the volume of the pod that tolerates the drain (and stays) is not waited for"
        );
    }
}
