//! Node termination, as upstream's `node/termination`: a deleted Node keeps the
//! `karpenter.sh/termination` finalizer until it is tainted `karpenter.sh/disrupted`, drained
//! through the Eviction API (non-critical pods first, DaemonSet pods after the others,
//! critical ones last; PodDisruptionBudgets answered with 429 are retried), empty for the
//! minimum drain time, and its instance is gone. Past the NodeClaim's
//! terminationGracePeriod, pods are deleted regardless.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, Pod, Taint};
use k8s_openapi::jiff::Timestamp;
use karpenter_api::NodeClaim;
use karpenter_api::labels::{
    DISRUPTED_TAINT_KEY, EXCLUDE_FROM_LOAD_BALANCERS_LABEL,
    NODE_CLAIM_TERMINATION_TIMESTAMP_ANNOTATION, NODE_POOL_LABEL, TERMINATION_FINALIZER,
};
use karpenter_core::scheduling::taints;
use karpenter_core::termination;
use kube::api::{DeleteParams, EvictParams};
use kube::{Api, ResourceExt};
use serde_json::json;

use crate::cloudprovider::{CloudProvider, CloudProviderError};
use crate::events::{normal, warning};
use crate::metrics::labels;
use crate::state::StoredPod;
use crate::writes::{allow_missing_write, without_finalizer};
use crate::{Context, Error};
use karpenter_core::state::pods;

/// A pod deleted more than this long ago is stuck (its kubelet is gone) and not waited for.
const STUCK_TERMINATING: Duration = Duration::from_secs(60);

/// When each node's drain came up empty, to hold it for the minimum drain time.
#[derive(Default)]
pub struct DrainClock(Mutex<HashMap<String, Instant>>);

impl DrainClock {
    fn empty_since(&self, node: &str) -> Instant {
        *self
            .0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(node.to_string())
            .or_insert_with(Instant::now)
    }

    fn reset(&self, node: &str) {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(node);
    }
}

fn disrupted_taint() -> Taint {
    Taint {
        key: DISRUPTED_TAINT_KEY.into(),
        effect: "NoSchedule".into(),
        ..Default::default()
    }
}

/// Pods the drain waits for: not finished, not a static pod, not tolerating the disrupted
/// taint (those would come straight back), not stuck terminating.
pub fn drainable(pod: &StoredPod, now: Timestamp) -> bool {
    let tolerations = pod.spec.spec.tolerations.clone().unwrap_or_default();
    let stuck =
        pod.metadata.deletion_timestamp.as_ref().is_some_and(|t| {
            now.duration_since(t.0).as_secs() >= STUCK_TERMINATING.as_secs() as i64
        });
    !pods::is_terminal(pod)
        && !pods::is_mirror_pod(pod)
        && taints::first_untolerated(&[disrupted_taint()], &tolerations).is_some()
        && !stuck
}

/// The group drained first: non-critical non-DaemonSet, non-critical DaemonSet, critical
/// non-DaemonSet, critical DaemonSet.
pub fn drain_group<'a>(pods: &[&'a StoredPod]) -> Vec<&'a StoredPod> {
    let tier = |p: &StoredPod| (pods::is_critical(p) as u8) * 2 + pods::is_daemonset_pod(p) as u8;
    let Some(first) = pods.iter().map(|p| tier(p)).min() else {
        return Vec::new();
    };
    pods.iter().copied().filter(|p| tier(p) == first).collect()
}

fn termination_deadline(claim: Option<&NodeClaim>) -> Option<Timestamp> {
    claim?
        .annotations()
        .get(NODE_CLAIM_TERMINATION_TIMESTAMP_ANNOTATION)?
        .parse()
        .ok()
}

/// One pass over a deleting Node.
pub async fn reconcile<P: CloudProvider>(ctx: &Context<P>, node: &Node) -> Result<(), Error> {
    let now = Timestamp::now();
    let name = node.name_any();
    let provider_id = node
        .spec
        .as_ref()
        .and_then(|s| s.provider_id.clone())
        .unwrap_or_default();
    let claim = ctx.cluster.node_claim_for_provider_id(&provider_id);
    if let Some(c) = claim
        .as_ref()
        .filter(|c| c.metadata.deletion_timestamp.is_none())
    {
        ctx.delete_claim(&c.name_any(), &DeleteParams::default())
            .await?;
    }
    let taints: Vec<Taint> = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.clone())
        .unwrap_or_default();
    if !taints
        .iter()
        .any(|t| t.key == DISRUPTED_TAINT_KEY && t.effect == "NoSchedule")
    {
        let mut taints: Vec<Taint> = taints
            .into_iter()
            .filter(|t| t.key != DISRUPTED_TAINT_KEY)
            .collect();
        taints.push(disrupted_taint());
        let patch = json!({
            "metadata": {"labels": {EXCLUDE_FROM_LOAD_BALANCERS_LABEL: "karpenter"}, "resourceVersion": node.resource_version()},
            "spec": {"taints": taints},
        });
        return ctx.patch_node(&name, patch).await;
    }
    let deadline = termination_deadline(claim.as_deref());
    let on_node = ctx.cluster.pods_on(&name);
    let waiting: Vec<&StoredPod> = on_node
        .iter()
        .map(|p| &**p)
        .filter(|p| drainable(p, now))
        .collect();
    if !waiting.is_empty() {
        ctx.drains.reset(&name);
        drain(ctx, node, &waiting, deadline, now).await;
        return Ok(());
    }
    if ctx.drains.empty_since(&name).elapsed() < ctx.options.min_drain_time {
        return Ok(());
    }
    if let Some(claim) = claim.as_deref() {
        match ctx.call("delete", ctx.provider.delete(claim)).await {
            Err(CloudProviderError::NotFound(_)) => {}
            Ok(()) => return Ok(()),
            Err(e) => return Err(Error::Cloud(e)),
        }
    }
    allow_missing_write(ctx.patch_node(&name, without_finalizer(node)).await)?;
    ctx.drains.reset(&name);
    let pool = node
        .labels()
        .get(NODE_POOL_LABEL)
        .cloned()
        .unwrap_or_default();
    ctx.metrics
        .nodes_drained
        .get_or_create(&labels(&[("nodepool", &pool)]))
        .inc();
    ctx.metrics
        .nodes_terminated
        .get_or_create(&labels(&[("nodepool", &pool)]))
        .inc();
    tracing::info!(node = %name, "deleted node");
    Ok(())
}

fn pod_name(pod: &StoredPod) -> String {
    pod.metadata.name.clone().unwrap_or_default()
}

async fn drain<P: CloudProvider>(
    ctx: &Context<P>,
    node: &Node,
    waiting: &[&StoredPod],
    deadline: Option<Timestamp>,
    now: Timestamp,
) {
    // Past the grace period every pod goes, whatever its tier, budget or annotation.
    let forced: Vec<&StoredPod> = waiting
        .iter()
        .copied()
        .filter(|p| {
            let grace = p.spec.spec.termination_grace_period_seconds.unwrap_or(30);
            termination::forced(deadline.map(|d| d.as_second()), grace, now.as_second())
        })
        .collect();
    for pod in &forced {
        let api: Api<Pod> = Api::namespaced(
            ctx.client.clone(),
            pod.metadata.namespace.as_deref().unwrap_or("default"),
        );
        let grace = deadline.map_or(1, |d| (d.as_second() - now.as_second()).max(1)) as u32;
        let params = DeleteParams {
            grace_period_seconds: Some(grace),
            ..Default::default()
        };
        if api.delete(&pod_name(pod), &params).await.is_ok() {
            ctx.recorder
                .publish_to(
                    pod.reference(),
                    normal(
                        "Disrupted",
                        "Deleting the pod to accommodate the terminationTime of the node",
                    ),
                )
                .await;
            ctx.metrics
                .pods_drained
                .get_or_create(&labels(&[("reason", "forced")]))
                .inc();
        }
    }
    // A do-not-disrupt pod is waited for, never evicted: only the deadline above removes it.
    let evictable: Vec<&StoredPod> = waiting
        .iter()
        .copied()
        .filter(|p| termination::evictable(p.metadata.annotations.as_ref()))
        .collect();
    let group = drain_group(&evictable);
    for pod in group
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
    {
        let api: Api<Pod> = Api::namespaced(
            ctx.client.clone(),
            pod.metadata.namespace.as_deref().unwrap_or("default"),
        );
        let result = api.evict(&pod_name(pod), &EvictParams::default()).await;
        let code = match &result {
            Ok(_) => 200,
            Err(kube::Error::Api(e)) => e.code,
            Err(_) => 0,
        };
        ctx.metrics
            .pods_eviction_requests
            .get_or_create(&labels(&[("code", &code.to_string())]))
            .inc();
        match result {
            Ok(_) => {
                ctx.recorder
                    .publish_to(pod.reference(), normal("Evicted", "Evicted pod"))
                    .await;
                ctx.metrics
                    .pods_drained
                    .get_or_create(&labels(&[("reason", "evicted")]))
                    .inc();
            }
            Err(kube::Error::Api(e)) if e.code == 429 => {
                let message = format!(
                    "Failed to drain node, evicting pod {} violates a PDB",
                    pod.key()
                );
                ctx.recorder
                    .publish(node, warning("FailedDraining", message))
                    .await;
            }
            Err(kube::Error::Api(e)) if e.message.contains("more than one PodDisruptionBudget") => {
                let message = format!(
                    "Failed to drain node, pod {} has more than one PodDisruptionBudget; eviction does not support multiple PDBs",
                    pod.key()
                );
                ctx.recorder
                    .publish(node, warning("FailedDraining", message))
                    .await;
            }
            Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => {}
            Err(e) => {
                tracing::warn!(pod = %pod.key(), error = %e, "eviction failed, retrying")
            }
        }
    }
}

/// Runs termination over every deleting Node on each change until `shutdown`.
pub async fn run<P: CloudProvider>(
    ctx: Arc<Context<P>>,
    shutdown: tokio_util::sync::CancellationToken,
) {
    let mut changes = ctx.cluster.subscribe();
    while ctx.next_pass(&mut changes, &shutdown).await {
        if !ctx.is_leader() || !ctx.cluster.synced() {
            continue;
        }
        let deleting: Vec<Arc<Node>> = ctx
            .cluster
            .nodes
            .all()
            .into_iter()
            .filter(|n| n.metadata.deletion_timestamp.is_some())
            .filter(|n| n.finalizers().iter().any(|f| f == TERMINATION_FINALIZER))
            .collect();
        futures::stream::iter(deleting)
            .for_each_concurrent(64, |node| {
                let ctx = ctx.clone();
                async move {
                    if let Err(e) = reconcile(&ctx, &node).await
                        && !e.is_conflict()
                    {
                        tracing::warn!(node = %node.name_any(), error = %e, "terminating node");
                    }
                }
            })
            .await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(name: &str, critical: bool, daemonset: bool) -> StoredPod {
        stored(raw(name, critical, daemonset))
    }

    fn stored(p: Pod) -> StoredPod {
        StoredPod::new(p, &crate::state::SpecInterner::default())
    }

    fn raw(name: &str, critical: bool, daemonset: bool) -> Pod {
        let mut p: Pod =
            serde_json::from_value(json!({"metadata": {"name": name}, "spec": {"containers": []}}))
                .unwrap();
        if critical {
            p.spec.as_mut().unwrap().priority_class_name = Some("system-node-critical".into());
        }
        if daemonset {
            p.metadata.owner_references = Some(vec![
                serde_json::from_value(
                    json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "d", "uid": "u"}),
                )
                .unwrap(),
            ]);
        }
        p
    }

    #[test]
    fn drain_order_is_upstreams() {
        let all = [
            pod("crit-ds", true, true),
            pod("crit", true, false),
            pod("ds", false, true),
            pod("app", false, false),
        ];
        let mut remaining: Vec<&StoredPod> = all.iter().collect();
        let mut order = Vec::new();
        while !remaining.is_empty() {
            let group: Vec<String> = drain_group(&remaining)
                .iter()
                .map(|p| pod_name(p))
                .collect();
            remaining.retain(|p| !group.contains(&pod_name(p)));
            order.push(group);
        }
        assert_eq!(order, [["app"], ["ds"], ["crit"], ["crit-ds"]]);
    }

    #[test]
    fn pods_tolerating_the_disrupted_taint_are_not_waited_for() {
        let now = Timestamp::now();
        let mut p = raw("a", false, false);
        assert!(drainable(&stored(p.clone()), now));
        p.spec.as_mut().unwrap().tolerations = Some(vec![
            serde_json::from_value(json!({"operator": "Exists"})).unwrap(),
        ]);
        assert!(!drainable(&stored(p), now), "tolerates everything");
        let mut stuck = raw("b", false, false);
        stuck.metadata.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                Timestamp::from_second(now.as_second() - 120).unwrap(),
            ));
        assert!(
            !drainable(&stored(stuck), now),
            "stuck terminating for two minutes"
        );
        let mut done = raw("c", false, false);
        done.status = Some(serde_json::from_value(json!({"phase": "Succeeded"})).unwrap());
        assert!(!drainable(&stored(done), now));
    }
}
